"""A local three-node cluster (runonce/devbroker/cluster.py): runonce's topics get three copies
with two in sync, and a write acknowledged by all in-sync replicas survives the loss of the
node that led its partition. (Started beside the session's broker, in a home of its own,
and stopped whatever happens.)"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource

from runonce.devbroker.broker import BrokerState
from runonce.devbroker.cluster import Cluster
from runonce.kafka import topics
from runonce.settings import Settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(base_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(base_settings.with_(home=tmp_path_factory.mktemp("cluster-home")), size=3)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _config(admin: Any, topic: str, name: str) -> str:
    """A topic's config as a broker sees it; a new topic reaches each broker's view a moment later."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + 30
    while True:
        try:
            return str(admin.describe_configs([resource])[resource].result()[name].value)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _topics(admin: Any, names: list[str]) -> Any:
    """Metadata that lists every name with a leader: a new topic reaches each node's view a moment
    after the node that created it, and a client may ask any of them."""
    deadline = time.monotonic() + 30
    while True:
        meta = admin.list_topics(timeout=10)
        if all(n in meta.topics and meta.topics[n].partitions and
               all(p.leader >= 0 for p in meta.topics[n].partitions.values()) for n in names):
            return meta
        assert time.monotonic() < deadline, f"topics never showed up everywhere: {names}"
        time.sleep(0.3)


def test_topics_create_on_three_brokers_makes_three_copies_two_in_sync(cluster: Cluster) -> None:
    heard: list[str] = []
    outcome = topics.create_topics(cluster.bootstrap, 6, say=heard.append)
    assert set(outcome.values()) == {"created"} and not heard, (outcome, heard)
    admin = topics.admin_client(cluster.bootstrap)
    meta = _topics(admin, [spec.name for spec in topics.TOPICS])
    assert len(meta.brokers) == 3
    for spec in topics.TOPICS:
        assert {len(p.replicas) for p in meta.topics[spec.name].partitions.values()} == {3}, spec.name
        assert _config(admin, spec.name, "min.insync.replicas") == "2", spec.name
    assert topics.create_topics(cluster.bootstrap, 6)[topics.REQUESTED] == "exists"


def test_an_acknowledged_write_survives_its_leaders_loss(cluster: Cluster) -> None:
    topics.create_topics(cluster.bootstrap, 6)
    admin = topics.admin_client(cluster.bootstrap)
    leader = _topics(admin, [topics.DROPPED]).topics[topics.DROPPED].partitions[0].leader
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    acked: list[int] = []
    for i in range(100):
        producer.produce(topics.DROPPED, value=f"r{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: acked.append(msg.offset()) if err is None else None)
    assert producer.flush(30) == 0 and len(acked) == 100
    cluster.nodes[leader].kill()
    assert cluster.status()[leader].state is BrokerState.CRASHED
    # Two of three in sync remain: the partition gets a new leader and still takes writes.
    deadline = time.monotonic() + 60
    while _topics(admin, [topics.DROPPED]).topics[topics.DROPPED].partitions[0].leader == leader:
        assert time.monotonic() < deadline, "no new leader was elected"
        time.sleep(0.5)
    producer.produce(topics.DROPPED, value=b"after", partition=0)
    assert producer.flush(30) == 0
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "cluster-test",
                       "enable.auto.commit": False})
    reader.assign([TopicPartition(topics.DROPPED, 0, min(acked))])
    seen: list[bytes] = []
    while len(seen) < 101 and time.monotonic() < deadline:
        seen += [m.value() for m in reader.consume(200, 1.0) if not m.error()]
    reader.close()
    assert seen[:100] == [f"r{i}".encode() for i in range(100)] and seen[100] == b"after"
    cluster.restart(leader)
    assert all(s.state is BrokerState.RUNNING for s in cluster.status().values())
