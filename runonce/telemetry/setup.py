"""The tracer provider of runonce's own processes (worker, executor, gateway), from the
standard OpenTelemetry environment, as every OpenTelemetry SDK reads it: tracing is on when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) or
``OTEL_TRACES_EXPORTER`` is set and ``OTEL_SDK_DISABLED`` is not ``true``. The service is
``OTEL_SERVICE_NAME``, else ``runonce-<command>``; the sampler ``OTEL_TRACES_SAMPLER`` (the
SDK reads it). An agent application that has its own provider configures nothing here."""

from __future__ import annotations

import atexit
import logging
from typing import Mapping

from runonce.errors import ConfigError

log = logging.getLogger("runonce.telemetry")

_ASKS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER")


def asked(environ: Mapping[str, str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name) for name in _ASKS) and environ.get("OTEL_TRACES_EXPORTER", "").strip() != "none"


def configure_from_env(service: str, environ: Mapping[str, str]) -> bool:
    """Set the process's tracer provider if the environment asks for tracing; whether it did.
    Asked without ``runonce[otel]`` installed: a ConfigError naming the extra."""
    if not asked(environ):
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigError(f"OTEL_* asks for traces, and this runonce has no OpenTelemetry SDK: "
                          f"pip install 'runonce[otel]' (no module {exc.name!r})") from exc
    provider = TracerProvider(resource=Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME") or service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # the endpoint from OTEL_EXPORTER_OTLP_*
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)  # what is batched is sent before the process ends
    log.info("traces: OTLP over HTTP as %s", environ.get("OTEL_SERVICE_NAME") or service)
    return True
