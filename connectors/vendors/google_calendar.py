"""Google Calendar, as its API v3 defines it (kind ``google-calendar``).

An action inserts one event: ``POST /calendar/v3/calendars/{calendarId}/events`` with an ``id``
of our choosing, derived from the action's natural id (else its vendor key) and written in
base32hex, the alphabet the API requires of a client-chosen id (``a``-``v`` and ``0``-``9``, 5 to
1024 characters, unique per calendar). The calendar itself then refuses a second event with
that id: 409 ``duplicate``. The connector reads the event that holds the id
(``GET …/events/{eventId}``) and answers with it. Hence ``Capability.NATURAL_KEY``: inserting
again after an unknown outcome is safe, and two actions with one natural id make one event,
the second answered with the first's event id.

Credentials are an OAuth 2.0 access token, sent as the Bearer token:
- ``service_account_key``: a service account's JSON key (``{ file = "key.json" }``). google-auth
  signs a JWT with it and trades it at the key's ``token_uri`` for an access token, which it
  renews before it expires. Its requests go through runonce's one HTTP seam.
  ``subject`` impersonates a user of your Workspace domain (domain-wide delegation).
- ``token``: an access token you obtain and renew yourself.

Google's errors are ``{"error": {"code", "message", "errors": [{"reason"}], "status"}}``, read
before the generic HTTP table (connectors/toolkit/transport.py):

    409 duplicate                   done: the event exists; read it and answer with it
    401 (authError)                 failed: Google refused the credentials (never shown)
    403/429 rateLimitExceeded,      the vendor's rate limit (every call waits, then retries)
      userRateLimitExceeded,
      quotaExceeded
    400, 403 (no access), 404       failed, not created
    5xx, timeout, lost answer       unknown: inserting again with the same id is safe
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote, urlencode

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.bearer import BearerSource, StaticBearer
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import ConnectorError, PermanentVendorError, RateLimited, TransientVendorError
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.tls import client_context
from runonce.connectors.toolkit.transport import HttpResult, VendorHttp, raise_for_status, retry_after_seconds

TOOLS = frozenset({"schedule_calendar_event"})
BASE_URL = "https://www.googleapis.com"
#: the narrowest scope that inserts and reads events
SCOPE = "https://www.googleapis.com/auth/calendar.events"
#: ``sendUpdates``: who Google notifies of the new event (the API's enum)
SEND_UPDATES = ("all", "externalOnly", "none")
#: Google's reasons for its rate limits and quotas (Calendar API, "Handle API errors")
RATE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded"})
#: what the id is derived from, versioned: a change of derivation must not reuse old ids
_ID_SALT = b"runonce/google-calendar/event-id/v1\0"
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")


def event_id(call: ActionCall) -> str:
    """The event's id: base32hex of a digest of the natural id (else the vendor key), lower case
    and unpadded: 52 characters of ``[0-9a-v]``."""
    basis = call.natural_id or call.vendor_key
    digest = hashlib.sha256(_ID_SALT + basis.encode("utf-8")).digest()
    return base64.b32hexencode(digest).decode("ascii").rstrip("=").lower()


class ServiceAccount:
    """A service account's key, through google-auth; one refresh at a time, shared by every
    thread of the executor."""

    def __init__(self, key: Secret, subject: str | None, http: VendorHttp) -> None:
        """``http``: the seam the token exchange goes through (its endpoint, absolute, is the key's)."""
        from google.oauth2 import service_account

        self.source = f"service account key {key.source}"
        try:
            info = json.loads(key.reveal())
            # google-auth leaves this one untyped
            self._credentials = service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
                info, scopes=[SCOPE], subject=subject)
        except (ValueError, KeyError) as exc:  # not JSON, or not a service account's key
            raise PermanentVendorError(f"{self.source} is not a service account's JSON key: "
                                       f"{type(exc).__name__}") from None
        self._lock = threading.Lock()
        self._http = http

    def bearer(self) -> str:
        import google.auth.exceptions

        with self._lock:
            if not self._credentials.valid:
                try:
                    self._credentials.refresh(_TokenRequest(self._http))
                except google.auth.exceptions.RefreshError as exc:
                    # google-auth's message is the token endpoint's answer: no key in it
                    what = f"Google refused the {self.source}: {exc.args[0] if exc.args else exc}"
                    if exc.retryable:
                        raise TransientVendorError(what) from exc
                    raise PermanentVendorError(what) from exc
                except google.auth.exceptions.TransportError as exc:  # nothing reached the calendar yet
                    raise TransientVendorError(f"getting an access token for the {self.source}: {exc}") from exc
            return str(self._credentials.token)


class _TokenResponse:
    def __init__(self, result: HttpResult) -> None:
        self.status = result.status
        self.headers = dict(result.headers)
        body = result.body
        self.data = (json.dumps(body) if isinstance(body, (dict, list)) else str(body or "")).encode("utf-8")


class _TokenRequest:
    """google-auth's transport (``google.auth.transport.Request``), over runonce's HTTP seam: the
    token exchange verifies TLS as every other call does, and its failures are translated once."""

    def __init__(self, http: VendorHttp) -> None:
        self._http = http

    def __call__(self, url: str, method: str = "GET", body: bytes | str | None = None,
                 headers: Mapping[str, str] | None = None, timeout: float | None = None,
                 **kwargs: object) -> _TokenResponse:
        import google.auth.exceptions

        data = body.encode("utf-8") if isinstance(body, str) else body
        try:
            return _TokenResponse(self._http.request(method, url, data, headers=headers))
        except ConnectorError as exc:
            raise google.auth.exceptions.TransportError(str(exc)) from exc  # type: ignore[no-untyped-call]


@dataclass
class GoogleCalendarConnector:
    name: str
    credentials: BearerSource
    http: VendorHttp
    send_updates: str = "all"
    default_duration_min: int = 30
    tools: frozenset[str] = TOOLS
    capability = Capability.NATURAL_KEY

    def _events_url(self, call: ActionCall) -> str:
        calendar = str(call.params.get("calendar_id") or "").strip()
        if not calendar:
            raise PermanentVendorError(f"{call.tool}: params field 'calendar_id' is required")
        return f"/calendar/v3/calendars/{quote(calendar, safe='@.')}/events"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.credentials.bearer()}", "Accept": "application/json"}

    def perform(self, call: ActionCall) -> VendorResponse:
        path = self._events_url(call)
        event = event_body(call, self.default_duration_min)
        result = self.http.request("POST", f"{path}?{urlencode({'sendUpdates': self.send_updates})}",
                                   json.dumps(event).encode(),
                                   headers={**self._headers(), "Content-Type": "application/json"})
        if result.status == 409 and "duplicate" in _reasons(result):
            return self._existing(path, event["id"])
        body = _raise_for_google("POST", self.http.url(path), result)
        return VendorResponse(str(body.get("id") or event["id"]), "created")

    def _existing(self, path: str, eid: str) -> VendorResponse:
        """The event that already holds the id: created by an earlier attempt, or action, with
        the same natural id. Its own answer names it (it may have been cancelled since)."""
        get = f"{path}/{eid}"
        try:
            body = _raise_for_google("GET", self.http.url(get), self.http.request("GET", get, headers=self._headers()))
        except ConnectorError as exc:  # the 409 said the id is taken: that is the answer
            return VendorResponse(eid, f"already scheduled (409 duplicate; reading it: {exc})")
        return VendorResponse(str(body.get("id") or eid), f"already scheduled ({body.get('status', 'confirmed')})")

    def probe(self) -> str:
        """Google Calendar's harmless authenticated call: the first entry of the calendar list."""
        path = "/calendar/v3/users/me/calendarList"
        _raise_for_google("GET", self.http.url(path),
                          self.http.request("GET", f"{path}?maxResults=1", headers=self._headers()))
        return f"GET /calendar/v3/users/me/calendarList answered ({self.credentials.source})"


def event_body(call: ActionCall, default_duration_min: int) -> dict[str, Any]:
    """The Event resource of an action's params: ``start`` (RFC 3339, or a date for an all-day
    event), ``end`` or ``duration_min``, ``time_zone``, ``title``, ``description``, ``location``,
    ``attendees`` (emails). The action's id rides along as a private extended property."""
    p = call.params
    zone = str(p.get("time_zone") or "") or None
    start, end = _times(call, zone, default_duration_min)
    event: dict[str, Any] = {"id": event_id(call), "start": start, "end": end,
                             "summary": str(p.get("title") or p.get("summary") or call.tool)[:1024],
                             "extendedProperties": {"private": {"runonceActionId": call.action_id}}}
    for field, key in (("description", "description"), ("location", "location")):
        if p.get(field):
            event[key] = str(p[field])
    attendees = p.get("attendees") or []
    if not isinstance(attendees, list) or not all(isinstance(a, str) and _EMAIL.match(a) for a in attendees):
        raise PermanentVendorError(f"{call.tool}: params field 'attendees' must be a list of email addresses")
    if attendees:
        event["attendees"] = [{"email": a} for a in attendees]
    return event


def _times(call: ActionCall, zone: str | None, default_duration_min: int) -> tuple[dict[str, str], dict[str, str]]:
    raw_start, raw_end = str(call.params.get("start") or ""), call.params.get("end")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw_start):  # an all-day event; its end is exclusive
        day = _parse(call, "start", raw_start).date()
        end_day = _parse(call, "end", str(raw_end)).date() if raw_end else day + dt.timedelta(days=1)
        return {"date": day.isoformat()}, {"date": end_day.isoformat()}
    start = _parse(call, "start", raw_start)
    if start.tzinfo is None and zone is None:  # the API's own rule for dateTime
        raise PermanentVendorError(f"{call.tool}: params field 'start' needs a time zone offset "
                                   f"(2026-12-01T15:00:00Z) or a 'time_zone' param")
    if raw_end:
        end = _parse(call, "end", str(raw_end))
    else:
        minutes = call.params.get("duration_min", default_duration_min)
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 0 < minutes <= 60 * 24 * 14:
            raise PermanentVendorError(f"{call.tool}: params field 'duration_min' must be minutes, 1 to 20160")
        end = start + dt.timedelta(minutes=minutes)
    if end <= start:
        raise PermanentVendorError(f"{call.tool}: the event ends before it starts")
    with_zone = {"timeZone": zone} if zone else {}
    return {"dateTime": start.isoformat(), **with_zone}, {"dateTime": end.isoformat(), **with_zone}


def _parse(call: ActionCall, field: str, value: str) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        raise PermanentVendorError(f"{call.tool}: params field {field!r} must be an ISO 8601 time, "
                                   f"got {value[:40]!r}") from None


def _reasons(result: HttpResult) -> set[str]:
    error = result.body.get("error") if isinstance(result.body, dict) else None
    errors = error.get("errors") if isinstance(error, dict) else None
    return {str(e.get("reason")) for e in errors or [] if isinstance(e, dict)}


def _raise_for_google(method: str, url: str, result: HttpResult) -> Mapping[str, Any]:
    body: Mapping[str, Any] = result.body if isinstance(result.body, dict) else {}
    if result.status < 400:
        return body
    raw = body.get("error")
    error: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    reasons = _reasons(result)
    said = (f"{method} {url}: HTTP {result.status} {error.get('status') or ''} "
            f"{', '.join(sorted(reasons))}: {error.get('message') or result.body}").replace("  ", " ")
    if result.status == 401:
        raise PermanentVendorError(f"{said} (Google refused the credentials)")
    if result.status in (403, 429) and (reasons & RATE_REASONS or result.status == 429):
        raise RateLimited(said, retry_after_seconds(result.headers.get("retry-after")))
    raise_for_status(method, url, result)
    return body


FIELDS = Spec("google-calendar", (
    Field("service_account_key", FieldType.SECRET, "a service account's JSON key (or `token`)", optional=True),
    Field("token", FieldType.SECRET, "an access token you renew yourself (or `service_account_key`)", optional=True),
    Field("subject", FieldType.TEXT, "the user a service account acts as (domain-wide delegation)", optional=True),
    Field("base_url", FieldType.URL, "the Calendar API", BASE_URL),
    Field("send_updates", FieldType.CHOICE, "who Google notifies of an event", "all", options=SEND_UPDATES),
    Field("default_duration_min", FieldType.INTEGER, "an event's length when an action gives no end", 30),
))


def from_config(fields: VendorFields) -> GoogleCalendarConnector:
    base_url = fields.url("base_url")
    key, token = fields.optional_secret("service_account_key"), fields.optional_secret("token")
    subject = fields.text("subject") or None
    if (key is None) == (token is None):
        raise fields.error("service_account_key", "give one of service_account_key (a service account's JSON "
                                                  "key) and token (an access token)")
    credentials: BearerSource
    if key is not None:
        try:
            # the token endpoint is the key's own (absolute): verified against ca_file, whatever base_url is
            token_http = VendorHttp("", timeout_s=fields.timeout_s, tls=client_context(fields.ca_file))
            credentials = ServiceAccount(key, subject, token_http)
        except ImportError as exc:
            raise fields.error("service_account_key", f"needs google-auth: pip install 'runonce[google]' "
                                                      f"({exc})") from None
        except PermanentVendorError as exc:
            raise fields.error("service_account_key", str(exc)) from None
    else:
        assert token is not None
        if subject:
            raise fields.error("subject", "impersonates a user through a service account's key; a token "
                                          "already belongs to its user")
        credentials = StaticBearer(token)
    return GoogleCalendarConnector(fields.name, credentials, fields.http(base_url),
                                   fields.choice("send_updates"), fields.integer("default_duration_min"),
                                   fields.tools(TOOLS))


KIND = Kind(FIELDS, from_config)
