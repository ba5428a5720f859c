"""The lost-coordinator check (runonce/kafka/group_stall.py) on the client's statistics JSON,
and the two loops that act on it: an idle executor or stream worker whose consumer has been
without its group coordinator past the limit leaves for a restart; one whose group is up,
however long, never does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runonce.kafka.group_stall import GroupStall
from runonce.kafka.stats import stats_callback
from tests.support.executor_fakes import FakeConsumer, executor, tp

STATES = ("init", "term", "query-coord", "wait-coord", "wait-broker", "wait-broker-transport", "up")


def stats(state: str, age_s: float, join_state: str = "init") -> str:
    """librdkafka's statistics, cut to what the check reads."""
    return json.dumps({"name": "c", "cgrp": {"state": state, "stateage": int(age_s * 1000), "join_state": join_state,
                                             "rebalance_cnt": 0, "assignment_size": 0}})


@given(st.sampled_from(STATES), st.floats(min_value=0, max_value=10_000), st.floats(min_value=1, max_value=600))
def test_named_exactly_when_the_group_has_been_away_from_up_past_the_limit(state: str, age_s: float,
                                                                           limit_s: float) -> None:
    stall = GroupStall(limit_s=limit_s)
    stats_callback(stall)(stats(state, age_s))
    lost = stall.check()
    assert (lost is not None) == (state != "up" and int(age_s * 1000) / 1000 >= limit_s)
    if lost is not None:
        assert state in lost


def test_the_stuck_consumer_of_the_fault_test_is_named_with_its_states() -> None:
    stall = GroupStall(limit_s=60)
    stats_callback(stall)(stats("query-coord", 360, "init"))
    assert stall.check() == ("no group coordinator for 360 s (group state query-coord, join state init): "
                             "the client stopped looking for one")


def test_no_statistics_or_no_group_in_them_is_no_stall() -> None:
    stall = GroupStall(limit_s=1)
    assert stall.check() is None
    stats_callback(stall)(json.dumps({"name": "producer", "topics": {}}))
    stats_callback(stall)("not json")
    assert stall.check() is None


def test_the_latest_statistics_count() -> None:
    stall = GroupStall(limit_s=60)
    stats_callback(stall)(stats("query-coord", 120))
    stats_callback(stall)(stats("up", 0))
    assert stall.check() is None


class Left(Exception):
    pass


def _leave(why: str) -> None:
    raise Left(why)


def test_an_idle_executor_without_its_coordinator_leaves_for_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runonce.kafka.loop.leave_for_restart", _leave)
    ex = executor(FakeConsumer([tp(0, 0)]))
    stall = ex.loop.group_stall = GroupStall(limit_s=60)
    stats_callback(stall)(stats("up", 600))
    ex.step()  # idle, group up: stays
    stats_callback(stall)(stats("query-coord", 61))
    with pytest.raises(Left, match="no group coordinator for 61 s"):
        ex.step()


def test_an_idle_stream_worker_without_its_coordinator_leaves_for_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit.test_worker_commit import worker

    monkeypatch.setattr("runonce.kafka.loop.leave_for_restart", _leave)
    w, _ = worker(tmp_path, [])
    stats_callback(w.group_stall)(stats("up", 600))
    assert w.step() == 0
    stats_callback(w.group_stall)(stats("wait-coord", 300))
    with pytest.raises(Left, match="runonce-stream-.*no group coordinator for 300 s"):
        w.step()
