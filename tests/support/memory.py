"""In-memory runtime for the stream job's logic: the same ``Pipeline`` every runtime runs,
over dict stores, routing the internal topics as Kafka would, for fast unit tests (no
Kafka is mocked: the integration tests run the real job against the real broker)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from runonce.core.policy import PolicyBook
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.kafka.record import Headers
from runonce.sdk.submit import build_request
from runonce.streams.metrics import StreamMetrics
from runonce.streams.ports import Inbound
from runonce.streams.processor import Pipeline
from runonce.telemetry.spans import NO_SPANS, Spans
from runonce.wire.approvals import cancel_record
from runonce.wire.codec import Codec


class MemoryStore:
    def __init__(self) -> None:
        self.parts: dict[int, dict[bytes, bytes]] = defaultdict(dict)

    def get(self, partition: int, key: bytes) -> bytes | None:
        return self.parts[partition].get(key)

    def put(self, partition: int, key: bytes, value: bytes) -> None:
        self.parts[partition][key] = value

    def delete(self, partition: int, key: bytes) -> None:
        self.parts[partition].pop(key, None)

    def scan(self, partition: int, after: bytes | None, limit: int) -> Iterable[tuple[bytes, bytes]]:
        keys = sorted(k for k in self.parts[partition] if after is None or k > after)[:limit]
        return [(k, self.parts[partition][k]) for k in keys]

    def size(self) -> int:
        return sum(len(p) for p in self.parts.values())


class MemoryPipeline:
    """Feeds requests through both stages, routing internal topics like Kafka would."""

    def __init__(self, partitions: int = 6, policies: PolicyBook | None = None, *, inline_scopes: bool = False,
                 spans: Spans = NO_SPANS) -> None:
        """``inline_scopes``: one worker owning every partition, as the transactional runtime
        decides stage 2 in place; otherwise every pass takes the scoped topic (faust)."""
        self.partitions = partitions
        self.codec = Codec()
        self.keys, self.scopes, self.holds = MemoryStore(), MemoryStore(), MemoryStore()
        self.pipeline = Pipeline(codec=self.codec, policies=policies or PolicyBook.load(), partitions=partitions,
                                 keys=self.keys, scopes=self.scopes, holds=self.holds, metrics=StreamMetrics(),
                                 decides_scope_here=(lambda _p: True) if inline_scopes else None, spans=spans)
        self.key_stage, self.scope_stage = self.pipeline.keys, self.pipeline.scopes
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.outputs: dict[str, list[tuple[bytes | None, bytes, Headers]]] = defaultdict(list)
        self.last_decision: dict[str, dict[str, Any]] = {}
        self._held: dict[str, dict[str, Any]] = {}
        #: every request fed, in order (to redeliver one)
        self.fed: list[Inbound] = []

    def _next_offset(self, topic: str, partition: int) -> int:
        offset = self.offsets[(topic, partition)]
        self.offsets[(topic, partition)] += 1
        return offset

    def feed_raw(self, value: bytes | None, *, key: bytes | None, timestamp_ms: int,
                       partition: int | None = None, headers: Headers = ()) -> Inbound:
        if partition is None:
            partition = partition_for(key, self.partitions) if key else 0
        inbound = Inbound(topics.REQUESTED, partition, self._next_offset(topics.REQUESTED, partition), timestamp_ms,
                          key, value, tuple(headers))
        self.fed.append(inbound)
        self.process(inbound)
        return inbound

    def feed(self, tool: str, params: dict[str, Any], *, timestamp_ms: int, key: str | None = None,
                   natural_id: str | None = None, action_id: str | None = None,
                   partition: int | None = None, headers: Headers = ()) -> dict[str, Any]:
        record = build_request(tool, params, agent_id="test", idempotency_key=key, natural_id=natural_id,
                               action_id=action_id, requested_at_ms=timestamp_ms)
        kafka_key = (key or record["action_id"]).encode()
        self.feed_raw(self.codec.encode("ActionRequested", record), key=kafka_key, timestamp_ms=timestamp_ms,
                            partition=partition, headers=headers)
        return record

    def verdict(self, action_id: str, verdict: str, *, approver: str, timestamp_ms: int,
                      verdict_id: str | None = None, reason: str = "") -> Inbound:
        """An approver's verdict on a held action, on the partition its held record names."""
        assert action_id in self._held, f"{action_id} was never held"
        partition = self._held[action_id]["hold_partition"]
        value = self.codec.encode("ApprovalVerdict", {
            "verdict_id": verdict_id or f"{approver}-{verdict}-{timestamp_ms}", "action_id": action_id,
            "verdict": verdict, "approver": approver, "reason": reason})
        inbound = Inbound(topics.APPROVALS, partition, self._next_offset(topics.APPROVALS, partition), timestamp_ms,
                          action_id.encode(), value)
        self.process(inbound)
        return inbound

    def cancel(self, action_id: str, *, agent_id: str, timestamp_ms: int, cancel_id: str | None = None,
               reason: str = "") -> Inbound:
        """An agent's cancel of a held action, on the partition its held record names."""
        assert action_id in self._held, f"{action_id} was never held"
        partition = self._held[action_id]["hold_partition"]
        value = self.codec.encode("ActionCancel", cancel_record(action_id, agent_id, reason, cancel_id))
        inbound = Inbound(topics.CANCELS, partition, self._next_offset(topics.CANCELS, partition), timestamp_ms,
                          action_id.encode(), value)
        self.process(inbound)
        return inbound

    def tick(self, partition: int, timestamp_ms: int) -> None:
        """Event time moving on a partition (another action decided there), as expiry needs."""
        self.feed("update_salesforce_field", {"record_id": f"tick-{timestamp_ms}", "field": "f", "value": 1},
                        timestamp_ms=timestamp_ms, key=f"tick-{partition}-{timestamp_ms}", partition=partition)

    def verdicts(self) -> list[dict[str, Any]]:
        return [self.codec.decode(value, expect="VerdictDecided")[1] for _, value, _ in self.outputs[topics.VERDICTS]]

    def redeliver(self, inbound: Inbound) -> None:
        """The same record again, as after a crash before the offset commit."""
        self.process(inbound)

    def process(self, first: Inbound) -> None:
        queue = [first]
        while queue:
            inbound = queue.pop(0)
            for out in self.pipeline.process_all(inbound):
                if out.topic in (topics.REKEY, topics.SCOPED):
                    assert out.partition is not None
                    queue.append(Inbound(out.topic, out.partition, self._next_offset(out.topic, out.partition),
                                         inbound.timestamp_ms, out.key, out.value, out.headers))
                    continue
                self.outputs[out.topic].append((out.key, out.value, out.headers))
                if out.topic in (topics.APPROVED, topics.DROPPED, topics.HELD):
                    decision = self.codec.decode(out.value, expect="ActionDecision")[1]
                    self.last_decision[decision["request"]["action_id"]] = decision
                    if out.topic == topics.HELD:
                        self._held[decision["request"]["action_id"]] = decision

    def decisions(self, topic: str = topics.APPROVED) -> list[dict[str, Any]]:
        return [self.codec.decode(value, expect="ActionDecision")[1] for _, value, _ in self.outputs[topic]]

    def decision_for(self, action_id: str) -> dict[str, Any]:
        assert action_id in self.last_decision, f"no decision for {action_id}"
        return self.last_decision[action_id]
