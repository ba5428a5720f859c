"""The seam between the stream job's logic and its runtime: where state is kept. (What a
stage writes it returns, as ``Out`` records; the runtime sends them.)"""

from __future__ import annotations

from typing import Iterable, Protocol

from runonce.kafka.record import Record


class StateStore(Protocol):
    """One table's state for the partitions this worker owns, one partition at a time."""

    def get(self, partition: int, key: bytes) -> bytes | None: ...

    def put(self, partition: int, key: bytes, value: bytes) -> None: ...

    def delete(self, partition: int, key: bytes) -> None: ...

    def scan(self, partition: int, after: bytes | None, limit: int) -> Iterable[tuple[bytes, bytes]]:
        """Up to ``limit`` entries of one partition with keys > ``after``, in key order."""
        ...


#: one consumed record, runtime-neutral (the same type the topic reader yields)
Inbound = Record
