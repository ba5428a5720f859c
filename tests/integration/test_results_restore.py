"""The executor's results restore reads ``actions.results`` to its end as written, not to the
first transaction still open: executors of every vendor write to the same partitions, so
another vendor's transaction, open while this executor restarts (or left by one that died,
until the broker aborts it), may lie before this executor's own last intent. Read to the last
stable offset only, the restore misses that intent, and the executor performs the action a
second time."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from runonce.connectors.executor.result_store import ResultStore
from runonce.connectors.executor.results import DEFAULT_WINDOW_MS, ResultIndex
from runonce.kafka import topics
from runonce.kafka.groups import EXECUTOR_PREFIX
from runonce.kafka.transactions import init_producer, transactional_config
from runonce.settings import Settings
from runonce.wire.codec import Codec
from runonce.wire.results import Result, Status, result_record
from tests.integration.test_executor import own_approved_topic

pytestmark = pytest.mark.broker

PARTITION = 5


def _transaction(bootstrap: str, name: str) -> Producer:
    producer = init_producer(transactional_config(bootstrap, f"{EXECUTOR_PREFIX}test-{name}-{uuid.uuid4().hex[:6]}"),
                             name)
    producer.begin_transaction()
    return producer


@pytest.mark.parametrize("folder", ["empty", "intact"])
def test_a_restore_reads_past_another_executors_open_transaction_to_its_own_intent(
        broker: Settings, tmp_path: Path, folder: str) -> None:
    """``empty``: a new folder restores from the topic. ``intact``: the folder holds the intent
    and the offset after it, beyond the last stable offset; taken for a recreated topic's,
    the folder was wiped and the intent lost with it. Either way a later intent, past the
    folder's offsets, is read from the topic (catches an intact folder trusted without its tail)."""
    bootstrap, codec, now_ms = broker.bootstrap_servers(), Codec(), int(time.time() * 1000)
    action_id = str(uuid.uuid4())
    # Another vendor's executor: its result is written, its transaction not yet ended.
    other = _transaction(bootstrap, "other-vendor")
    other.produce(topics.RESULTS, key=b"other", partition=PARTITION, value=codec.encode("ActionResult", result_record(
        str(uuid.uuid4()), None, "charge_payment", Result(Status.ATTEMPTING), now_ms)))
    assert other.flush(10) == 0
    # This executor's intent, committed after it; and a later intent of its own, past what an
    # intact folder stores: its restore must read the tail after its stored offsets too.
    delivered: list[int] = []
    later_id = str(uuid.uuid4())
    for name, intent in (("this-executor", action_id), ("this-executor-later", later_id)):
        ours = _transaction(bootstrap, name)
        ours.produce(topics.RESULTS, key=intent.encode(), partition=PARTITION,
                     value=codec.encode("ActionResult", result_record(intent, None, "send_email",
                                                                      Result(Status.ATTEMPTING), now_ms)),
                     on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None)
        ours.commit_transaction(30)
    assert len(delivered) == 2 and delivered[1] > delivered[0]

    index = ResultIndex(bootstrap, frozenset({"send_email"}),
                        ResultStore(tmp_path / "index", key_window_ms=DEFAULT_WINDOW_MS), timeout_s=30,
                        source_topic=own_approved_topic(bootstrap))
    if folder == "intact":  # as the executor's commit left it (results.ResultIndex.record)
        index.learn([(action_id, action_id, Result(Status.ATTEMPTING))], {PARTITION: delivered[0] + 1})
    # The other transaction ends while the restore runs (a restore that stops short is done by then).
    ending = threading.Timer(3.0, other.abort_transaction, args=(30,))
    ending.start()
    try:
        index.restore({PARTITION: 0})
        found, found_later = index.result(action_id), index.result(later_id)
    finally:
        ending.join()
        index.close()
    assert found is not None and found.status is Status.ATTEMPTING, \
        f"the restore ({folder} folder) stopped short of this executor's intent: {found}"
    assert found_later is not None and found_later.status is Status.ATTEMPTING, \
        f"the restore ({folder} folder) never read the tail after the stored offsets: {found_later}"
