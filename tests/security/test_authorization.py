"""What an agent's principal cannot reach on the secured broker, each refusal with the
broker's matching authorization error, and the positive control that it can do its job; each
test twice: the principal over SASL_SSL with SCRAM-SHA-512, and the principal a client
certificate names over mTLS. The ACLs are the same for both."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from runonce.errors import AccessDenied
from runonce.kafka import acls, clients, topics
from runonce.kafka.access import KafkaAccess
from runonce.kafka.client_config import ClientConfig
from runonce.kafka.reader import read_all
from runonce.sdk.submit import Submitter
from tests.security.conftest import Connect, SecuredCluster

pytestmark = pytest.mark.broker


def _produce(access: KafkaAccess, topic: str) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    p = clients.producer(access)
    try:
        # The refusal comes in the delivery report, or from produce() itself when the client has
        # already learned it (its metadata named the topic unauthorized first: seen once in CI).
        p.produce(topic, key=b"k", value=b"v", on_delivery=lambda err, _msg: outcome.append(err))
        p.flush(15)
    except KafkaException as exc:  # a principal without any WRITE cannot even get a producer id
        return exc.args[0]
    assert outcome, "no delivery report within 15 s"
    return outcome[0]


def test_an_agent_can_write_requested_and_read_nothing(cluster: SecuredCluster, connect: Connect) -> None:
    agent = connect("agent")
    with Submitter(agent, agent_id="sec-agent") as sub:
        sub.submit("send_email", {"to": "a@example.com", "subject": "s"}, idempotency_key="sec-1")
    with pytest.raises(AccessDenied, match="(GROUP|TOPIC)_AUTHORIZATION_FAILED"):
        list(read_all(agent, topics.REQUESTED, timeout_s=10))


def test_an_agent_writing_approved_is_refused(cluster: SecuredCluster, connect: Connect) -> None:
    err = _produce(connect("agent"), topics.APPROVED)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ... and so is every other topic but requested
    for topic in (topics.DROPPED, topics.RESULTS, topics.DLQ, topics.REKEY, topics.CHANGELOG_KEYS):
        err = _produce(connect("agent"), topic)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, topic


def test_an_agent_cannot_approve_its_own_action_and_an_approver_can_do_only_that(cluster: SecuredCluster,
                                                                                connect: Connect) -> None:
    for agent in ("agent", "agent-reader"):  # no agent principal writes a verdict
        err = _produce(connect(agent), topics.APPROVALS)
        assert err is not None and err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                  KafkaError.CLUSTER_AUTHORIZATION_FAILED), (agent, err)
    # an agent's cancel of its own held action is its to write: a cancel can only deny
    assert _produce(connect("agent"), topics.CANCELS) is None
    approver = connect("approver")
    assert _produce(approver, topics.APPROVALS) is None  # the positive control
    list(read_all(approver, topics.HELD, timeout_s=20))  # reads what is held: no exception
    for topic in (topics.APPROVED, topics.REQUESTED, topics.HELD):
        err = _produce(approver, topic)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, topic


def test_an_agent_joining_the_stream_jobs_group_is_refused(cluster: SecuredCluster, connect: Connect) -> None:
    consumer = Consumer({**clients.base_config(connect("agent")), "group.id": "runonce",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topics.REQUESTED])
    error = None
    deadline = time.monotonic() + 20
    try:
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            assert msg is None or msg.error(), "the agent read a record through the stream job's group"
            error = msg.error() if msg is not None else None
    finally:
        consumer.close()
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error


def test_an_agent_using_an_executors_transactional_id_is_refused(cluster: SecuredCluster, connect: Connect) -> None:
    producer = Producer(clients.producer_config(connect("agent"),
                                                **{"transactional.id": "runonce-exec-payments-0"}))
    with pytest.raises(KafkaException) as caught:
        producer.init_transactions(20)
    assert caught.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_an_agent_creating_acls_is_refused(cluster: SecuredCluster, connect: Connect) -> None:
    widen = [acls.Grant("agent", "topic", topics.APPROVED, "literal", ("WRITE",))]
    with pytest.raises(AccessDenied, match="CLUSTER_AUTHORIZATION_FAILED"):
        acls.apply(connect("agent"), widen)
    assert _produce(connect("agent"), topics.APPROVED) is not None  # still refused


def test_an_unauthenticated_client_gets_nothing(cluster: SecuredCluster) -> None:
    bootstrap = cluster.admin.bootstrap_servers()
    with pytest.raises(KafkaException) as caught:
        AdminClient(clients.base_config(bootstrap)).list_topics(timeout=2)  # no SASL at all
    assert caught.value.args[0].code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT)
    errors: list[KafkaError] = []
    wrong = AdminClient({**clients.base_config(cluster.access("agent", password="not-the-password")),
                         "error_cb": errors.append})
    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=2)
    wrong.poll(1)  # serves the error callback
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def _refusal(access: KafkaAccess) -> str:
    """What a client is told when the broker will not have it (its error callback's text)."""
    errors: list[KafkaError] = []
    client = AdminClient({**clients.base_config(access), "error_cb": errors.append})
    with pytest.raises(KafkaException):
        client.list_topics(timeout=3)
    client.poll(1)  # serves the error callback
    assert errors, "refused without a word"
    return " | ".join(sorted({re.sub(r"\(after \d+ms", "(after N ms", e.str()) for e in errors}))


def test_a_client_without_the_ca_or_with_a_wrong_password_is_refused_clearly(cluster: SecuredCluster) -> None:
    """Without the broker's CA the TLS handshake fails, and says the certificate is not trusted.
    A wrong SCRAM password reads the same whichever principal it claims, one that exists or
    not: the answer tells an attacker nothing about who exists."""
    no_ca = KafkaAccess(cluster.admin.bootstrap_servers(), "agent", cluster.users["agent"], None,
                        ClientConfig((("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512"))))
    assert "certificate verify failed" in _refusal(no_ca)
    # only the authentication errors: librdkafka also reports "N/1 brokers are down", N by timing
    said = {name: " | ".join(m for m in _refusal(cluster.access(name, password="not-the-password")).split(" | ")
                             if "SASL authentication error" in m)
            for name in ("agent", "approver", "nobody-at-all")}
    assert len(set(said.values())) == 1 and "Authentication failed" in said["agent"], said


def test_analysts_read_dropped_and_nothing_else(cluster: SecuredCluster, connect: Connect) -> None:
    analyst = connect("analyst")
    list(read_all(analyst, topics.DROPPED, timeout_s=20))  # allowed: no exception
    for topic in (topics.APPROVED, topics.REQUESTED, topics.RESULTS):
        with pytest.raises(AccessDenied, match="TOPIC_AUTHORIZATION_FAILED"):
            list(read_all(analyst, topic, timeout_s=10))
    err = _produce(analyst, topics.DROPPED)
    assert err is not None and err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                              KafkaError.CLUSTER_AUTHORIZATION_FAILED), err


def test_apply_prune_removes_a_grant_that_is_not_in_the_file(cluster: SecuredCluster) -> None:
    admin = cluster.admin.kafka_access()
    scratch = "sec.scratch"  # not one of runonce's topics: the oracle never reads it
    admin_client = AdminClient(clients.base_config(admin))  # kept alive until the future resolves
    admin_client.create_topics([NewTopic(scratch, 1, 1)])[scratch].result()
    grants = acls.load()
    stray = acls.Grant("agent", "topic", scratch, "literal", ("WRITE",))
    acls.apply(admin, [stray])
    deadline = time.monotonic() + 20
    while (err := _produce(cluster.access("agent"), scratch)) is not None and time.monotonic() < deadline:
        time.sleep(0.5)  # the new grant reaches the authorizer a moment later
    assert err is None, err  # the stray grant works ...
    count, deleted = acls.apply(admin, grants, prune=True)
    assert deleted == 1 and count == sum(len(g.operations) for g in grants)
    held = {(b.principal, b.name, b.operation.name) for b in acls.current(admin, acls.principals(grants))}
    assert held == {(f"User:{g.principal}", g.name, op) for g in grants for op in g.operations}
    deadline = time.monotonic() + 20
    while (err := _produce(cluster.access("agent"), scratch)) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # ... and is gone again


def test_an_agent_awaiting_as_itself_is_refused_and_as_agent_reader_may_read(cluster: SecuredCluster,
                                                                             connect: Connect) -> None:
    from runonce.sdk.client import ActionClient

    with pytest.raises(AccessDenied, match="(GROUP|TOPIC)_AUTHORIZATION_FAILED"):
        ActionClient(connect("agent"), agent_id="sec-agent")
    with ActionClient(connect("agent"), agent_id="sec-agent", outcomes=connect("agent-reader")):
        pass
    grants = [g for g in acls.load() if g.principal == "agent-reader"]
    assert grants and not any("WRITE" in g.operations for g in grants)  # it writes nowhere
