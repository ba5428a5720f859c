"""Decisions and the state they read and write: plain data, no I/O.

A duplicate is a Decision with outcome DROP and a Reason; it is never an exception.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field

#: a str as JSON writes it by default (quoted, non-ASCII escaped): json's own C function
from json.encoder import encode_basestring_ascii as _quoted
from typing import Generic, Mapping, TypeVar

#: made once: ``json.dumps`` with any option builds a new encoder at each call
_COMPACT = json.JSONEncoder(separators=(",", ":"))
#: how a scope's stored bytes begin: its expiry, then its claims
_EXPIRES = b'{"e":'


class Outcome(enum.Enum):
    #: passed stage 1 (keys); stage 2 (scope rules) decides next. Internal topics only.
    PASS = "PASSED"
    APPROVE = "APPROVED"
    DROP = "DROPPED"
    #: it would be approved, but its policy asks for a person's yes first (core/approval.py)
    HOLD = "HELD"


class Reason(enum.Enum):
    UNIQUE = "unique"
    #: approved, but it repeats content within an audit-mode window (recorded, not blocked)
    CONTENT_WINDOW_AUDIT = "content_window_audit"
    DUPLICATE_KEY = "duplicate_key"
    KEY_PAYLOAD_MISMATCH = "key_payload_mismatch"
    MISSING_KEY = "missing_key"
    NATURAL_ID_TAKEN = "natural_id_taken"
    CONTENT_WINDOW = "content_window"
    BUDGET_EXHAUSTED = "budget_exhausted"
    TOOL_DENIED = "tool_denied"
    #: held for approval, and a person said no
    APPROVAL_DENIED = "approval_denied"
    #: held for approval, and no one said yes before its expiry
    APPROVAL_EXPIRED = "approval_expired"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where and when an action entered: its place in actions.requested and its event time."""

    partition: int
    offset: int
    event_time_ms: int


@dataclass(frozen=True, slots=True)
class Claim:
    """The first action that took a key, a natural id, some content, or a budget slot."""

    action_id: str
    partition: int
    offset: int
    at_ms: int
    expires_at_ms: int

    def live_at(self, event_time_ms: int) -> bool:
        return event_time_ms < self.expires_at_ms

    def to_json(self) -> list[object]:
        return [self.action_id, self.partition, self.offset, self.at_ms, self.expires_at_ms]

    @classmethod
    def from_json(cls, raw: list[object]) -> Claim:
        action_id, partition, offset, at_ms, expires_at_ms = raw
        return cls(str(action_id), int(partition), int(offset), int(at_ms), int(expires_at_ms))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class KeyState:
    """Stage 1 state of one dedup key (idempotency key or content-derived key)."""

    claim: Claim
    content_hash: str
    #: the W3C traceparent of the action that took the key, kept by a worker that records
    #: spans so a repeat's span can link to the first's trace. Never read by a decision.
    first_traceparent: str | None = None

    @property
    def expires_at_ms(self) -> int:
        return self.claim.expires_at_ms

    def to_bytes(self) -> bytes:
        """``{"c":[claim],"h":hash[,"t":traceparent]}``, compact JSON, written out by hand: one
        per decision, and the same bytes as ``json.dumps`` gives them (tests/unit/test_decide.py)."""
        c = self.claim
        text = (f'{{"c":[{_quoted(c.action_id)},{c.partition:d},{c.offset:d},{c.at_ms:d},{c.expires_at_ms:d}],'
                f'"h":{_quoted(self.content_hash)}')
        if self.first_traceparent is not None:
            text += f',"t":{_quoted(self.first_traceparent)}'
        return (text + "}").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> KeyState:
        raw = json.loads(data)
        return cls(Claim.from_json(raw["c"]), raw["h"], raw.get("t"))

    @staticmethod
    def expires_at_of(data: bytes) -> int:
        """``from_bytes(data).expires_at_ms`` without parsing the rest: the expiry sweep reads
        two entries per record decided. The claim is the first member and expires_at_ms its
        last field; JSON escapes every quote inside a string, so the first ``],"h"`` ends it."""
        return int(data[:data.index(b'],"h"')].rsplit(b",", 1)[1])


@dataclass(frozen=True, slots=True)
class ScopeState:
    """Stage 2 state of one scope (the resource an action touches)."""

    natural_ids: Mapping[str, Claim] = field(default_factory=dict)
    contents: Mapping[str, Claim] = field(default_factory=dict)
    #: approved actions inside the budget window, oldest first
    budget: tuple[Claim, ...] = ()

    @property
    def expires_at_ms(self) -> int:
        """When every entry has expired and the whole scope can be deleted."""
        claims = [*self.natural_ids.values(), *self.contents.values(), *self.budget]
        return max((c.expires_at_ms for c in claims), default=0)

    def to_bytes(self) -> bytes:
        # "e" first: the expiry sweep reads it without parsing the claims (``expires_at_of``)
        return _COMPACT.encode(
            {
                "e": self.expires_at_ms,
                "n": {k: c.to_json() for k, c in self.natural_ids.items()},
                "c": {k: c.to_json() for k, c in self.contents.items()},
                "b": [c.to_json() for c in self.budget],
            }
        ).encode()

    @staticmethod
    def expires_at_of(data: bytes) -> int:
        """``from_bytes(data).expires_at_ms`` without building its claims: the expiry sweep
        reads about two scopes per record decided. Written since 2026-12: the first member
        says it; before: each claim's expires_at_ms is its last field."""
        if data.startswith(_EXPIRES):
            return int(data[len(_EXPIRES):data.index(b",", len(_EXPIRES))])
        raw = json.loads(data)
        claims = [*raw["n"].values(), *raw["c"].values(), *raw["b"]]
        return max((int(c[-1]) for c in claims), default=0)

    @classmethod
    def from_bytes(cls, data: bytes) -> ScopeState:
        raw = json.loads(data)
        return cls(
            {k: Claim.from_json(v) for k, v in raw["n"].items()},
            {k: Claim.from_json(v) for k, v in raw["c"].items()},
            tuple(Claim.from_json(v) for v in raw["b"]),
        )


S = TypeVar("S", KeyState, ScopeState)


@dataclass(frozen=True, slots=True)
class Decision(Generic[S]):
    outcome: Outcome
    reason: Reason
    #: the state to store for the key/scope; None leaves the store as it is
    new_state: S | None = None
    #: the first action this one repeats (for drops and audit approvals)
    repeat_of: Claim | None = None
    #: the key, natural id or scope the action collided on
    matched_key: str | None = None
    window_ms: int | None = None
    #: this very action was decided before (an at-least-once redelivery); same outcome again
    replay: bool = False
