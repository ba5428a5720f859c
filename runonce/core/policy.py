"""Policies are data: which strategy each tool gets. Loaded and validated once at start.

See ``policies.toml`` beside this file for the format and the shipped defaults.
"""

from __future__ import annotations

import enum
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from runonce.core.approval import ApprovalRule
from runonce.core.content import canonical_json, sha256_hex
from runonce.core.normal import NormalForm, apply, nfc
from runonce.errors import ConfigError, InvalidAction


class KeyMode(enum.Enum):
    DERIVE = "derive"
    REQUIRE = "require"
    NONE = "none"


class WindowMode(enum.Enum):
    STRICT = "strict"
    AUDIT = "audit"


@dataclass(frozen=True, slots=True)
class NaturalIdRule:
    fields: tuple[str, ...]
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class ContentWindow:
    window_ms: int
    mode: WindowMode


@dataclass(frozen=True, slots=True)
class Budget:
    max_actions: int
    window_ms: int


@dataclass(frozen=True, slots=True)
class Policy:
    tool: str
    denied: bool = False
    key_mode: KeyMode = KeyMode.DERIVE
    key_ttl_ms: int = 24 * 3600 * 1000
    scope: tuple[str, ...] = ()
    natural_id: NaturalIdRule | None = None
    content_window: ContentWindow | None = None
    budget: Budget | None = None
    #: False for tools that only the [default] table covers (the SDK warns about those)
    named: bool = True
    #: params fields compared in a normal form beyond NFC (``normalize = { to = "email" }``)
    normal_forms: Mapping[str, NormalForm] = field(default_factory=dict)
    #: when an action needs a person's yes before it runs (core/approval.py)
    approval: ApprovalRule | None = None

    @property
    def has_scope_rules(self) -> bool:
        return self.natural_id is not None or self.content_window is not None or self.budget is not None

    def identity(self, params: Mapping[str, Any], action_id: str) -> dict[str, Any]:
        """``params`` as decisions compare them: every string NFC, the fields ``normalize``
        names in their form (core/normal.py). Raises InvalidAction for such a field that is
        not a string."""
        out: dict[str, Any] = nfc(dict(params))
        for name, form in self.normal_forms.items():
            if name in out:
                if not isinstance(out[name], str):
                    raise InvalidAction(f"action {action_id}: tool {self.tool}: params field {name!r} must be a "
                                        f"string ({form.value}), got {_json_type(out[name])}")
                out[name] = apply(form, out[name])
        return out

    def scope_key(self, params: Mapping[str, Any], action_id: str) -> str:
        """The resource this action touches, e.g. ``send_email:to=john@example.com``. Each scope
        value is a non-blank string or an integer: a null, a list or an object names no one
        resource (is ``"to": ["a", "b"]`` one recipient or two?)."""
        parts = []
        for name in self.scope:
            if name not in params:
                raise InvalidAction(f"action {action_id}: tool {self.tool} needs params field {name!r} (policy scope)")
            value = params[name]
            if isinstance(value, str) and value.strip():
                parts.append(f"{name}={value}")
            elif isinstance(value, int) and not isinstance(value, bool):
                parts.append(f"{name}={canonical_json(value)}")
            else:
                raise InvalidAction(f"action {action_id}: tool {self.tool}: params field {name!r} (policy scope) "
                                    f"must be a non-blank string or an integer, got {_json_type(value)}")
        key = f"{self.tool}:" + "&".join(parts)
        # Keys are Kafka keys and RocksDB keys: bound their size, keep them readable when short.
        return key if len(key) <= 200 else f"{self.tool}:sha256={sha256_hex(key)}"

    def scope_of(self, params: Mapping[str, Any], explicit_natural_id: str | None,
                 action_id: str) -> tuple[str | None, str | None]:
        """(scope key, natural id) of an action; (None, None) for a tool without scope rules,
        whose actions stage 1 decides alone. Raises InvalidAction when the rules cannot read
        the params (or a natural id is given to a tool without a write-once rule)."""
        if not self.has_scope_rules:
            return None, self.natural_id_for(params, explicit_natural_id, action_id)
        return self.scope_key(params, action_id), self.natural_id_for(params, explicit_natural_id, action_id)

    def natural_id_for(self, params: Mapping[str, Any], explicit: str | None, action_id: str) -> str | None:
        if self.natural_id is None:
            if explicit is not None:
                raise InvalidAction(f"action {action_id}: natural_id given but tool {self.tool} has no write-once rule")
            return None
        if explicit is not None:  # readable when short; a bounded key in the scope's state when not
            if len(explicit) <= 64 and explicit.isascii() and explicit.isprintable():
                return f"{self.tool}:nid={explicit}"
            return f"{self.tool}:nid=sha256:{sha256_hex(explicit)[:32]}"
        values = []
        for name in self.natural_id.fields:
            if name not in params:
                raise InvalidAction(f"action {action_id}: tool {self.tool} needs params field {name!r} (natural_id)")
            values.append(params[name])
        return f"{self.tool}:nid=sha256:{sha256_hex(canonical_json(values))[:32]}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a blank string"
    return {bool: "a boolean", float: "a number with a fraction", list: "an array", dict: "an object"}.get(
        type(value), type(value).__name__)


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _DURATION.match(value) if isinstance(value, str) else None
    if not match or int(match.group(1)) <= 0:
        raise ConfigError(f"{where}: expected a positive duration like '24h', '5m' or milliseconds, got {value!r}")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def format_duration(ms: int) -> str:
    """The largest unit that divides ``ms`` exactly: 86400000 -> '24h' is '1d', 300000 -> '5m'."""
    for unit in ("d", "h", "m", "s"):
        if ms % _UNIT_MS[unit] == 0:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"


_FIELDS = {"denied", "key", "key_ttl", "scope", "natural_id", "content_window", "budget", "normalize", "approval"}


def _enum(cls: type[enum.Enum], value: Any, where: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in cls)
        raise ConfigError(f"{where}: expected one of {allowed}, got {value!r}") from None


def _table(raw: Any, where: str, required: set[str], optional: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table like {{ {', '.join(sorted(required))} = ... }}, got {raw!r}")
    unknown = set(raw) - required - optional
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    missing = required - set(raw)
    if missing:
        raise ConfigError(f"{where}: missing field(s) {', '.join(sorted(missing))}")
    return raw


def _str_list(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(x, str) and x for x in raw):
        raise ConfigError(f"{where}: expected a non-empty list of field names, got {raw!r}")
    return tuple(raw)


def _approval(raw: Any, where: str) -> ApprovalRule:
    """``approval = { always = true | above = { field = number } | max_items = { field = n }, expires = "24h" }``."""
    t = _table(raw, where, {"expires"}, {"always", "above", "max_items"})
    expires_ms = parse_duration_ms(t["expires"], f"{where}.expires")
    always = t.get("always", False)
    if not isinstance(always, bool):
        raise ConfigError(f"{where}.always: expected true or false, got {always!r}")
    above: dict[str, float] = {}
    for name, limit in _field_table(t.get("above"), f"{where}.above").items():
        if not isinstance(limit, (int, float)) or isinstance(limit, bool) or limit != limit:
            raise ConfigError(f"{where}.above.{name}: expected a number, got {limit!r}")
        above[name] = float(limit)
    max_items: dict[str, int] = {}
    for name, most in _field_table(t.get("max_items"), f"{where}.max_items").items():
        if not isinstance(most, int) or isinstance(most, bool) or most < 0:
            raise ConfigError(f"{where}.max_items.{name}: expected a whole number of items, got {most!r}")
        max_items[name] = most
    if always == bool(above or max_items):
        raise ConfigError(f"{where}: say when approval is needed: always = true, or above = {{ field = number }} "
                          "and/or max_items = { field = n } (not both kinds)")
    return ApprovalRule(expires_ms=expires_ms, always=always, above=above, max_items=max_items)


def _field_table(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{where}: expected a table of params fields like {{ amount_cents = 50000 }}, got {raw!r}")
    return raw


def _policy(tool: str, raw: Any, where: str, named: bool) -> Policy:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table, got {raw!r}")
    unknown = set(raw) - _FIELDS
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(_FIELDS))})")
    denied = raw.get("denied", False)
    if not isinstance(denied, bool):
        raise ConfigError(f"{where}.denied: expected true or false, got {denied!r}")
    scope = _str_list(raw["scope"], f"{where}.scope") if "scope" in raw else ()
    natural_id = content_window = budget = None
    if "natural_id" in raw:
        t = _table(raw["natural_id"], f"{where}.natural_id", {"fields", "ttl"})
        natural_id = NaturalIdRule(_str_list(t["fields"], f"{where}.natural_id.fields"),
                                   parse_duration_ms(t["ttl"], f"{where}.natural_id.ttl"))
    if "content_window" in raw:
        t = _table(raw["content_window"], f"{where}.content_window", {"window"}, {"mode"})
        content_window = ContentWindow(parse_duration_ms(t["window"], f"{where}.content_window.window"),
                                       _enum(WindowMode, t.get("mode", "strict"), f"{where}.content_window.mode"))
    if "budget" in raw:
        t = _table(raw["budget"], f"{where}.budget", {"max", "window"})
        if not isinstance(t["max"], int) or isinstance(t["max"], bool) or t["max"] < 1:
            raise ConfigError(f"{where}.budget.max: expected a positive integer, got {t['max']!r}")
        budget = Budget(t["max"], parse_duration_ms(t["window"], f"{where}.budget.window"))
    normal_forms: dict[str, NormalForm] = {}
    if "normalize" in raw:
        forms = raw["normalize"]
        if not isinstance(forms, dict) or not forms:
            raise ConfigError(f"{where}.normalize: expected a table like {{ to = \"email\" }}, got {forms!r}")
        normal_forms = {name: _enum(NormalForm, form, f"{where}.normalize.{name}") for name, form in forms.items()}
    approval = _approval(raw["approval"], f"{where}.approval") if "approval" in raw else None
    policy = Policy(
        tool=tool,
        normal_forms=normal_forms,
        denied=denied,
        key_mode=_enum(KeyMode, raw.get("key", "derive"), f"{where}.key"),
        key_ttl_ms=parse_duration_ms(raw.get("key_ttl", "24h"), f"{where}.key_ttl"),
        scope=scope,
        natural_id=natural_id,
        content_window=content_window,
        budget=budget,
        named=named,
        approval=approval,
    )
    if policy.has_scope_rules and not policy.scope:
        raise ConfigError(f"{where}: natural_id, content_window and budget need a scope = [params fields]")
    return policy


@dataclass(frozen=True, slots=True)
class PolicyBook:
    """Every tool's policy, plus the default for tools no table names."""

    default: Policy
    tools: Mapping[str, Policy]
    #: what the policies say, hashed (12 hex digits): the worker stamps it on each decision, so a
    #: gateway or SDK loaded with other policies can tell (sdk/outcomes.py warns once)
    digest: str = ""

    def for_tool(self, tool: str) -> Policy:
        policy = self.tools.get(tool)
        if policy is not None:
            return policy
        # Same rules as [default], under the tool's own name (so scope keys stay per tool).
        return Policy(tool=tool, denied=self.default.denied, key_mode=self.default.key_mode,
                      key_ttl_ms=self.default.key_ttl_ms, named=False)

    def longest_key_ttl_ms(self) -> int:
        """How long any idempotency key is remembered: an executor's window for its second line
        of defence (a key approved again after this is a new action, on purpose)."""
        return max([self.default.key_ttl_ms, *(p.key_ttl_ms for p in self.tools.values())])

    @classmethod
    def from_toml(cls, text: str, source: str = "policies") -> PolicyBook:
        """One policy file alone (the shipped one, or a test's)."""
        return cls._build([(_tables(text, source), source)])

    @classmethod
    def load(cls, path: Path | None = None) -> PolicyBook:
        """The shipped policies, with ``path``'s on top: a ``[tools.NAME]`` table of the file adds
        that tool or replaces its shipped table, its ``[default]`` replaces the shipped one. A file
        that says ``replace_shipped = true`` stands alone (the shipped tables are dropped)."""
        shipped = (_tables((resources.files("runonce.core") / "policies.toml").read_text(encoding="utf-8"),
                           SHIPPED_SOURCE), SHIPPED_SOURCE)
        if path is None:
            return cls._build([shipped])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read policy file {path}: {exc}") from exc
        own = _tables(text, str(path))
        replace = own.pop("replace_shipped", False)
        if not isinstance(replace, bool):
            raise ConfigError(f"{path}: replace_shipped must be true or false")
        return cls._build([(own, str(path))] if replace else [shipped, (own, str(path))])

    @classmethod
    def _build(cls, layers: list[tuple[dict[str, Any], str]]) -> PolicyBook:
        """Later layers win, table by table; each table's errors name the file it came from."""
        default_raw: tuple[Mapping[str, Any], str] = ({}, layers[-1][1])
        tools_raw: dict[str, tuple[Mapping[str, Any], str]] = {}
        for data, source in layers:
            if "default" in data:
                default_raw = (data["default"], source)
            tables = data.get("tools", {})
            if not isinstance(tables, dict):
                raise ConfigError(f"{source}: [tools] must be a table of tables")
            tools_raw.update({name: (raw, source) for name, raw in tables.items()})
        raw, source = default_raw
        if set(raw) - {"denied", "key", "key_ttl"}:  # approval too is per tool
            raise ConfigError(f"{source}: [default] takes only denied, key and key_ttl (scope rules are per tool)")
        default = _policy("*", raw, f"{source}: [default]", named=False)
        tools = {name: _policy(name, raw, f"{source}: [tools.{name}]", named=True)
                 for name, (raw, source) in tools_raw.items()}
        said = {"default": raw, "tools": {name: table for name, (table, _) in tools_raw.items()}}
        return cls(default=default, tools=tools, digest=sha256_hex(canonical_json(said))[:12])


#: where the shipped policies are, as errors name them
SHIPPED_SOURCE = "runonce/core/policies.toml"


def _tables(text: str, source: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    unknown = set(data) - {"default", "tools", "replace_shipped"}
    if unknown:
        raise ConfigError(f"{source}: unknown top-level table(s) {', '.join(sorted(unknown))}; "
                          f"use [default] and [tools.NAME]")
    return data
