"""``actions.results`` as Python: an executor's status for an action and the record it writes.

``attempting`` is the intent an executor commits before it calls the vendor; the other three
are final. The SDK reports ``dropped`` for an action runonce dropped (it has no result).

An intent is *withdrawn* when the executor that wrote it proves, in a later transaction of its
own (while it still owns the partition), that its call never started: the lease ended first,
or the executor was told to stop (connectors/executor/lease.py). Its next owner performs it
instead of reconciling it. It is an ``attempting`` record whose ``error`` starts with
``WITHDRAWN``: a new enum symbol would be a new schema, which every deployed reader would meet
as an unknown fingerprint (single-object encoding, no registry); as it is, an older reader sees
an intent, not a final status, and waits, which is what it should do."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping


class Status(enum.Enum):
    ATTEMPTING = "attempting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    IN_DOUBT = "in_doubt"

    @property
    def final(self) -> bool:
        return self is not Status.ATTEMPTING


class CallStatus(enum.StrEnum):
    """What a caller (SDK handle, gateway answer, framework tool) is told about an action: an
    executor's final status, or why there is none. A ``str`` as well, so ``== "succeeded"``
    and JSON keep working."""

    SUCCEEDED = Status.SUCCEEDED.value
    FAILED = Status.FAILED.value
    IN_DOUBT = Status.IN_DOUBT.value
    #: runonce dropped it: no executor ever saw it
    DROPPED = "dropped"
    #: the gateway answered before its outcome arrived
    PENDING = "pending"
    #: held for a person's approval when the gateway answered
    HELD = "held"

    @classmethod
    def of(cls, status: Status) -> CallStatus:
        """An executor's final status, as a caller sees it."""
        if not status.final:
            raise ValueError(f"{status.value} is not a final status")
        return cls(status.value)


DROPPED, PENDING, HELD = CallStatus.DROPPED, CallStatus.PENDING, CallStatus.HELD


def result_partition(approved_partition: int) -> int:
    """The partition of ``actions.results`` an action's intent and result go to: its approved
    record's partition number. The executor that owns an approved partition then restores
    exactly its own history from one results partition, and the SDK finds a result where it
    found the decision."""
    return approved_partition


#: the ``error`` of a withdrawn intent starts with this
WITHDRAWN = "withdrawn: the call never started"


@dataclass(frozen=True, slots=True)
class Result:
    """What performing an action came to (one ``ActionResult`` record's content)."""

    status: Status
    vendor_ref: str | None = None
    error: str | None = None
    attempts: int = 0

    @property
    def withdrawn(self) -> bool:
        """An intent whose call its executor proved never started (the module's docstring)."""
        return self.status is Status.ATTEMPTING and self.error is not None and self.error.startswith(WITHDRAWN)


def withdrawn(why: str) -> Result:
    """The record that withdraws an intent whose call never started."""
    return Result(Status.ATTEMPTING, error=f"{WITHDRAWN} ({why})")


def result_of(record: Mapping[str, Any]) -> Result:
    return Result(Status(record["status"]), record["vendor_ref"], record["error"], record["attempts"])


#: a vendor's error text or reference is cut here: a result explains, it does not carry a 5 MB
#: error page (with the request's own bounded fields, every result fits actions.results)
MAX_VENDOR_TEXT_CHARS = 4000


def _cut(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_VENDOR_TEXT_CHARS else text[:MAX_VENDOR_TEXT_CHARS] + "…"


def result_record(action_id: str, idempotency_key: str | None, tool: str, result: Result,
                  completed_at_ms: int) -> dict[str, Any]:
    return {"action_id": action_id, "idempotency_key": idempotency_key, "tool": tool,
            "status": result.status.value, "vendor_ref": _cut(result.vendor_ref), "error": _cut(result.error),
            "attempts": result.attempts, "completed_at_ms": completed_at_ms}
