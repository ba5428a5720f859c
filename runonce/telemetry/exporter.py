"""The stream job's span exporter, a process of its own (telemetry/handoff.py starts it): reads
batches of span facts from stdin, builds OpenTelemetry's spans from them (the service the
worker's, ``OTEL_SERVICE_NAME`` or ``--service``) and exports them over OTLP as the ``OTEL_*``
environment says. Runs in the idle scheduling class (only when the CPU is otherwise idle); ends
when its stdin does, once what it read is sent.

    python -m runonce.telemetry.exporter --service runonce-worker < frames
"""

from __future__ import annotations

import argparse
import os
import pickle
import signal
import sys
from typing import BinaryIO, Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from runonce.telemetry.handoff import FRAME, SpanFacts
from runonce.telemetry.otel import FIRST_ACTION, decision_attributes, wait_attributes, wait_end_ms
from runonce.wire.trace import Decided, Waited

SCOPE = InstrumentationScope("runonce")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def span_of(facts: SpanFacts, resource: Resource) -> ReadableSpan:
    """The span the worker handed off, as otel.py makes the same span in-process."""
    of, trace_hex, span_hex, parent_hex, state, at_ns = facts
    trace_id = int(trace_hex, 16)
    context = SpanContext(trace_id, int(span_hex, 16), is_remote=False, trace_flags=_SAMPLED,
                          trace_state=TraceState.from_header([state]) if state else None)
    parent = SpanContext(trace_id, int(parent_hex, 16), is_remote=True, trace_flags=_SAMPLED) if parent_hex else None
    if of[0] == "wait":
        waited = Waited(*of[1:])  # type: ignore[arg-type]  # the fields handoff.py wrote, in order
        return ReadableSpan(
            name=f"wait_for_approval {waited.tool}", kind=SpanKind.INTERNAL, context=context, parent=parent,
            resource=resource, instrumentation_scope=SCOPE, attributes=wait_attributes(waited),
            start_time=waited.held_at_ms * 1_000_000, end_time=wait_end_ms(waited) * 1_000_000,
            status=Status(StatusCode.UNSET) if waited.change == "release" else Status(StatusCode.ERROR, waited.change))
    decided = Decided(*of[1:])  # type: ignore[arg-type]
    first = _first(decided.first_traceparent)
    return ReadableSpan(
        name=f"decide {decided.tool}", kind=SpanKind.CONSUMER, context=context, parent=parent, resource=resource,
        instrumentation_scope=SCOPE, attributes=decision_attributes(decided), start_time=at_ns, end_time=at_ns,
        links=[Link(first, FIRST_ACTION)] if first is not None else [])


def _first(traceparent: str | None) -> SpanContext | None:
    """The first action's span, from the ``traceparent`` its key kept (checked when it was kept)."""
    if not traceparent:
        return None
    _, trace_hex, span_hex, flags = traceparent.split("-")
    return SpanContext(int(trace_hex, 16), int(span_hex, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)))


def batches(stream: BinaryIO) -> "Sequence[SpanFacts] | None":
    """The next batch of span facts from the worker; None at the end of the stream."""
    head = stream.read(FRAME.size)
    if len(head) < FRAME.size:
        return None
    (size,) = FRAME.unpack(head)
    body = stream.read(size)
    if len(body) < size:
        return None
    found: Sequence[SpanFacts] = pickle.loads(body)  # noqa: S301 (from the worker that started this process)
    return found


def serve(stream: BinaryIO, exporter: SpanExporter, resource: Resource) -> int:
    """Export every batch until the stream ends; how many spans were exported."""
    sent = 0
    while (batch := batches(stream)) is not None:
        exporter.export([span_of(facts, resource) for facts in batch])
        sent += len(batch)
    return sent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--service", required=True, help="the service the spans are of (OTEL_SERVICE_NAME wins)")
    args = parser.parse_args(argv)
    # Linux's idle class: the exporter runs when no other process wants the CPU, so under a
    # backlog its spans wait (in the pipe, then in the worker) instead of taking the worker's
    # or the broker's time; elsewhere, the lowest priority
    if hasattr(os, "sched_setscheduler"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.nice(19)
    # a stop of the worker's process group reaches this process too: it ends when the worker
    # closes its stdin (or dies), after sending what it read
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or args.service})
    exporter: SpanExporter = OTLPSpanExporter()
    serve(sys.stdin.buffer, exporter, resource)
    exporter.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
