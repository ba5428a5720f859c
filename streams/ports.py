"""The two seams between the stream job's logic and its runtime (faust in production,
plain dictionaries in unit tests): where state is kept, and where records are sent."""

from __future__ import annotations

from typing import Iterable, Protocol

from runonce.kafka.record import Headers, Record


class StateStore(Protocol):
    """One table's state for the partitions this worker owns."""

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def scan(self, partition: int, after: bytes | None, limit: int) -> Iterable[tuple[bytes, bytes]]:
        """Up to ``limit`` entries of one partition with keys > ``after``, in key order."""
        ...


class Sink(Protocol):
    async def send(self, topic: str, key: bytes | None, value: bytes, *, partition: int | None = None,
                   headers: Headers = ()) -> None: ...


#: one consumed record, runtime-neutral (the same type the topic reader yields)
Inbound = Record
