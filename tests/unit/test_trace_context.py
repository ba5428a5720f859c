"""The caller's trace context carried on runonce's records (runonce/wire/trace.py): which
contexts travel, and that every record the stream job writes for a request carries its own.

Catches: ``Pipeline.process`` not tracing its outputs (every carried case fails); a stage-2
hand-off that drops the headers (the scoped case); a malformed ``traceparent`` copied on, or
turned into a dead letter; a ``tracestate`` carried without a valid ``traceparent``."""

from __future__ import annotations

import pytest

from runonce.kafka import topics
from runonce.kafka.record import Out, find_header
from runonce.wire.trace import TRACEPARENT, TRACESTATE, carried, trace_headers, valid_traceparent
from tests.support.memory import MemoryPipeline

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("value, ok", [
    (PARENT, True),
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", True),
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),  # an all-zero trace id
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),  # an all-zero parent id
    ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", False),  # upper case
    ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),  # a version this code does not know
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", False),
    ("garbage", False), ("", False), (None, False),
])
def test_only_a_well_formed_traceparent_is_valid(value: str | None, ok: bool) -> None:
    assert valid_traceparent(value) is ok


def test_tracestate_travels_only_with_a_valid_traceparent_and_only_when_sane() -> None:
    assert trace_headers({TRACEPARENT: PARENT, TRACESTATE: "vendor=abc"}) == (
        (TRACEPARENT, PARENT.encode()), (TRACESTATE, b"vendor=abc"))
    assert trace_headers({TRACEPARENT: "garbage", TRACESTATE: "vendor=abc"}) == ()
    assert trace_headers({TRACEPARENT: PARENT, TRACESTATE: "x" * 600}) == ((TRACEPARENT, PARENT.encode()),)
    assert trace_headers({}) == ()
    assert carried([("runonce.policies", b"d"), (TRACEPARENT, PARENT.encode())]) == ((TRACEPARENT, PARENT.encode()),)


def test_a_record_with_its_own_context_keeps_it() -> None:
    own = Out("t", None, b"v", headers=((TRACEPARENT, OTHER.encode()),))
    assert own.traced_as(((TRACEPARENT, PARENT.encode()),)) is own


def _parents(m: MemoryPipeline, topic: str) -> list[bytes | None]:
    return [find_header(headers, TRACEPARENT) for _, _, headers in m.outputs[topic]]


def test_every_record_written_for_a_request_carries_its_trace_context() -> None:
    m = MemoryPipeline()
    traced = ((TRACEPARENT, PARENT.encode()), (TRACESTATE, b"vendor=abc"))
    email = {"to": "a@example.com", "subject": "s", "body": "b"}
    m.feed("send_email", email, timestamp_ms=1_000, key="k-1", headers=traced)                       # approved
    m.feed("send_email", email, timestamp_ms=2_000, key="k-1", headers=((TRACEPARENT, OTHER.encode()),))  # a repeat
    m.feed("charge_payment", {"card": "tok", "amount_cents": 2_000_000}, timestamp_ms=3_000, key="big",
           headers=traced)                                                                             # held
    m.feed("restart_service", {"service": "api", "reason": "crash"}, timestamp_ms=4_000, key="r-1",
           headers=traced)                                                                             # via stage 2
    m.feed_raw(b"not an Avro record", key=b"bad", timestamp_ms=5_000, headers=traced)                 # dead letter
    assert _parents(m, topics.APPROVED) == [PARENT.encode(), PARENT.encode()]
    assert _parents(m, topics.DROPPED) == [OTHER.encode()]  # the repeat's own trace, not the first's
    assert _parents(m, topics.HELD) == [PARENT.encode()]
    assert _parents(m, topics.DLQ) == [PARENT.encode()]
    assert all(find_header(h, TRACESTATE) == b"vendor=abc" for _, _, h in m.outputs[topics.HELD])


def test_a_malformed_context_is_left_behind_and_the_request_decided_as_any_other() -> None:
    m = MemoryPipeline()
    m.feed("send_email", {"to": "a@example.com", "subject": "s", "body": "b"}, timestamp_ms=1_000, key="k",
           headers=((TRACEPARENT, b"\xff not a context"), (TRACESTATE, b"vendor=abc")))
    assert len(m.outputs[topics.APPROVED]) == 1 and not m.outputs[topics.DLQ]
    assert _parents(m, topics.APPROVED) == [None]
    assert find_header(m.outputs[topics.APPROVED][0][2], TRACESTATE) is None
