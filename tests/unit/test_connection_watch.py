"""clients.ConnectionWatch: a handshake that keeps failing stops the client; a broker that is
down (connections refused, never a failed handshake) never does, nor one failure now and then.

Catches: the threshold gone (the first failure raises: a broker dying mid-handshake would stop
every client), the window gone (failures hours apart add up), a transport error counted as a
handshake failure (a broker that is down would stop clients that should wait for it)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from runonce.errors import AccessDenied, HandshakeFailed
from runonce.kafka.clients import ConnectionWatch
from tests.support.clock import Clock

TLS_TO_PLAINTEXT = KafkaError(KafkaError._TRANSPORT, "ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: "
                              "Disconnected: SSL connection closed by peer: connecting to a PLAINTEXT broker "
                              "listener? (after 2ms in state SSL_HANDSHAKE)")
SASL_REFUSED = KafkaError(KafkaError._AUTHENTICATION, "sasl_plaintext://127.0.0.1:9092/bootstrap: SASL PLAIN "
                          "mechanism handshake failed (after 0ms in state AUTH_HANDSHAKE)")
DOWN = KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: "
                  "Connection refused (after 0ms in state CONNECT)")


@pytest.mark.parametrize("err, words", [(TLS_TO_PLAINTEXT, "TLS handshake"), (SASL_REFUSED, "SASL handshake")])
def test_the_third_failed_handshake_in_a_row_stops_the_client_naming_it(err: KafkaError, words: str) -> None:
    clock = Clock(1000.0)
    watch = ConnectionWatch(clock)
    for _ in range(2):
        watch(err)
        clock.now += 0.5
    with pytest.raises(HandshakeFailed, match=words):
        watch(err)


def test_a_broker_that_is_down_never_stops_a_client() -> None:
    watch = ConnectionWatch(Clock(1000.0))
    for _ in range(100):
        watch(DOWN)
    watch(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))


def test_failures_further_apart_than_the_window_do_not_add_up() -> None:
    clock = Clock(1000.0)
    watch = ConnectionWatch(clock)
    for _ in range(10):  # one every 16 s: never three within 30 s
        watch(TLS_TO_PLAINTEXT)
        clock.now += 16.0


def test_refused_credentials_are_access_denied_not_a_handshake_that_does_not_fit() -> None:
    wrong = KafkaError(KafkaError._AUTHENTICATION, "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: "
                       "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                       "SCRAM-SHA-512 (after 3ms in state AUTH_REQ)")
    watch = ConnectionWatch(Clock(1000.0))
    watch(wrong)
    watch(wrong)
    with pytest.raises(AccessDenied, match="refused this principal's credentials"):
        watch(wrong)
