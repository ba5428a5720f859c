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
waits for the broker's acknowledgements (acks=all), before the commit goes out."""

from __future__ import annotations

import asyncio
from typing import Any

from faust.transport.producer import ProducerBuffer

_PATCHED = "_runonce_drains"


def drain_before_commit() -> None:
    """Install the draining flush (once per process; every faust app in it gets it)."""
    if getattr(ProducerBuffer, _PATCHED, False):
        return
    hand_on = ProducerBuffer._send_pending

    async def _send_pending(self: Any, fut: Any) -> None:
        self._runonce_in_hand = getattr(self, "_runonce_in_hand", 0) + 1
        try:
            await hand_on(self, fut)
        finally:
            self._runonce_in_hand -= 1

    async def flush(self: Any) -> None:
        while self.size or getattr(self, "_runonce_in_hand", 0):
            if self.state != "running":
                raise RuntimeError("Cannot flush: Producer not Running")
            self.message_sent.clear()
            try:
                await asyncio.wait_for(self.message_sent.wait(), timeout=0.1)
            except asyncio.TimeoutError:
                continue  # still waiting: never return with records in hand

    ProducerBuffer._send_pending = _send_pending  # type: ignore[method-assign]  # the patch
    ProducerBuffer.flush = flush  # type: ignore[method-assign]
    setattr(ProducerBuffer, _PATCHED, True)
