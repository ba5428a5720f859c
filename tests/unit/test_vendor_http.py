"""The HTTP seam's one rule (connectors/toolkit/transport.py): what happened on the wire says
whether the request may have reached the vendor, played on real loopback sockets (a refused
port, a TLS handshake refused, a server that hangs up after reading the request, one that
never answers).

Catches: a refused connection taken for "may have happened" (every retry-safe call would end
in_doubt) or a lost answer taken for "not performed" (a blind retry: a second charge); a TLS
failure retried forever; a read timeout called a failure; the base URL's query string or a
credential URL in a message."""

from __future__ import annotations

import http.server
import socket
import ssl
import threading
from pathlib import Path
from typing import Iterator

import pytest
import trustme

from runonce.connectors.toolkit.errors import OutcomeUnknown, PermanentVendorError, TransientVendorError
from runonce.connectors.toolkit.transport import VendorHttp


class _Vendor(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a vendor's API does

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/hang-up"):  # the request was read, and no answer comes
            self.close_connection = True
            return
        body = b'{"id": "ch_1"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def vendor() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Vendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_answer_is_returned_as_it_came(vendor: str) -> None:
    answer = VendorHttp(vendor).request("POST", "/v1/charges?k=1", b"{}")
    assert (answer.status, answer.body, answer.headers["content-type"]) == (200, {"id": "ch_1"}, "application/json")


def test_a_refused_connection_was_never_sent() -> None:
    http = VendorHttp(f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(TransientVendorError, match=r"POST http://127\.0\.0\.1:\d+/v1/charges: cannot connect"):
        http.request("POST", "/v1/charges?key=planted-5521", b"{}")


def test_a_server_that_hangs_up_after_reading_the_request_may_have_acted(vendor: str) -> None:
    with pytest.raises(OutcomeUnknown, match="connection lost after the request was sent"):
        VendorHttp(vendor).request("POST", "/hang-up", b"{}")


def test_a_server_silent_past_the_timeout_may_have_acted() -> None:
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        http = VendorHttp(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.5)
        with pytest.raises(OutcomeUnknown, match="no answer within 0 s|no answer within 1 s"):
            http.request("POST", "/v1/charges", b"{}")


def test_a_tls_handshake_refused_is_permanent_and_names_tls(tmp_path: Path) -> None:
    """A server whose certificate no CA here signed: nothing was sent, and a retry fails the same way."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Vendor)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(PermanentVendorError, match="TLS: .*CERTIFICATE_VERIFY_FAILED"):
            VendorHttp(url).request("POST", "/v1/charges", b"{}")
        trusting = ssl.create_default_context()
        ca.configure_trust(trusting)
        assert VendorHttp(url, tls=trusting).request("POST", "/v1/charges", b"{}").status == 200
    finally:
        server.shutdown()
        server.server_close()


def test_a_credential_url_is_shown_by_its_name(vendor: str) -> None:
    http = VendorHttp(f"{vendor}/hang-up/services/T1/B2/planted-5521", shown_as="the webhook of alerts")
    with pytest.raises(OutcomeUnknown) as raised:
        http.request("POST", "", b"{}")
    assert str(raised.value).startswith("POST the webhook of alerts:") and "planted-5521" not in str(raised.value)
