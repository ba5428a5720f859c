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
from runonce.wire.trace import TRACEPARENT, TRACESTATE, Decided, TraceHeaders, carried, trace_headers

_W3C = TraceContextTextMapPropagator()


def provider_is_set() -> bool:
    """Whether anyone set a tracer provider (else OpenTelemetry's API hands out spans that record nothing)."""
    return not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)


def _context_of(headers: TraceHeaders) -> otel_context.Context | None:
    found = {name: value.decode("ascii") for name, value in carried(headers)}
    return _W3C.extract(found) if found else None


def _headers_of(span: trace.Span) -> TraceHeaders:
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=trace.set_span_in_context(span))
    return trace_headers({k: v for k, v in carrier.items() if k in (TRACEPARENT, TRACESTATE)})


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
        attributes = {"gen_ai.tool.name": decided.tool, "runonce.action.id": decided.action_id,
                      "runonce.decision.outcome": decided.outcome, "runonce.decision.reason": decided.reason}
        if decided.repeat_of is not None:
            attributes["runonce.decision.repeat_of"] = decided.repeat_of
        span = self.tracer.start_span(f"decide {decided.tool}", context=_context_of(request),
                                      kind=SpanKind.CONSUMER, attributes=attributes)
        span.end()
        return _headers_of(span)

    @contextlib.contextmanager
    def execute(self, approved: TraceHeaders, tool: str, action_id: str, capability: str) -> Iterator[Finish]:
        with self.tracer.start_as_current_span(
                f"execute_tool {tool}", context=_context_of(approved), kind=SpanKind.INTERNAL, attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": action_id, "gen_ai.tool.type": "function",
                    "runonce.action.id": action_id, "runonce.capability": capability}) as span:
            def finish(status: str) -> None:
                span.set_attribute("runonce.outcome", status)
                if status != "succeeded":
                    span.set_status(Status(StatusCode.ERROR, status))
            yield finish
