"""The foundation's acceptance test: a transactional producer commits one action and
aborts another; a read_committed consumer sees exactly the committed one, decoded equal, and
``first_committed_offset`` (what faust's recovery trusts over its own consumer's position)
finds no committed record after it until one is written."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition

from runonce.kafka import clients
from runonce.kafka.reader import first_committed_offset
from runonce.kafka.topics import admin_client
from runonce.sdk.submit import build_request
from runonce.settings import Settings
from runonce.wire.codec import Codec

pytestmark = pytest.mark.broker


def test_committed_is_read_and_aborted_is_not(broker: Settings) -> None:
    from confluent_kafka.admin import NewTopic

    bootstrap = broker.bootstrap_servers()
    topic = f"test.txn.{uuid.uuid4().hex[:8]}"
    admin = admin_client(bootstrap)  # keep the handle alive until the future resolves
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    codec = Codec()
    committed = build_request("send_email", {"to": "a@b.c"}, agent_id="t", idempotency_key="commit-me")
    aborted = build_request("send_email", {"to": "a@b.c"}, agent_id="t", idempotency_key="abort-me")

    producer = Producer(clients.producer_config(bootstrap, **{"transactional.id": f"test-{uuid.uuid4()}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"commit-me", value=codec.encode("ActionRequested", committed))
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"abort-me", value=codec.encode("ActionRequested", aborted))
    producer.flush(30)
    producer.abort_transaction(30)

    consumer = clients.reader(bootstrap, group=f"test-{uuid.uuid4().hex[:6]}")
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "no EOF within 10 s"
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF
            break
        seen.append(codec.decode(msg.value(), expect="ActionRequested")[1])
    consumer.close()
    assert seen == [committed]

    # offsets: 0 committed, 1 its commit marker, 2 aborted, 3 its abort marker
    assert first_committed_offset(bootstrap, topic, 0, 0) == 0
    assert first_committed_offset(bootstrap, topic, 0, 1) is None  # markers and an aborted record only
    producer.begin_transaction()
    producer.produce(topic, key=b"later", value=b"x")
    producer.commit_transaction(30)
    assert first_committed_offset(bootstrap, topic, 0, 1) == 4
