"""The caller's trace context on runonce's records: W3C Trace Context (``traceparent``,
``tracestate``) in Kafka record headers under those names, as OpenTelemetry's Kafka
instrumentation writes them.

A request carries its caller's context (the SDK's current OpenTelemetry context, an HTTP
call's headers, an MCP call's ``_meta``); every record the stream job writes for it
(approved, dropped, held, a hand-off between its stages, a dead letter) carries the same, and
so does the executor's result. An agent team's trace can then follow one action from the
agent's tool call to the vendor's answer.

Only a well-formed context travels: a malformed ``traceparent`` (or a ``tracestate`` without
a valid one) is left behind, never a reason to dead-letter a request. Nothing here imports
OpenTelemetry: carrying a context is copying two headers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

#: version 00, a trace id and a parent id that are not all zeros, and the flags (W3C Trace Context §3.2)
_TRACEPARENT = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")
#: W3C's limit: 32 list members of at most 256 characters; a header past 512 may be cut
MAX_TRACESTATE_CHARS = 512

TraceHeaders = Sequence[tuple[str, bytes]]


def valid_traceparent(value: str | None) -> bool:
    return value is not None and _TRACEPARENT.match(value) is not None


def trace_headers(carrier: Mapping[str, str]) -> tuple[tuple[str, bytes], ...]:
    """The record headers of a context given as text (an HTTP request's headers, an MCP
    call's ``_meta``, what OpenTelemetry's propagator injects); () for none or a malformed one."""
    parent = carrier.get(TRACEPARENT)
    if parent is None or not valid_traceparent(parent.strip()):
        return ()
    headers: tuple[tuple[str, bytes], ...] = ((TRACEPARENT, parent.strip().encode("ascii")),)
    state = carrier.get(TRACESTATE)
    if state and len(state) <= MAX_TRACESTATE_CHARS and state.isascii() and state.isprintable():
        headers += ((TRACESTATE, state.encode("ascii")),)
    return headers


def carried(headers: TraceHeaders) -> tuple[tuple[str, bytes], ...]:
    """The trace context among a record's headers, to put on what is written for it."""
    found: dict[str, str] = {}
    for name, value in headers:
        if name in (TRACEPARENT, TRACESTATE) and name not in found and value is not None:
            found[name] = value.decode("ascii", "replace")
    return trace_headers(found)


@dataclass(frozen=True, slots=True)
class Decided:
    """A decision's facts, as its span shows them (runonce/telemetry): the stream job's stages
    put them on the record they write, and the pipeline turns them into a span."""

    tool: str
    action_id: str
    outcome: str
    reason: str
    #: on a repeat: the action it repeats
    repeat_of: str | None = None
    #: on a repeat of a key whose first action was traced: that action's ``traceparent``
    #: (``H_FIRST_TRACEPARENT``), for a span link from the repeat's trace to the first's
    first_traceparent: str | None = None


@dataclass(frozen=True, slots=True)
class Waited:
    """A held action's wait for a person, as its span shows it: from the hold to the verdict
    (or the expiry) that ended it, on the stream job's event times."""

    tool: str
    action_id: str
    held_at_ms: int
    ended_at_ms: int
    #: what ended it: ``release``, ``deny`` or ``expire`` (core/approval.py ``Change``)
    change: str
    #: who ended it; the expiry's name for an expiry
    decided_by: str | None


#: on a decision that drops a repeat of a key: the first action's ``traceparent``, when the
#: worker recorded spans as it decided the first (an analyst can find the original's trace)
H_FIRST_TRACEPARENT = "runonce.first.traceparent"
