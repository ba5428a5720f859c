"""The fence on faust's input commits: an input partition is committed only as far as the
pipeline has decided it, whatever faust acknowledged, and a record delivered past skipped
records stops the worker (streams/faust_runtime/fence.py)."""

# ruff: noqa: SLF001  # these tests drive the faust internals the runtime patches (faust has no seam)

from __future__ import annotations

import asyncio
from collections import defaultdict
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from intervaltree import IntervalTree

from runonce.streams.faust_runtime import patches
from runonce.streams.faust_runtime.fence import InputFence, RecordsSkipped

T = "actions.requested"
KEY = (T, 0)


def _log_reader(records: set[int]):
    """first_committed over a partition holding ``records`` (other offsets: markers, aborted)."""
    calls: list[int] = []

    def first_committed(topic: str, partition: int, offset: int) -> int | None:
        calls.append(offset)
        return min((o for o in records if o >= offset), default=None)

    return first_committed, calls


def test_in_order_records_move_the_commit_and_ask_nothing() -> None:
    first, calls = _log_reader(set(range(100)))
    fence = InputFence([T], first)
    assert fence.commit_offset(KEY) is None  # nothing before faust's first seek
    fence.seeked({KEY: 40})
    for offset in range(40, 60):
        asyncio.run(fence.check(KEY, offset))
        fence.passed(KEY, offset)
    assert fence.commit_offset(KEY) == 60
    assert calls == []


def test_a_hole_holding_records_stops_and_the_commit_stays_below_it() -> None:
    first, _ = _log_reader(set(range(100)))
    fence = InputFence([T], first)
    fence.seeked({KEY: 10})
    for offset in range(10, 20):
        fence.passed(KEY, offset)
    with pytest.raises(RecordsSkipped, match="20..29"):
        asyncio.run(fence.check(KEY, 30))  # faust acknowledged 20..29 and never delivered them
    assert fence.commit_offset(KEY) == 20


def test_a_hole_of_markers_is_passed() -> None:
    first, calls = _log_reader({*range(0, 10), *range(12, 20)})  # 10, 11: commit markers
    fence = InputFence([T], first)
    fence.seeked({KEY: None})  # nothing committed yet: from the start
    for offset in [*range(0, 10), *range(12, 20)]:
        asyncio.run(fence.check(KEY, offset))
        fence.passed(KEY, offset)
    assert fence.commit_offset(KEY) == 20
    assert calls == [10]


def test_records_decided_before_the_seek_fill_the_hole() -> None:
    """faust can deliver records once before its seek and drop them after it (the run covers them)."""
    first, calls = _log_reader(set(range(100)))
    fence = InputFence([T], first)
    for offset in range(50, 56):  # delivered while the seek was on its way
        fence.passed(KEY, offset)
    fence.seeked({KEY: 50})
    asyncio.run(fence.check(KEY, 56))
    fence.passed(KEY, 56)
    assert fence.commit_offset(KEY) == 57
    assert calls == []


def test_a_revoked_partition_is_not_committed_until_seeked_again() -> None:
    fence = InputFence([T], _log_reader(set())[0])
    fence.seeked({KEY: 5})
    fence.passed(KEY, 5)
    fence.revoked([KEY])
    assert fence.commit_offset(KEY) is None
    fence.seeked({KEY: 6})
    assert fence.commit_offset(KEY) == 6


# What faust may do to a partition: deliver the next record, skip records (acknowledged,
# never delivered), deliver a record again, or seek back to the committed offset (a rebalance).
Step = st.one_of(st.just(("next", 0)), st.tuples(st.just("skip"), st.integers(1, 5)),
                 st.just(("again", 0)), st.just(("seek", 0)))


@settings(max_examples=300, deadline=None)
@given(markers=st.sets(st.integers(0, 59), max_size=15), steps=st.lists(Step, max_size=120))
def test_the_commit_never_passes_an_undecided_record(markers: set[int], steps: list[tuple[str, int]]) -> None:
    records = set(range(60)) - markers
    first, _ = _log_reader(records)
    fence = InputFence([T], first)
    committed = 0
    decided: set[int] = set()
    position = 0
    fence.seeked({KEY: committed})
    for kind, n in steps:
        if kind == "seek":
            fence.revoked([KEY])
            position = committed
            fence.seeked({KEY: committed})
            continue
        if kind == "skip":
            position += n
            continue
        if kind == "again":
            position = max(committed, position - 1)
        upcoming = sorted(o for o in records if o >= position)
        if not upcoming:
            continue
        offset = upcoming[0]
        try:
            asyncio.run(fence.check(KEY, offset))
        except RecordsSkipped:  # the worker stops; its restart seeks to the commit
            fence = InputFence([T], first)
            position = committed
            fence.seeked({KEY: committed})
            continue
        fence.passed(KEY, offset)
        decided.add(offset)
        position = offset + 1
        proposed = fence.commit_offset(KEY)
        if proposed is not None and proposed > committed:
            committed = proposed
        assert all(o in decided for o in records if o < committed), (committed, sorted(decided))


def _consumer(fence: InputFence | None, acked: list[int], committed: int) -> SimpleNamespace:
    """faust's Consumer as its ``_new_offset`` sees it."""
    return SimpleNamespace(app=SimpleNamespace(runonce_fence=fence), _acked=defaultdict(list, {KEY: list(acked)}),
                           _acked_index=defaultdict(set, {KEY: set(acked)}), _gap=defaultdict(IntervalTree),
                           _committed_offset=defaultdict(lambda: None, {KEY: committed}))


def test_faust_commits_an_input_partition_at_the_fence_not_at_its_acks() -> None:
    from faust.transport.consumer import Consumer
    from faust.types import TP

    patches.install()
    tp = TP(T, 0)
    fence = InputFence([T], _log_reader(set())[0])
    fence.seeked({KEY: 100})
    for offset in range(100, 110):
        fence.passed(KEY, offset)
    # faust acknowledged 100..139: 110..139 skipped by its stream, never decided
    consumer = _consumer(fence, list(range(100, 140)), 100)
    assert Consumer._new_offset(consumer, tp) == 110
    assert consumer._acked[KEY] == []  # faust's own list is still trimmed
    # an app without a fence keeps faust's offsets
    assert Consumer._new_offset(_consumer(None, list(range(100, 140)), 100), tp) == 140
