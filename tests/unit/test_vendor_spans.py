"""A connector's HTTP request as a CLIENT span (runonce/telemetry/vendor.py), through the
toolkit's one HTTP seam, against a loopback server that records what it received.

Catches: the request span not the child of the span current around it (the executor's
``execute_tool``); the W3C context not sent to the vendor, or sent when nothing traces; the
query string (where a vendor API may carry a token) in ``url.full``; the answer's status not
on the span; a URL that is a credential in ``url.full``."""

from __future__ import annotations

import http.server
import threading
from typing import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from runonce.connectors.toolkit.transport import VendorHttp

TOKEN = "planted-query-token-5521"


class _Recorder(http.server.BaseHTTPRequestHandler):
    received: list[dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.received.append({k.lower(): v for k, v in self.headers.items()})
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = 402 if "decline" in self.path else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"id": "ch_1"}')

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def vendor() -> Iterator[tuple[str, list[dict[str, str]]]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.received
    server.shutdown()


@pytest.fixture
def global_provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A process-wide tracer provider for one test, taken away after it (OpenTelemetry sets
    its global once; its own test utilities reset it the same way)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield provider, exporter
    provider.shutdown()
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # noqa: SLF001 (how OpenTelemetry's own tests reset it)
    trace._TRACER_PROVIDER = None  # noqa: SLF001


def test_a_vendor_request_is_a_client_span_under_the_current_one_and_sends_its_context(
        vendor: tuple[str, list[dict[str, str]]], global_provider: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    url, received = vendor
    provider, exporter = global_provider
    with provider.get_tracer("test").start_as_current_span("execute_tool charge_payment") as parent:
        result = VendorHttp(url).request("POST", f"/v1/charges?key={TOKEN}", b"{}")
        VendorHttp(url).request("POST", "/v1/charges/decline", b"{}")
    assert result.status == 200
    ok, declined = (s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT)
    assert ok.name == "POST" and ok.parent is not None
    assert ok.parent.span_id == parent.get_span_context().span_id
    assert ok.attributes["http.response.status_code"] == 200 and ok.attributes["http.request.method"] == "POST"
    assert ok.attributes["url.full"] == f"{url}/v1/charges" and TOKEN not in repr(dict(ok.attributes))
    # the vendor got the request span's context: its own trace, if it keeps one, joins ours
    _, trace_id, span_id, _ = received[0]["traceparent"].split("-")
    assert (trace_id, span_id) == (f"{ok.context.trace_id:032x}", f"{ok.context.span_id:016x}")
    assert declined.status.status_code is StatusCode.ERROR and declined.attributes["error.type"] == "402"


def test_nothing_is_sent_or_made_when_nothing_traces(vendor: tuple[str, list[dict[str, str]]]) -> None:
    url, received = vendor
    VendorHttp(url).request("POST", "/v1/charges", b"{}")
    assert "traceparent" not in received[0]


def test_a_url_that_is_a_credential_is_never_on_the_span(
        vendor: tuple[str, list[dict[str, str]]], global_provider: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """Catches a Slack incoming webhook's URL (its path is the credential) written whole into
    ``url.full``: a trace backend would hold the key to the channel."""
    url, _ = vendor
    _, exporter = global_provider
    VendorHttp(f"{url}/services/T1/B2/{TOKEN}", shown_as="the incoming webhook of alerts (env:HOOK)").request(
        "POST", "", b"{}")
    [span] = exporter.get_finished_spans()
    assert span.attributes["url.full"] == f"{url}/REDACTED", span.attributes
    assert TOKEN not in repr(dict(span.attributes))
