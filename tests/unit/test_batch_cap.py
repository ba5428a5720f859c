"""The transaction size cap: cut after a timeout, grown back by full commits, always 1..max."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runonce.streams.transactional.batch_cap import BatchCap

events = st.lists(st.one_of(st.just("timeout"), st.integers(min_value=1, max_value=5000)), max_size=200)


@given(max_records=st.integers(min_value=1, max_value=100_000), history=events)
def test_the_cap_stays_within_one_and_the_setting(max_records: int, history: list[object]) -> None:
    cap = BatchCap(max_records)
    for event in history:
        before = cap.records
        if event == "timeout":
            after = cap.timed_out()
            assert after < before or before == 1
        else:
            assert isinstance(event, int)
            after = cap.committed(event)
            assert after >= before  # a commit never cuts the cap
        assert 1 <= cap.records <= max_records


def test_a_slow_broker_finds_a_size_within_two_timeouts() -> None:
    cap = BatchCap(2000)
    assert [cap.timed_out() for _ in range(3)] == [250, 31, 3]


def test_full_batches_bring_the_setting_back_and_partial_ones_do_not() -> None:
    cap = BatchCap(2000)
    cap.timed_out()
    cap.timed_out()
    assert cap.committed(10) == 31  # demand below the cap: no reason to grow
    steps = 0
    while cap.records < 2000:
        cap.committed(cap.records)
        steps += 1
    assert cap.records == 2000 and steps <= 20


def test_a_cap_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        BatchCap(0)
