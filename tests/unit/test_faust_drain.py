"""faust's flush gap, and the drain that closes it: no offset commit while a buffered record
(a decision or a changelog write) has not been handed to the Kafka client."""

# ruff: noqa: SLF001  # these tests drive the faust internals the runtime patches (faust has no seam)

from __future__ import annotations

import asyncio

import pytest
from faust.transport.producer import ProducerBuffer

from runonce.errors import ProducerStuck
from runonce.streams.faust_runtime import patches
from runonce.streams.faust_runtime.drain import DrainBound
from tests.support.clock import Clock


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
    patches.install()

    async def go() -> list[str]:
        buf = Buffer(size=3)
        log: list[str] = []
        task = asyncio.create_task(_slow_producer(buf, log))
        await ProducerBuffer.flush(buf)  # type: ignore[arg-type]
        log.append("flushed")
        await task
        return log

    assert asyncio.run(go()) == ["handed on", "flushed"]


def test_a_drain_that_hands_on_nothing_gives_up_without_committing() -> None:
    heard: list[str] = []
    patches.install(DrainBound(stuck_after_s=3, stuck=heard.append, clock=Clock(per_look_s=1.0)))
    try:
        async def go() -> None:
            buf = Buffer(size=2)
            buf._runonce_in_hand = 1  # taken off the queue, and the client never takes it
            await ProducerBuffer.flush(buf)  # type: ignore[arg-type]

        with pytest.raises(ProducerStuck):
            asyncio.run(go())
        assert len(heard) == 1 and "no record for 3 s with 2 queued and 1 in hand" in heard[0], heard
    finally:
        patches.install()


def test_a_slow_drain_that_keeps_moving_is_not_stuck() -> None:
    heard: list[str] = []
    clock = Clock()
    patches.install(DrainBound(stuck_after_s=5, stuck=heard.append, clock=clock))
    try:
        async def producer(buf: Buffer) -> None:
            while buf.size:  # 4 s between records: 16 s in all, more than the bound, never at once
                await asyncio.sleep(0.25)
                clock.now += 4.0
                buf._size -= 1
                buf.message_sent.set()

        async def go() -> int:
            buf = Buffer(size=4)
            task = asyncio.create_task(producer(buf))
            await ProducerBuffer.flush(buf)  # type: ignore[arg-type]
            await task
            return buf.size

        assert asyncio.run(go()) == 0
        assert heard == [] and clock.now == 16.0
    finally:
        patches.install()
