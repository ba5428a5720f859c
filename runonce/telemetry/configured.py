"""Which spans this process makes: chosen once, where a client, worker or executor is made.

Apart from spans.py so that the contract imports nothing of OpenTelemetry's side (otel.py
and handoff.py implement the contract; this module picks between them)."""

from __future__ import annotations

import atexit
from typing import Mapping

from runonce.telemetry.spans import NO_SPANS, DecisionSpans, Spans


def configured_spans() -> Spans:
    """This process's spans: OpenTelemetry's when a tracer provider is set (by the
    application, or by ``setup.configure_from_env``), else none. Asked once, when a client,
    worker or executor is made: nothing is looked up per record."""
    try:
        from runonce.telemetry.otel import OtelSpans, provider_is_set
    except ImportError:  # no opentelemetry-api: nothing to trace with
        return NO_SPANS
    return OtelSpans() if provider_is_set() else NO_SPANS


def decision_spans(service: str, environ: Mapping[str, str]) -> DecisionSpans:
    """The stream job's spans. When runonce's own setup traces (the ``OTEL_*`` environment,
    setup.py), they are handed off to an exporter process (handoff.py): the decision path
    makes no span object and encodes nothing. Else as ``configured_spans``: an application
    that runs the pipeline with a provider of its own gets its spans in-process."""
    from runonce.telemetry.setup import asked

    if not asked(environ):
        return configured_spans()
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler

    from runonce.telemetry.handoff import ExporterPipe, HandedOffSpans

    provider = trace.get_tracer_provider()
    sampler = provider.sampler if isinstance(provider, TracerProvider) else TracerProvider().sampler

    class _Roots:
        def __init__(self, sampler: Sampler) -> None:
            self.sampler = sampler

        def sampled(self, trace_id: int, name: str) -> bool:
            return self.sampler.should_sample(None, trace_id, name).decision is Decision.RECORD_AND_SAMPLE

    pipe = ExporterPipe(environ.get("OTEL_SERVICE_NAME") or service)
    atexit.register(pipe.close)  # what waits is sent before the process ends
    return HandedOffSpans(_Roots(sampler), pipe, follows_parent=isinstance(sampler, ParentBased))
