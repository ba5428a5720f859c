"""Least-privilege ACLs from one file (``acls.toml``), applied with the admin principal.

``load`` parses and checks the file (errors name the grant); ``apply`` creates the
ALLOW bindings (creating an existing one is a no-op) and, with ``prune``, deletes every
other binding of the file's principals, so the file is the whole truth about them.
This module is the seam where confluent-kafka's admin errors become runonce errors.
"""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from runonce.errors import ConfigError
from runonce.kafka.access import KafkaAccess, KafkaTarget
from runonce.kafka.clients import base_config, translate

_RESOURCES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
              "transactional_id": ResourceType.TRANSACTIONAL_ID}
_PATTERNS = {"literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED}
_OPERATIONS = {"READ": AclOperation.READ, "WRITE": AclOperation.WRITE, "DESCRIBE": AclOperation.DESCRIBE}


@dataclass(frozen=True, slots=True)
class Grant:
    principal: str  # a SASL username; the binding's principal is User:<name>
    resource: str
    name: str
    pattern: str
    operations: tuple[str, ...]

    def bindings(self) -> list[AclBinding]:
        return [AclBinding(_RESOURCES[self.resource], self.name, _PATTERNS[self.pattern], f"User:{self.principal}",
                           "*", _OPERATIONS[op], AclPermissionType.ALLOW) for op in self.operations]

    def describe(self) -> str:
        name = f"{self.name}*" if self.pattern == "prefixed" else self.name
        return f"User:{self.principal:<9} {'/'.join(self.operations):<20} {self.resource} {name}"


def default_file() -> Path:
    return Path(str(resources.files("runonce.kafka") / "acls.toml"))


def load(path: Path | None = None) -> list[Grant]:
    path = path or default_file()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"ACL file {path}: {exc}") from exc
    grants = []
    for i, raw in enumerate(data.get("grant", []), 1):
        where = f"ACL file {path}, grant #{i}"
        unknown = set(raw) - {"principal", "resource", "name", "pattern", "operations"}
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}")
        for field_ in ("principal", "resource", "name", "operations"):
            if not raw.get(field_):
                raise ConfigError(f"{where}: missing {field_}")
        if raw["resource"] not in _RESOURCES:
            raise ConfigError(f"{where}: resource must be one of {sorted(_RESOURCES)}, got {raw['resource']!r}")
        pattern = raw.get("pattern", "literal")
        if pattern not in _PATTERNS:
            raise ConfigError(f"{where}: pattern must be literal or prefixed, got {pattern!r}")
        bad = [op for op in raw["operations"] if op not in _OPERATIONS]
        if bad:
            raise ConfigError(f"{where}: operations must be among {sorted(_OPERATIONS)}, got {bad}")
        grants.append(Grant(raw["principal"], raw["resource"], raw["name"], pattern, tuple(raw["operations"])))
    if not grants:
        raise ConfigError(f"ACL file {path} grants nothing")
    return grants


def holders(path: Path | None = None) -> dict[str, str]:
    """Who connects as each principal: the file's ``[holders]`` table, every principal of its
    grants named (a principal nobody is said to hold is an error, as a holder without grants)."""
    path = path or default_file()
    grants = load(path)
    table = tomllib.loads(path.read_text(encoding="utf-8")).get("holders", {})
    named = principals(grants)
    missing, extra = sorted(set(named) - set(table)), sorted(set(table) - set(named))
    if missing or extra:
        raise ConfigError(f"ACL file {path}: [holders] must name each principal of the grants "
                          f"(missing {missing}, without grants {extra})")
    return {name: str(table[name]) for name in named}


def show(grants: list[Grant], held_by: dict[str, str]) -> str:
    """The grants by principal, each under who connects as it: what ``runonce acl show`` prints."""
    lines: list[str] = []
    for name in principals(grants):
        lines.append(f"{name}: {held_by[name]}")
        lines += [f"  {g.describe()}" for g in grants if g.principal == name]
    return "\n".join(lines)


def principals(grants: list[Grant]) -> list[str]:
    return list(dict.fromkeys(g.principal for g in grants))


def apply(bootstrap: KafkaTarget, grants: list[Grant], *, prune: bool = False,
          timeout_s: float = 30.0) -> tuple[int, int]:
    """Create the file's bindings; with ``prune`` delete its principals' other bindings.
    Returns (bindings in the file, bindings deleted)."""
    admin = AdminClient(base_config(bootstrap))
    wanted = [b for g in grants for b in g.bindings()]
    try:
        for fut in admin.create_acls(wanted, request_timeout=timeout_s).values():
            fut.result()
        deleted = 0
        if prune:
            keep = set(wanted)
            stale = [b for b in _bindings_of(admin, principals(grants), timeout_s) if b not in keep]
            deleted = _delete(admin, stale, timeout_s)
    except KafkaException as exc:
        raise translate(exc, f"cannot apply ACLs at {bootstrap}") from exc
    return len(wanted), deleted


def revoke(bootstrap: KafkaTarget, grants: list[Grant], timeout_s: float = 30.0) -> int:
    """Delete exactly these grants' bindings; returns how many the broker removed."""
    admin = AdminClient(base_config(bootstrap))
    try:
        return _delete(admin, [b for g in grants for b in g.bindings()], timeout_s)
    except KafkaException as exc:
        raise translate(exc, f"cannot revoke ACLs at {bootstrap}") from exc


def _delete(admin: AdminClient, bindings: list[AclBinding], timeout_s: float) -> int:
    if not bindings:
        return 0
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                                b.operation, b.permission_type) for b in bindings]
    return sum(len(fut.result()) for fut in admin.delete_acls(filters, request_timeout=timeout_s).values())


def _bindings_of(admin: AdminClient, names: list[str], timeout_s: float) -> list[AclBinding]:
    found: list[AclBinding] = []
    for name in names:
        # None matches any name and any host in a filter (librdkafka); the stubs want str
        flt = AclBindingFilter(ResourceType.ANY, None,  # type: ignore[arg-type]
                               ResourcePatternType.ANY, f"User:{name}", None,  # type: ignore[arg-type]
                               AclOperation.ANY, AclPermissionType.ANY)
        found.extend(admin.describe_acls(flt, request_timeout=timeout_s).result())
    return found


def current(bootstrap: KafkaTarget, names: list[str], timeout_s: float = 30.0) -> list[AclBinding]:
    admin = AdminClient(base_config(bootstrap))
    try:
        return _bindings_of(admin, names, timeout_s)
    except KafkaException as exc:
        raise translate(exc, f"cannot list ACLs at {bootstrap}") from exc


def wait_until_granted(access: KafkaAccess, topic: str, timeout_s: float = 30.0) -> None:
    """Return once ``access``'s principal sees ``topic``: new ACLs reach the broker's authorizer
    through the metadata log a moment after CreateAcls returns."""
    admin = AdminClient(base_config(access))
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException as exc:
            raise translate(exc, f"cannot check the grants of {access}") from exc
        if meta is not None and meta.error is None:
            return
        if time.monotonic() > deadline:
            raise translate(meta.error, f"the grants of {access} on {topic} never took effect") \
                if meta is not None and meta.error is not None else ConfigError(f"no topic {topic}")
        time.sleep(0.2)
