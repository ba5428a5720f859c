"""runonce's spans (runonce/telemetry) with OpenTelemetry's own SDK and its in-memory
exporter: which spans, whose children, with what, and never a param's value.

Catches: a decision span that is not the child of its request's context (another trace);
outputs that carry the request's context instead of the decision span's (the executor's span
would skip the decision); a repeat's span without the action it repeats; an execution span
without its outcome or parent; a param's value in any span; tracing turned on by nothing; a
repeat's span without its link to the first's trace; a release that starts a new trace (the
hold's context not kept), or without the wait for a person as a span of its own."""

from __future__ import annotations

import io
import pickle
from typing import Iterator

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from runonce.core.policy import PolicyBook
from runonce.kafka import topics
from runonce.kafka.record import find_header
from runonce.streams.ports import Inbound
from runonce.telemetry.exporter import serve
from runonce.telemetry.handoff import FRAME, HandedOffSpans, SpanFacts
from runonce.telemetry.otel import OtelSpans
from runonce.telemetry.setup import asked
from runonce.telemetry.spans import NO_SPANS, DecisionSpans
from runonce.wire.trace import H_FIRST_TRACEPARENT, TRACEPARENT
from tests.support.executor_fakes import FakeCheckpoint, FakeConsumer, Mailer, Msg, approved, executor, tp
from tests.support.memory import MemoryPipeline

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
SECRET = "planted-secret-body-7731"
RETRY_PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
HELD = PolicyBook.from_toml("""
[tools.send_email]
key = "require"
approval = { always = true, expires = "1h" }
""")


@pytest.fixture
def exported() -> Iterator[tuple[OtelSpans, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield OtelSpans(provider), exporter
    provider.shutdown()


class _Sampled:
    def __init__(self, sampled: bool) -> None:
        self.value = sampled

    def sampled(self, trace_id: int, name: str) -> bool:
        return self.value


class _Exported:
    """A handed-off span's way to the exporter process, in one: its facts through a frame, as
    the exporter builds the span (telemetry/exporter.py), into the in-memory exporter."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def put(self, facts: SpanFacts) -> None:
        frames = io.BytesIO()
        payload = pickle.dumps([facts])
        frames.write(FRAME.pack(len(payload)) + payload)
        frames.seek(0)
        serve(frames, self.exporter, Resource.create({"service.name": "runonce-worker"}))


@pytest.fixture(params=["in-process", "handed-off"])
def decision_exported(request: pytest.FixtureRequest,
                      exported: tuple[OtelSpans, InMemorySpanExporter]) -> tuple[DecisionSpans, InMemorySpanExporter]:
    """The stream job's spans both ways (OtelSpans, as an application's provider makes them;
    HandedOffSpans, as runonce's worker makes them): the same spans, the same outputs."""
    if request.param == "in-process":
        return exported
    exporter = InMemorySpanExporter()
    return HandedOffSpans(_Sampled(True), _Exported(exporter), follows_parent=True), exporter


def _ids(header: bytes | None) -> tuple[str, str]:
    assert header is not None
    _, trace_id, span_id, _ = header.decode().split("-")
    return trace_id, span_id


def _no_secret(spans: tuple[ReadableSpan, ...]) -> None:
    for span in spans:
        assert SECRET not in repr(dict(span.attributes or {})) and SECRET not in span.name


def test_each_decision_is_a_span_in_its_callers_trace_and_its_outputs_carry_that_span(
        decision_exported: tuple[DecisionSpans, InMemorySpanExporter]) -> None:
    spans, exporter = decision_exported
    m = MemoryPipeline(spans=spans)
    email = {"to": "a@example.com", "subject": "s", "body": SECRET}
    first = m.feed("send_email", email, timestamp_ms=1_000, key="k-1", headers=((TRACEPARENT, PARENT.encode()),))
    m.feed("send_email", email, timestamp_ms=2_000, key="k-1", headers=((TRACEPARENT, PARENT.encode()),))
    approve, drop = exporter.get_finished_spans()
    for span in (approve, drop):
        assert span.name == "decide send_email" and span.kind is SpanKind.CONSUMER
        assert span.parent is not None and f"{span.parent.span_id:016x}" == "00f067aa0ba902b7"
        assert f"{span.context.trace_id:032x}" == TRACE_ID
    assert approve.attributes["runonce.decision.outcome"] == "APPROVED"
    assert drop.attributes["runonce.decision.reason"] == "duplicate_key"
    assert drop.attributes["runonce.decision.repeat_of"] == first["action_id"]
    # what the stream job wrote carries the decision's span: the executor's span is its child
    assert _ids(find_header(m.outputs[topics.APPROVED][0][2], TRACEPARENT)) == (TRACE_ID, f"{approve.context.span_id:016x}")
    _no_secret(exporter.get_finished_spans())


def test_a_request_without_a_context_starts_a_trace_of_its_own(
        decision_exported: tuple[DecisionSpans, InMemorySpanExporter]) -> None:
    spans, exporter = decision_exported
    m = MemoryPipeline(spans=spans)
    m.feed("send_email", {"to": "a@example.com", "subject": "s", "body": "b"}, timestamp_ms=1_000, key="k")
    (span,) = exporter.get_finished_spans()
    assert span.parent is None
    assert _ids(find_header(m.outputs[topics.APPROVED][0][2], TRACEPARENT))[1] == f"{span.context.span_id:016x}"


def test_performing_an_approved_action_is_an_execute_tool_span_under_its_decision(
        exported: tuple[OtelSpans, InMemorySpanExporter]) -> None:
    spans, exporter = exported
    consumer = FakeConsumer([tp(0, 3)])
    consumer.messages = [Msg(0, 3, approved("a1"), headers=[(TRACEPARENT, PARENT.encode())])]
    executor(consumer, FakeCheckpoint(), connector=Mailer(), spans=spans).step()
    (span,) = exporter.get_finished_spans()
    assert span.name == "execute_tool send_email" and span.kind is SpanKind.INTERNAL
    assert span.parent is not None and f"{span.parent.span_id:016x}" == "00f067aa0ba902b7"
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.call.id"] == "a1" and span.attributes["runonce.outcome"] == "succeeded"
    assert span.attributes["runonce.attempts"] == 1


def test_a_repeats_decision_links_to_the_first_actions_trace(
        decision_exported: tuple[DecisionSpans, InMemorySpanExporter]) -> None:
    spans, exporter = decision_exported
    m = MemoryPipeline(spans=spans)
    email = {"to": "a@example.com", "subject": "s", "body": "b"}
    m.feed("send_email", email, timestamp_ms=1_000, key="k-1", headers=((TRACEPARENT, PARENT.encode()),))
    m.feed("send_email", email, timestamp_ms=2_000, key="k-1", headers=((TRACEPARENT, RETRY_PARENT.encode()),))
    approve, drop = exporter.get_finished_spans()
    assert f"{drop.context.trace_id:032x}" == RETRY_PARENT.split("-")[1]  # the retry's own trace
    (link,) = drop.links
    assert (f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") == (TRACE_ID, "00f067aa0ba902b7")
    assert not approve.links
    # the dropped record names the first's trace too, for an analyst
    assert find_header(m.outputs[topics.DROPPED][0][2], H_FIRST_TRACEPARENT) == PARENT.encode()


def test_a_key_keeps_no_trace_when_spans_are_not_recorded() -> None:
    m = MemoryPipeline()
    email = {"to": "a@example.com", "subject": "s", "body": "b"}
    m.feed("send_email", email, timestamp_ms=1_000, key="k-1", headers=((TRACEPARENT, PARENT.encode()),))
    m.feed("send_email", email, timestamp_ms=2_000, key="k-1", headers=((TRACEPARENT, RETRY_PARENT.encode()),))
    assert find_header(m.outputs[topics.DROPPED][0][2], H_FIRST_TRACEPARENT) is None
    assert all(b'"t"' not in value for part in m.keys.parts.values() for value in part.values())


@pytest.mark.parametrize("recorded", [True, False], ids=["spans", "no-spans"])
def test_a_held_actions_release_continues_its_trace_after_the_wait_for_a_person(
        decision_exported: tuple[DecisionSpans, InMemorySpanExporter], recorded: bool) -> None:
    spans: DecisionSpans = decision_exported[0] if recorded else NO_SPANS
    exporter = decision_exported[1]
    m = MemoryPipeline(policies=HELD, spans=spans)
    record = m.feed("send_email", {"to": "a@example.com", "subject": "s", "body": SECRET}, timestamp_ms=1_000,
                    key="k-1", headers=((TRACEPARENT, PARENT.encode()),))
    m.verdict(record["action_id"], "approve", approver="carol", timestamp_ms=61_000)
    (_, _, released), = m.outputs[topics.APPROVED]
    trace_id, parent_span = _ids(find_header(released, TRACEPARENT))
    assert trace_id == TRACE_ID  # the release is in the request's trace, not the approver's
    if not recorded:
        assert parent_span == "00f067aa0ba902b7" and not exporter.get_finished_spans()
        return
    hold, wait, release = exporter.get_finished_spans()
    assert hold.attributes["runonce.decision.outcome"] == "HELD"
    assert wait.name == "wait_for_approval send_email" and wait.parent.span_id == hold.context.span_id
    assert (wait.start_time, wait.end_time) == (1_000 * 1_000_000, 61_000 * 1_000_000)
    assert wait.attributes["runonce.approval.change"] == "release"
    assert wait.attributes["runonce.approval.decided_by"] == "carol"
    assert release.parent.span_id == wait.context.span_id
    assert release.attributes["runonce.decision.outcome"] == "APPROVED"
    assert parent_span == f"{release.context.span_id:016x}"  # the executor's span is the release's child
    _no_secret(exporter.get_finished_spans())


def test_a_decision_redelivered_is_one_span_however_often_its_record_comes(
        decision_exported: tuple[DecisionSpans, InMemorySpanExporter]) -> None:
    """Catches a replay (the same record again after a crash, at least once; a verdict
    redelivered) making a second decide span, or a second wait and release, for one decision;
    stage 1's, stage 2's and a verdict's replays each."""
    spans, exporter = decision_exported
    scoped = PolicyBook.from_toml("""
[tools.update_salesforce_field]
key = "require"
scope = ["record_id"]
natural_id = { fields = ["record_id", "field"], ttl = "24h" }
""")
    keyed_only = PolicyBook.from_toml('[tools.send_email]\nkey = "require"\n')  # decided in stage 1
    for policies, tool, params in ((keyed_only, "send_email", {"to": "a@example.com", "subject": "s", "body": SECRET}),
                                   (scoped, "update_salesforce_field", {"record_id": "r1", "field": "f", "value": 1})):
        exporter.clear()
        m = MemoryPipeline(policies=policies, spans=spans)  # stage 2 after a hop: its own replay
        m.feed(tool, params, timestamp_ms=1_000, key="k-1", headers=((TRACEPARENT, PARENT.encode()),))
        (request,) = m.fed
        m.redeliver(request)
        m.redeliver(request)
        decided = [span for span in exporter.get_finished_spans() if span.name == f"decide {tool}"]
        assert len(decided) == 1, [span.name for span in exporter.get_finished_spans()]
        assert len(m.outputs[topics.APPROVED]) == 3  # each delivery's output written (the executor dedups)
        for _, _, headers in m.outputs[topics.APPROVED][1:]:  # in the caller's trace still
            assert _ids(find_header(headers, TRACEPARENT))[0] == TRACE_ID

    exporter.clear()
    m = MemoryPipeline(policies=HELD, spans=spans)
    record = m.feed("send_email", {"to": "a@example.com"}, timestamp_ms=1_000, key="k-2",
                    headers=((TRACEPARENT, PARENT.encode()),))
    verdict = m.verdict(record["action_id"], "approve", approver="carol", timestamp_ms=61_000)
    m.redeliver(verdict)
    names = [span.name for span in exporter.get_finished_spans()]
    assert names.count("wait_for_approval send_email") == 1 and names.count("decide send_email") == 2, names


def test_a_verdict_dead_lettered_stays_in_its_approvers_trace() -> None:
    """Catches a verdict's dead letter written without the verdict's trace context (a request's
    dead letter keeps its caller's): whoever looks for the approver's click finds where it went."""
    m = MemoryPipeline(policies=HELD)
    value = m.codec.encode("ApprovalVerdict", {"verdict_id": "v-1", "action_id": "a-1", "verdict": "approve",
                                               "approver": "", "reason": ""})  # no approver: refused
    m.process(Inbound(topics.APPROVALS, 0, 0, 5_000, b"a-1", value, ((TRACEPARENT, RETRY_PARENT.encode()),)))
    (_, _, headers), = m.outputs[topics.DLQ]
    assert find_header(headers, TRACEPARENT) == RETRY_PARENT.encode()


@pytest.mark.parametrize("environ, on", [
    ({}, False),
    ({"OTEL_SERVICE_NAME": "x"}, False),  # a name alone exports nothing
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, False),
])
def test_tracing_is_on_only_when_the_standard_environment_asks(environ: dict[str, str], on: bool) -> None:
    assert asked(environ) is on


@pytest.mark.parametrize("parent_flags, follows_parent, root_sampled, sampled", [
    ("01", True, False, True),   # parent-based: a sampled request's decision is sampled
    ("00", True, True, False),   # ... and an unsampled one's is not, whatever the root sampler says
    ("01", False, False, False),  # a sampler that is not parent-based decides alone
    (None, True, False, False),  # a root: the sampler decides
    (None, True, True, True),
])
def test_a_handed_off_decision_is_sampled_as_the_sdk_would_sample_it(
        parent_flags: str | None, follows_parent: bool, root_sampled: bool, sampled: bool) -> None:
    """Catches the worker's handed-off spans sampling otherwise than OpenTelemetry's SDK in the
    same process would (the request's flag ignored, or followed by a sampler that is not
    parent-based), and an unsampled decision's outputs marked sampled (the executor would
    record spans whose parent no one exported)."""
    exporter = InMemorySpanExporter()
    spans = HandedOffSpans(_Sampled(root_sampled), _Exported(exporter), follows_parent=follows_parent)
    headers = ((TRACEPARENT, f"00-{TRACE_ID}-00f067aa0ba902b7-{parent_flags}".encode()),) if parent_flags else ()
    m = MemoryPipeline(spans=spans)
    m.feed("send_email", {"to": "a@example.com", "subject": "s", "body": "b"}, timestamp_ms=1_000, key="k", headers=headers)
    written = find_header(m.outputs[topics.APPROVED][0][2], TRACEPARENT)
    assert written is not None and written.decode().endswith("-01" if sampled else "-00")
    assert len(exporter.get_finished_spans()) == (1 if sampled else 0)
    if parent_flags:
        assert _ids(written)[0] == TRACE_ID  # the request's trace, sampled or not
