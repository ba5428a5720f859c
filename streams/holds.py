"""Held actions: the stream job's side of human approval (the decisions are core/approval.py's).

- **Hold.** A stage that would approve an action whose policy asks for approval (and whose
  params meet the rule) calls ``Holds.hold`` instead: the hold is stored in the holds table on
  the deciding partition ``p``, and the decision goes to actions.held (outcome HELD) naming
  ``p`` as ``hold_partition``.
- **Verdicts.** An approver writes a verdict to actions.approvals on partition ``p``
  (``wire.approvals.verdict_partition``). The worker that owns ``p`` owns it on every input
  topic (the range assignor), so the hold and its verdicts have one decider: ``Holds.verdict``
  decides each once, in order, in the transaction that consumes it. The first approve
  releases the held decision to actions.approved (``verdict_by`` names the approver); a deny
  drops it (approval_denied). Every verdict, deciding or not, is written to actions.verdicts
  with what it changed.
- **Cancels.** An agent that gives up on its held action writes a cancel to actions.cancels on
  ``p``; ``Holds.cancel`` decides it as a deny by that agent (``agent:<id>``) when the agent is
  the one the held request names, and writes what it did to actions.verdicts, as a verdict's.
- **Expiry**, on event time: ``Holds.sweep`` runs for every record the partition decides and
  drops each hold whose expiry that record's time has reached (approval_expired). It scans
  the partition's holds only when one is due (the earliest due time is kept in memory; a
  restarted worker scans once on its first record). A hold ended a week ago is deleted (a
  tombstone in its changelog).

A replay (at-least-once runtime) decides the same verdict again and writes the same outputs:
the stored hold names the verdict that ended it (``Hold.decided_verdict``).
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from runonce.core.approval import (
    EXPIRY,
    ApprovalRule,
    CancelRecord,
    Change,
    Hold,
    HoldStatus,
    Verdict,
    VerdictDecision,
    VerdictRecord,
    decide_cancel,
    decide_verdict,
    hold,
    sweep,
)
from runonce.core.decision import Outcome, Reason
from runonce.errors import DecodeError, InvariantViolation
from runonce.kafka import topics
from runonce.kafka.record import Out
from runonce.streams import records
from runonce.streams.metrics import StreamMetrics
from runonce.streams.ports import Inbound, StateStore
from runonce.telemetry.spans import NO_SPANS, DecisionSpans
from runonce.wire.codec import Codec
from runonce.wire.trace import TraceHeaders, Waited

#: how long an ended hold is kept (a late verdict is told who ended it)
KEEP_ENDED_MS = 7 * 24 * 3600 * 1000

_DROP_REASON = {Change.DENY: Reason.APPROVAL_DENIED, Change.EXPIRE: Reason.APPROVAL_EXPIRED}


@dataclass(frozen=True, slots=True)
class HoldEntry:
    """A holds-table value: the hold, the held decision (Avro) to release or drop later, and
    the trace context of the hold's decision, which its release or drop continues."""

    hold: Hold
    decision: bytes
    trace: TraceHeaders = ()

    def to_bytes(self) -> bytes:
        raw: dict[str, Any] = {"h": self.hold.to_json(), "d": base64.b64encode(self.decision).decode()}
        if self.trace:
            raw["t"] = [[name, value.decode("ascii")] for name, value in self.trace]
        return json.dumps(raw, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, partition: int) -> HoldEntry:
        try:
            data = json.loads(raw)
            trace = tuple((str(name), str(value).encode("ascii")) for name, value in data.get("t", ()))
            return cls(Hold.from_json(data["h"]), base64.b64decode(data["d"]), trace)
        except Exception as exc:  # runonce wrote it: unreadable state is a broken invariant
            raise InvariantViolation(f"holds[{partition}]: unreadable entry: {exc!r}") from exc


class Holds:
    def __init__(self, store: StateStore, codec: Codec, metrics: StreamMetrics,
                 final: Callable[[dict[str, Any], Outcome, Reason, str], Out], spans: DecisionSpans = NO_SPANS) -> None:
        """``final``: how a stage writes a final decision (its metrics, its output key)."""
        self.store = store
        self.codec = codec
        self.metrics = metrics
        self._final = final
        self.spans = spans
        #: per partition, the earliest event time at which a sweep has work (absent: unknown)
        self._due_ms: dict[int, float] = {}
        #: the hold ``hold`` made, until ``keep`` stores it: (partition, action id, entry)
        self._unkept: tuple[int, str, HoldEntry] | None = None
        #: per partition, the holds waiting for a person: action id -> held at (for the gauges)
        self._waiting: dict[int, dict[str, int]] = {}
        metrics.holds_waiting.set_function(lambda: sum(len(w) for w in self._waiting.values()))
        metrics.hold_oldest.set_function(self._oldest_s)

    # -- holding -------------------------------------------------------------------------
    def hold(self, record: dict[str, Any], rule: ApprovalRule, why: str, partition: int) -> Out:
        """``record`` (an APPROVE decision) held on ``partition`` instead; stored by ``keep``."""
        action_id = str(record["request"]["action_id"])
        raw = self.store.get(partition, action_id.encode())
        prior = HoldEntry.from_bytes(raw, partition).hold if raw is not None else None
        held = hold(action_id, rule, why, record["event_time_ms"], prior)
        out = dict(record, outcome=Outcome.HOLD.value, hold_why=held.why, hold_expires_at_ms=held.expires_at_ms,
                   hold_partition=partition)
        value = self.codec.encode("ActionDecision", out)
        # Written by ``keep``, once the trace context its decision is written with is known
        # (Pipeline.process); again on a replay, as claims are ("Replays write again" in core/decide.py).
        self._unkept = (partition, action_id, HoldEntry(held, value))
        if partition in self._due_ms:
            self._due_ms[partition] = min(self._due_ms[partition], held.expires_at_ms)
        if held.status is HoldStatus.HELD:
            self._waiting.setdefault(partition, {})[action_id] = held.held_at_ms
        self.metrics.held.labels(record["request"]["tool"]).inc()
        return Out(topics.HELD, records.output_key(out), value, decision=out)

    def keep(self, held: Mapping[str, Any], context: TraceHeaders) -> None:
        """Store the hold ``hold`` just made for ``held``, with the trace context the hold's
        decision is written with (its span's, or the request's): the release or drop, whenever
        it comes, continues that trace."""
        unkept, self._unkept = self._unkept, None
        action_id = str(held["request"]["action_id"])
        if unkept is None or unkept[1] != action_id:
            raise InvariantViolation(f"{action_id}: a hold kept that was not made")
        partition, _, entry = unkept
        self.store.put(partition, action_id.encode(), replace(entry, trace=tuple(context)).to_bytes())

    # -- verdicts ------------------------------------------------------------------------
    def verdict(self, inbound: Inbound) -> list[Out]:
        """A verdict from actions.approvals: what it changed, and the release or drop it caused."""
        _, raw = self.codec.decode(inbound.value, expect="ApprovalVerdict")
        verdict = VerdictRecord(str(raw["verdict_id"]), str(raw["action_id"]), Verdict(raw["verdict"]),
                                str(raw["approver"]), inbound.timestamp_ms, str(raw.get("reason") or ""))
        if not verdict.action_id or not verdict.verdict_id or not verdict.approver:
            raise DecodeError("a verdict needs an action_id, a verdict_id and an approver")
        entry = self._entry(inbound.partition, verdict.action_id)
        outcome = decide_verdict(entry.hold if entry is not None else None, verdict)
        return self._apply(inbound.partition, entry, outcome, verdict, inbound.timestamp_ms)

    def cancel(self, inbound: Inbound) -> list[Out]:
        """An agent's cancel from actions.cancels: what it changed, and the drop it caused."""
        _, raw = self.codec.decode(inbound.value, expect="ActionCancel")
        cancel = CancelRecord(str(raw["cancel_id"]), str(raw["action_id"]), str(raw["agent_id"]),
                              inbound.timestamp_ms, str(raw.get("reason") or ""))
        if not cancel.action_id or not cancel.cancel_id or not cancel.agent_id:
            raise DecodeError("a cancel needs an action_id, a cancel_id and an agent_id")
        entry = self._entry(inbound.partition, cancel.action_id)
        asked_by = (str(self.codec.decode(entry.decision, expect="ActionDecision")[1]["request"]["agent_id"])
                    if entry is not None else None)
        outcome = decide_cancel(entry.hold if entry is not None else None, cancel, asked_by)
        return self._apply(inbound.partition, entry, outcome, cancel.as_verdict(), inbound.timestamp_ms)

    def _entry(self, partition: int, action_id: str) -> HoldEntry | None:
        raw = self.store.get(partition, action_id.encode())
        return HoldEntry.from_bytes(raw, partition) if raw is not None else None

    def sweep(self, partition: int, event_time_ms: int) -> list[Out]:
        """Expire this partition's holds that are due; forget ended ones kept long enough."""
        if event_time_ms < self._due_ms.get(partition, float("-inf")):
            return []
        outs: list[Out] = []
        due = float("inf")
        waiting: dict[str, int] = {}
        # One scan of the partition's holds (people's approvals: few), the open transaction's included.
        for key, raw in self.store.scan(partition, None, 1 << 30):
            entry = HoldEntry.from_bytes(raw, partition)
            held = entry.hold
            if held.status is HoldStatus.HELD:
                outcome = sweep(held, event_time_ms)
                if outcome.change is Change.EXPIRE and outcome.new_hold is not None:
                    outs += self._apply(partition, entry, outcome, None, event_time_ms)
                    held = outcome.new_hold
                else:
                    due = min(due, held.expires_at_ms)
                    waiting[held.action_id] = held.held_at_ms
                    continue
            forget_at_ms = (held.decided_at_ms or held.expires_at_ms) + KEEP_ENDED_MS
            if event_time_ms >= forget_at_ms:
                self.store.delete(partition, key)
            else:
                due = min(due, forget_at_ms)
        self._due_ms[partition] = due
        self._waiting[partition] = waiting
        return outs

    def _continued(self, final: Out, tool: str, entry: HoldEntry, ended: Hold, change: Change,
                   event_time_ms: int) -> Out:
        """The release or drop in the hold's trace: after the wait's span, with its own decision's."""
        context = self.spans.wait(entry.trace, Waited(tool, entry.hold.action_id, entry.hold.held_at_ms,
                                                      event_time_ms, change.value, ended.decided_by))
        if self.spans.recording and final.decision is not None:
            context = self.spans.decide(context, records.decided(final.decision))
        return final.with_trace(context) if context else final

    def forget(self) -> None:
        """The open transaction's state changes were dropped (an abort, a rebalance): what
        was learnt from them about due times is dropped too."""
        self._due_ms.clear()
        self._waiting.clear()

    def _oldest_s(self) -> float:
        oldest = min((t for w in self._waiting.values() for t in w.values()), default=None)
        # wall clock: a gauge for people, never an input to a decision
        return 0.0 if oldest is None else max(0.0, time.time() - oldest / 1000)

    def _apply(self, p: int, entry: HoldEntry | None, outcome: VerdictDecision, verdict: VerdictRecord | None,
               event_time_ms: int) -> list[Out]:
        outs: list[Out] = []
        ended = outcome.new_hold
        prior = entry.hold if entry is not None else None
        if ended is not None and entry is not None:
            if outcome.change is not Change.NONE:
                _, record = self.codec.decode(entry.decision, expect="ActionDecision")
                record.update(verdict_by=ended.decided_by, verdict_id=ended.decided_verdict)
                tool = str(record["request"]["tool"])
                if outcome.change is Change.RELEASE:
                    final = self._final(dict(record, outcome=Outcome.APPROVE.value), Outcome.APPROVE,
                                        Reason(record["reason"]), tool)
                else:
                    reason = _DROP_REASON[outcome.change]
                    final = self._final(dict(record, outcome=Outcome.DROP.value, reason=reason.value),
                                        Outcome.DROP, reason, tool)
                # a redelivered verdict's release or drop: its spans were made the first time
                outs.append(final.traced_as(entry.trace) if outcome.replay
                            else self._continued(final, tool, entry, ended, outcome.change, event_time_ms))
                if not outcome.replay:
                    self.metrics.holds_ended.labels(outcome.change.value).inc()
            self.store.put(p, ended.action_id.encode(), replace(entry, hold=ended).to_bytes())
            if ended.status is not HoldStatus.HELD:
                self._waiting.get(p, {}).pop(ended.action_id, None)
        now = ended or prior
        action_id = verdict.action_id if verdict is not None else (now.action_id if now else "")
        outs.append(Out(topics.VERDICTS, action_id.encode(), self.codec.encode("VerdictDecided", {
            "action_id": action_id,
            "verdict_id": verdict.verdict_id if verdict else None,
            "verdict": verdict.verdict.value if verdict else None,
            "approver": verdict.approver if verdict else EXPIRY,
            "reason": verdict.reason if verdict else "",
            "change": outcome.change.value,
            "status": now.status.value if now else None,
            "decided_by": now.decided_by if now else None,
            "note": outcome.note,
            "event_time_ms": event_time_ms,
        })))
        return outs
