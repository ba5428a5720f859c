"""In-memory runtime for the stream job's logic: the same KeyStage/ScopeStage that faust
runs, over dict stores and a list sink, for fast unit tests (no Kafka is mocked: the
integration tests run the real job against the real broker)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from runonce.codec import Codec
from runonce.core.policy import PolicyBook
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.streams.metrics import StreamMetrics
from runonce.streams.ports import Headers, Inbound
from runonce.streams.processor import KeyStage, ScopeStage
from runonce.submit import build_request


class MemoryStore:
    def __init__(self) -> None:
        self.parts: dict[int, dict[bytes, bytes]] = defaultdict(dict)
        self.current = 0  # the partition of the record being processed, as faust's event context

    def get(self, key: bytes) -> bytes | None:
        return self.parts[self.current].get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.parts[self.current][key] = value

    def delete(self, key: bytes) -> None:
        self.parts[self.current].pop(key, None)

    def scan(self, partition: int, after: bytes | None, limit: int) -> Iterable[tuple[bytes, bytes]]:
        keys = sorted(k for k in self.parts[partition] if after is None or k > after)[:limit]
        return [(k, self.parts[partition][k]) for k in keys]

    def size(self) -> int:
        return sum(len(p) for p in self.parts.values())


class ListSink:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes, int | None, Headers]] = []

    async def send(self, topic: str, key: bytes | None, value: bytes, *, partition: int | None = None,
                   headers: Headers = ()) -> None:
        self.sent.append((topic, key, value, partition, tuple(headers)))


class MemoryPipeline:
    """Feeds requests through both stages, routing internal topics like Kafka would."""

    def __init__(self, partitions: int = 6, policies: PolicyBook | None = None) -> None:
        self.partitions = partitions
        self.codec = Codec()
        self.sink = ListSink()
        self.keys, self.scopes = MemoryStore(), MemoryStore()
        common: dict[str, Any] = dict(codec=self.codec, policies=policies or PolicyBook.load(), partitions=partitions,
                                      sink=self.sink, metrics=StreamMetrics())
        self.key_stage = KeyStage(store=self.keys, **common)
        self.scope_stage = ScopeStage(store=self.scopes, **common)
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.outputs: dict[str, list[tuple[bytes | None, bytes, Headers]]] = defaultdict(list)
        self._last_decision: dict[str, dict[str, Any]] = {}

    def _next_offset(self, topic: str, partition: int) -> int:
        offset = self.offsets[(topic, partition)]
        self.offsets[(topic, partition)] += 1
        return offset

    async def feed_raw(self, value: bytes | None, *, key: bytes | None, timestamp_ms: int,
                       partition: int | None = None) -> Inbound:
        if partition is None:
            partition = partition_for(key, self.partitions) if key else 0
        inbound = Inbound(topics.REQUESTED, partition, self._next_offset(topics.REQUESTED, partition), timestamp_ms,
                          key, value)
        await self._process(inbound)
        return inbound

    async def feed(self, tool: str, params: dict[str, Any], *, timestamp_ms: int, key: str | None = None,
                   natural_id: str | None = None, action_id: str | None = None,
                   partition: int | None = None) -> dict[str, Any]:
        record = build_request(tool, params, agent_id="test", idempotency_key=key, natural_id=natural_id,
                               action_id=action_id, requested_at_ms=timestamp_ms)
        kafka_key = (key or record["action_id"]).encode()
        await self.feed_raw(self.codec.encode("ActionRequested", record), key=kafka_key, timestamp_ms=timestamp_ms,
                            partition=partition)
        return record

    async def redeliver(self, inbound: Inbound) -> None:
        """The same record again, as after a crash before the offset commit."""
        await self._process(inbound)

    async def _process(self, first: Inbound) -> None:
        queue = [first]
        while queue:
            inbound = queue.pop(0)
            stage = self.scope_stage if inbound.topic == topics.SCOPED else self.key_stage
            store = self.scopes if stage is self.scope_stage else self.keys
            store.current = inbound.partition
            before = len(self.sink.sent)
            await stage.process(inbound)
            for topic, key, value, partition, headers in self.sink.sent[before:]:
                if topic in (topics.REKEY, topics.SCOPED):
                    assert partition is not None
                    queue.append(Inbound(topic, partition, self._next_offset(topic, partition), inbound.timestamp_ms,
                                         key, value, headers))
                else:
                    self.outputs[topic].append((key, value, headers))
                    if topic in (topics.APPROVED, topics.DROPPED):
                        decision = self.codec.decode(value, expect="ActionDecision")[1]
                        self._last_decision[decision["request"]["action_id"]] = decision

    def decisions(self, topic: str = topics.APPROVED) -> list[dict[str, Any]]:
        return [self.codec.decode(value, expect="ActionDecision")[1] for _, value, _ in self.outputs[topic]]

    def decision_for(self, action_id: str) -> dict[str, Any]:
        assert action_id in self._last_decision, f"no decision for {action_id}"
        return self._last_decision[action_id]
