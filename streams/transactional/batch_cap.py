"""How many records the next transaction may take: smaller after a transaction the broker
could not take in time, back up as transactions commit.

A transaction must be delivered within its timeout. Against a broker that is slow to take
writes (a produce quota, a disk that stalls, a follower that lags), a batch of the full
size can time out every time, be aborted, rewound and taken again whole: a worker that
retries the same batch forever and decides nothing. Cutting the cap by a factor of eight
after each timeout finds a size the broker takes within a few aborts; each committed
batch that filled the cap lets it grow by a quarter again, so a recovered broker gets
full batches back within twenty transactions."""

from __future__ import annotations

from dataclasses import dataclass

SHRINK_BY = 8
GROW_BY = 1.25


@dataclass(slots=True)
class BatchCap:
    max_records: int
    records: int = 0

    def __post_init__(self) -> None:
        if self.max_records < 1:
            raise ValueError(f"max_records must be at least 1, got {self.max_records}")
        self.records = self.records or self.max_records

    def timed_out(self) -> int:
        """The last transaction was not delivered in time: the next takes an eighth."""
        self.records = max(1, self.records // SHRINK_BY)
        return self.records

    def committed(self, batch_records: int) -> int:
        """A transaction of ``batch_records`` committed; a full one lets the cap grow."""
        if batch_records >= self.records:
            self.records = min(self.max_records, max(self.records + 1, int(self.records * GROW_BY)))
        return self.records
