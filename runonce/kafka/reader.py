"""Reading topics (read_committed): from the beginning to the current end (the oracle, the
CLI, tests), from a time or an offset to the end (the SDK looking back), and ``Tail``, a
thread that reads as records arrive (the SDK's outcomes, the test watchers)."""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Iterator

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from runonce.errors import BrokerUnavailable, ResultTimeout
from runonce.kafka import clients
from runonce.kafka.access import KafkaTarget
from runonce.kafka.record import Record

log = logging.getLogger("runonce.kafka")

#: the most records one ``fetched`` call hands over
FETCH_LIMIT = 1000


def fetched(consumer: Any, wait_s: float, limit: int = FETCH_LIMIT) -> list[Any]:
    """The messages (and events) a consumer has for us, at most ``limit``: what has already
    arrived, without waiting; if nothing has, waits up to ``wait_s`` for a first one and takes
    what came with it. ``consume(n, wait)`` alone would hold every record until n arrive or the
    wait ends (a batch that waits to fill adds its wait to every record's latency; under load
    batches grow by themselves); ``poll`` alone costs a call per record."""
    msgs = consumer.consume(limit, 0)
    if msgs:
        return list(msgs)
    msgs = consumer.consume(1, wait_s)
    if msgs and limit > 1:
        msgs += consumer.consume(limit - 1, 0)
    return list(msgs)


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
                meta = clients.metadata(consumer, 10.0, topic)  # not yet assigned
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


#: answers of a cluster whose leaders are still settling (new topics, a broker restarting)
_SETTLING = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                       KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT})


def ends(consumer: Any, names: tuple[str, ...], connect_timeout_s: float = 10.0) -> list[TopicPartition]:
    """Each partition's current end, as explicit offsets (an OFFSET_END assignment would be
    resolved later, when fetching starts: after a first submit, maybe). ``consumer`` is not yet
    assigned."""
    ends = []
    for name in names:
        meta = clients.metadata(consumer, connect_timeout_s, name).topics[name]
        if meta.error is not None:
            raise clients.translate(meta.error, f"reading {name}")
        for p in meta.partitions:
            tp = TopicPartition(name, p)
            try:
                high = settled(functools.partial(high_watermark, consumer, tp))
            except KafkaException as exc:
                raise clients.translate(exc, f"reading the end of {name}[{p}]") from exc
            ends.append(TopicPartition(name, p, high))
    return ends


def high_watermark(consumer: Any, tp: TopicPartition) -> int:
    """The end as ``consumer`` may read it: for a read_committed consumer, the last stable
    offset (where the first transaction still open begins), not the end of what was written."""
    return int(consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1])


def written_ends(view: Any, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """Each partition's end as written, records of transactions still open included, asked of
    a ``clients.written_view``: the end a read_committed reading must reach before it has seen
    everything committed so far. Such a reading stops, and reports EOF, at the first
    transaction still open (its last stable offset), and another producer's may be open below
    records that committed after it."""
    ends = {}
    for p in partitions:
        try:
            ends[p] = settled(functools.partial(high_watermark, view, TopicPartition(topic, p)))
        except KafkaException as exc:
            raise clients.translate(exc, f"reading the end of {topic}[{p}]") from exc
    return ends


def settled(ask: Callable[[], Any], patience_s: float = 30.0) -> Any:
    """``ask()``, asked again while the cluster's leaders are still settling."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return ask()
        except KafkaException as exc:
            err = exc.args[0]
            if not (err.retriable() or err.code() in _SETTLING) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def positions_at(consumer: Any, names: tuple[str, ...], at_ms: int) -> list[TopicPartition]:
    """Each partition's first offset at or after ``at_ms`` (broker time; its end if none)."""
    wanted = []
    for name in names:
        meta = consumer.list_topics(name, timeout=10).topics[name]
        if meta.error is not None:
            raise clients.translate(meta.error, f"reading {name}")
        wanted += [TopicPartition(name, p, at_ms) for p in meta.partitions]
    found = settled(lambda: consumer.offsets_for_times(wanted, timeout=10))
    # No record at or after the time: start at the end (what comes next is all there is).
    return [TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found]


def read_to_end(reader: Any, starts: list[TopicPartition], deadline: float) -> Iterator[Any]:
    """The records of ``starts`` (each from its offset) up to each partition's end when asked,
    with ``reader`` (a ``clients.reader(to_end=True)``); ResultTimeout past ``deadline``."""
    ends = {}
    for tp in starts:
        ends[(tp.topic, tp.partition)] = reader.get_watermark_offsets(tp, timeout=10, cached=False)[1]
    reader.assign(starts)
    pending = {k for k, end in ends.items() if end > 0}
    while pending:
        if time.monotonic() > deadline:
            raise ResultTimeout(f"looking back through {sorted(pending)} took too long")
        for msg in reader.consume(1000, 0.2):
            key = (msg.topic(), msg.partition())
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(key)
                    continue
                raise clients.translate(err, f"reading {key}")
            if msg.offset() + 1 >= ends[key]:
                pending.discard(key)
            if msg.value() is not None:
                yield msg


class Tail:
    """A thread that reads its assigned partitions as records arrive and hands each to
    ``take`` (``fetched``: woken by the first record, never waiting for a batch to fill).
    A record ``take`` cannot read is counted and logged, never the end of the tail. The
    consumer is this thread's alone until ``close``. ``tombstones``: hand over records
    without a value too (a dead letter of one is one)."""

    def __init__(self, consumer: Any, starts: list[TopicPartition], take: Callable[[Any], None], name: str, *,
                 tombstones: bool = False) -> None:
        self.consumer, self.take, self.name, self.tombstones = consumer, take, name, tombstones
        self.unreadable = 0
        self._stop = threading.Event()
        consumer.assign(starts)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in fetched(self.consumer, 0.2):
                if msg.error() or (msg.value() is None and not self.tombstones):
                    continue
                try:
                    self.take(msg)
                except Exception as exc:  # noqa: BLE001 - a foreign record must not end the tail
                    self.unreadable += 1
                    log.warning("%s: skipped an unreadable record on %s[%d]@%d (%d so far): %s", self.name,
                                msg.topic(), msg.partition(), msg.offset(), self.unreadable, exc)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.consumer.close()
