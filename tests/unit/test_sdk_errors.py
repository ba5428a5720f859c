from __future__ import annotations

import socket

import pytest

from runonce.errors import BrokerUnavailable, InvalidAction
from runonce.sdk.client import ActionClient
from runonce.sdk.submit import build_request


def test_an_unreachable_broker_is_a_clear_error() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BrokerUnavailable, match=f"cannot reach Kafka at 127.0.0.1:{port}"):
        ActionClient(f"127.0.0.1:{port}", connect_timeout_s=1)


def test_params_that_cannot_be_serialized_are_named() -> None:
    with pytest.raises(InvalidAction, match="params for send_email cannot be serialized as JSON"):
        build_request("send_email", {"to": object()}, agent_id="a")
    with pytest.raises(InvalidAction, match="cannot be serialized"):
        build_request("send_email", {"amount": float("nan")}, agent_id="a")


def test_a_delivery_whose_offset_librdkafka_does_not_know_is_delivered_without_a_position() -> None:
    """After a leader's loss, an idempotent producer's retry of a batch the broker had already
    written is answered DUPLICATE_SEQUENCE_NUMBER: delivered, with no offset (confluent-kafka
    gives None). The agent goes on; the action is found by its id. Catches the delivery report
    that took the offset for an int (the 3-node failover test's agent died of a TypeError in
    one run of ten)."""
    from runonce.sdk.submit import Submitter
    from tests.support.kafka_fakes import Msg

    with socket.socket() as s:  # nothing is sent: the reports are handed over as librdkafka would
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    submitter = Submitter(f"127.0.0.1:{port}")
    submitter._on_delivery("known", None, Msg("actions.requested", 2, 41))  # noqa: SLF001 (librdkafka calls it)
    submitter._on_delivery("retried", None, Msg("actions.requested", 3, None))  # noqa: SLF001
    assert submitter.position("known") == (2, 41)
    assert submitter.position("retried") is None


def test_a_delivery_error_answers_its_own_request_and_never_the_next_callers(
        caplog: pytest.LogCaptureFixture) -> None:
    """A gateway's callers share one producer. A request that timed out (its caller answered
    503) stays queued; when a cut outlasts ``message.timeout.ms`` librdkafka reports its error
    later, during another caller's wait. Catches that error raised to the next, healthy caller
    (issue 75: the shared error list raised at the next flush)."""
    import threading

    from confluent_kafka import KafkaError

    from runonce.errors import BrokerUnavailable
    from runonce.sdk.submit import Submitter
    from tests.support.kafka_fakes import Msg

    with socket.socket() as s:  # no broker: the first request is never delivered
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    submitter = Submitter(f"127.0.0.1:{port}", timeout_s=0.5)
    first = build_request("charge_payment", {"amount_cents": 1}, agent_id="a", action_id="first")
    with pytest.raises(BrokerUnavailable, match="action first undelivered after"):
        submitter.delivered(first)
    # the cut outlasts the message timeout: librdkafka reports the first request's error now
    submitter._on_delivery("first", KafkaError(KafkaError._MSG_TIMED_OUT), None)  # noqa: SLF001

    submitter.timeout_s = 5.0
    second = build_request("charge_payment", {"amount_cents": 2}, agent_id="b", action_id="second")
    raised: list[BaseException] = []

    def call() -> None:
        try:
            submitter.delivered(second)
        except BaseException as exc:  # noqa: BLE001 (the test's verdict)
            raised.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    while caller.is_alive() and "second" not in submitter._awaited:  # noqa: SLF001
        pass
    submitter._on_delivery("second", None, Msg("actions.requested", 1, 7))  # noqa: SLF001 (delivered)
    caller.join(5)
    assert not caller.is_alive() and raised == [], raised
    assert submitter.position("second") == (1, 7)
    assert "record first, whose caller was told it was undelivered, was not delivered either" in caplog.text
