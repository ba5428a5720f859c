"""Commit no input offset past a record the pipeline has not decided.

faust commits the offsets its consumer has *acknowledged*, and it acknowledges records it never
hands to an agent:

* a stream skips, and acknowledges, every event of an older consumer generation or of a
  stopped flow (faust's ``streams.py``: "we want to ack the filtered out message otherwise the
  lag would increase");
* its fetch loop treats a jump between the last offset read and the next record as a "gap"
  (meant for commit markers), commits across it, and drops the records below it when they
  come: a batch fetched before a seek is delivered after it (faust-streaming issues 216, 221,
  236).

So after a rebalance the group's committed offset can pass records no worker decided (the
crash test's kill storm found it: test_crash.py).

The fence keeps, for each input partition, the offset below which every record has been
decided by this worker (``next_offset``): set from the committed offset at each of faust's
seeks, and moved only by records the pipeline has finished (``passed``). faust's commit of
an input partition is that offset, never its own. A record that would move the fence over
offsets it has not seen (``check``) is checked with the broker: a hole that holds only commit
markers or aborted records is passed; a hole that holds a record means faust skipped it, and
the worker stops before acknowledging anything more (``stop.py``). Its restart resumes from
the fenced commit and decides the hole (harmless by design: replays decide the same way).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Mapping

from runonce.errors import FatalError, RunonceError
from runonce.streams.faust_runtime.markers import FirstCommitted

#: (topic, partition)
Key = tuple[str, int]


class RecordsSkipped(FatalError):
    """faust passed over records of an input partition without handing them to the pipeline."""


@dataclass(slots=True)
class _Partition:
    #: every record below it is decided; None until this assignment's first seek
    next_offset: int | None = None
    #: the last run of consecutive offsets this worker decided (an earlier assignment's
    #: included: faust may deliver a record once before its seek and skip it after)
    run_first: int = -1
    run_last: int = -2


class InputFence:
    def __init__(self, topics: Iterable[str], first_committed: FirstCommitted) -> None:
        self.topics = frozenset(topics)
        self.first_committed = first_committed
        self._parts: dict[Key, _Partition] = {}

    def seeked(self, committed: Mapping[Key, int | None]) -> None:
        """faust moved these partitions to their committed offsets (None: nothing committed)."""
        for key, offset in committed.items():
            self._parts.setdefault(key, _Partition()).next_offset = offset or 0

    def revoked(self, keys: Iterable[Key]) -> None:
        for key in keys:
            if key in self._parts:
                self._parts[key].next_offset = None

    def hole(self, key: Key, offset: int) -> tuple[int, int] | None:
        """The offsets [first, offset) the record at ``offset`` would move the fence over
        without this worker having decided them; None when there are none."""
        part = self._parts.get(key)
        if part is None or part.next_offset is None or offset <= part.next_offset:
            return None
        if part.run_first <= part.next_offset and offset - 1 <= part.run_last:
            return None
        return part.next_offset, offset

    async def check(self, key: Key, offset: int) -> None:
        """Raise ``RecordsSkipped`` when a record in the hole before ``offset`` exists."""
        hole = self.hole(key, offset)
        if hole is None:
            return
        topic, partition = key
        try:
            found = await asyncio.get_running_loop().run_in_executor(
                None, self.first_committed, topic, partition, hole[0])
        except RunonceError as exc:
            raise RecordsSkipped(f"{topic}[{partition}] jumped from {hole[0]} to {offset} and the broker "
                                 f"could not say whether records lie between: {exc}") from exc
        if found is not None and found < offset:
            raise RecordsSkipped(f"faust skipped {topic}[{partition}] offsets {hole[0]}..{offset - 1} "
                                 f"(a record at {found}) and delivered {offset}")

    def passed(self, key: Key, offset: int) -> None:
        """The pipeline finished the record at ``offset`` (its outputs are in the producer)."""
        part = self._parts.setdefault(key, _Partition())
        if offset == part.run_last + 1:
            part.run_last = offset
        else:
            part.run_first = part.run_last = offset
        if part.next_offset is not None and offset >= part.next_offset:
            part.next_offset = offset + 1

    def commit_offset(self, key: Key) -> int | None:
        part = self._parts.get(key)
        return None if part is None else part.next_offset


def _fence_of(consumer: Any) -> InputFence | None:
    fence: InputFence | None = getattr(consumer.app, "runonce_fence", None)  # a faust app not runonce's has none
    return fence


def fenced_offset(new_offset: Callable[[Any, Any], int | None]) -> Callable[[Any, Any], int | None]:
    """``Consumer._new_offset``: an input partition of an app with a fence commits at its fence;
    anything else keeps faust's own offset."""

    def _new_offset(self: Any, tp: Any) -> int | None:
        offset = new_offset(self, tp)  # still called: it trims faust's list of acks
        fence = _fence_of(self)
        if fence is None or tp.topic not in fence.topics:
            return offset
        return fence.commit_offset((tp.topic, tp.partition))

    return _new_offset


def seeks_told(perform_seek: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
    """``Consumer.perform_seek``: the fence hears the committed offsets faust seeked to."""

    async def _perform_seek(self: Any) -> None:
        await perform_seek(self)
        fence = _fence_of(self)
        if fence is not None:
            fence.seeked({(tp.topic, tp.partition): self._committed_offset.get(tp)
                          for tp in self.assignment() if tp.topic in fence.topics})

    return _perform_seek


def revocations_told(on_revoked: Callable[[Any, Any], Awaitable[None]]) -> Callable[[Any, Any], Awaitable[None]]:
    """``Consumer.on_partitions_revoked``: the fence forgets partitions before faust lets them go."""

    async def _on_partitions_revoked(self: Any, revoked: Any) -> None:
        fence = _fence_of(self)
        if fence is not None:
            fence.revoked((tp.topic, tp.partition) for tp in revoked)
        await on_revoked(self, revoked)

    return _on_partitions_revoked
