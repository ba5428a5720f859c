"""Which connector serves which vendor: the connectors file's ``kind``, looked up among the
shipped kinds and the entry points of the group ``runonce.connectors`` (yours: docs/connectors.md).

A kind is a factory: ``(VendorFields) -> Connector``. It reads its own fields; a field no one
read is an error, and so is a tool that two vendors claim (each executor would perform it)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, Mapping

from runonce.connectors.toolkit.base import Connector
from runonce.connectors.toolkit.config import Rate, VendorFields, read_tables, read_vendors
from runonce.connectors.vendors import google_calendar, jira, kubernetes, salesforce, slack, smtp, stripe, webhooks
from runonce.errors import ConfigError

Factory = Callable[[VendorFields], Connector]

ENTRY_POINT_GROUP = "runonce.connectors"

def _postgres(fields: VendorFields) -> Connector:
    """Imported when used: psycopg is the ``postgres`` extra's."""
    try:
        from runonce.connectors.vendors import postgres
    except ImportError as exc:
        raise fields.error("kind", f"needs psycopg: pip install 'runonce[postgres]' ({exc})") from None
    return postgres.from_config(fields)


#: the kinds runonce ships
SHIPPED: dict[str, Factory] = {
    "stripe": stripe.from_config,
    "smtp": smtp.from_config,
    "postgres": _postgres,
    "slack": slack.from_config,
    "jira": jira.from_config,
    "salesforce": salesforce.from_config,
    "slack-webhook": slack.webhook_from_config,
    "webhook": webhooks.from_config,
    "google-calendar": google_calendar.from_config,
    "kubernetes": kubernetes.from_config,
}


def kinds() -> dict[str, Factory]:
    """Shipped kinds and installed ones; an installed kind may not shadow a shipped one."""
    found: dict[str, Factory] = dict(SHIPPED)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in SHIPPED:
            raise ConfigError(f"entry point {ep.value!r} ({ep.dist.name if ep.dist else '?'}) registers kind "
                              f"{ep.name!r}, which runonce ships; give it another name")
        found[ep.name] = entry_point_factory(ep.name, ep.load)
    return found


def entry_point_factory(kind: str, load: Callable[[], object]) -> Factory:
    def factory(fields: VendorFields) -> Connector:
        try:
            made = load()
        except Exception as exc:  # an installed package failing to import: say which kind, for which vendor
            raise fields.error("kind", f"{kind!r} is an installed entry point that cannot be loaded: "
                                       f"{type(exc).__name__}: {exc}") from exc
        if not callable(made):
            raise fields.error("kind", f"{kind!r}: its entry point is not a factory")
        connector = made(fields)
        return connector  # type: ignore[no-any-return]
    return factory


@dataclass(frozen=True, slots=True)
class Vendor:
    """One vendor of the connectors file, built: its connector and our pace toward it."""

    connector: Connector
    kind: str
    rate: Rate | None


def build_vendor(fields: VendorFields, known: Mapping[str, Factory]) -> Vendor:
    factory = known.get(fields.kind)
    if factory is None:
        raise fields.error("kind", f"unknown kind {fields.kind!r}; known: {', '.join(sorted(known))} "
                                   f"(others install as entry points of {ENTRY_POINT_GROUP})")
    connector = factory(fields)
    unknown = fields.unknown()
    if unknown:
        raise fields.error(unknown[0], f"unknown field for kind {fields.kind!r}")
    if connector.name != fields.name:
        raise fields.error("kind", f"the {fields.kind!r} factory named its connector {connector.name!r}; "
                                   f"it must use fields.name")
    return Vendor(connector, fields.kind, fields.rate)


def load(path: Path, environ: Mapping[str, str]) -> dict[str, Vendor]:
    """Every vendor of the file, built and checked (a ConfigError names the vendor and field)."""
    known = kinds()
    built = {name: build_vendor(fields, known) for name, fields in read_vendors(path, environ).items()}
    _one_owner_per_tool(path, built)
    return built


def _one_owner_per_tool(path: Path, built: Mapping[str, Vendor]) -> None:
    owner: dict[str, str] = {}
    for name, vendor in built.items():
        for tool in sorted(vendor.connector.tools):
            if tool in owner:
                raise ConfigError(f"{path}: tool {tool!r} is served by vendors.{owner[tool]} and vendors.{name}: "
                                  f"each executor would perform it; give it to one (tools = [...])")
            owner[tool] = name


def vendor(path: Path, environ: Mapping[str, str], name: str,
           warn: Callable[[str], None] = lambda _message: None) -> Vendor:
    """One vendor, built for its executor. Another vendor's mistake is its own executor's to stop
    on: this one is told (``warn``) and starts, so one broken table never stops every vendor.
    A tool this vendor shares with another that builds is refused, as in ``load``."""
    tables = read_tables(path)
    if name not in tables:
        raise ConfigError(f"{path}: no [vendors.{name}]; vendors: {', '.join(sorted(tables))}")
    known = kinds()
    built = {name: build_vendor(VendorFields(str(path), name, tables[name], environ), known)}
    for other, table in tables.items():
        if other == name:
            continue
        try:
            built[other] = build_vendor(VendorFields(str(path), other, table, environ), known)
        except ConfigError as exc:
            warn(f"{exc} (its executor will not start; vendors.{name}'s does)")
    _one_owner_per_tool(path, built)
    return built[name]
