"""topics.asked_again: an admin request is sent again only when the client dropped the
connection it went out on (the multi-broker bootstrap race), and never past its attempts."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from runonce.kafka import topics


def _failing(codes: list[int], answer: str = "done"):  # type: ignore[no-untyped-def]
    calls: list[int] = []

    def request() -> str:
        calls.append(1)
        if len(calls) <= len(codes):
            raise KafkaException(KafkaError(codes[len(calls) - 1]))
        return answer

    return request, calls


def test_a_dropped_connection_is_asked_again_until_it_answers() -> None:
    request, calls = _failing([KafkaError._DESTROY_BROKER, KafkaError._DESTROY_BROKER])
    assert topics.asked_again(request) == "done"
    assert len(calls) == 3


def test_it_gives_up_after_its_attempts() -> None:
    request, calls = _failing([KafkaError._DESTROY_BROKER] * 5)
    with pytest.raises(KafkaException) as err:
        topics.asked_again(request, attempts=3)
    assert err.value.args[0].code() == KafkaError._DESTROY_BROKER
    assert len(calls) == 3


@pytest.mark.parametrize("code", [KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.INVALID_CONFIG,
                                  KafkaError._TIMED_OUT, KafkaError.TOPIC_ALREADY_EXISTS])
def test_any_other_error_is_not_asked_again(code: int) -> None:
    request, calls = _failing([code])
    with pytest.raises(KafkaException) as err:
        topics.asked_again(request)
    assert err.value.args[0].code() == code
    assert len(calls) == 1
