"""Let faust's changelog recovery finish on changelogs the transactional runtime wrote, and
never finish it before every committed changelog record has been applied.

The default runtime writes the tables' changelogs inside transactions, so a changelog may
end in a commit marker: an offset no consumer ever receives. faust's ``Recovery`` waits
for a record at the high watermark and, outside exactly-once mode, never stops waiting
("No event received for active tp ... "); in exactly-once mode it checks, after the queue
has stayed empty for two cycles, whether the consumer's *position* has reached the high
watermark, and if so declares the partition recovered. Its patch (``patches.py``) gives every
``Recovery`` that check, whatever the processing guarantee, so a deployment can move between
runtimes over the same changelogs.

The position alone is not proof. faust's fetcher can move the client's position past records
it then never delivers (it drops the rest of a fetched batch when its flow stops or its
generation changes mid-batch), and a record still travelling from the fetcher to recovery's
queue is past the position too. Believing the position there would finish recovery without
a claim the changelog holds, and approve the next repeat of that action. faust itself takes
the shortcut only in exactly-once mode and after two 5 s cycles; runonce takes it always and
after two 1 s cycles, so it does not rest on the position alone. A position at the high watermark is believed only when the broker, asked by a consumer of
its own (``runonce.kafka.reader.first_committed_offset``), has no committed record after the
last one recovery applied; otherwise recovery is sent back to fetch from that record.

Recovery waits for changelog events in cycles of 5 s and checks only after two empty ones:
10 s added to every start on such a changelog. Its cycle is cut to ``RECOVERY_CYCLE_S``
(its only ``asyncio.wait_for``, seen through ``_RecoveryClock``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Optional

from runonce.errors import FatalError, RetryableError
from runonce.streams.faust_runtime.stop import stop_before_ack

log = logging.getLogger("runonce.streams")

#: the longest Recovery waits for one changelog event before it looks at positions again
RECOVERY_CYCLE_S = 1.0

#: (topic, partition, offset) -> the first committed record's offset at or after it, None if none
FirstCommitted = Callable[[str, int, int], Optional[int]]


class _RecoveryClock:
    """``asyncio`` as faust's recovery module sees it: the same, but no wait longer than a cycle."""

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    @staticmethod
    def wait_for(aw: Any, timeout: float | None) -> Any:
        return asyncio.wait_for(aw, timeout=None if timeout is None else min(timeout, RECOVERY_CYCLE_S))


class CheckedPositions:
    """faust's consumer as Recovery sees it: the same, except that ``position`` claims a
    changelog partition's end only when the broker confirms nothing committed is left unread."""

    def __init__(self, consumer: Any, recovery: Any, first_committed: FirstCommitted,
                 on_fatal: Callable[[str], None] = stop_before_ack) -> None:
        self._consumer = consumer
        self._recovery = recovery
        self._first_committed = first_committed
        self._on_fatal = on_fatal

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)

    async def position(self, tp: Any) -> Optional[int]:
        position: Optional[int] = await self._consumer.position(tp)
        applied: Optional[int] = self._recovery.active_offsets.get(tp)  # the last offset recovery applied
        last: Optional[int] = self._recovery.active_highwaters.get(tp)  # the partition's last offset
        if position is None or applied is None or last is None or position < last or applied >= last:
            return position
        try:
            first = await asyncio.to_thread(self._first_committed, tp.topic, tp.partition, applied + 1)
        except RetryableError as exc:  # cannot tell yet: not recovered; recovery asks again next cycle
            log.warning("recovery: cannot confirm the end of %s[%d]: %s", tp.topic, tp.partition, exc)
            return applied
        except FatalError as exc:  # refused (an ACL): asking again cannot help, and faust's recovery
            # swallows exceptions, so a raise would leave a worker that waits for ever
            self._on_fatal(f"recovery cannot confirm the end of {tp.topic}[{tp.partition}]: {exc}")
            raise
        if first is None or first > last:
            return position  # only commit markers or aborted records after what was applied
        log.warning("recovery: %s[%d] has committed records from offset %d (its last is %d) that never "
                    "reached recovery, though the consumer's position is %d; fetching them again",
                    tp.topic, tp.partition, first, last, position)
        await self._consumer.seek(tp, first)
        return applied


class _RecoveryView:
    """The app as a Recovery sees it: everything forwarded, except that recovery tolerates
    control records at a changelog's end (faust ties that to ``in_transaction``) and sees the
    consumer through ``CheckedPositions``."""

    in_transaction = True

    def __init__(self, app: Any) -> None:
        object.__setattr__(self, "_app", app)
        object.__setattr__(self, "_recovery", None)

    @property
    def consumer(self) -> Any:
        first_committed: FirstCommitted = self._app.first_committed_offset
        return CheckedPositions(self._app.consumer, self._recovery, first_committed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._app, name, value)


def recovery_through_view(init: Callable[..., None]) -> Callable[..., None]:
    """``Recovery.__init__``: the recovery sees its app through ``_RecoveryView``. The app must
    offer ``first_committed_offset`` (a ``FirstCommitted``): runonce's faust app does."""

    def __init__(self: Any, app: Any, tables: Any, **kwargs: Any) -> None:
        view = _RecoveryView(app)
        init(self, view, tables, **kwargs)  # the app, seen through a view
        object.__setattr__(view, "_recovery", self)

    return __init__


def recovery_clock(_asyncio: object) -> object:
    """faust's recovery module's ``asyncio``: the same, but no wait longer than a cycle."""
    return _RecoveryClock()
