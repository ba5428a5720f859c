"""A kind's fields, declared once: name, type, default, whether it is a secret, and what it is
for. The declaration checks the table before the factory reads it (an unknown or misspelt
field is named first, even when a required one is missing too), gives the factory its
defaults, and writes the field tables of docs/vendors.md (``runonce connectors fields``), as
Kafka Connect's ``ConfigDef`` and Redpanda Connect's ``ConfigSpec`` do."""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: a field's default; ``REQUIRED`` (None): the table must give it
Default = str | int | float | bool | None
REQUIRED: Default = None


class FieldType(enum.Enum):
    TEXT = "text"
    URL = "https URL"
    SECRET = "secret"
    INTEGER = "integer"
    NUMBER = "number"
    FLAG = "true/false"
    CHOICE = "one of"
    #: ``[vendors.NAME.tools.TOOL]`` tables, one per tool (a kind whose tools are statements)
    TOOL_TABLES = "a table per tool"


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: FieldType
    doc: str
    default: Default = REQUIRED
    #: a field that may be absent with no default (one of two ways to authenticate)
    optional: bool = False
    #: CHOICE: the values it takes
    options: tuple[str, ...] = ()
    #: SECRET: a plain string is taken too (a user name)
    plain_ok: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED and not self.optional

    def default_said(self) -> str:
        if self.required:
            return "required"
        if self.default is REQUIRED or self.default == "":
            return "-"
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return f"`{self.default}`"

    def type_said(self) -> str:
        if self.type is FieldType.CHOICE:
            return "one of " + ", ".join(f"`{o}`" for o in self.options)
        if self.type is FieldType.SECRET:
            return "secret or plain text" if self.plain_ok else "secret"
        return str(self.type.value)


@dataclass(frozen=True, slots=True)
class Spec:
    """Every field one kind reads, besides those every vendor has (``COMMON_FIELDS``)."""

    kind: str
    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        clash = sorted({n for n in names if names.count(n) > 1} | (set(names) & COMMON_FIELDS))
        if clash:
            raise ValueError(f"kind {self.kind!r} declares {clash[0]!r} twice (or a field every vendor has)")

    def get(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields)

    def markdown(self) -> str:
        """The kind's field table, as docs/vendors.md shows it."""
        rows = ["| field | type | default | what it is |", "|---|---|---|---|"]
        rows += [f"| `{f.name}` | {f.type_said()} | {f.default_said()} | {f.doc} |" for f in self.fields]
        return "\n".join(rows)


#: the fields every vendor has, whatever its kind (read by VendorFields itself; docs/vendors.md
#: "Fields every vendor has")
COMMON_FIELDS = frozenset({"kind", "tools", "timeout_s", "ca_file", "rate"})
