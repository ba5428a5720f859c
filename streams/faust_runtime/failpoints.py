"""The faust runtime's failpoints other than ``kill_after_state`` (inline in ``app._run``, where
the outputs are): faults tests plant on purpose (``RUNONCE_STREAM_FAILPOINT``)."""

from __future__ import annotations

import logging
from typing import Any

from runonce.kafka import topics

log = logging.getLogger("runonce.streams")


class PassOver:
    """Failpoint ``pass_over:N[:TAG]``: do to N records of actions.requested (holding TAG) what
    faust does to the events it skips, acknowledge them undecided; then, at the next such
    record, let faust commit what it has acknowledged before deciding it: the window in which
    faust committed a skipped range on 2026-12-02 (fence.py)."""

    def __init__(self, n: int, tag: bytes) -> None:
        self.left = n
        self.tag = tag

    @classmethod
    def parse(cls, arg: str) -> "PassOver":
        n, _, tag = arg.partition(":")
        return cls(int(n), tag.encode())

    async def skips(self, msg: Any, app: Any) -> bool:
        if msg.topic != topics.REQUESTED or self.left < 0 or self.tag not in (msg.value or b""):
            return False
        if self.left > 0:
            self.left -= 1
            log.warning("failpoint pass_over: %s[%d]@%d acknowledged undecided", msg.topic, msg.partition, msg.offset)
            return True
        self.left = -1
        await app.consumer.commit()
        return False
