"""The one commit path (runonce/kafka/checkpoint.py) against a fake producer: its steps in
order, and each row of its failure table."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from runonce.errors import AccessDenied, FatalError
from runonce.kafka.checkpoint import FAILURES, Checkpoint, Failure, Step
from runonce.kafka.record import Out
from runonce.kafka.watchdog import Watchdog
from tests.support.kafka_fakes import FakeProducer, Made


def failing(code: int, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, "planted", **flags))


def checkpoint(*producers: FakeProducer) -> tuple[Checkpoint, Made]:
    made = Made(*producers)
    return Checkpoint("runonce-test", made, lambda: "group-metadata", Watchdog("t", 60, start=False),  # type: ignore[arg-type]
                      transaction_timeout_s=10), made


RECORDS = [Out("actions.approved", b"k", b"v", 0), Out("changelog", b"k", None, 2), Out("changelog", b"j", b"x", 2)]
OFFSETS = {("actions.requested", 0): 42}


def test_the_steps_in_order_and_the_after_commit_step_gets_each_partitions_end() -> None:
    producer = FakeProducer()
    ckpt, _ = checkpoint(producer)
    ends: list[dict[tuple[str, int], int]] = []
    assert ckpt.commit(RECORDS, OFFSETS, flush=True, after_commit=ends.append) is None
    assert producer.calls == ["begin", "produce", "produce", "produce", "flush", "offsets", "commit"]
    assert ends == [{("actions.approved", 0): 1, ("changelog", 2): 2}]


def test_a_delivery_without_an_offset_commits_and_reports_the_ends_known() -> None:
    """A retry the broker had already written (DUPLICATE_SEQUENCE_NUMBER after a leader's loss)
    is delivered with no offset. Catches the delivery report that adds 1 to None: a TypeError in
    librdkafka's callback, raised out of the flush of a transaction that did commit."""
    producer = FakeProducer(unknown_offsets=1)
    ckpt, _ = checkpoint(producer)
    ends: list[dict[tuple[str, int], int]] = []
    assert ckpt.commit(RECORDS, OFFSETS, flush=True, after_commit=ends.append) is None
    assert producer.calls[-1] == "commit"
    assert ends == [{("changelog", 2): 2}]


class TimedProducer(FakeProducer):
    """Each call moves ``clock`` on by its own cost, so each step's time is known."""

    COST_S = {"begin": 0.25, "produce": 0.5, "flush": 5.0, "offsets": 3.0, "commit": 1.0, "abort": 7.0}
    clock = 0.0

    def _call(self, name: str) -> None:
        TimedProducer.clock += self.COST_S[name]
        super()._call(name)


def test_a_committed_transaction_reports_the_time_of_each_step_and_an_aborted_one_nothing() -> None:
    steps: list[tuple[Step, float]] = []
    rebalance = failing(KafkaError.REBALANCE_IN_PROGRESS, txn_requires_abort=True)
    made = Made(TimedProducer(), TimedProducer(fail={"offsets": [rebalance]}))
    ckpt = Checkpoint("runonce-test", made, lambda: "group-metadata",  # type: ignore[arg-type]
                      Watchdog("t", 60, start=False), transaction_timeout_s=10,
                      on_step=lambda step, s: steps.append((step, s)), clock=lambda: TimedProducer.clock)
    assert ckpt.commit(RECORDS, OFFSETS, flush=True) is None
    # begin and three produces, then each step on its own (not the time since the transaction began)
    assert steps == [(Step.PRODUCE, 1.75), (Step.FLUSH, 5.0), (Step.OFFSETS, 3.0), (Step.COMMIT, 1.0)]
    steps.clear()
    assert ckpt.commit(RECORDS[:1], {}) is None  # no flush asked for, no offsets: those steps are not reported
    assert steps == [(Step.PRODUCE, 0.75), (Step.COMMIT, 1.0)]
    steps.clear()
    ckpt.producer = made.planted.pop(0)
    assert ckpt.commit(RECORDS, OFFSETS, flush=True) is Failure.ABORTABLE
    assert steps == []  # the metric is of committed transactions: an abort's steps would skew it


def test_a_full_local_queue_is_waited_out_never_dropped() -> None:
    producer = FakeProducer(full_queue=2)
    ckpt, _ = checkpoint(producer)
    assert ckpt.commit(RECORDS[:1], OFFSETS) is None
    assert producer.calls == ["begin", "queue full", "poll", "queue full", "poll", "produce", "offsets", "commit"]


def test_retriable_a_commit_is_committed_again_then_aborted() -> None:
    retriable = [failing(KafkaError._TIMED_OUT, retriable=True) for _ in range(2)]
    producer = FakeProducer(fail={"commit": retriable})
    ckpt, _ = checkpoint(producer)
    assert ckpt.commit(RECORDS, OFFSETS) is None  # the third commit took
    assert producer.calls.count("commit") == 3 and "abort" not in producer.calls

    producer = FakeProducer(fail={"commit": [failing(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, retriable=True)
                                             for _ in range(3)]})
    ckpt, _ = checkpoint(producer)
    after: list[Any] = []
    assert ckpt.commit(RECORDS, OFFSETS, after_commit=after.append) is Failure.RETRIABLE
    assert producer.calls[-4:] == ["commit", "commit", "commit", "abort"] and after == []


def test_abortable_aborts_and_is_never_retried_in_place() -> None:
    producer = FakeProducer(fail={"offsets": [failing(KafkaError.REBALANCE_IN_PROGRESS, txn_requires_abort=True)]})
    ckpt, _ = checkpoint(producer)
    assert ckpt.commit(RECORDS, OFFSETS) is Failure.ABORTABLE
    assert producer.calls == ["begin", "produce", "produce", "produce", "offsets", "abort"]


def test_timed_out_records_the_broker_did_not_take_abort_the_transaction() -> None:
    producer = FakeProducer(undelivered=3)
    ckpt, _ = checkpoint(producer)
    after: list[Any] = []
    assert ckpt.commit(RECORDS, OFFSETS, flush=True, after_commit=after.append) is Failure.TIMED_OUT
    assert producer.calls[-2:] == ["flush", "abort"] and "offsets" not in producer.calls and after == []


def test_fatal_a_dead_producer_is_replaced_and_the_next_commit_uses_the_new_one() -> None:
    dead = FakeProducer(fail={"commit": [failing(KafkaError._STATE, fatal=True)]})
    ckpt, made = checkpoint(dead)
    assert ckpt.commit(RECORDS, OFFSETS) is Failure.FATAL
    assert "abort" not in dead.calls and len(made.made) == 2
    assert ckpt.commit(RECORDS, OFFSETS) is None and made.made[1].calls[-1] == "commit"


def test_an_abort_that_fails_replaces_the_producer_too() -> None:
    producer = FakeProducer(fail={"offsets": [failing(KafkaError._STATE, txn_requires_abort=True)],
                                  "abort": [failing(KafkaError._TRANSPORT)]})
    ckpt, made = checkpoint(producer)
    assert ckpt.commit(RECORDS, OFFSETS) is Failure.FATAL and len(made.made) == 2


@pytest.mark.parametrize("where", ["offsets", "commit", "abort"])
def test_fenced_anywhere_is_an_exit_never_a_fight(where: str) -> None:
    fail: dict[str, list[BaseException]] = {where: [failing(KafkaError.PRODUCER_FENCED, fatal=True)]}
    if where == "abort":
        fail["offsets"] = [failing(KafkaError.REBALANCE_IN_PROGRESS, txn_requires_abort=True)]
    ckpt, made = checkpoint(FakeProducer(fail=fail))
    with pytest.raises(FatalError, match="fenced"):
        ckpt.commit(RECORDS, OFFSETS)
    assert len(made.made) == 1


def test_refused_by_the_brokers_acls_is_an_access_denied_exit() -> None:
    ckpt, _ = checkpoint(FakeProducer(fail={"offsets": [failing(KafkaError.GROUP_AUTHORIZATION_FAILED)]}))
    with pytest.raises(AccessDenied):
        ckpt.commit(RECORDS, OFFSETS)


def test_a_failpoints_abort_writes_everything_then_aborts() -> None:
    producer = FakeProducer()
    ckpt, _ = checkpoint(producer)
    assert ckpt.commit(RECORDS, OFFSETS, abort=True) is Failure.ABORTABLE
    assert producer.calls[-3:] == ["flush", "offsets", "abort"] and "commit" not in producer.calls


def test_every_failure_has_its_row_in_the_table() -> None:
    assert set(FAILURES) == set(Failure) and all(len(why) > 40 for why in FAILURES.values())
