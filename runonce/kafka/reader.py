"""Read a topic from the beginning to its current end (read_committed), for the oracle,
the CLI and tests. The end is where every partition reports EOF."""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterable, Iterator

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from runonce.errors import BrokerUnavailable
from runonce.kafka import clients
from runonce.kafka.access import KafkaTarget
from runonce.kafka.record import Record


#: the most records one ``fetched`` call hands over
FETCH_LIMIT = 1000


def fetched(consumer: Any, wait_s: float, limit: int = FETCH_LIMIT) -> list[Any]:
    """The messages (and events) a consumer has for us: waits up to ``wait_s`` for the first,
    then takes what is already fetched without waiting again. ``consume(n, wait)`` alone would
    hold every record until n arrive or the wait ends; ``poll`` alone costs a call per record."""
    first = consumer.poll(wait_s)
    if first is None:
        return []
    return [first, *consumer.consume(limit - 1, 0)]


def read_all(bootstrap: KafkaTarget, topic: str, timeout_s: float = 60.0, *, partitions: Iterable[int] | None = None,
             follow: bool = False, since_ms: int | None = None, until_ms: int | None = None) -> Iterator[Record]:
    """``read_messages``, each message as a ``Record``."""
    for msg in read_messages(bootstrap, topic, timeout_s, partitions=partitions, follow=follow, since_ms=since_ms,
                             until_ms=until_ms):
        yield Record.of(msg)


def read_messages(bootstrap: KafkaTarget, topic: str, timeout_s: float = 60.0, *,
                  partitions: Iterable[int] | None = None, follow: bool = False, since_ms: int | None = None,
                  until_ms: int | None = None) -> Iterator[Any]:
    """Every record of ``topic`` (or of some of its partitions) from the beginning, until each
    partition reports EOF, as confluent-kafka messages (never an error event: those end the
    read or raise); with ``follow``, keep reading until the caller stops iterating.

    ``since_ms``/``until_ms`` bound the records by broker timestamp: reading starts at each
    partition's first record at or after ``since_ms`` (the broker's time index, never a scan
    from the beginning) and a partition is done at its first record after ``until_ms``."""
    consumer = clients.reader(bootstrap, group=f"runonce-reader-{uuid.uuid4().hex[:8]}", to_end=not follow)
    try:
        if partitions is None:
            try:
                meta = consumer.list_topics(topic, timeout=10)
            except KafkaException as exc:
                raise clients.translate(exc, f"cannot read {topic} at {bootstrap}") from exc
            tmeta = meta.topics.get(topic)
            if tmeta is not None and tmeta.error is not None:
                raise clients.translate(tmeta.error, f"cannot read {topic} at {bootstrap}")
            if tmeta is None:
                raise BrokerUnavailable(f"topic {topic} does not exist at {bootstrap}")
            partitions = tmeta.partitions
        numbers = sorted(partitions)
        starts = {p: OFFSET_BEGINNING for p in numbers}
        if since_ms is not None:
            try:
                found = consumer.offsets_for_times([TopicPartition(topic, p, since_ms) for p in numbers], timeout=10)
            except KafkaException as exc:
                raise clients.translate(exc, f"cannot look up {topic} by time at {bootstrap}") from exc
            # -1: nothing at or after that time yet, so start at the end
            starts = {tp.partition: tp.offset if tp.offset >= 0 else OFFSET_END for tp in found}
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in numbers])
        pending = set(numbers)
        past_until: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while pending or (follow and len(past_until) < len(numbers)):
            if not follow and time.monotonic() > deadline:
                raise BrokerUnavailable(f"reading {topic} did not reach its end within {timeout_s:.0f} s "
                                        f"(partitions {sorted(pending)} pending)")
            for msg in fetched(consumer, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise clients.translate(err, f"reading {topic}")
                if until_ms is not None:
                    if msg.partition() in past_until:  # fetched before the pause took
                        continue
                    if msg.timestamp()[1] > until_ms:
                        past_until.add(msg.partition())
                        pending.discard(msg.partition())
                        consumer.pause([TopicPartition(topic, msg.partition())])
                        continue
                yield msg
    finally:
        consumer.close()


def first_committed_offset(bootstrap: KafkaTarget, topic: str, partition: int, offset: int,
                           timeout_s: float = 10.0, *, group: str | None = None) -> int | None:
    """The offset of the first committed record of ``topic[partition]`` at or after ``offset``,
    or None when there is none up to the partition's end (only commit markers, aborted records,
    or nothing). Asks the broker with a consumer of its own, so no other client's position or
    buffers can answer for it; BrokerUnavailable when it cannot tell within ``timeout_s``,
    AccessDenied when this principal may not ask. ``group``: a group the principal may use
    (the consumer only assigns and commits nothing, but the client still looks its
    coordinator up)."""
    consumer = clients.reader(bootstrap, group=group or f"runonce-reader-{uuid.uuid4().hex[:8]}", to_end=True)
    try:
        consumer.assign([TopicPartition(topic, partition, offset if offset > 0 else OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is None:
                found: int | None = msg.offset()
                return found
            if err.code() == KafkaError._PARTITION_EOF:
                return None
            raise clients.translate(err, f"reading {topic}[{partition}]")
        raise BrokerUnavailable(f"{topic}[{partition}] did not answer from offset {offset} within {timeout_s:.0f} s")
    finally:
        consumer.close()
