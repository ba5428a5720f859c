"""Close faust's flush gap: offsets are committed only after every buffered record is sent.

Before committing offsets faust awaits ``producer.flush()``, which drains its
``ProducerBuffer`` with ``flush_atmost(None)``; that returns as soon as no buffered record
is handed on within 0.1 s, with records still queued, and it does not see the record the
buffer's task has taken off the queue but not yet handed to aiokafka. Records in either
place (decisions, and the tables' changelog writes) could then be lost by a crash while
the offset of the input that caused them was already committed: a restored state behind
its committed input, a claim forgotten (issue: "a decision changed after a crash").

``drain_before_commit`` makes ``ProducerBuffer.flush`` wait until the queue is empty *and*
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
from typing import Any, Callable

from faust.transport.producer import ProducerBuffer

from runonce.errors import ProducerStuck
from runonce.kafka.watchdog import leave_for_restart

_PATCHED = "_runonce_drains"

#: the longest a flush waits without one record handed on before the worker leaves
DRAIN_STUCK_S = 60.0


@dataclass(frozen=True, slots=True)
class DrainBound:
    stuck_after_s: float
    #: hears why the drain gave up; by default it exits the process (EXIT_STUCK)
    stuck: Callable[[str], None]
    clock: Callable[[], float]


def drain_before_commit(stuck_after_s: float = DRAIN_STUCK_S,
                        stuck: Callable[[str], None] = leave_for_restart,
                        clock: Callable[[], float] = time.monotonic) -> None:
    """Install the draining flush (the patch once per process: every faust app in it gets it;
    each call sets its bound). ``stuck`` and ``clock`` are injectable for tests."""
    # the patch's own attribute on faust's class (faust has no seam for this: the module's docstring)
    ProducerBuffer._runonce_bound = DrainBound(stuck_after_s, stuck, clock)  # type: ignore[attr-defined]  # noqa: SLF001
    if getattr(ProducerBuffer, _PATCHED, False):
        return
    hand_on = ProducerBuffer._send_pending  # noqa: SLF001  # the method this patch wraps

    async def _send_pending(self: Any, fut: Any) -> None:
        self._runonce_in_hand = getattr(self, "_runonce_in_hand", 0) + 1
        try:
            await hand_on(self, fut)
        finally:
            self._runonce_in_hand -= 1

    async def flush(self: Any) -> None:
        bound: DrainBound = ProducerBuffer._runonce_bound  # type: ignore[attr-defined]  # noqa: SLF001
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

    ProducerBuffer._send_pending = _send_pending  # type: ignore[method-assign]  # noqa: SLF001  # the patch
    ProducerBuffer.flush = flush  # type: ignore[method-assign]
    setattr(ProducerBuffer, _PATCHED, True)
