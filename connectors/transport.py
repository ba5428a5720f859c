"""The one I/O seam of the HTTP and SMTP connectors: every foreign exception becomes a
ConnectorError here, with the rule that decides safety: a request that may have reached
the vendor and whose answer we did not see, or whose answer does not say it was refused,
is an OutcomeUnknown, never a failure and never a blind retry.

HTTP answers, for every HTTP connector (payments, webhook, slack, jira, calendar, salesforce):

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
    not performed, never retry                a 5xx reply, every recipient refused
    may have been performed: OutcomeUnknown   a timeout, or the connection lost, once connected
                                              (the relay may have queued the message after DATA)

An OutcomeUnknown is retried only where that is safe: a connector with a vendor key calls
again with the same key, one with a state check asks first, the rest are ``in_doubt``
(connectors/runner.py)."""

from __future__ import annotations

import http.client
import json
import smtplib
import socket
import time
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from typing import Any, Mapping
from urllib.parse import urlsplit

from runonce.connectors.errors import OutcomeUnknown, PermanentVendorError, RateLimited, TransientVendorError


#: HTTP statuses that say the vendor did not act and a retry may succeed
NOT_PERFORMED = frozenset({409, 429, 503})


@dataclass(frozen=True, slots=True)
class HttpResult:
    status: int
    body: Any


def http_json(method: str, url: str, payload: Mapping[str, Any] | None = None, *,
              headers: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> HttpResult:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout_s)
    body = json.dumps(payload).encode() if payload is not None else None
    sent = False
    try:
        try:
            conn.connect()
        except OSError as exc:  # nothing was sent: safe to retry
            raise TransientVendorError(f"{method} {url}: cannot connect: {exc}") from exc
        try:
            conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body,
                         headers={"Content-Type": "application/json", **(headers or {})})
            sent = True
            resp = conn.getresponse()
            raw = resp.read()
        except (socket.timeout, TimeoutError) as exc:
            raise OutcomeUnknown(f"{method} {url}: no answer within {timeout_s:.0f} s") from exc
        except (http.client.HTTPException, OSError) as exc:
            if sent:
                raise OutcomeUnknown(f"{method} {url}: connection lost after the request was sent: {exc}") from exc
            raise TransientVendorError(f"{method} {url}: {exc}") from exc
    finally:
        conn.close()
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = raw.decode("utf-8", "replace")
    retry_after = resp.getheader("Retry-After")
    if resp.status == 429 or (resp.status == 503 and retry_after is not None):
        raise RateLimited(f"{method} {url}: HTTP {resp.status} (rate limited, Retry-After: {retry_after}): {data}",
                          retry_after_seconds(retry_after))
    if resp.status in NOT_PERFORMED:
        raise TransientVendorError(f"{method} {url}: HTTP {resp.status}: {data}")
    if resp.status >= 500:
        raise OutcomeUnknown(f"{method} {url}: HTTP {resp.status} may have been performed: {data}")
    if resp.status >= 400:
        raise PermanentVendorError(f"{method} {url}: HTTP {resp.status}: {data}")
    return HttpResult(resp.status, data)


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


def smtp_send(host: str, port: int, message: EmailMessage, timeout_s: float = 30.0) -> None:
    try:
        with smtplib.SMTP(host, port, timeout=timeout_s) as smtp:
            smtp.send_message(message)
    except (socket.timeout, TimeoutError) as exc:
        raise OutcomeUnknown(f"SMTP {host}:{port}: no answer within {timeout_s:.0f} s") from exc
    except smtplib.SMTPConnectError as exc:
        raise TransientVendorError(f"SMTP {host}:{port}: {exc}") from exc
    except smtplib.SMTPRecipientsRefused as exc:
        raise PermanentVendorError(f"SMTP {host}:{port}: every recipient refused: {exc.recipients!r}") from exc
    except smtplib.SMTPResponseException as exc:
        if 400 <= exc.smtp_code < 500:
            raise TransientVendorError(f"SMTP {exc.smtp_code}: {exc.smtp_error!r}") from exc
        raise PermanentVendorError(f"SMTP {exc.smtp_code}: {exc.smtp_error!r}") from exc
    except ConnectionRefusedError as exc:
        raise TransientVendorError(f"SMTP {host}:{port}: connection refused") from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise OutcomeUnknown(f"SMTP {host}:{port}: {exc}") from exc
