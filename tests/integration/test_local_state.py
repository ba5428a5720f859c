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
from runonce.kafka.partitioner import partition_for
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import Submitter, build_request
from runonce.settings import Settings
from tests.support.worker import WorkerProcess

pytestmark = pytest.mark.broker

GROUP = "runonce"  # the faust runtime's consumer group


def _end(bootstrap: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topics.REQUESTED, partition), timeout=10)[1])
    finally:
        c.close()


def _committed(bootstrap: str, partition: int) -> int:
    """The stream job's committed offset on actions.requested[partition]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return int(c.committed([TopicPartition(topics.REQUESTED, partition)], timeout=10)[0].offset)
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
    key = f"local-{uuid.uuid4().hex}"
    params = {"record_id": f"rec-{key}", "field": "owner", "value": "agent-1"}
    original = build_request("update_salesforce_field", params, agent_id="local", idempotency_key=key)
    partition = partition_for(key.encode(), broker.partitions)  # keyed: stage 1 decides on this partition
    first = WorkerProcess(broker, "local-a", tmp_path, runtime="faust",  # it may decide earlier leftovers first
                          extra_env={"RUNONCE_STREAM_FAILPOINT": f"kill_after_state:{original['action_id']}"})
    first.start()
    with Submitter(bootstrap, agent_id="local") as sub:
        sub.send(original)
    sent_before = _end(bootstrap, partition)
    _wait("the failpoint's SIGKILL", lambda: not first.alive(), 120, first.log_tail())
    assert "failpoint kill_after_state" in first.log_tail(), first.log_tail()
    time.sleep(2)
    assert original["action_id"] not in decision_log.by_action, "the fault did not apply: the approval left"

    again = WorkerProcess(broker, "local-a", tmp_path, runtime="faust")  # the same RocksDB folder
    again.start()
    try:
        decision_log.wait([original["action_id"]], timeout_s=90)
        _wait("the group's commit past the action", lambda: _committed(bootstrap, partition) >= sent_before, 60,
              again.log_tail())
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
        f"the retry of {original['action_id']} was {decision['outcome']} {decision['reason']}: its claim did not "
        f"survive the kill\n{again.log_tail()}")
    assert decision["first_action_id"] == original["action_id"]
