"""Which connector serves which vendor: the connectors file's ``kind``, looked up among the
shipped kinds and the entry points of the group ``runonce.connectors`` (yours: docs/connectors.md).

A kind is a ``Kind`` (toolkit/kind.py): its fields, declared, and a factory ``(VendorFields) ->
Connector`` that reads them (an installed one may be a bare factory). A field it does not
declare, or no one read, is an error, and so is a tool that two vendors claim (each executor
would perform it)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, Mapping

from runonce.connectors.toolkit.base import Connector, state_check
from runonce.connectors.toolkit.config import VendorFields, read_tables, read_vendors
from runonce.connectors.toolkit.fields import Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.vendors import (
    google_calendar,
    jira,
    kubernetes,
    postgres_fields,
    salesforce,
    slack,
    smtp,
    stripe,
    webhooks,
)
from runonce.errors import ConfigError
from runonce.rate import Rate

Factory = Callable[[VendorFields], Connector]

ENTRY_POINT_GROUP = "runonce.connectors"

def _postgres(fields: VendorFields) -> Connector:
    """Imported when used: psycopg is the ``postgres`` extra's."""
    try:
        from runonce.connectors.vendors import postgres
    except ImportError as exc:
        raise fields.error("kind", f"needs psycopg: pip install 'runonce[postgres]' ({exc})") from None
    return postgres.from_config(fields)


#: the kinds runonce ships, each with its fields declared
SHIPPED: dict[str, Kind] = {kind.spec.kind: kind for kind in (
    stripe.KIND, smtp.KIND, Kind(postgres_fields.FIELDS, _postgres), slack.KIND, jira.KIND, salesforce.KIND,
    slack.WEBHOOK_KIND, webhooks.KIND, google_calendar.KIND, kubernetes.KIND)}


def kinds() -> dict[str, Factory]:
    """Shipped kinds and installed ones; an installed kind may not shadow a shipped one."""
    found: dict[str, Factory] = dict(SHIPPED)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in SHIPPED:
            raise ConfigError(f"entry point {ep.value!r} ({ep.dist.name if ep.dist else '?'}) registers kind "
                              f"{ep.name!r}, which runonce ships; give it another name")
        found[ep.name] = Installed(ep.name, ep.load)
    return found


@dataclass(frozen=True, slots=True)
class Installed:
    """A kind installed as an entry point, loaded when a vendor names it (or its fields are
    listed): a package that fails to import stops that vendor's executor only, named."""

    kind: str
    load: Callable[[], object]

    def factory(self, fields: VendorFields | None = None) -> Factory:
        try:
            made = self.load()
        except Exception as exc:  # an installed package failing to import: say which kind, for which vendor
            said = f"{self.kind!r} is an installed entry point that cannot be loaded: {type(exc).__name__}: {exc}"
            raise (fields.error("kind", said) if fields is not None else ConfigError(said)) from exc
        if not callable(made):
            said = f"{self.kind!r}: its entry point is not a factory"
            raise fields.error("kind", said) if fields is not None else ConfigError(said)
        return made

    def __call__(self, fields: VendorFields) -> Connector:
        return self.factory(fields)(fields)


def spec_of(kind: str, factories: Mapping[str, Factory]) -> Spec | None:
    """A kind's declared fields; None for an installed factory that declares none."""
    factory = factories.get(kind)
    if factory is None:
        raise ConfigError(f"unknown kind {kind!r}; known: {', '.join(sorted(factories))}")
    if isinstance(factory, Installed):
        factory = factory.factory()
    return factory.spec if isinstance(factory, Kind) else None


@dataclass(frozen=True, slots=True)
class Vendor:
    """One vendor of the connectors file, built: its connector and our pace toward it."""

    connector: Connector
    kind: str
    rate: Rate | None


def build_vendor(fields: VendorFields, factories: Mapping[str, Factory]) -> Vendor:
    factory = factories.get(fields.kind)
    if factory is None:
        raise fields.error("kind", f"unknown kind {fields.kind!r}; known: {', '.join(sorted(factories))} "
                                   f"(others install as entry points of {ENTRY_POINT_GROUP})")
    connector = factory(fields)
    unknown = fields.unknown()
    if unknown:
        raise fields.error(unknown[0], f"unknown field for kind {fields.kind!r}")
    if connector.name != fields.name:
        raise fields.error("kind", f"the {fields.kind!r} factory named its connector {connector.name!r}; "
                                   f"it must use fields.name")
    try:
        state_check(connector)
    except ConfigError as exc:
        raise fields.error("kind", f"the {fields.kind!r} factory built a connector that breaks its contract: {exc}") from None
    return Vendor(connector, fields.kind, fields.rate)


def load(path: Path, environ: Mapping[str, str]) -> dict[str, Vendor]:
    """Every vendor of the file, built and checked (a ConfigError names the vendor and field)."""
    factories = kinds()
    built = {name: build_vendor(fields, factories) for name, fields in read_vendors(path, environ).items()}
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
    factories = kinds()
    built = {name: build_vendor(VendorFields(str(path), name, tables[name], environ), factories)}
    for other, table in tables.items():
        if other == name:
            continue
        try:
            built[other] = build_vendor(VendorFields(str(path), other, table, environ), factories)
        except ConfigError as exc:
            warn(f"{exc} (its executor will not start; vendors.{name}'s does)")
    _one_owner_per_tool(path, built)
    return built[name]
