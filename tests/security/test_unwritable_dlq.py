"""If actions.dlq cannot be written, the stream job stops instead of skipping the bad record
(the transactional runtime: its transaction is refused and nothing of it commits; faust:
after bounded retries); once the DLQ is writable again, the record is dead-lettered."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from runonce.audit.oracle import verify
from runonce.kafka import acls, clients, topics
from runonce.kafka.reader import read_all
from runonce.streams.faust_runtime.stop import EXIT_STOPPED_BEFORE_ACK
from runonce.wire.headers import H_ORIGIN_OFFSET, H_ORIGIN_PARTITION
from tests.security.conftest import SecuredCluster
from tests.support.worker import RUNTIMES, WorkerProcess

pytestmark = pytest.mark.broker

DLQ_WRITE = acls.Grant("stream", "topic", topics.DLQ, "literal", ("WRITE",))


def _dead_letters_for(cluster: SecuredCluster, position: tuple[int, int]) -> list[object]:
    return [r for r in read_all(cluster.admin.kafka_access(), topics.DLQ)
            if (r.header(H_ORIGIN_PARTITION), r.header(H_ORIGIN_OFFSET))
            == (str(position[0]).encode(), str(position[1]).encode())]


#: runtime -> (exit status, what its log must say)
STOPS = {
    "transactional": (2, ("transaction refused", "TOPIC_AUTHORIZATION_FAILED")),
    "faust": (EXIT_STOPPED_BEFORE_ACK, ("refused a dead letter 3 times", "TopicAuthorizationFailed")),
}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_unwritable_dlq_stops_the_worker_and_the_record_waits(cluster: SecuredCluster, tmp_path,
                                                                 runtime: str) -> None:
    admin = cluster.admin.kafka_access()
    assert acls.revoke(admin, [DLQ_WRITE]) == 1
    try:
        _stop_then_recover(cluster, tmp_path, runtime)
    finally:
        acls.apply(admin, [DLQ_WRITE])


def _stop_then_recover(cluster: SecuredCluster, tmp_path, runtime: str) -> None:
    admin = cluster.admin.kafka_access()
    landed: list[tuple[int, int]] = []
    producer = Producer(clients.producer_config(cluster.access("agent")))
    producer.produce(topics.REQUESTED, key=b"poison", value=b"not an action",
                     on_delivery=lambda err, msg: landed.append((msg.partition(), msg.offset())))
    assert producer.flush(15) == 0 and landed

    worker = WorkerProcess(cluster.admin, f"dlq-worker-{runtime}", tmp_path, cluster.env("stream"), runtime)
    worker.start()
    try:
        code = worker.wait_exit(120)
    except Exception:
        worker.kill()
        raise AssertionError(f"the worker kept running with an unwritable DLQ:\n{worker.log_tail()}") from None
    log = worker.log_path.read_text(errors="replace")
    status, says = STOPS[runtime]
    assert code == status, log[-3000:]
    assert all(s in log for s in says), log[-3000:]
    assert _dead_letters_for(cluster, landed[0]) == []

    acls.apply(admin, [DLQ_WRITE])  # the operator fixes the grant and restarts the worker
    again = WorkerProcess(cluster.admin, f"dlq-worker-{runtime}", tmp_path, cluster.env("stream"), runtime)
    again.start()
    try:
        deadline = time.monotonic() + 120
        found: list[object] = []
        while not found and time.monotonic() < deadline:
            assert again.alive(), again.log_tail()
            time.sleep(1)
            found = _dead_letters_for(cluster, landed[0])
    finally:
        again.stop()
    assert found, "the record skipped while the DLQ was unwritable was never dead-lettered"
    if runtime == "transactional":  # exactly-once; faust may write a dead letter again after a redelivery
        time.sleep(2)
        assert len(_dead_letters_for(cluster, landed[0])) == 1
    assert verify(admin).ok
