"""A receipt: what one decision or one outcome was, by hashes, never by values, and where it
sits on its chain. Its fields are declared once, here; docs/receipts.md is written from them."""

from __future__ import annotations

import enum
from dataclasses import MISSING, dataclass, fields
from json.encoder import encode_basestring as _quoted  # a str as JSON writes it, non-ASCII kept
from typing import Any, Mapping

from runonce.receipts.canonical import MAX_INT, NotCanonical, Value, sha256_hex


class Kind(enum.Enum):
    #: the stream job's: approved, dropped, held; a hold released or denied by its approver
    DECISION = "decision"
    #: an executor's: what performing the action did
    OUTCOME = "outcome"


@dataclass(frozen=True, slots=True)
class Receipt:
    #: the chain it is on: a partition's, e.g. ``decisions/3`` (one writer: the partition's owner)
    chain: str
    #: its place on the chain, from 0
    seq: int
    #: the digest of the receipt before it on the chain; empty for the first
    prev: str
    kind: Kind
    action_id: str
    tenant: str
    agent_id: str
    tool: str
    #: sha256 of the request's params_json as the agent sent it (UTF-8)
    params_sha256: str
    #: the digest of the policies that decided (a decision's ``runonce.policies`` header)
    policy: str
    #: a decision's outcome (APPROVED, DROPPED, HELD) or an outcome's status
    outcome: str
    #: why: a decision's reason, an outcome's error kind (empty when it succeeded)
    reason: str
    #: sha256 of the certified record's bytes as written (the decision, the result)
    record_sha256: str
    #: the decision's event time, or when the outcome was recorded
    at_ms: int
    #: a released or denied hold's approver (``verdict_by``)
    approver: str | None = None
    #: an outcome's: sha256 of the vendor's answer
    answer_sha256: str | None = None
    #: an outcome's: the vendor's own id for the effect (a charge id, a message id)
    vendor_ref: str | None = None
    #: the W3C trace id the action ran in
    trace_id: str | None = None

    def to_json(self) -> dict[str, Value]:
        out: dict[str, Value] = {name: getattr(self, name) for name in _NAMES}
        out["kind"] = self.kind.value
        return out

    def to_bytes(self) -> bytes:
        """The canonical bytes (canonical.py): what is hashed, chained and signed. Written out
        field by field in their sorted order, one per decision the worker writes; the same bytes
        as ``canonical_bytes(self.to_json())`` (tests/unit/test_receipts.py)."""
        parts = []
        for name in _SORTED:
            value = self.kind.value if name == "kind" else getattr(self, name)
            if value is None:
                parts.append(f'"{name}":null')
            elif isinstance(value, str):
                parts.append(f'"{name}":{_quoted(value)}')
            elif -MAX_INT <= value <= MAX_INT:
                parts.append(f'"{name}":{value:d}')
            else:
                raise NotCanonical(f"{name}: {value} is past 2**53")
        try:
            return ("{" + ",".join(parts) + "}").encode("utf-8")
        except UnicodeEncodeError as exc:
            raise NotCanonical(f"a string with no UTF-8 form: {exc.reason}") from None

    def digest(self) -> str:
        return sha256_hex(self.to_bytes())

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Receipt:
        """A receipt as exported; ValueError naming what does not fit."""
        unknown = sorted(set(raw) - {f.name for f in FIELDS})
        if unknown:
            raise ValueError(f"not a receipt's field: {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for f in FIELDS:
            value = raw.get(f.name)
            if value is None:
                if f.name in REQUIRED:
                    raise ValueError(f"a receipt without {f.name}")
                continue
            wanted = int if f.type == "int" else str  # kind is its value, a string
            if not isinstance(value, wanted) or isinstance(value, bool):
                raise ValueError(f"{f.name}: {value!r} is not a{'n integer' if wanted is int else ' string'}")
            values[f.name] = value
        try:
            values["kind"] = Kind(values["kind"])
        except ValueError:
            raise ValueError(f"kind: {raw['kind']!r} is none of {', '.join(k.value for k in Kind)}") from None
        return cls(**values)


FIELDS = fields(Receipt)
REQUIRED = frozenset(f.name for f in FIELDS if f.default is MISSING)
_NAMES = tuple(f.name for f in FIELDS)
#: the canonical order: by name (the names are ASCII, so code points and UTF-16 units agree)
_SORTED = tuple(sorted(_NAMES))


def template(fixed: Mapping[str, Value]) -> str:
    """The canonical bytes of receipts whose ``fixed`` fields always hold these values, as a
    ``%``-format with a ``%(name)s`` for each other field (given already in its JSON form:
    ``quoted`` for a string, ``null``, a number): a writer that makes one receipt per record
    encodes it in one formatting, in the order and form ``Receipt.to_bytes`` writes
    (tests/unit/test_worker_receipts.py holds the two equal)."""
    unknown = sorted(set(fixed) - set(_NAMES))
    if unknown:
        raise ValueError(f"not a receipt's field: {', '.join(unknown)}")
    parts = []
    for name in _SORTED:
        if name in fixed:
            value = fixed[name]
            form = "null" if value is None else quoted(value) if isinstance(value, str) else f"{value:d}"
            parts.append(f'"{name}":{form}'.replace("%", "%%"))
        else:
            parts.append(f'"{name}":%({name})s')
    return "{" + ",".join(parts) + "}"


def quoted(text: str) -> str:
    """A string in its canonical JSON form (non-ASCII kept)."""
    return _quoted(text)
