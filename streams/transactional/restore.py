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


def restore(reader: Any, table: TableState, partition: int, *, timeout_s: float = 300.0,
            batch: int = 10_000, bounds_timeout_s: float = BOUNDS_TIMEOUT_S, backoff_s: float = 0.5) -> Restored:
    started = time.monotonic()
    low, high = _bounds(reader, table, partition, bounds_timeout_s, backoff_s)
    part = table.open(partition)
    stored = part.next_offset
    rebuilt = stored is None or stored > high or stored < low
    if rebuilt and stored is not None:
        log.warning("%s[%d]: local state at changelog offset %d, changelog spans %d..%d: rebuilding",
                    table.name, partition, stored, low, high)
        part = table.open(partition, wipe=True)
    start = low if rebuilt else int(stored)  # type: ignore[arg-type]
    records = 0
    if start < high:
        reader.assign([TopicPartition(table.changelog, partition, start)])
        try:
            position = start
            said = time.monotonic()
            while position < high:
                if time.monotonic() - said > 10:  # a long restore says how far it is
                    log.info("%s[%d]: restoring, at changelog offset %d of %d (%d records applied)",
                             table.name, partition, position, high, records)
                    said = time.monotonic()
                if time.monotonic() - started > timeout_s:
                    raise RestoreStuck(f"{table.changelog}[{partition}] not read to {high} within {timeout_s:.0f} s "
                                       f"(at {position}): a transaction on it is still open?")
                msgs = reader.consume(batch, 0.1)
                changes = []
                for msg in msgs:
                    if msg.error():
                        if msg.error().fatal():
                            raise RestoreStuck(f"{table.changelog}[{partition}]: {msg.error()}")
                        continue
                    changes.append((msg.key(), msg.value()))
                position = reader.position([TopicPartition(table.changelog, partition)])[0].offset
                if position < 0:
                    position = start
                if changes:
                    part.apply(changes, position)
                    records += len(changes)
        finally:
            reader.unassign()
        if records == 0 and part.next_offset != position:
            part.apply([], position)  # only markers or aborted records: remember how far we read
    elif rebuilt:
        part.apply([], start)
    return Restored(table.name, partition, records, start, high, time.monotonic() - started, rebuilt)
