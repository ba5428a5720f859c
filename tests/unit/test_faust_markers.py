"""markers.py: faust's recovery reads past commit markers, and looks at positions after a short
cycle, not after two of its 5 s waits."""

from __future__ import annotations

import asyncio
import time

import faust.tables.recovery as recovery

from runonce.streams.faust_runtime import patches
from runonce.streams.faust_runtime.markers import RECOVERY_CYCLE_S


def test_recovery_waits_a_short_cycle_for_a_changelog_event() -> None:
    patches.install()

    async def empty_cycle() -> float:
        queue: asyncio.Queue[object] = asyncio.Queue()
        started = time.monotonic()
        try:
            await recovery.asyncio.wait_for(queue.get(), timeout=5.0)  # recovery's own call
        except recovery.asyncio.TimeoutError:
            return time.monotonic() - started
        raise AssertionError("an empty queue answered")

    waited_s = asyncio.run(empty_cycle())
    assert RECOVERY_CYCLE_S <= waited_s < 4.0, waited_s


def test_a_shorter_wait_or_no_limit_is_left_as_asked() -> None:
    patches.install()

    async def go() -> tuple[str, str]:
        async def soon(value: str) -> str:
            await asyncio.sleep(0.05)
            return value

        return (await recovery.asyncio.wait_for(soon("limited"), timeout=0.5),
                await recovery.asyncio.wait_for(soon("unlimited"), timeout=None))

    assert asyncio.run(go()) == ("limited", "unlimited")
    assert recovery.asyncio.sleep is asyncio.sleep  # everything else is asyncio's own
