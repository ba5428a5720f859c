"""The one I/O seam of the HTTP and SMTP connectors: every foreign exception becomes a
ConnectorError here, with the rule that decides safety: a request that may have reached
the vendor and whose answer we did not see, or whose answer does not say it was refused,
is an OutcomeUnknown, never a failure and never a blind retry.

HTTP answers, for every HTTP connector (a vendor's own reading of its errors, as Stripe's in
connectors/vendors/stripe.py, comes first):

    not performed, retry with the same key    connection refused (nothing sent), 503,
                                              409 (Stripe: the same key is still in flight)
    not performed, the vendor's rate limit:   429, and 503 with Retry-After: RateLimited, with
      every call to it waits, then retries    the Retry-After seconds (or HTTP date) it gave
    not performed, never retry                any other 4xx
    may have been performed: OutcomeUnknown   500, 502, 504 and any other 5xx (a gateway in front
                                              of the vendor, or the vendor itself, failed after
                                              the request reached it), a timeout, a connection
                                              lost after the request was sent
SMTP:
    not performed, retry                      connection refused, a 4xx reply (before or to DATA)
    not performed, never retry                a 5xx reply, every recipient refused, a relay that
                                              offers no STARTTLS when asked for it, a certificate
                                              that does not verify, refused credentials
    may have been performed: OutcomeUnknown   a timeout, or the connection lost, once the message's
                                              DATA began (the relay may have queued it); before
                                              DATA the same is "not performed" (a kept session
                                              the relay closed: the message goes on a new one)

An OutcomeUnknown is retried only where that is safe: a connector with a vendor key calls
again with the same key, one with a state check asks first, the rest are ``in_doubt``
(connectors/executor/runner.py)."""

from __future__ import annotations

import enum
import http.client
import json
import smtplib
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from typing import Any, Mapping
from urllib.parse import urlsplit

from runonce.connectors.toolkit.errors import OutcomeUnknown, PermanentVendorError, RateLimited, TransientVendorError
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.tls import client_context
from runonce.telemetry import vendor as vendor_spans

#: HTTP statuses that say the vendor did not act and a retry may succeed
NOT_PERFORMED_STATUSES = frozenset({409, 429, 503})


@dataclass(frozen=True, slots=True)
class HttpResult:
    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


class VendorHttp:
    """One vendor's HTTP: its base URL, its timeout and TLS held once, and what happened on the
    wire translated once, here, into what it means for safety.

    ``request`` returns any answer as it came (a JSON body decoded); only the wire raises:
    nothing sent (TransientVendorError; a TLS handshake that fails, PermanentVendorError), or
    sent and unanswered (OutcomeUnknown). A target is a path joined to the base URL, or an
    absolute URL (a token endpoint named by the vendor's answer). ``https`` is verified against
    ``tls`` (the system's CAs when None). ``shown_as`` replaces the URL in every message and
    span when the URL is itself a credential (a Slack incoming webhook's).

    Each request on a connection of its own (http.client): measured against stripe-mock, httpx's
    kept-alive pool served 696 charges/s where this serves 1,263 (docs/measured.md), its Python
    per request costing more than the connects it saves on a fast vendor."""

    def __init__(self, base_url: str, *, timeout_s: float = 30.0, tls: ssl.SSLContext | None = None,
                 shown_as: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._tls = tls
        self._shown_as = shown_as

    def url(self, target: str = "") -> str:
        """What messages name for ``target``: its URL, or ``shown_as``; never a query string
        (where a vendor API may carry a token)."""
        if self._shown_as is not None:
            return self._shown_as
        return self._full(target).split("?", 1)[0]

    def _full(self, target: str) -> str:
        return target if "://" in target else f"{self.base_url}{target}"

    def request(self, method: str, target: str = "", body: bytes | None = None, *,
                headers: Mapping[str, str] | None = None) -> HttpResult:
        with vendor_spans.http(method, self._full(target), redacted=self._shown_as is not None) as traced:
            raw, resp = self._exchange(method, target, body, dict(headers or {}, **traced.headers))
            traced.answered(resp.status)
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = raw.decode("utf-8", "replace")
        return HttpResult(resp.status, data, {k.lower(): v for k, v in resp.getheaders()})

    def json(self, method: str, target: str = "", payload: Mapping[str, Any] | None = None, *,
             headers: Mapping[str, str] | None = None) -> HttpResult:
        """A JSON request, its answer through the generic table (``raise_for_status``)."""
        body = json.dumps(payload).encode() if payload is not None else None
        result = self.request(method, target, body, headers={"Content-Type": "application/json", **(headers or {})})
        return raise_for_status(method, self.url(target), result)

    def _exchange(self, method: str, target: str, body: bytes | None,
                  headers: dict[str, str]) -> tuple[bytes, http.client.HTTPResponse]:
        parts = urlsplit(self._full(target))
        what = f"{method} {self.url(target)}"
        host = parts.hostname or "127.0.0.1"
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(host, parts.port or 443, timeout=self.timeout_s,
                                               context=self._tls or client_context(None))
        else:
            conn = http.client.HTTPConnection(host, parts.port or 80, timeout=self.timeout_s)
        sent = False
        try:
            try:
                conn.connect()
            except ssl.SSLError as exc:  # the handshake failed: nothing was sent, and it will fail again
                raise PermanentVendorError(f"{what}: TLS: {exc}") from exc
            except OSError as exc:  # nothing was sent: safe to retry
                raise TransientVendorError(f"{what}: cannot connect: {exc}") from exc
            try:
                conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body,
                             headers=headers)
                sent = True
                resp = conn.getresponse()
                raw = resp.read()
            except (socket.timeout, TimeoutError) as exc:
                raise OutcomeUnknown(f"{what}: no answer within {self.timeout_s:.0f} s") from exc
            except (http.client.HTTPException, OSError) as exc:
                if sent:
                    raise OutcomeUnknown(f"{what}: connection lost after the request was sent: {exc}") from exc
                raise TransientVendorError(f"{what}: {exc}") from exc
        finally:
            conn.close()
        return raw, resp


def raise_for_status(method: str, url: str, result: HttpResult) -> HttpResult:
    """The HTTP answers table above: a 2xx passes, anything else raises what it means."""
    status, data = result.status, result.body
    retry_after = result.headers.get("retry-after")
    if status == 429 or (status == 503 and retry_after is not None):
        raise RateLimited(f"{method} {url}: HTTP {status} (rate limited, Retry-After: {retry_after}): {data}",
                          retry_after_seconds(retry_after))
    if status in NOT_PERFORMED_STATUSES:
        raise TransientVendorError(f"{method} {url}: HTTP {status}: {data}")
    if status >= 500:
        raise OutcomeUnknown(f"{method} {url}: HTTP {status} may have been performed: {data}")
    if status >= 400:
        raise PermanentVendorError(f"{method} {url}: HTTP {status}: {data}")
    return result


def retry_after_seconds(value: str | None, now_s: float | None = None) -> float | None:
    """RFC 9110 Retry-After: delay-seconds or an HTTP-date; None when absent or unreadable.
    A fractional number is accepted (some vendors send one); never negative."""
    if value is None or not value.strip():
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        pass
    try:
        at = parsedate_to_datetime(value.strip()).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, at - (time.time() if now_s is None else now_s))


class SmtpTls(enum.Enum):
    #: port 587: connect in clear, then STARTTLS before anything else; a relay that does not
    #: offer it is refused (nothing is sent in clear)
    STARTTLS = "starttls"
    #: port 465: TLS from the first byte
    IMPLICIT = "implicit"
    #: no TLS: only to loopback (the config refuses it elsewhere)
    NONE = "none"


@dataclass(frozen=True, slots=True)
class SmtpRelay:
    host: str
    port: int
    tls: SmtpTls = SmtpTls.STARTTLS
    context: ssl.SSLContext | None = None
    username: Secret | None = None
    password: Secret | None = None
    timeout_s: float = 30.0

    def __str__(self) -> str:
        return f"SMTP {self.host}:{self.port}"


class _Smtp(smtplib.SMTP):
    """smtplib's client, marking when a message's DATA begins: before it, nothing of the message
    has left (a lost connection is "not performed"); from it on, the relay may have it."""

    data_began = False

    def data(self, msg: Any) -> tuple[int, bytes]:
        self.data_began = True
        return super().data(msg)


class _SmtpSsl(smtplib.SMTP_SSL):
    """``_Smtp`` with TLS from the first byte."""

    data_began = False

    def data(self, msg: Any) -> tuple[int, bytes]:
        self.data_began = True
        return super().data(msg)


#: an SMTP session of ours: it marks when DATA began
_Client = _Smtp | _SmtpSsl


class _LostBeforeData(TransientVendorError):
    """The connection was lost before the message's DATA: nothing of it was sent."""


def smtp_session(relay: SmtpRelay) -> _Client:
    """Connected, encrypted as the relay asks and logged in: nothing of a message is sent yet,
    so every failure here is "not performed" (a 4xx or a refused connection may pass; a 5xx, a
    certificate that does not verify, a relay without STARTTLS or refused credentials will not)."""
    context = relay.context or client_context(None)
    smtp: _Client | None = None
    try:
        if relay.tls is SmtpTls.IMPLICIT:
            smtp = _SmtpSsl(relay.host, relay.port, timeout=relay.timeout_s, context=context)
        else:
            smtp = _Smtp(relay.host, relay.port, timeout=relay.timeout_s)
        smtp.ehlo()
        if relay.tls is SmtpTls.STARTTLS:
            if not smtp.has_extn("starttls"):
                raise PermanentVendorError(f"{relay}: the relay does not offer STARTTLS; refusing to send in clear")
            smtp.starttls(context=context)
            smtp.ehlo()
        if relay.username is not None and relay.password is not None:
            smtp.login(relay.username.reveal(), relay.password.reveal())
        return smtp
    except PermanentVendorError:
        _quietly_close(smtp)
        raise
    except smtplib.SMTPNotSupportedError as exc:  # credentials given, and the relay offers no AUTH
        _quietly_close(smtp)
        raise PermanentVendorError(f"{relay}: {exc}; refusing to send unauthenticated") from exc
    except smtplib.SMTPResponseException as exc:
        _quietly_close(smtp)
        what = "refused the credentials" if isinstance(exc, smtplib.SMTPAuthenticationError) else "refused"
        if 400 <= exc.smtp_code < 500:
            raise TransientVendorError(f"{relay}: {exc.smtp_code} {_reply(exc)}") from exc
        raise PermanentVendorError(f"{relay} {what}: {exc.smtp_code} {_reply(exc)}") from exc
    except ssl.SSLError as exc:
        _quietly_close(smtp)
        raise PermanentVendorError(f"{relay}: TLS: {exc}") from exc
    except (smtplib.SMTPException, OSError) as exc:  # timeouts and refused connections included
        _quietly_close(smtp)
        raise TransientVendorError(f"{relay}: before sending: {type(exc).__name__}: {exc}") from exc


#: an idle session older than this is closed, not reused: relays drop idle clients (RFC 5321
#: asks servers to wait 5 minutes; many wait less)
SESSION_IDLE_S = 30.0


@dataclass(slots=True)
class _Kept:
    smtp: _Client
    #: messages sent on it
    sent: int
    idle_since_s: float


class SmtpSessions:
    """Authenticated sessions to one relay, kept open between messages: a TCP connect, a TLS
    handshake and an AUTH cost more than a message does. A kept session the relay closed while
    it idled fails at MAIL FROM, before the message's DATA: nothing of the message has left, so
    it goes once on a new session. Once DATA has begun, a session that fails makes the message
    ``OutcomeUnknown`` exactly as a new session's would, and is closed, never used again: a
    message is never sent a second time on another one.

    ``messages_per_session``: a session is closed after this many (relays cap them: Exchange's
    receive connectors take 20 by default); 1 opens a session per message. ``max_idle``: how many
    are kept at most (as many as the executor has calls in flight, say); thread-safe."""

    def __init__(self, relay: SmtpRelay, *, messages_per_session: int = 20, max_idle: int = 16) -> None:
        self.relay = relay
        self.messages_per_session = messages_per_session
        self.max_idle = max_idle
        self._idle: list[_Kept] = []
        self._lock = threading.Lock()
        #: sessions opened (a connect, TLS and AUTH each): what keeping them saves, counted
        self.opened = 0

    def send(self, message: EmailMessage, sender: str) -> None:
        """One message. Before its DATA nothing is sent; once it began, a lost connection or a
        timeout may hide a delivery: OutcomeUnknown."""
        with vendor_spans.smtp(self.relay.host, self.relay.port):
            kept = self._take()
            try:
                try:
                    _send_on(self.relay, kept.smtp, message, sender)
                except _LostBeforeData:
                    if kept.sent == 0:
                        raise  # a new session's: the runner retries as for any "not performed"
                    _quietly_close(kept.smtp)
                    kept = self._open()  # a kept one the relay had closed: nothing left on it
                    _send_on(self.relay, kept.smtp, message, sender)
            except BaseException:
                _quietly_close(kept.smtp)
                raise
            kept.sent += 1
            self._give_back(kept)

    def _take(self) -> _Kept:
        while True:
            with self._lock:
                kept = self._idle.pop() if self._idle else None
            if kept is None:
                return self._open()
            if time.monotonic() - kept.idle_since_s < SESSION_IDLE_S:
                return kept
            _quietly_close(kept.smtp)

    def _open(self) -> _Kept:
        smtp = smtp_session(self.relay)
        with self._lock:
            self.opened += 1
        return _Kept(smtp, 0, time.monotonic())

    def _give_back(self, kept: _Kept) -> None:
        if kept.sent < self.messages_per_session:
            kept.idle_since_s = time.monotonic()
            with self._lock:
                if len(self._idle) < self.max_idle:
                    self._idle.append(kept)
                    return
        _quietly_close(kept.smtp)


def smtp_send(relay: SmtpRelay, message: EmailMessage, sender: str) -> None:
    """One message, on a session of its own (``SmtpSessions`` keeps them). Before DATA nothing
    is sent; once the message is on its way, a lost connection or a timeout may hide a delivery:
    OutcomeUnknown."""
    with vendor_spans.smtp(relay.host, relay.port):
        smtp = smtp_session(relay)
        try:
            _send_on(relay, smtp, message, sender)
        finally:
            _quietly_close(smtp)


def _send_on(relay: SmtpRelay, smtp: _Client, message: EmailMessage, sender: str) -> None:
    smtp.data_began = False
    try:
        smtp.send_message(message, from_addr=sender)
    except smtplib.SMTPRecipientsRefused as exc:
        raise PermanentVendorError(f"{relay}: every recipient refused: {list(exc.recipients)!r}") from exc
    except smtplib.SMTPResponseException as exc:
        if 400 <= exc.smtp_code < 500:
            raise TransientVendorError(f"{relay}: {exc.smtp_code} {_reply(exc)}") from exc
        raise PermanentVendorError(f"{relay}: {exc.smtp_code} {_reply(exc)}") from exc
    except (smtplib.SMTPException, OSError) as exc:
        if not smtp.data_began:
            raise _LostBeforeData(f"{relay}: lost before the message was sent: {type(exc).__name__}: {exc}") from exc
        # a timeout after DATA too: smtplib turns it into SMTPServerDisconnected ("timed out")
        raise OutcomeUnknown(f"{relay}: {exc} (within {relay.timeout_s:.0f} s)") from exc


def _reply(exc: smtplib.SMTPResponseException) -> str:
    error = exc.smtp_error
    return error.decode("utf-8", "replace") if isinstance(error, bytes) else str(error)


def _quietly_close(smtp: smtplib.SMTP | None) -> None:
    if smtp is None:
        return
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        smtp.close()
