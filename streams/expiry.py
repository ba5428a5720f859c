"""Bounded state: expired entries are deleted from RocksDB *and* the changelog.

Decisions already ignore expired entries (``decide`` compares ``expires_at_ms`` with the
record's event time), so this only reclaims space. It runs inside record processing,
because a changelog tombstone must be written for the partition being processed, and it
advances on event time, never the wall clock: a replay deletes the same entries.
An incremental cursor per partition keeps the per-record cost constant.
"""

from __future__ import annotations

from typing import Callable

from runonce.streams.ports import StateStore


class Sweeper:
    def __init__(self, store: StateStore, expires_at_ms: Callable[[bytes], int], *,
                 every_records: int = 32, batch: int = 64) -> None:
        self._store = store
        self._expires_at_ms = expires_at_ms
        self._every = every_records
        self._batch = batch
        self._cursor: dict[int, bytes | None] = {}
        self._seen: dict[int, int] = {}
        self.deleted = 0

    def tick(self, partition: int, event_time_ms: int) -> int:
        """Count a record; every ``every_records`` records sweep a batch. Returns entries deleted."""
        seen = self._seen.get(partition, 0) + 1
        self._seen[partition] = seen
        if seen % self._every:
            return 0
        return self.sweep(partition, event_time_ms)

    def sweep(self, partition: int, event_time_ms: int, batch: int | None = None) -> int:
        limit = batch or self._batch
        entries = list(self._store.scan(partition, self._cursor.get(partition), limit))
        expired = [key for key, value in entries if self._expires_at_ms(value) <= event_time_ms]
        for key in expired:
            self._store.delete(partition, key)
        # Wrap around at the end of the partition's keys.
        self._cursor[partition] = entries[-1][0] if len(entries) == limit else None
        self.deleted += len(expired)
        return len(expired)
