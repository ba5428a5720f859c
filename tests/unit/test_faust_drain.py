"""faust's flush gap, and the drain that closes it: no offset commit while a buffered record
(a decision or a changelog write) has not been handed to the Kafka client."""

from __future__ import annotations

import asyncio

from faust.transport.producer import ProducerBuffer

from runonce.streams.faust_runtime.drain import drain_before_commit


class Buffer:
    """ProducerBuffer's state as its flush sees it: a queue size, a 'sent' event, and records
    the buffer's task has taken off the queue but not yet handed on."""

    def __init__(self, size: int) -> None:
        self._size = size
        self.state = "running"
        self.message_sent = asyncio.Event()
        self._runonce_in_hand = 0

    @property
    def size(self) -> int:
        return self._size


async def _slow_producer(buf: Buffer, log: list[str]) -> None:
    """Hands on one record every 0.3 s (a producer kept behind), the last one slowly."""
    while buf.size:
        await asyncio.sleep(0.3)
        buf._size -= 1
        buf._runonce_in_hand = 1
        buf.message_sent.set()
    await asyncio.sleep(0.3)
    buf._runonce_in_hand = 0
    log.append("handed on")
    buf.message_sent.set()


def test_fausts_own_flush_returns_with_records_still_buffered() -> None:
    async def go() -> int:
        buf = Buffer(size=3)
        task = asyncio.create_task(_slow_producer(buf, []))
        await ProducerBuffer.flush_atmost(buf, None)  # type: ignore[arg-type]
        left = buf.size
        task.cancel()
        return left

    assert asyncio.run(go()) == 3  # the gap: "flushed", and all three records still queued


def test_the_drain_returns_only_when_nothing_is_queued_or_in_hand() -> None:
    drain_before_commit()

    async def go() -> list[str]:
        buf = Buffer(size=3)
        log: list[str] = []
        task = asyncio.create_task(_slow_producer(buf, log))
        await ProducerBuffer.flush(buf)  # type: ignore[arg-type]
        log.append("flushed")
        await task
        return log

    assert asyncio.run(go()) == ["handed on", "flushed"]
