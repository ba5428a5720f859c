"""A claim that reached only a faust worker's local RocksDB is made durable by its replay
("Replays write again" in runonce/core/decide.py).

The failpoint kills worker A right after a keyed action's claim is written to its local
RocksDB, before the claim's changelog record or the approval leave faust's buffer. A
restarts over the same folder, finds its own claim and decides the action again (a replay),
and is killed once the group has committed past it. Then worker B, on a folder of its own,
restores from the changelog alone and meets a retry of the action (the same idempotency
key): it must be dropped as a repeat. When a replay wrote nothing, A re-emitted the approval
and the claim existed on A's disk only: B approved the retry (the faust crash test's
"decided two ways", one run in three).
"""

from __future__ import annotations

import time
import uuid
from typing import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from runonce.core.decision import Outcome, Reason
from runonce.kafka import topics
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from runonce.testkit.watch import DecisionWatcher

from tests.support.worker import WorkerProcess

pytestmark = pytest.mark.broker

GROUP = "runonce"  # the faust runtime's consumer group
INPUTS = (topics.REQUESTED, topics.REKEY, topics.SCOPED)


def _unsettled(bootstrap: str) -> int:
    """How many input records the stream job's group has not committed yet."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(t, p) for t in INPUTS for p in c.list_topics(t, timeout=10).topics[t].partitions]
        committed = {(tp.topic, tp.partition): tp.offset for tp in c.committed(tps, timeout=10)}
        return sum(max(0, c.get_watermark_offsets(tp, timeout=10)[1] - max(committed[(tp.topic, tp.partition)], 0))
                   for tp in tps)
    finally:
        c.close()


def _wait(what: str, done: Callable[[], bool], timeout_s: float, logs: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s:.0f} s\n{logs}"
        time.sleep(0.5)


def test_a_claim_written_locally_but_never_sent_does_not_outlive_a_kill(
        broker: Settings, decision_log: DecisionWatcher, tmp_path) -> None:
    bootstrap = broker.bootstrap_servers()
    _wait("the stream job's earlier input committed", lambda: _unsettled(bootstrap) == 0, 60)
    key = f"local-{uuid.uuid4().hex}"
    params = {"record_id": f"rec-{key}", "field": "owner", "value": "agent-1"}
    first = WorkerProcess(broker, "local-a", tmp_path, runtime="faust",
                          extra_env={"RUNONCE_STREAM_FAILPOINT": "kill_after_state"})
    first.start()
    with Submitter(bootstrap, agent_id="local") as sub:
        original = sub.submit("update_salesforce_field", params, idempotency_key=key)
    _wait("the failpoint's SIGKILL", lambda: not first.alive(), 90, first.log_tail())
    assert "failpoint kill_after_state" in first.log_tail(), first.log_tail()
    time.sleep(2)
    assert original not in decision_log.by_action, "the fault did not apply: the approval left before the kill"

    again = WorkerProcess(broker, "local-a", tmp_path, runtime="faust")  # the same RocksDB folder
    again.start()
    try:
        decision_log.wait([original], timeout_s=90)
        _wait("the group's commit past the action", lambda: _unsettled(bootstrap) == 0, 60, again.log_tail())
    finally:
        again.kill()

    other = WorkerProcess(broker, "local-b", tmp_path, runtime="faust")  # restores from the changelog alone
    other.start()
    try:
        with Submitter(bootstrap, agent_id="local") as sub:
            retry = sub.submit("update_salesforce_field", params, idempotency_key=key)
        decision = decision_log.wait([retry], timeout_s=90)[retry]
    finally:
        other.stop()
    assert (decision["outcome"], decision["reason"]) == (Outcome.DROP.value, Reason.DUPLICATE_KEY.value), (
        f"the retry of {original} was {decision['outcome']} {decision['reason']}: its claim did not survive "
        f"the kill\n{again.log_tail()}")
    assert decision["first_action_id"] == original
