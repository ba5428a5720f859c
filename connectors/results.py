"""What an executor knows about past attempts: the latest result per action id (and which
action first used each vendor key), restored from ``actions.results`` for the partitions it
owns. Results are written to the same partition number as the approved record, so the
owner of approved partition p is the only writer of results partition p."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from runonce.codec import Codec
from runonce.connectors.runner import Outcome, Status
from runonce.errors import BrokerUnavailable
from runonce.kafka import clients, topics


class ResultIndex:
    def __init__(self) -> None:
        self.by_action: dict[str, Outcome] = {}
        #: vendor key -> the action id that first used it (second line of defense)
        self.by_key: dict[str, str] = {}

    def put(self, action_id: str, vendor_key: str, outcome: Outcome) -> None:
        self.by_action[action_id] = outcome
        self.by_key.setdefault(vendor_key, action_id)

    def restore(self, bootstrap: str, partitions: list[int], tools: frozenset[str], codec: Codec,
                timeout_s: float = 60.0) -> int:
        """Read results partitions to their end (read_committed); returns records applied."""
        if not partitions:
            return 0
        consumer = clients.reader(bootstrap, group=f"runonce-restore-{uuid.uuid4().hex[:8]}")
        consumer.assign([TopicPartition(topics.RESULTS, p, OFFSET_BEGINNING) for p in partitions])
        pending, applied = set(partitions), 0
        deadline = time.monotonic() + timeout_s
        try:
            while pending:
                if time.monotonic() > deadline:
                    raise BrokerUnavailable(f"restoring results partitions {sorted(pending)} timed out")
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise BrokerUnavailable(f"restoring results: {msg.error()}")
                if msg.value() is None:
                    continue
                _, r = codec.decode(msg.value(), expect="ActionResult")
                if r["tool"] in tools:
                    self.put(r["action_id"], r["idempotency_key"] or r["action_id"], from_record(r))
                    applied += 1
        finally:
            consumer.close()
        return applied


def from_record(r: dict[str, Any]) -> Outcome:
    return Outcome(Status(r["status"]), r["vendor_ref"], r["error"], r["attempts"])


def to_record(action_id: str, idempotency_key: str | None, tool: str, outcome: Outcome) -> dict[str, Any]:
    return {"action_id": action_id, "idempotency_key": idempotency_key, "tool": tool,
            "status": outcome.status.value, "vendor_ref": outcome.vendor_ref, "error": outcome.error,
            "attempts": outcome.attempts, "completed_at_ms": int(time.time() * 1000)}
