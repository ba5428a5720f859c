"""The sandbox's Google Calendar API v3 and the OAuth 2.0 token endpoint its service accounts
use, written from Google's documentation (the Calendar v3 discovery document, "Handle API
errors", "Using OAuth 2.0 for Server to Server Applications"):

* ``POST /token``: the JWT bearer grant (RFC 7523). The assertion must be signed (RS256) by the
  service account's key, name it as ``iss``, Google's token endpoint as ``aud``, a calendar scope, and
  not have expired; the answer is an access token for an hour. Else 400 ``invalid_grant``.
* ``POST /calendar/v3/calendars/<calendarId>/events``: events.insert. A client-chosen ``id``
  must be base32hex (``[a-v0-9]``, 5 to 1024 characters); an id the calendar already holds is
  refused with 409 ``duplicate``: the calendar deduplicates on it. ``start`` and ``end`` are
  required, a ``dateTime`` needs an offset or a ``timeZone``, an attendee needs an ``email``, and
  a field the Event resource does not have is refused, as Google's API refuses unknown names.
* ``GET /calendar/v3/calendars/<calendarId>/events/<eventId>``: events.get, or 404 ``notFound``.
* ``GET /calendar/v3/users/me/calendarList``: the calendar list (what ``--probe`` asks).

Every call needs ``Authorization: Bearer`` with the static token or one this endpoint issued,
else 401 with Google's ``authError`` body. Calendars whose id begins with ``nowhere`` do not
exist (404). Each event inserted is one effect in the ledger (vendor ``calendar``).
"""

from __future__ import annotations

import base64
import datetime as dt
import hmac
import json
import re
import secrets
import threading
import time
from typing import Any, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from runonce.connectors.vendors.sandbox.ledger import Effect, Ledger

#: the Event resource's fields (the discovery document's ``schemas.Event.properties``); the
#: tests keep their own copy (tests/connectors/vendor_api_facts.py) on purpose: a check of what
#: the connector sends must not take the sandbox's word for what Google accepts
EVENT_FIELDS = frozenset({
    "anyoneCanAddSelf", "attachments", "attendees", "attendeesOmitted", "colorId",
    "conferenceData", "created", "creator", "description", "end", "endTimeUnspecified", "etag", "eventType",
    "extendedProperties", "focusTimeProperties", "gadget", "guestsCanInviteOthers", "guestsCanModify",
    "guestsCanSeeOtherGuests", "hangoutLink", "htmlLink", "iCalUID", "id", "kind", "location", "locked",
    "organizer", "originalStartTime", "outOfOfficeProperties", "privateCopy", "recurrence", "recurringEventId",
    "reminders", "sequence", "source", "start", "status", "summary", "transparency", "updated", "visibility",
    "workingLocationProperties"})
SEND_UPDATES = frozenset({"all", "externalOnly", "none"})
_EVENT_ID = re.compile(r"^[a-v0-9]{5,1024}$")
_JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
#: the ``aud`` Google requires of the assertion, wherever the key's token_uri points
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"
_SCOPES = frozenset({"https://www.googleapis.com/auth/calendar", "https://www.googleapis.com/auth/calendar.events"})


def google_error(code: int, reason: str, message: str, status: str = "") -> dict[str, Any]:
    """Google's JSON error body."""
    error: dict[str, Any] = {"errors": [{"domain": "global", "reason": reason, "message": message}],
                             "code": code, "message": message}
    if status:
        error["status"] = status
    return {"error": error}


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ServiceAccountKey:
    """A service account of the sandbox's project: its key pair and its JSON key file's text."""

    def __init__(self, token_uri: str, client_email: str = "runonce@runonce-sandbox.iam.gserviceaccount.com") -> None:
        self._private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_key = self._private.public_key()
        self.key_id = secrets.token_hex(20)
        self.client_email = client_email
        self.token_uri = token_uri

    def key_json(self) -> str:
        """The key file as Google's console gives it (the fields google-auth reads)."""
        pem = self._private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()).decode()
        return json.dumps({"type": "service_account", "project_id": "runonce-sandbox",
                           "private_key_id": self.key_id, "private_key": pem, "client_email": self.client_email,
                           "client_id": "100000000000000000001", "token_uri": self.token_uri})


class GoogleCalendarApi:
    def __init__(self, ledger: Ledger, token: str, account: ServiceAccountKey | None = None) -> None:
        self.ledger = ledger
        self.account = account
        self._tokens = {token}
        self._lock = threading.Lock()
        #: (calendarId, eventId) -> the event
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.tokens_issued = 0

    def token(self, form: Mapping[str, str]) -> tuple[int, Any]:
        """The token endpoint: a signed JWT for an access token."""
        refused = self._refused_assertion(form)
        if refused is not None:
            return 400, {"error": "invalid_grant", "error_description": refused}
        issued = f"ya29.sandbox-{secrets.token_urlsafe(24)}"
        with self._lock:
            self._tokens.add(issued)
            self.tokens_issued += 1
        return 200, {"access_token": issued, "expires_in": 3599, "token_type": "Bearer"}

    def _refused_assertion(self, form: Mapping[str, str]) -> str | None:
        if form.get("grant_type") != _JWT_BEARER or not form.get("assertion"):
            return "Invalid grant: account not found"
        if self.account is None:
            return "Invalid grant: account not found"
        try:
            head, claims_part, signature = str(form["assertion"]).split(".")
            header, claims = json.loads(_b64url(head)), json.loads(_b64url(claims_part))
            self.account.public_key.verify(_b64url(signature), f"{head}.{claims_part}".encode(),
                                           padding.PKCS1v15(), hashes.SHA256())
        except (ValueError, InvalidSignature):
            return "Invalid JWT Signature."
        now = time.time()
        if header.get("alg") != "RS256" or header.get("kid") != self.account.key_id:
            return "Invalid JWT Signature."
        if claims.get("iss") != self.account.client_email or claims.get("aud") != GOOGLE_TOKEN_AUDIENCE:
            return "Invalid JWT: iss or aud is not this account's"
        if not isinstance(claims.get("exp"), int) or claims["exp"] < now or claims.get("iat", 0) > now + 60:
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."
        if not set(str(claims.get("scope", "")).split()) & _SCOPES:
            return "Invalid grant: no calendar scope"
        return None

    def authorized(self, authorization: str | None) -> bool:
        if not authorization or not authorization.startswith("Bearer "):
            return False
        given = authorization.removeprefix("Bearer ")
        with self._lock:
            return any(hmac.compare_digest(given, t) for t in self._tokens)

    def handle(self, method: str, rest: list[str], query: Mapping[str, list[str]], body: Any,
               authorization: str | None) -> tuple[int, Any]:
        """``rest``: the path after ``/calendar/v3/``."""
        if not self.authorized(authorization):
            return 401, google_error(401, "authError", "Request had invalid authentication credentials. Expected "
                                     "OAuth 2 access token, login cookie or other valid authentication credential.",
                                     "UNAUTHENTICATED")
        if method == "GET" and rest == ["users", "me", "calendarList"]:
            return 200, {"kind": "calendar#calendarList", "items": [{"id": "primary", "accessRole": "owner"}]}
        if len(rest) < 3 or rest[0] != "calendars" or rest[2] != "events":
            return 404, google_error(404, "notFound", "Not Found")
        calendar = rest[1]
        if calendar.startswith("nowhere"):
            return 404, google_error(404, "notFound", "Not Found")
        if method == "POST" and len(rest) == 3:
            return self._insert(calendar, query, body)
        if method == "GET" and len(rest) == 4:
            with self._lock:
                event = self.events.get((calendar, rest[3]))
            return (200, event) if event is not None else (404, google_error(404, "notFound", "Not Found"))
        return 404, google_error(404, "notFound", "Not Found")

    def _insert(self, calendar: str, query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        send = query.get("sendUpdates", ["none"])[-1]
        if send not in SEND_UPDATES:
            return 400, google_error(400, "invalidParameter", f"Invalid value for: sendUpdates: {send}")
        problem = _event_problem(body)
        if problem is not None:
            return 400, google_error(400, *problem)
        eid = str(body.get("id") or secrets.token_hex(13))
        event = {**body, "kind": "calendar#event", "id": eid, "status": "confirmed",
                 "htmlLink": f"https://calendar.google.com/calendar/event?eid={eid}",
                 "created": dt.datetime.now(dt.timezone.utc).isoformat()}
        with self._lock:
            if (calendar, eid) in self.events:
                return 409, google_error(409, "duplicate", "The requested identifier already exists.")
            self.events[(calendar, eid)] = event
        self.ledger.record(Effect("calendar", eid, f"event on {calendar}", {"ref": eid, "notified": send}))
        return 200, event


def _event_problem(body: Any) -> tuple[str, str] | None:
    """(reason, message) of what events.insert refuses in an Event, as Google words it."""
    if not isinstance(body, dict):
        return "parseError", "Parse Error"
    unknown = sorted(set(body) - EVENT_FIELDS)
    if unknown:
        return "invalid", f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.'
    if "id" in body and not (isinstance(body["id"], str) and _EVENT_ID.match(body["id"])):
        return "invalid", "Invalid resource id value."
    for edge in ("start", "end"):
        when = body.get(edge)
        if not isinstance(when, dict) or not (when.get("date") or when.get("dateTime")):
            return "required", f"Missing {edge} time."
        stamp = when.get("dateTime")
        if stamp:
            try:
                parsed = dt.datetime.fromisoformat(str(stamp))
            except ValueError:
                return "invalid", f"Invalid {edge} time."
            if parsed.tzinfo is None and not when.get("timeZone"):
                return "required", f"Missing time zone definition for {edge} time."
    for attendee in body.get("attendees") or []:
        if not isinstance(attendee, dict) or not attendee.get("email"):
            return "required", "Missing attendee email."
    return None
