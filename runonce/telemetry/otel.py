"""runonce's spans on OpenTelemetry's API, named and attributed after its conventions where
they fit (messaging for the submit, GenAI's ``execute_tool`` for the execution) and
``runonce.*`` where they do not (the decision). Never a secret: no params, no result, no
vendor reference; the tool, the action's id, the outcome and why."""

from __future__ import annotations

import contextlib
from typing import Iterator

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import ProxyTracerProvider, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from runonce.kafka import topics
from runonce.telemetry.spans import Finish
from runonce.wire.trace import TRACEPARENT, TRACESTATE, Decided, TraceHeaders, Waited, carried

_W3C = TraceContextTextMapPropagator()


def provider_is_set() -> bool:
    """Whether anyone set a tracer provider (else OpenTelemetry's API hands out spans that record nothing)."""
    return not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)


def _context_of(headers: TraceHeaders) -> otel_context.Context | None:
    found = {name: value.decode("ascii") for name, value in carried(headers)}
    return _W3C.extract(found) if found else None


def _span_context_of(traceparent: str | None) -> trace.SpanContext | None:
    context = _context_of(((TRACEPARENT, traceparent.encode("ascii")),)) if traceparent else None
    if context is None:
        return None
    found = trace.get_current_span(context).get_span_context()
    return found if found.is_valid else None


def _headers_of(span: trace.Span) -> TraceHeaders:
    """The span's W3C context as record headers: written directly (what the propagator
    writes, without its dict and its parse; this runs for every decision)."""
    ctx = span.get_span_context()
    headers: TraceHeaders = (
        (TRACEPARENT, f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}".encode("ascii")),)
    if ctx.trace_state:
        headers = (*headers, (TRACESTATE, ctx.trace_state.to_header().encode("ascii")))
    return headers


#: a repeat's link to the first action's trace
FIRST_ACTION = {"runonce.link": "first_action"}


def decision_attributes(decided: Decided) -> dict[str, str]:
    """A decision span's attributes (here, and in the stream worker's exporter process)."""
    attributes = {"gen_ai.tool.name": decided.tool, "runonce.action.id": decided.action_id,
                  "runonce.decision.outcome": decided.outcome, "runonce.decision.reason": decided.reason}
    if decided.repeat_of is not None:
        attributes["runonce.decision.repeat_of"] = decided.repeat_of
    return attributes


def wait_attributes(waited: Waited) -> dict[str, str]:
    """A wait for a person's span's attributes."""
    attributes = {"gen_ai.tool.name": waited.tool, "runonce.action.id": waited.action_id,
                  "runonce.approval.change": waited.change}
    if waited.decided_by is not None:
        attributes["runonce.approval.decided_by"] = waited.decided_by
    return attributes


def wait_end_ms(waited: Waited) -> int:
    """A wait ends with its verdict, never before its hold (event times may run backwards)."""
    return max(waited.ended_at_ms, waited.held_at_ms)


class OtelSpans:
    recording = True

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        """``provider``: the global one unless given (tests give one with an in-memory exporter)."""
        self.tracer = (provider or trace.get_tracer_provider()).get_tracer("runonce")

    @contextlib.contextmanager
    def submit(self, tool: str, action_id: str, caller: TraceHeaders) -> Iterator[TraceHeaders]:
        parent = _context_of(caller) if caller else None  # else the caller's current context
        with self.tracer.start_as_current_span(
                f"send {topics.REQUESTED}", context=parent, kind=SpanKind.PRODUCER, attributes={
                    "messaging.system": "kafka", "messaging.operation.type": "send",
                    "messaging.destination.name": topics.REQUESTED,
                    "gen_ai.tool.name": tool, "runonce.action.id": action_id}) as span:
            yield _headers_of(span)

    def decide(self, request: TraceHeaders, decided: Decided) -> TraceHeaders:
        first = _span_context_of(decided.first_traceparent)
        span = self.tracer.start_span(
            f"decide {decided.tool}", context=_context_of(request), kind=SpanKind.CONSUMER,
            links=[trace.Link(first, FIRST_ACTION)] if first is not None else None)
        if span.is_recording():  # an unsampled decision (most, at 1%) builds no attributes
            span.set_attributes(decision_attributes(decided))
        span.end()
        return _headers_of(span)

    def wait(self, held: TraceHeaders, waited: Waited) -> TraceHeaders:
        # Made when the verdict is decided, with the hold's and the verdict's event times: a
        # wait of days is one span, and nothing is held open in the worker meanwhile.
        span = self.tracer.start_span(f"wait_for_approval {waited.tool}", context=_context_of(held),
                                      kind=SpanKind.INTERNAL, attributes=wait_attributes(waited),
                                      start_time=waited.held_at_ms * 1_000_000)
        if waited.change != "release":
            span.set_status(Status(StatusCode.ERROR, waited.change))
        span.end(end_time=wait_end_ms(waited) * 1_000_000)
        return _headers_of(span)

    @contextlib.contextmanager
    def execute(self, approved: TraceHeaders, tool: str, action_id: str, capability: str) -> Iterator[Finish]:
        with self.tracer.start_as_current_span(
                f"execute_tool {tool}", context=_context_of(approved), kind=SpanKind.INTERNAL, attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": action_id, "gen_ai.tool.type": "function",
                    "runonce.action.id": action_id, "runonce.capability": capability}) as span:
            def finish(status: str, attempts: int) -> None:
                span.set_attribute("runonce.outcome", status)
                span.set_attribute("runonce.attempts", attempts)
                if status != "succeeded":
                    span.set_status(Status(StatusCode.ERROR, status))
            yield finish
