"""The SDK's side of wire/trace.py: the caller's current OpenTelemetry context, as the W3C
headers a request carries. Without ``opentelemetry-api`` installed, or outside any span, there
is none, and a request starts no trace of its own: the cost is one dictionary."""

from __future__ import annotations


def current_carrier() -> dict[str, str]:
    try:
        from opentelemetry import propagate
    except ImportError:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)  # the globally configured propagator (W3C Trace Context by default)
    return carrier
