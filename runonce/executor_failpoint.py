"""Where a crash test may stop an executor (``RUNONCE_EXECUTOR_FAILPOINT=POINT[:N]``): the names,
declared once for the setting that is validated at start (runonce/settings.py) and the executor
that passes them (connectors/executor/failpoints.py)."""

from __future__ import annotations

import enum


class Point(enum.Enum):
    #: intents committed, no vendor called yet
    BEFORE_CALL = "before_call"
    #: every vendor call of the batch answered, no result committed
    AFTER_CALL = "after_call"
    #: results and offsets committed
    AFTER_COMMIT = "after_commit"
    #: a committed transaction's results not yet in the local results index
    BEFORE_INDEX_WRITE = "before_index_write"
    #: inside the vendor's own transaction, its effect and marker written, before its COMMIT
    BEFORE_VENDOR_COMMIT = "before_vendor_commit"
    #: not a kill: each record's first result transaction is written, then aborted
    ABORT_RESULT = "abort_result"
    #: not a kill: at the first BEFORE_CALL, stop for N seconds (a paused process), then go on
    STALL_BEFORE_CALL = "stall_before_call"


def parse_failpoint(text: str) -> tuple[Point, int]:
    """``POINT[:N]``: the point and N (the Nth pass; 1 when not given). ValueError names what
    is wrong and every point."""
    point, _, nth = text.partition(":")
    if point not in {p.value for p in Point} or (nth and not (nth.isdigit() and int(nth) >= 1)):
        raise ValueError(f"must be one of {', '.join(p.value for p in Point)}, each optionally :N "
                         f"(the Nth pass, N >= 1), got {text!r}")
    return Point(point), int(nth or 1)
