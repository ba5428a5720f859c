"""Close faust's flush gap: offsets are committed only after every buffered record is sent.

Before committing offsets faust awaits ``producer.flush()``, which drains its
``ProducerBuffer`` with ``flush_atmost(None)``; that returns as soon as no buffered record
is handed on within 0.1 s, with records still queued, and it does not see the record the
buffer's task has taken off the queue but not yet handed to aiokafka. Records in either
place (decisions, and the tables' changelog writes) could then be lost by a crash while
the offset of the input that caused them was already committed: a restored state behind
its committed input, a claim forgotten (issue: "a decision changed after a crash").

The draining flush (installed by ``patches.py``) makes ``ProducerBuffer.flush`` wait until the queue is empty *and*
no record is being handed on; faust's producer then awaits aiokafka's own flush, which
waits for the broker's acknowledgements (acks=all), before the commit goes out.

The wait is bounded by progress, not by time: while records wait, one must be handed on at
least every ``stuck_after_s``. A buffer that stops draining (seen under SIGKILLs of other
workers every few seconds: "producer buffer full", then silence) ends the process with
``EXIT_STUCK``, as the transactional runtime's watchdog does; its restart resumes from the
committed offsets, which this commit never moved."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from runonce.errors import ProducerStuck
from runonce.kafka.watchdog import leave_for_restart

#: the longest a flush waits without one record handed on before the worker leaves
DRAIN_STUCK_S = 60.0


@dataclass(frozen=True, slots=True)
class DrainBound:
    stuck_after_s: float = DRAIN_STUCK_S
    #: hears why the drain gave up; by default it exits the process (EXIT_STUCK)
    stuck: Callable[[str], None] = leave_for_restart
    clock: Callable[[], float] = time.monotonic


def counted_hand_on(hand_on: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """``ProducerBuffer._send_pending``, counting the record it has taken off the queue and not yet
    handed to aiokafka (the record ``flush`` could not see)."""

    async def _send_pending(self: Any, fut: Any) -> None:
        self._runonce_in_hand = getattr(self, "_runonce_in_hand", 0) + 1
        try:
            await hand_on(self, fut)
        finally:
            self._runonce_in_hand -= 1

    return _send_pending


def draining_flush(bound: DrainBound) -> Callable[[Callable[..., Awaitable[None]]], Callable[..., Awaitable[None]]]:
    """``ProducerBuffer.flush`` that returns only once nothing is queued or in hand, within
    ``bound`` (faust's own flush is not called: it returns with records still queued)."""

    def replace(_faust_flush: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        async def flush(self: Any) -> None:
            moved_at = bound.clock()
            while self.size or getattr(self, "_runonce_in_hand", 0):
                if self.state != "running":
                    raise RuntimeError("Cannot flush: Producer not Running")
                self.message_sent.clear()
                try:
                    await asyncio.wait_for(self.message_sent.wait(), timeout=0.1)
                    moved_at = bound.clock()
                except asyncio.TimeoutError:
                    # still waiting: never return with records in hand, and never wait for ever
                    if bound.clock() - moved_at > bound.stuck_after_s:
                        why = (f"faust's producer buffer handed on no record for {bound.stuck_after_s:.0f} s "
                               f"with {self.size} queued and {getattr(self, '_runonce_in_hand', 0)} in hand")
                        bound.stuck(why)
                        raise ProducerStuck(why)  # reached only when ``stuck`` returns: never commit

        return flush

    return replace
