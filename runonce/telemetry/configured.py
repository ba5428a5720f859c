"""Which spans this process makes: chosen once, where a client, worker or executor is made.

Apart from spans.py so that the contract imports nothing of OpenTelemetry's side (otel.py
implements the contract; this module picks between the two)."""

from __future__ import annotations

from runonce.telemetry.spans import NO_SPANS, Spans


def configured_spans() -> Spans:
    """This process's spans: OpenTelemetry's when a tracer provider is set (by the
    application, or by ``setup.configure_from_env``), else none. Asked once, when a client,
    worker or executor is made: nothing is looked up per record."""
    try:
        from runonce.telemetry.otel import OtelSpans, provider_is_set
    except ImportError:  # no opentelemetry-api: nothing to trace with
        return NO_SPANS
    return OtelSpans() if provider_is_set() else NO_SPANS
