"""One Kafka record, independent of the client that read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from runonce.wire.trace import TRACEPARENT, TRACESTATE, carried

Headers = Sequence[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    def header(self, name: str) -> bytes | None:
        return find_header(self.headers, name)

    @classmethod
    def of(cls, msg: Any) -> Record:
        """From a confluent-kafka message that carries a record (not an error)."""
        return cls(msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value(),
                   tuple(msg.headers() or ()))


def find_header(headers: Headers, name: str) -> bytes | None:
    """The first value of a header (Kafka headers are a list: names may repeat)."""
    for k, v in headers:
        if k == name:
            return v
    return None


@dataclass(frozen=True, slots=True)
class Out:
    """One record to write: what the stream job's stages and the executors hand their runtime."""

    topic: str
    key: bytes | None
    #: None: a tombstone (a state change that deletes its key, on a changelog)
    value: bytes | None
    #: None lets the producer's partitioner choose (murmur2 of the key, as Java and faust)
    partition: int | None = None
    headers: Headers = ()
    #: the decision record ``value`` encodes, for its span (runonce/telemetry): its facts are
    #: read only when spans are recorded, so a process that traces nothing builds nothing more
    decision: Mapping[str, Any] | None = None
    #: a decision made before and made again (an at-least-once replay, a verdict redelivered):
    #: its span was made the first time, and is not made twice
    replay: bool = False

    def traced_as(self, source: Headers) -> Out:
        """This record with the trace context of the record it was written for (wire/trace.py),
        unless it carries one of its own."""
        if find_header(self.headers, TRACEPARENT) is not None:
            return self
        context = carried(source)
        return self._with_headers((*self.headers, *context)) if context else self

    def with_trace(self, context: Headers) -> Out:
        """This record with ``context`` as its trace context (a span's own, made for it)."""
        kept = tuple((k, v) for k, v in self.headers if k not in (TRACEPARENT, TRACESTATE))
        return self._with_headers((*kept, *context))

    def with_header(self, name: str, value: bytes) -> Out:
        return self._with_headers((*self.headers, (name, value)))

    def _with_headers(self, headers: Headers) -> Out:
        # not dataclasses.replace: it looks the fields up each call, and this runs per decision
        return Out(self.topic, self.key, self.value, self.partition, headers, self.decision, self.replay)
