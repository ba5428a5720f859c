"""A connector's request to its vendor as a CLIENT span: the child of the span current when
the connector runs (the executor's ``execute_tool``), as OpenTelemetry's own HTTP and
database instrumentations do. The context is the one ambient thing here on purpose: a
connector is handed an action, not a tracer, and its requests nest where it runs.

HTTP after OpenTelemetry's HTTP client conventions (``{method}``, ``http.request.method``,
``server.address``, ``url.full`` without its query, ``http.response.status_code``) and the
W3C context sent on to the vendor; SMTP and a PostgreSQL transaction after the network and
database conventions. Never a header, a body, a query string or a statement's parameters.

Without a tracer provider (or without OpenTelemetry) it costs one check per request."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping
from urllib.parse import urlsplit

try:
    from opentelemetry import trace
    from opentelemetry.propagate import inject
    from opentelemetry.trace import SpanKind, Status, StatusCode

    from runonce.telemetry.otel import provider_is_set
except ImportError:  # the bare SDK: nothing traces
    trace = None  # type: ignore[assignment]

Attribute = str | int
#: a span's attributes, built only when a span is made
Attributes = Callable[[], Mapping[str, Attribute]]


@dataclass(slots=True)
class VendorCall:
    """What a connector tells the span of its request, and what it sends with it."""

    #: the W3C context to send with an HTTP request (empty when nothing traces)
    headers: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, Attribute] = field(default_factory=dict)

    def answered(self, status: int) -> None:
        self.attributes["http.response.status_code"] = status


@contextlib.contextmanager
def _span(name: str, attributes: Attributes, propagate: bool) -> Iterator[VendorCall]:
    call = VendorCall()
    if trace is None or not provider_is_set():
        yield call
        return
    tracer = trace.get_tracer("runonce.connectors")
    with tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=dict(attributes()),
                                      record_exception=False, set_status_on_exception=False) as span:
        if propagate:
            inject(call.headers)
        try:
            yield call
        except BaseException as exc:
            # the exception's type only: a vendor's words may quote the action's params
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.set_attributes(call.attributes)
        status = call.attributes.get("http.response.status_code")
        if isinstance(status, int) and status >= 400:
            span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR))


def http(method: str, url: str, *, redacted: bool = False) -> contextlib.AbstractContextManager[VendorCall]:
    """``redacted``: the URL's path is a credential (a Slack incoming webhook's), so ``url.full``
    says ``REDACTED`` in its place, as OpenTelemetry's HTTP conventions ask."""
    def attributes() -> Mapping[str, Attribute]:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = "/REDACTED" if redacted else parts.path
        return {"http.request.method": method, "server.address": parts.hostname or "",
                "server.port": port, "url.full": f"{parts.scheme}://{parts.netloc}{path}"}

    return _span(method, attributes, propagate=True)


def smtp(host: str, port: int) -> contextlib.AbstractContextManager[VendorCall]:
    return _span("smtp send", lambda: {"network.protocol.name": "smtp", "server.address": host, "server.port": port},
                 propagate=False)


def database(system: str, host: str, port: int, namespace: str) -> contextlib.AbstractContextManager[VendorCall]:
    """One transaction (``db.operation.name`` = ``transaction``: look, effect, marker, commit)."""
    return _span(f"transaction {namespace}",
                 lambda: {"db.system.name": system, "db.operation.name": "transaction", "db.namespace": namespace,
                          "server.address": host, "server.port": port}, propagate=False)
