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
