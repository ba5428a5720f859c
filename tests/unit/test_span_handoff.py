"""The stream worker's span hand-off end to end on this machine: ``ExporterPipe`` starts the
exporter process (``python -m runonce.telemetry.exporter``), which sends the spans over OTLP
to a receiver that records every request (a local HTTP server decoding OpenTelemetry's own
protobuf). No Kafka: the decisions' spans are made by ``HandedOffSpans`` directly.

Catches: spans lost between the worker and the exporter (a batch never written, a frame
misread), an exporter that died and is not started again (every later span lost), spans sent
under another service than the worker's, and ``close`` not waiting for what was handed off."""

from __future__ import annotations

import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from runonce.telemetry.handoff import ExporterPipe, HandedOffSpans
from runonce.wire.trace import Decided


class Receiver:
    """An OTLP/HTTP traces endpoint that keeps each span's service, name and id."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                request = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
                for resource_spans in request.resource_spans:
                    service = next(a.value.string_value for a in resource_spans.resource.attributes
                                   if a.key == "service.name")
                    for scope in resource_spans.scope_spans:
                        receiver.spans.extend((service, s.name, s.span_id.hex()) for s in scope.spans)
                body = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def wait_for(self, n: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.spans) < n and time.monotonic() < deadline:
            time.sleep(0.05)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    found = Receiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", found.url)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    yield found
    found.server.shutdown()


class _Always:
    def sampled(self, trace_id: int, name: str) -> bool:
        return True


def _decide(spans: HandedOffSpans, n: int, start: int) -> list[str]:
    """n decisions' spans; the span ids their outputs carry."""
    made = []
    for i in range(start, start + n):
        ((_, traceparent),) = spans.decide((), Decided("send_email", f"a-{i}", "APPROVED", "unique"))
        made.append(traceparent.decode().split("-")[2])
    return made


def test_every_handed_off_span_reaches_otlp_even_after_the_exporter_died(receiver: Receiver) -> None:
    pipe = ExporterPipe("runonce-worker")
    spans = HandedOffSpans(_Always(), pipe, follows_parent=True)
    first = _decide(spans, 30, 0)
    receiver.wait_for(30)
    assert sorted(s[2] for s in receiver.spans) == sorted(first)
    assert pipe.pid is not None
    os.kill(pipe.pid, signal.SIGKILL)  # the exporter dies (OOM-killed, say) while the worker goes on
    time.sleep(0.5)
    later = _decide(spans, 30, 30)
    pipe.close(timeout_s=60)  # sends what waits, and returns once the exporter has sent it: no wait here
    assert sorted(s[2] for s in receiver.spans) == sorted(first + later)
    assert {(service, name) for service, name, _ in receiver.spans} == {("runonce-worker", "decide send_email")}
    assert pipe.dropped == 0
