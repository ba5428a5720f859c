"""One port per process for everything that asks about it from outside: ``/metrics``
(Prometheus' text format), ``/healthz`` (live) and ``/readyz`` (ready), as a pod is scraped
and probed on one port. 200 or 503, with the reason as the body (runonce/kafka/health.py)."""

from __future__ import annotations

import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from runonce.kafka.health import Health, ProbeAnswer


class ProbeServer:
    """Serves in a daemon thread until ``close``; ``port`` is the one bound (0 picks a free one)."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry, health: Health) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(HTTPStatus.OK, generate_latest(outer.registry), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez"):
                    self._answer(outer.health.live())
                elif path == "/readyz":
                    self._answer(outer.health.ready())
                else:
                    self._send(HTTPStatus.NOT_FOUND, b"/metrics, /healthz, /readyz\n", "text/plain")

            def _answer(self, answer: ProbeAnswer) -> None:
                status = HTTPStatus.OK if answer.ok else HTTPStatus.SERVICE_UNAVAILABLE
                self._send(status, (answer.reason + "\n").encode(), "text/plain; charset=utf-8")

            def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return None  # a probe every few seconds is not news

        self.registry = registry
        self.health = health
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.host = host
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, name="probes", daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
