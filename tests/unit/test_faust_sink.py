"""The guards that keep faust from skipping a record it could not write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runonce.kafka import topics
from runonce.kafka.record import Out
from runonce.streams.faust_runtime.sink import DeadLetterUnwritable, FaustSink, SendFailureGuard


class FakeTopic:
    """faust's Topic.send: returns a delivery future; fails the first ``failures`` times."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent: list[bytes] = []
        self.buffered: list[bytes] = []

    async def send(self, *, key: Any, value: bytes, partition: Any, headers: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.failures:
            self.failures -= 1
            fut.set_exception(RuntimeError("TopicAuthorizationFailedError"))
        else:
            self.sent.append(value)
            fut.set_result("metadata")
        return fut

    def send_soon(self, *, key: Any, value: bytes, partition: Any, headers: Any) -> None:
        self.buffered.append(value)


class FakeApp:
    def __init__(self, failures: int) -> None:
        self.topics: dict[str, FakeTopic] = {}
        self.failures = failures

    def topic(self, name: str, **_: Any) -> FakeTopic:
        return self.topics.setdefault(name, FakeTopic(self.failures))


def _sink(failures: int) -> tuple[FaustSink, FakeApp]:
    app = FakeApp(failures)
    return FaustSink(app, [topics.DLQ, topics.APPROVED], 6, backoff_s=0.0), app  # type: ignore[arg-type]


def test_a_dead_letter_is_retried_until_written() -> None:
    sink, app = _sink(failures=2)
    asyncio.run(sink.send(Out(topics.DLQ, b"k", b"poison")))
    assert app.topics[topics.DLQ].sent == [b"poison"]


def test_an_unwritable_dlq_stops_after_bounded_retries() -> None:
    sink, app = _sink(failures=10)
    with pytest.raises(DeadLetterUnwritable, match="refused a dead letter 3 times"):
        asyncio.run(sink.send(Out(topics.DLQ, b"k", b"poison")))
    assert app.topics[topics.DLQ].failures == 7  # exactly three attempts, then stop


def test_decisions_are_buffered_not_awaited() -> None:
    sink, app = _sink(failures=0)
    asyncio.run(sink.send(Out(topics.APPROVED, b"k", b"decision")))
    assert app.topics[topics.APPROVED].buffered == [b"decision"] and app.topics[topics.APPROVED].sent == []


def test_a_failed_buffered_send_stops_the_worker_but_a_dead_letter_failure_is_left_to_the_sink() -> None:
    fatal: list[str] = []
    guard = SendFailureGuard(on_fatal=fatal.append)
    state = guard.on_send_initiated(None, topics.APPROVED, None, 1, 1)
    guard.on_send_error(None, RuntimeError("RecordTooLarge"), state)
    assert fatal and topics.APPROVED in fatal[0] and "RecordTooLarge" in fatal[0]
    guard.on_send_error(None, RuntimeError("x"), guard.on_send_initiated(None, topics.DLQ, None, 1, 1))
    assert len(fatal) == 1
