"""An executor's offsets not yet committed, and where each assigned partition started.

Two kinds of offset wait for a commit: records that need none of their own (another vendor's
tools, redeliveries of final results), and start positions the executor chose for partitions
the group never committed (``decided``: durable at the next commit, so no later owner chooses
again). Every commit carries them; alone they are committed once they have waited
``flush_after_s`` (or at close), so a quiet executor does not write a transaction per skip."""

from __future__ import annotations

from typing import Callable, Iterable

from runonce.kafka.positions import Start

#: (topic, partition) -> the next offset to read
Positions = dict[tuple[str, int], int]


class Offsets:
    def __init__(self, topic: str, clock: Callable[[], float], flush_after_s: float = 1.0) -> None:
        self.topic, self.clock, self.flush_after_s = topic, clock, flush_after_s
        self.pending: Positions = {}
        self._pending_since = 0.0
        #: start positions chosen for partitions without a committed offset, until one commits
        self.decided: dict[int, int] = {}
        #: where each assigned partition's reading started (its position until a record is read)
        self.starts: dict[int, int] = {}

    def assigned(self, starts: list[Start]) -> None:
        """The partitions of an assignment (all of them), each at its start."""
        self.starts = {s.partition: s.offset for s in starts}
        for s in starts:
            if s.decided:
                self.pending[(self.topic, s.partition)] = s.offset
                self.decided[s.partition] = s.offset
                self._pending_since = 0.0  # due at the next idle turn

    def revoked(self) -> None:
        self.pending.clear()
        self.decided.clear()
        self.starts.clear()

    def with_pending(self, offsets: Positions) -> Positions:
        """What a commit of ``offsets`` carries: the pending ones too."""
        return {**self.pending, **offsets}

    def advance(self, after: Positions) -> None:
        """Records that need no commit of their own: pending from now."""
        if not self.pending:
            self._pending_since = self.clock()
        self.pending.update(after)

    def due(self, force: bool) -> Positions | None:
        """The pending offsets to commit alone now, if any are due."""
        if self.pending and (force or self.clock() - self._pending_since > self.flush_after_s):
            return dict(self.pending)
        return None

    def committed(self) -> None:
        """A commit succeeded: it carried every pending offset and decided start."""
        self.pending.clear()
        self.decided.clear()

    def dropped(self) -> None:
        """A producer that cannot commit (fenced, broken): the next owner re-reads from the
        group's committed offsets."""
        self.pending.clear()

    def decided_positions(self) -> Positions:
        return {(self.topic, p): offset for p, offset in self.decided.items()}

    def rewound(self, starts: Iterable[tuple[str, Start]]) -> None:
        """After an abort the consumer went back to the committed offsets; a decided start
        still to be made durable is pending again."""
        self.pending.clear()
        for topic, s in starts:
            if s.decided:
                self.pending[(topic, s.partition)] = s.offset
