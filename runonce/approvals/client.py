"""Held actions and verdicts as an approver sees them: what is held (``actions.held``), what each
verdict did (``actions.verdicts``), and a verdict written (``actions.approvals``).

Writing a verdict decides nothing by itself: the hold's owner decides verdicts one at a time,
so two approvers who click at once both get an answer, and only the first releases the action.
``verdict`` returns once the owner has decided this very verdict (or its timeout passes)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from runonce.core.approval import HoldStatus, Verdict
from runonce.errors import NotHeld, ResultTimeout
from runonce.kafka import clients, topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.partitioner import partition_for
from runonce.kafka.reader import read_all
from runonce.wire.approvals import verdict_partition, verdict_record
from runonce.wire.codec import Codec


@dataclass(frozen=True, slots=True)
class VerdictSeen:
    """One verdict (or an expiry) and what it did."""

    verdict_id: str | None
    approver: str
    verdict: str | None
    change: str
    note: str
    reason: str
    at_ms: int


def _seen(v: dict[str, Any]) -> VerdictSeen:
    return VerdictSeen(v["verdict_id"], v["approver"], v["verdict"], v["change"], v["note"], v["reason"],
                       v["event_time_ms"])


@dataclass(frozen=True, slots=True)
class HeldAction:
    action_id: str
    tool: str
    params: dict[str, Any]
    agent_id: str
    why: str
    held_at_ms: int
    expires_at_ms: int
    status: HoldStatus
    decided_by: str | None = None
    verdicts: tuple[VerdictSeen, ...] = field(default_factory=tuple)
    record: dict[str, Any] = field(default_factory=dict, repr=False)


class Approvals:
    def __init__(self, target: KafkaTarget, approver: str, *, timeout_s: float = 30.0) -> None:
        """``target``: where, and as whom (the ``approver`` principal on a secured broker);
        ``approver``: the name each verdict carries."""
        self.target = target
        self.approver = approver
        self.timeout_s = timeout_s
        self.codec = Codec()
        self._producer = clients.producer(target, **{"linger.ms": 0})
        self._partition_count: int | None = None

    def held(self) -> list[HeldAction]:
        """Every held action (newest first), with its status and every verdict on it."""
        verdicts: dict[str, list[dict[str, Any]]] = {}
        for v in self._verdicts():
            verdicts.setdefault(v["action_id"], []).append(v)
        out = [self._held_action(d, verdicts.get(d["request"]["action_id"], [])) for d in self._holds().values()]
        return sorted(out, key=lambda h: h.held_at_ms, reverse=True)

    def get(self, action_id: str) -> HeldAction:
        record = self._holds().get(action_id)
        if record is None:
            raise NotHeld(f"no action {action_id} is held (see `runonce approvals list`)")
        partition = partition_for(action_id, self._partitions())  # what each verdict did: keyed by action id
        mine = [v for v in self._verdicts(partitions=[partition]) if v["action_id"] == action_id]
        return self._held_action(record, mine)

    def send(self, action_id: str, verdict: Verdict, reason: str = "", *, verdict_id: str | None = None,
             approver: str | None = None) -> str:
        """Write a verdict (as ``approver``, else this client's); returns its id (the same id
        sent again is the same verdict)."""
        held = self._holds().get(action_id)
        if held is None:
            raise NotHeld(f"no action {action_id} is held (see `runonce approvals list`)")
        record = verdict_record(action_id, verdict, approver or self.approver, reason, verdict_id)
        try:
            self._producer.produce(topics.APPROVALS, key=action_id.encode(),
                                   value=self.codec.encode("ApprovalVerdict", record),
                                   partition=verdict_partition(held))
            left = self._producer.flush(self.timeout_s)
        except KafkaException as exc:
            raise clients.translate(exc, f"cannot write a verdict to {topics.APPROVALS}") from exc
        if left:
            raise ResultTimeout(f"the verdict on {action_id} was not delivered within {self.timeout_s:.0f} s")
        return str(record["verdict_id"])

    def verdict(self, action_id: str, verdict: Verdict, reason: str = "", *, verdict_id: str | None = None,
                approver: str | None = None, wait_s: float = 30.0) -> VerdictSeen:
        """Write a verdict and wait for what it did (released it, or changed nothing and why)."""
        since_ms = int(time.time() * 1000) - 60_000  # the owner's clock stamps its answer: some slack
        sent = self.send(action_id, verdict, reason, verdict_id=verdict_id, approver=approver)
        partition = partition_for(action_id, self._partitions())
        deadline = time.monotonic() + wait_s
        while True:
            for v in self._verdicts(partitions=[partition], since_ms=since_ms):
                if v["verdict_id"] == sent:
                    return _seen(v)
            if time.monotonic() > deadline:
                raise ResultTimeout(f"verdict {sent} on {action_id} was written but not decided within {wait_s:.0f} s "
                                    "(is a stream worker running?)")
            time.sleep(0.1)

    # -- reading ---------------------------------------------------------------------------
    def _holds(self) -> dict[str, dict[str, Any]]:
        """Each held action's HELD decision (a replayed hold, at-least-once, is one hold)."""
        out: dict[str, dict[str, Any]] = {}
        for r in read_all(self.target, topics.HELD, self.timeout_s):
            d = self.codec.decode(r.value, expect="ActionDecision")[1]
            out.setdefault(d["request"]["action_id"], d)
        return out

    def _verdicts(self, partitions: list[int] | None = None, since_ms: int | None = None) -> list[dict[str, Any]]:
        return [self.codec.decode(r.value, expect="VerdictDecided")[1]
                for r in read_all(self.target, topics.VERDICTS, self.timeout_s, partitions=partitions,
                                  since_ms=since_ms)]

    def _partitions(self) -> int:
        if self._partition_count is None:
            self._partition_count = topics.partition_count(self.target, topics.VERDICTS)
        return self._partition_count

    @staticmethod
    def _held_action(d: dict[str, Any], verdicts: list[dict[str, Any]]) -> HeldAction:
        req = d["request"]
        last = next((v for v in reversed(verdicts) if v["status"] is not None), None)
        return HeldAction(req["action_id"], req["tool"], json.loads(req["params_json"] or "{}"), req["agent_id"],
                          d["hold_why"], d["event_time_ms"], d["hold_expires_at_ms"],
                          HoldStatus(last["status"]) if last else HoldStatus.HELD,
                          last["decided_by"] if last else None, tuple(_seen(v) for v in verdicts), d)

    def close(self) -> None:
        self._producer.flush(self.timeout_s)

    def __enter__(self) -> Approvals:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
