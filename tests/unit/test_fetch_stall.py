"""The stuck-fetcher check (runonce/kafka/fetch_stall.py) on the client's own statistics JSON,
with a clock of the test's: a stuck partition is named only after its position has stayed
put past the limit with records beyond it and nothing queued."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from runonce.kafka.fetch_stall import FetchStall
from runonce.kafka.stats import stats_callback
from tests.support.clock import Clock

TOPIC = "actions.approved"


def stats(**parts: tuple[int, str, int]) -> str:
    """librdkafka's statistics, cut to what the check reads; partition -1 is the client's own."""
    partitions = {"-1": {"partition": -1, "next_offset": -1001, "fetch_state": "none"}}
    for p, (next_offset, state, queued) in parts.items():
        partitions[p.lstrip("p")] = {"partition": int(p.lstrip("p")), "next_offset": next_offset,
                                     "fetch_state": state, "fetchq_cnt": queued}
    return json.dumps({"topics": {TOPIC: {"partitions": partitions}}})


def test_a_position_that_stays_put_with_records_beyond_it_is_named_after_the_limit() -> None:
    clock = Clock()
    stall = FetchStall(TOPIC, limit_s=60, check_every_s=10, clock=clock)
    stats_callback(stall)(stats(p0=(100, "active", 0), p1=(50, "validate-epoch-wait", 0)))
    ends = {0: 100, 1: 80}.get
    seen = []
    for _ in range(8):
        clock.now += 10
        seen.append(stall.check(ends, lambda: [0, 1]))
    assert seen[:6] == [None] * 6  # first seen at 10 s: named once 60 s have passed since
    assert seen[6] is not None and "actions.approved[1]" in seen[6] and "validate-epoch-wait" in seen[6]
    assert "stayed at 50" in seen[6]


def test_a_moving_position_a_full_queue_or_an_unaskable_leader_is_no_stall() -> None:
    clock = Clock()
    stall = FetchStall(TOPIC, limit_s=30, check_every_s=10, clock=clock)
    ends = {0: 1000, 1: 1000}.get
    for step in range(20):
        clock.now += 10
        # p0 moves every check; p1 has records queued locally (the executor is busy, not stuck)
        stats_callback(stall)(stats(p0=(step * 10, "active", 0), p1=(5, "active", 3)))
        assert stall.check(ends, lambda: [0, 1]) is None
        assert stall.check(lambda _p: None, lambda: [0, 1]) is None  # a leader away: a failover, not our stall


def test_checks_are_spaced_and_unknown_partitions_ignored() -> None:
    clock = Clock()
    stall = FetchStall(TOPIC, limit_s=0, check_every_s=10, clock=clock)
    asked: list[int] = []

    def ends(p: int) -> int:
        asked.append(p)
        return 10

    def assigned() -> list[int]:
        asked.append(-1)
        return [0, 7]

    stats_callback(stall)(stats(p0=(1, "active", 0)))
    clock.now = 5
    assert stall.check(ends, assigned) is None and asked == []  # too soon: neither the client nor a leader asked
    clock.now = 10
    assert stall.check(ends, assigned) is not None and asked == [-1, 0]  # no statistics for 7: its end not asked


@given(st.text(max_size=50))
def test_any_statistics_text_is_read_without_raising(text: str) -> None:
    stats_callback(FetchStall(TOPIC))(text)


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), min_size=1, max_size=30))
def test_caught_up_partitions_are_never_named(steps: list[tuple[int, int]]) -> None:
    clock = Clock()
    stall = FetchStall(TOPIC, limit_s=0, check_every_s=0, clock=clock)
    for next_offset, behind in steps:
        clock.now += 100
        stats_callback(stall)(stats(p0=(next_offset + behind, "active", 0)))
        assert stall.check(lambda _p: next_offset, lambda: [0]) is None  # the end is never beyond the position
