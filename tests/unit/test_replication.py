"""How many copies a cluster keeps of each runonce topic (runonce/kafka/replication.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runonce.errors import ConfigError
from runonce.kafka.replication import plan, reassignment_hint


def test_three_brokers_or_more_get_three_copies_two_in_sync_and_no_warning() -> None:
    for brokers in (3, 5, 9):
        r = plan(brokers)
        assert (r.factor, r.min_insync, r.warnings) == (3, 2, ())


def test_one_broker_gets_one_copy_said_aloud() -> None:
    r = plan(1)
    assert (r.factor, r.min_insync) == (1, 1)
    assert len(r.warnings) == 1 and "replication factor 1" in r.warnings[0] and "loses" in r.warnings[0]


def test_two_brokers_get_two_copies_and_are_told_what_that_costs() -> None:
    r = plan(2)
    assert (r.factor, r.min_insync) == (2, 1)
    assert r.warnings and "one broker only" in r.warnings[0]


def test_a_factor_the_cluster_cannot_hold_or_an_isr_above_it_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs at least 3 brokers"):
        plan(1, factor=3)
    with pytest.raises(ConfigError, match="min.insync.replicas 4"):
        plan(5, factor=3, min_insync=4)
    with pytest.raises(ConfigError):
        plan(0)


@given(brokers=st.integers(1, 12), factor=st.none() | st.integers(1, 12), isr=st.none() | st.integers(1, 12))
def test_a_plan_never_asks_for_more_copies_than_brokers_nor_more_in_sync_than_copies(
        brokers: int, factor: int | None, isr: int | None) -> None:
    try:
        r = plan(brokers, factor, isr)
    except ConfigError:
        assert (factor is not None and factor > brokers) or isr is not None
        return
    assert 1 <= r.min_insync <= r.factor <= brokers
    assert (r.factor == 1) == any(w.startswith("replication factor 1 ") for w in r.warnings)


def test_the_hint_names_the_tool_that_changes_a_factor() -> None:
    hint = reassignment_hint("actions.requested", 1, 3)
    assert "kafka-reassign-partitions" in hint and "actions.requested" in hint and "3 replicas" in hint
