"""The suite's one fake Kafka message, and a fake transactional producer for the one commit path's tests (runonce/kafka/checkpoint.py
and the stream worker's commit): it records every call, raises what a test plants, and
reports deliveries on flush."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Msg:
    """A confluent-kafka message as consumers and delivery reports hand it over."""

    _topic: str
    _partition: int
    #: None as confluent-kafka gives it for an offset librdkafka does not know
    _offset: int | None
    _key: bytes | None = None
    _value: bytes | None = None
    _timestamp_ms: int = 0
    _error: Any = None  # a KafkaError, as a consumer hands one over in place of a record
    _headers: list[tuple[str, bytes]] | None = None

    def error(self) -> Any:
        return self._error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp_ms

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._headers


@dataclass
class FakeProducer:
    """Records every call; ``fail``: {call name: [exceptions to raise, one per call]}."""

    calls: list[str] = field(default_factory=list)
    fail: dict[str, list[BaseException]] = field(default_factory=dict)
    undelivered: int = 0
    full_queue: int = 0
    #: how many of the first deliveries report no offset (a retry the broker had already written)
    unknown_offsets: int = 0
    _reports: list[Any] = field(default_factory=list)
    _next: dict[tuple[str, int], int] = field(default_factory=dict)

    def _call(self, name: str) -> None:
        self.calls.append(name)
        planted = self.fail.get(name)
        if planted:
            raise planted.pop(0)

    def begin_transaction(self) -> None:
        self._call("begin")

    def produce(self, topic: str, *, key: Any, value: Any, partition: int = 0, headers: Any = None,
                on_delivery: Any = None) -> None:
        if self.full_queue:
            self.full_queue -= 1
            self.calls.append("queue full")
            raise BufferError("Local: Queue full")
        self._call("produce")
        offset = self._next.get((topic, partition), 0)
        self._next[(topic, partition)] = offset + 1
        if on_delivery is not None:
            known = self.unknown_offsets <= 0
            self.unknown_offsets -= 1
            self._reports.append((on_delivery, Msg(topic, partition, offset if known else None)))

    def poll(self, timeout: float) -> int:
        self.calls.append("poll")
        return 0

    def flush(self, timeout: float) -> int:
        self._call("flush")
        for report, msg in self._reports:
            report(None, msg)
        self._reports.clear()
        return self.undelivered

    def send_offsets_to_transaction(self, offsets: Any, metadata: Any, timeout: float) -> None:
        self._call("offsets")

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit")

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort")


class Made:
    """The producers a checkpoint made (a new one after a FATAL failure)."""

    def __init__(self, *planted: FakeProducer) -> None:
        self.planted = list(planted)
        self.made: list[FakeProducer] = []

    def __call__(self) -> FakeProducer:
        self.made.append(self.planted.pop(0) if self.planted else FakeProducer())
        return self.made[-1]
