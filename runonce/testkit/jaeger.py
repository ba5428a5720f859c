"""A real Jaeger (v2, built by ``scripts/setup.sh`` with ``go get -tool``) on loopback ports of
its own, storing in memory: runonce's processes export to it over OTLP/HTTP as any
OpenTelemetry SDK does (``otel_env``), and a test reads a trace back from Jaeger's query API
(``/api/v3/traces/{id}``, OTLP JSON) as a person's Jaeger UI would."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from runonce.devbroker.broker import free_ports, stop_group
from runonce.testkit.vendor_servers import binary, wait_http

JAEGER = "jaeger"

#: only what a test needs: OTLP/HTTP in, the query API out, a health check; no other port
_CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces: {{receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}}
  telemetry:
    metrics: {{level: none}}
    logs: {{level: warn}}
extensions:
  jaeger_query:
    storage: {{traces: memstore}}
    http: {{endpoint: "127.0.0.1:{query}"}}
    grpc: {{endpoint: "127.0.0.1:{query_grpc}"}}
  jaeger_storage:
    backends: {{memstore: {{memory: {{max_traces: 100000}}}}}}
  healthcheckv2:
    use_v2: true
    http: {{endpoint: "127.0.0.1:{health}"}}
receivers:
  otlp:
    protocols: {{http: {{endpoint: "127.0.0.1:{otlp}"}}}}
processors:
  batch: {{timeout: 100ms}}
exporters:
  jaeger_storage_exporter: {{trace_storage: memstore}}
"""


@dataclass(frozen=True, slots=True)
class Span:
    """One span as Jaeger returns it."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int  # OTLP's: 1 internal, 2 server, 3 client, 4 producer, 5 consumer
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    #: (trace id, span id) of each link
    links: tuple[tuple[str, str], ...]
    error: bool


class Jaeger:
    def __init__(self, folder: Path, otlp_port: int | None = None, query_port: int | None = None) -> None:
        """Free loopback ports, unless ``otlp_port`` / ``query_port`` name them (OTLP's and
        Jaeger's usual 4318 and 16686, for a person's recipe)."""
        self.folder = folder
        self.otlp_port, self.query_port, query_grpc, self.health_port = free_ports(4)
        self.otlp_port = otlp_port or self.otlp_port
        self.query_port = query_port or self.query_port
        self._config = _CONFIG.format(otlp=self.otlp_port, query=self.query_port, query_grpc=query_grpc,
                                      health=self.health_port)
        self.query_url = f"http://127.0.0.1:{self.query_port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Jaeger:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "jaeger.yaml"
        config.write_text(self._config)
        log = self.folder / "jaeger.log"
        self.proc = subprocess.Popen([str(binary(JAEGER)), "--config", f"file:{config}"],
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        wait_http(f"http://127.0.0.1:{self.health_port}/status", self.proc, log)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc.pid)
            self.proc.wait(10)

    def otel_env(self, service: str) -> dict[str, str]:
        """What a process's environment needs to send its spans here (the standard variables),
        batched for a tenth of a second instead of five."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.otlp_port}", "OTEL_SERVICE_NAME": service,
                "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER": "parentbased_always_on"}

    @property
    def otlp_traces_url(self) -> str:
        return f"http://127.0.0.1:{self.otlp_port}/v1/traces"

    def answer(self, trace_id: str) -> dict[str, Any]:
        """Jaeger's answer for a trace as it came (OTLP JSON under ``result``); {} if it has none."""
        try:
            with urllib.request.urlopen(f"{self.query_url}/api/v3/traces/{trace_id}", timeout=10) as resp:
                body: dict[str, Any] = json.load(resp)
                return body
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return {}
            raise

    def trace(self, trace_id: str) -> list[Span]:
        """Every span of a trace Jaeger holds now ([] if none)."""
        return spans_of(self.answer(trace_id))

    def wait_for(self, trace_id: str, done: Callable[[list[Span]], bool], timeout_s: float = 60) -> list[Span]:
        """The trace once ``done`` says it is whole (spans from several processes arrive in
        their own time); what there is after ``timeout_s``, for the assertion to name."""
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.trace(trace_id)
            if done(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.3)


def spans_of(answer: dict[str, Any]) -> list[Span]:
    """The spans of a query API answer (``answer``'s format)."""
    return [_span(service, raw) for service, raw in _raw_spans(answer.get("result") or {})]


def _raw_spans(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for resource in result.get("resourceSpans", []):
        service = next((a["value"].get("stringValue", "") for a in resource.get("resource", {}).get("attributes", [])
                        if a["key"] == "service.name"), "")
        for scope in resource.get("scopeSpans", []):
            out += [(service, raw) for raw in scope.get("spans", [])]
    return out


def _value(v: dict[str, Any]) -> Any:
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in v:
            return v[kind]
    if "intValue" in v:
        return int(v["intValue"])
    return v


def _span(service: str, raw: dict[str, Any]) -> Span:
    return Span(service, raw["name"], raw["traceId"], raw["spanId"], raw.get("parentSpanId", ""),
                int(raw.get("kind", 0)), int(raw["startTimeUnixNano"]), int(raw["endTimeUnixNano"]),
                {a["key"]: _value(a["value"]) for a in raw.get("attributes", [])},
                tuple((link["traceId"], link["spanId"]) for link in raw.get("links", [])),
                (raw.get("status") or {}).get("code") == 2)


def main(argv: list[str] | None = None) -> int:
    """``python -m runonce.testkit.jaeger``: the project's Jaeger in the foreground, in memory,
    on loopback (docs/operating.md, "See runonce in your traces")."""
    import argparse
    import signal
    import sys
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m runonce.testkit.jaeger",
                                     description="Jaeger v2 (built by scripts/setup.sh --test) on 127.0.0.1, "
                                                 "traces in memory; Ctrl-C stops it.")
    parser.add_argument("--otlp-port", type=int, default=4318, help="OTLP/HTTP in (default 4318)")
    parser.add_argument("--query-port", type=int, default=16686, help="the query API (default 16686)")
    args = parser.parse_args(argv)
    # `kill %1` of the recipe's background job: stop Jaeger too (it runs in a session of its own)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    jaeger = Jaeger(Path(tempfile.mkdtemp(prefix="runonce-jaeger-")), args.otlp_port, args.query_port).start()
    print(f"Jaeger: send spans to OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{jaeger.otlp_port}; "
          f"read traces from {jaeger.query_url}/api/v3/traces/<trace id> (log {jaeger.folder / 'jaeger.log'})",
          flush=True)
    try:
        assert jaeger.proc is not None
        return jaeger.proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        jaeger.stop()


if __name__ == "__main__":
    raise SystemExit(main())
