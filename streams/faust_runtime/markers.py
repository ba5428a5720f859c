"""Let faust's changelog recovery finish on changelogs the transactional runtime wrote.

The default runtime writes the tables' changelogs inside transactions, so a changelog may
end in a commit marker: an offset no consumer ever receives. faust's ``Recovery`` waits
for a record at the high watermark and, outside exactly-once mode, never stops waiting
("No event received for active tp ... "); in exactly-once mode it checks, after the queue
has stayed empty for two cycles, whether the consumer's *position* has reached the high
watermark. ``read_past_markers`` gives every ``Recovery`` that check, whatever the
processing guarantee, so a deployment can move between runtimes over the same changelogs.

Recovery waits for changelog events in cycles of 5 s and checks only after two empty ones:
10 s added to every start on such a changelog. Its cycle is cut to ``RECOVERY_CYCLE_S``
(its only ``asyncio.wait_for``, seen through ``_RecoveryClock``), so the check comes after
about 2 s: the two empty cycles still order the consumer's position after the queue's drain.
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust.tables.recovery as recovery
from faust.tables.recovery import Recovery

_PATCHED = "_runonce_reads_past_markers"

#: the longest Recovery waits for one changelog event before it looks at positions again
RECOVERY_CYCLE_S = 1.0


class _RecoveryClock:
    """``asyncio`` as faust's recovery module sees it: the same, but no wait longer than a cycle."""

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    @staticmethod
    def wait_for(aw: Any, timeout: float | None) -> Any:
        return asyncio.wait_for(aw, timeout=None if timeout is None else min(timeout, RECOVERY_CYCLE_S))


class _RecoveryView:
    """The app as a Recovery sees it: everything forwarded, except that recovery tolerates
    control records at a changelog's end (faust ties that to ``in_transaction``)."""

    in_transaction = True

    def __init__(self, app: Any) -> None:
        object.__setattr__(self, "_app", app)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._app, name, value)


def read_past_markers() -> None:
    if getattr(Recovery, _PATCHED, False):
        return
    init = Recovery.__init__

    def __init__(self: Any, app: Any, tables: Any, **kwargs: Any) -> None:
        init(self, _RecoveryView(app), tables, **kwargs)  # type: ignore[arg-type]  # the app, seen through a view

    Recovery.__init__ = __init__  # type: ignore[method-assign]  # the patch
    setattr(recovery, "asyncio", _RecoveryClock())  # the cycle's length
    setattr(Recovery, _PATCHED, True)
