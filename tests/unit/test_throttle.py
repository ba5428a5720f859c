"""A vendor's pace (connectors/executor/throttle.py), on a fake clock: our rate, and the vendor's own
"slow down" (429 Retry-After) held for every call to it."""

from __future__ import annotations

import pytest

from runonce.connectors.executor.throttle import DEFAULT_PAUSE_S, Throttle
from runonce.connectors.toolkit.transport import retry_after_seconds
from runonce.errors import ConfigError
from runonce.rate import Rate
from runonce.settings import Settings
from tests.support.clock import Clock


def throttle(rate: float | None, burst: int = 1) -> tuple[Throttle, Clock]:
    clock = Clock(100.0, sleep_zero_ok=False)
    return Throttle("payments", rate, burst, clock=clock, sleep=clock.sleep), clock


def test_calls_go_at_the_rate_after_the_burst() -> None:
    t, clock = throttle(rate=50.0, burst=5)
    sent_at = []
    for _ in range(105):
        t.acquire()
        sent_at.append(clock.now)
    assert sent_at[4] == 100.0  # the burst goes at once
    assert sent_at[-1] - 100.0 == pytest.approx(100 / 50)  # the other 100 at 50/s
    assert all(b - a <= 1 / 50 + 1e-9 for a, b in zip(sent_at, sent_at[1:]))


def test_no_rate_of_ours_sends_at_once() -> None:
    t, clock = throttle(rate=None)
    for _ in range(1000):
        t.acquire()
    assert clock.now == 100.0


@pytest.mark.parametrize("rate", [None, 20.0])
def test_a_refusal_pauses_every_call_then_resumes_from_an_empty_bucket(rate: float | None) -> None:
    t, clock = throttle(rate=rate, burst=10)
    t.acquire()
    t.refused(retry_after_s=2.0)  # one call was refused; the next is any other call
    t.acquire()
    first = clock.now - 100.0
    assert first >= 2.0, "the other calls did not wait for the vendor's pause"
    if rate is not None:
        assert first == pytest.approx(2.0 + 1 / rate)  # no burst saved up during the pause
        t.acquire()
        assert clock.now - 100.0 == pytest.approx(2.0 + 2 / rate)
    assert t.refusals == 1


def test_a_refusal_without_retry_after_pauses_the_default() -> None:
    t, clock = throttle(rate=None)
    t.refused(retry_after_s=None)
    t.acquire()
    assert clock.now - 100.0 == pytest.approx(DEFAULT_PAUSE_S)
    assert t.waited_s == pytest.approx(DEFAULT_PAUSE_S) and t.waiting == 0


@pytest.mark.parametrize("value, seconds", [
    ("3", 3.0), ("0.5", 0.5), ("-4", 0.0), ("", None), (None, None), ("soon", None),
    ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
])
def test_retry_after_is_seconds_or_an_http_date(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, now_s=1445412480.0) == seconds


def test_vendor_limits_are_read_from_the_environment() -> None:
    s = Settings.from_env({"RUNONCE_VENDOR_LIMITS": "payments:per_s=50,in_flight=32; smtp:per_s=2.5,burst=5"})
    assert s.vendor_rate("payments") == Rate(50.0, 1, 32)
    assert s.vendor_rate("smtp") == Rate(2.5, 5, None)
    assert s.vendor_rate("slack") is None


@pytest.mark.parametrize("text, message", [
    ("payments", "must be VENDOR:FIELD=VALUE"),
    ("payments:speed=5", "payments.speed: unknown field; the fields are burst, in_flight, per_s"),
    ("payments:rate=5", r"payments.rate: unknown field; .*\(per_s is the rate's name\)"),
    ("payments:per_s=fast", "payments.per_s: must be a positive number"),
    ("payments:in_flight=2.5", "payments.in_flight: must be a positive integer"),
    ("payments:per_s=0", "payments.per_s: must be a positive number"),
    ("smtp:per_s=1;smtp:per_s=2", "smtp is named twice"),
])
def test_a_wrong_vendor_limit_names_vendor_and_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env({"RUNONCE_VENDOR_LIMITS": text})
