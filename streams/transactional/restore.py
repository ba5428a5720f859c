"""Bring one partition's local RocksDB up to its changelog before deciding anything on it.

The database is trusted up to its next offset (the changelog offset it is complete up to), so a
restart reads only the changelog's tail; a missing database, or one whose next offset the
changelog cannot have produced, is rebuilt from the changelog's start, in batches (one
write batch per consumed batch).

"The end" is the changelog's high watermark when the restore starts. Reading read_committed,
the consumer cannot pass a transaction that is still open, so reaching the high watermark
means every transaction that wrote before the restore began has been resolved: none of its
changes is missed because its commit marker had not landed yet."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from runonce.errors import FatalError
from runonce.streams.transactional.state import TableState

log = logging.getLogger("runonce.streams")


class RestoreStuck(FatalError):
    """The changelog could not be read to its end in time (an unresolved transaction, or no broker)."""


@dataclass(frozen=True, slots=True)
class Restored:
    table: str
    partition: int
    records: int
    from_offset: int
    to_offset: int
    seconds: float
    rebuilt: bool


#: how long a changelog partition may be without a leader (its broker lost, a new leader not
#: yet elected) before the restore gives up; a failover takes seconds
BOUNDS_TIMEOUT_S = 60.0


def _bounds(reader: Any, table: TableState, partition: int, timeout_s: float, backoff_s: float) -> tuple[int, int]:
    """The changelog partition's (low, high) watermarks. While its leader is lost, the client
    answers "unknown partition" or times out: ask again until ``timeout_s``, as a worker that
    exited here would only be restarted into the same failover (and restore all over again)."""
    tp = TopicPartition(table.changelog, partition)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = reader.get_watermark_offsets(tp, timeout=min(30.0, timeout_s), cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            fatal = err is None or not hasattr(err, "fatal") or err.fatal()
            if fatal or time.monotonic() + backoff_s > deadline:
                raise RestoreStuck(f"cannot read the bounds of {table.changelog}[{partition}] "
                                   f"within {timeout_s:.0f} s: {exc}") from exc
            log.warning("%s[%d]: cannot read the changelog's bounds yet (%s); asking again",
                        table.name, partition, err)
            time.sleep(backoff_s)


class RestoreJob:
    """One table partition brought up to its changelog a slice at a time (``step``), so a worker
    goes on deciding the partitions whose state is current while it restores those it was just
    given (Kafka Streams' standby-less restore: the partition waits, paused, the others do not).

    The end is the changelog's high watermark when the job is made, in the assignment: its
    partitions' input stays paused until the job is done, so nothing of this worker's writes to
    that changelog meanwhile."""

    def __init__(self, reader: Any, table: TableState, partition: int, *, timeout_s: float = 300.0,
                 bounds_timeout_s: float = BOUNDS_TIMEOUT_S, backoff_s: float = 0.5) -> None:
        self.reader, self.table, self.partition, self.timeout_s = reader, table, partition, timeout_s
        self.started = time.monotonic()
        #: time spent reading (what ``timeout_s`` bounds: the job waits its turn between batches)
        self.reading_s = 0.0
        self._said = self.started
        self.low, self.high = _bounds(reader, table, partition, bounds_timeout_s, backoff_s)
        part = table.open(partition)
        stored = part.next_offset
        self.rebuilt = stored is None or stored > self.high or stored < self.low
        if self.rebuilt and stored is not None:
            log.warning("%s[%d]: local state at changelog offset %d, changelog spans %d..%d: rebuilding",
                        table.name, partition, stored, self.low, self.high)
            part = table.open(partition, wipe=True)
        self.part = part
        self.start = self.low if self.rebuilt else int(stored)  # type: ignore[arg-type]
        self.position = self.start
        self.records = 0
        if self.start >= self.high and self.rebuilt:
            part.apply([], self.start)

    @property
    def done(self) -> bool:
        return self.position >= self.high

    def step(self, budget_s: float, batch: int = 10_000) -> bool:
        """Read and apply for up to ``budget_s`` (at least one fetch); True once at the end."""
        if self.done:
            return True
        began = time.monotonic()
        tp = TopicPartition(self.table.changelog, self.partition)
        self.reader.assign([TopicPartition(self.table.changelog, self.partition, self.position)])
        try:
            while self.position < self.high:
                now = time.monotonic()
                if now - self._said > 10:  # a long restore says how far it is
                    log.info("%s[%d]: restoring, at changelog offset %d of %d (%d records applied)",
                             self.table.name, self.partition, self.position, self.high, self.records)
                    self._said = now
                if self.reading_s + (now - began) > self.timeout_s:
                    raise RestoreStuck(f"{self.table.changelog}[{self.partition}] not read to {self.high} within "
                                       f"{self.timeout_s:.0f} s (at {self.position}): a transaction on it is still open?")
                # a short wait: a partition whose local state is current but for its last
                # transaction's commit marker has no record to hand over, only a position to move
                msgs = self.reader.consume(batch, 0.01)
                changes = []
                for msg in msgs:
                    if msg.error():
                        if msg.error().fatal():
                            raise RestoreStuck(f"{self.table.changelog}[{self.partition}]: {msg.error()}")
                        continue
                    changes.append((msg.key(), msg.value()))
                at = self.reader.position([tp])[0].offset
                self.position = max(self.position, at)
                if changes:
                    self.part.apply(changes, self.position)
                    self.records += len(changes)
                if time.monotonic() - began >= budget_s:
                    break
        finally:
            self.reader.unassign()
            self.reading_s += time.monotonic() - began
        if self.done and self.part.next_offset != self.position:
            self.part.apply([], self.position)  # only markers or aborted records: remember how far we read
        return self.done

    def result(self) -> Restored:
        return Restored(self.table.name, self.partition, self.records, self.start, self.high,
                        time.monotonic() - self.started, self.rebuilt)


def restore(reader: Any, table: TableState, partition: int, *, timeout_s: float = 300.0,
            batch: int = 10_000, bounds_timeout_s: float = BOUNDS_TIMEOUT_S, backoff_s: float = 0.5) -> Restored:
    """A partition restored whole, at once."""
    job = RestoreJob(reader, table, partition, timeout_s=timeout_s, bounds_timeout_s=bounds_timeout_s,
                     backoff_s=backoff_s)
    while not job.step(float("inf"), batch):
        pass
    return job.result()
