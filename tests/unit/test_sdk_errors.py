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
