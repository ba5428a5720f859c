"""One local HTTP server playing the vendors, each with its real idempotency semantics:

* payments  ``POST /v1/charges`` and ``GET /v1/balance`` as Stripe speaks them: a secret key as
  the Bearer token (else 401 and Stripe's error body), form-encoded parameters, Stripe's error
  bodies; ``Idempotency-Key``: a repeated key replays the saved response with
  ``Idempotent-Replayed: true``, a key in flight answers 409, a key reused with other parameters
  400 ``idempotency_error``.
* emails    ``POST /emails`` as Resend's email API speaks it: a Bearer API key, a JSON message,
  ``Idempotency-Key`` (a repeat replays the first answer; the key with another message is 409
  ``invalid_idempotent_request``): the worked example of docs/connectors.md.
* hooks     ``POST /hooks/<name>`` a receiver of Standard Webhooks 1.0: it checks ``webhook-id``,
  ``webhook-timestamp`` and ``webhook-signature`` against its ``whsec_`` secret (else 401) and
  performs each ``webhook-id`` once, as the specification asks receivers to.
* slack     ``POST /api/chat.postMessage`` and ``/api/auth.test`` as Slack's Web API speaks them:
  a bot token as the Bearer token (else HTTP 200 ``{"ok": false, "error": "invalid_auth"}``),
  Slack's ok/error bodies, ``ratelimited`` with 429; and an incoming webhook at
  ``POST /services/T…/B…/<secret>`` answering ``ok``. Slack deduplicates nothing.
* jira      Jira Cloud's REST v3: Basic auth (an account's email and API token, else 401);
  ``POST /rest/api/3/issue`` creates (the description must be an Atlassian Document, the
  project, summary and issue type are required, else 400 with Jira's ``errorMessages`` and
  ``errors``); ``GET /rest/api/3/search/jql?jql=labels = "L"`` finds, optionally lagging: a
  ``VendorFault`` with ``index_lag_s`` hides new issues from search for a while;
  ``GET /rest/api/3/myself`` answers who the credentials are.
* calendar  Google Calendar API v3 and its OAuth token endpoint (connectors/vendors/sandbox/google_calendar.py):
  ``POST /calendar/v3/calendars/<id>/events`` refuses a second event with one id (409 ``duplicate``).
* kubernetes the Kubernetes API server's ``apps/v1`` workloads, read and patched as ``kubectl rollout
  restart`` does (connectors/vendors/sandbox/kubernetes_api.py).
* salesforce Salesforce's REST API: an access token as the Bearer token (else 401
  ``INVALID_SESSION_ID``); ``GET /services/data/v62.0/sobjects/<SObject>/<Id>?fields=F`` reads,
  ``PATCH`` of the same path writes (204); errors as Salesforce's list of ``{message, errorCode}``.

``GET /_ledger`` lists every side effect, ``GET /_requests`` every request received, with its
headers, credentials redacted (so a
second call is visible even where the vendor deduplicates it, and whether a rate limit refused
it); ``POST /_faults`` injects faults (connectors/vendors/sandbox/faults.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import socket
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from runonce.connectors.vendors.sandbox.faults import VendorFault, VendorFaults
from runonce.connectors.vendors.sandbox.google_calendar import GoogleCalendarApi, google_error
from runonce.connectors.vendors.sandbox.kubernetes_api import KubernetesApi
from runonce.connectors.vendors.sandbox.kubernetes_api import status as kubernetes_status
from runonce.connectors.vendors.sandbox.ledger import Effect, Ledger, Request

#: request headers that carry credentials: recorded as their scheme and ``<redacted>``
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "cookie"})
#: the Slack channels the sandbox workspace treats as archived, or does not have
ARCHIVED_CHANNELS = frozenset({"archived"})
MISSING_CHANNELS = frozenset({"nowhere"})
#: Standard Webhooks: how far a webhook-timestamp may be from now (the reference library's 5 min)
HOOK_TOLERANCE_S = 300


def _jira_issue_errors(fields: dict[str, Any]) -> dict[str, str]:
    """What Jira Cloud refuses in an issue's fields (its messages, by field)."""
    errors = {}
    project = fields.get("project")
    if not isinstance(project, dict) or not project.get("key"):
        errors["project"] = "Specify a valid project ID or key"
    if not fields.get("summary"):
        errors["summary"] = "You must specify a summary of the issue."
    issuetype = fields.get("issuetype")
    if not isinstance(issuetype, dict) or not (issuetype.get("name") or issuetype.get("id")):
        errors["issuetype"] = "Specify an issue type"
    description = fields.get("description")
    if description is not None and not (isinstance(description, dict) and description.get("type") == "doc"):
        errors["description"] = "Operation value must be an Atlassian Document (see the Atlassian Document Format)"
    labels = fields.get("labels") or []
    if not isinstance(labels, list) or any(not isinstance(x, str) or " " in x for x in labels):
        errors["labels"] = "A label cannot contain spaces."
    return errors


class VendorState:
    def __init__(self, bearer_keys: dict[str, str], slack_token: str = "xoxb-runonce-sandbox",
                 webhook_secret: str = "whsec_" + base64.b64encode(b"runonce-sandbox-hooks").decode(),
                 slack_hook_path: str = "/services/T0SANDBOX/B0SANDBOX/sandbox",
                 jira_account: tuple[str, str] = ("agent@runonce.local", "jira-sandbox-token"),
                 salesforce_token: str = "00Dsandbox!runonce", google_token: str = "ya29.sandbox-static",
                 kubernetes_token: str = "sandbox-cluster-token") -> None:
        #: path prefix -> the API key its vendor accepts as the Bearer token (Stripe's, the email API's)
        self.bearer_keys = bearer_keys
        #: Slack's bot token (``xoxb-``), the hooks receiver's ``whsec_`` secret, and the path of
        #: the incoming webhook (its last segment is its secret)
        self.slack_token = slack_token
        self.webhook_secret = webhook_secret
        self.slack_hook_path = slack_hook_path
        self.slack_posts = 0
        #: Jira Cloud's Basic credentials: (email, API token)
        self.jira_account = jira_account
        #: Salesforce's OAuth access token
        self.salesforce_token = salesforce_token
        #: Standard Webhooks ids performed, per receiver: (name, webhook-id) -> the first answer
        self.hook_ids: dict[tuple[str, str], dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.ledger = Ledger()
        self.faults = VendorFaults()
        #: Stripe-style idempotency: key -> ("in_flight" | (status, body), request fingerprint)
        self.keys: dict[tuple[str, str], tuple[Any, str]] = {}
        self.issues: list[dict[str, Any]] = []
        #: Google Calendar: its events, the static access token, and the service account
        #: (``google.account``) whose signed JWTs its token endpoint trades for tokens
        self.google = GoogleCalendarApi(self.ledger, google_token)
        #: the Kubernetes API server: its workloads and the bearer token it accepts
        self.kubernetes = KubernetesApi(self.ledger, kubernetes_token)
        self.records: dict[tuple[str, str], dict[str, Any]] = {}


class _Handler(BaseHTTPRequestHandler):
    state: VendorState  # set on the subclass built by VendorServer
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as a vendor's own server sets it (Go's net/http, stripe-mock's, on every
    # connection): http.server writes an answer's headers and body apart, and with Nagle on, the
    # body of an answer on a kept-alive connection waited 40 ms for the client's delayed ACK
    disable_nagle_algorithm = True
    raw_body = b""  # the request's bytes as sent (a webhook's signature covers them)

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.raw_body = raw
        if not raw:
            return None
        if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            return {k: v[-1] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()}
        return json.loads(raw)

    def _stripe_error(self, status: int, kind: str, message: str, code: str = "") -> None:
        self._send(status, {"error": {"type": kind, "message": message, **({"code": code} if code else {})}})

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _recorded_headers(self) -> dict[str, str]:
        return {k.lower(): (v.split(" ", 1)[0] + " <redacted>" if " " in v else "<redacted>")
                if k.lower() in CREDENTIAL_HEADERS else v for k, v in self.headers.items()}

    def _slack_hook(self, path: str) -> bool:
        """A path of the incoming webhooks (``/services/T…/B…/secret``; not Salesforce's ``/services/data``)."""
        return path.startswith("/services/T")

    def _recorded_path(self) -> str:
        """The path as recorded: an incoming webhook's last segment is its secret."""
        if self._slack_hook(self.path):
            return self.path.rsplit("/", 1)[0] + "/<redacted>"
        return self.path

    def _drop(self) -> None:
        self.close_connection = True
        self.connection.close()

    def _route(self, method: str) -> None:
        path = urlsplit(self.path).path
        body = self._body() if method in ("POST", "PUT", "PATCH") else None
        st = self.state
        if path == "/_ledger":
            return self._send(200, st.ledger.as_json())
        if path == "/_requests":
            return self._send(200, st.ledger.requests_json())
        if path == "/_faults":
            if body is None:
                st.faults.clear()
            else:
                st.faults.add(VendorFault(**body))
            return self._send(200, {"ok": True})
        unauthorized = any(path.startswith(prefix) and self.headers.get("Authorization") != f"Bearer {key}"
                           for prefix, key in st.bearer_keys.items())
        retry_after_s = None if unauthorized else st.faults.rate_limited(path, method)
        st.ledger.received(Request(method, self._recorded_path(),
                                   self.headers.get("Idempotency-Key") or self.headers.get("webhook-id") or "",
                                   json.dumps(body, sort_keys=True) if body is not None else "",
                                   refused=401 if unauthorized else 429 if retry_after_s is not None else 0,
                                   headers=self._recorded_headers(), raw=self.raw_body.decode("utf-8", "replace")))
        if unauthorized:
            return self._stripe_error(401, "invalid_request_error", "Invalid API Key provided")
        if retry_after_s is not None and (path.startswith("/api/") or self._slack_hook(path)):  # Slack's own answer
            return self._send(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after_s)})
        if retry_after_s is not None and path.startswith("/apis/"):  # the Kubernetes API server's
            return self._send(429, kubernetes_status(429, "TooManyRequests", "Too many requests, please try again "
                                                     "later."), {"Retry-After": str(retry_after_s)})
        if retry_after_s is not None and path.startswith("/calendar/"):  # Google's
            return self._send(429, google_error(429, "rateLimitExceeded", "Rate Limit Exceeded"),
                              {"Retry-After": str(retry_after_s)})
        if retry_after_s is not None:
            return self._send(429, {"error": {"type": "invalid_request_error", "code": "rate_limit",
                                              "message": "rate limit exceeded"}}, {"Retry-After": str(retry_after_s)})
        if st.faults.take(path, "fail_500", method):
            return self._send(500, {"error": "injected failure"})
        delay = st.faults.delay_for(path, method)
        if delay:
            time.sleep(delay)
        status, answer = self._dispatch(method, path, body)
        if st.faults.take(path, "drop_response", method):
            return self._drop()  # the effect happened; the caller never hears of it
        after = st.faults.after_effect_status(path, method)
        if after is not None:  # the effect happened; the caller hears of a failure
            return self._send(after, {"error": f"injected {after} after the effect"})
        if isinstance(answer, str):
            return self._send_text(status, answer)
        replayed = isinstance(answer, dict) and answer.pop("idempotent_replayed", False)
        self._send(status, answer, {"Idempotent-Replayed": "true"} if replayed else None)

    def _dispatch(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        key = self.headers.get("Idempotency-Key")
        if method == "POST" and path == "/v1/charges":
            return self._keyed("payments", key, body, lambda: self._charge(key or "", body))
        if method == "POST" and path == "/emails":
            return self._email(key, body)
        if method == "GET" and path == "/v1/balance":
            return 200, {"object": "balance", "available": [{"amount": 0, "currency": "usd"}], "livemode": False}
        if method == "POST" and parts[0] == "hooks" and len(parts) == 2:
            return self._hook(parts[1], body)
        if method == "POST" and parts[0] == "api" and len(parts) == 2:
            return self._slack_api(parts[1], body if isinstance(body, dict) else {})
        if method == "POST" and self._slack_hook(path):
            return self._slack_incoming(path, body if isinstance(body, dict) else {})
        if parts[:3] == ["rest", "api", "3"]:
            return self._jira(method, parts[3:], body)
        if method == "POST" and path == "/token":
            return self.state.google.token(body if isinstance(body, dict) else {})
        if parts[0] == "apis":
            return self.state.kubernetes.handle(method, parts, parse_qs(urlsplit(self.path).query), body,
                                                {k.title(): v for k, v in self.headers.items()})
        if parts[:2] == ["calendar", "v3"]:
            return self.state.google.handle(method, parts[2:], parse_qs(urlsplit(self.path).query), body,
                                            self.headers.get("Authorization"))
        if parts[:2] == ["services", "data"] and len(parts) >= 3:
            return self._salesforce(method, parts[2:], body)
        return 404, {"error": f"no route {method} {path}"}

    def _keyed(self, vendor: str, key: str | None, body: Any, perform: Any) -> tuple[int, Any]:
        if not key:
            return 400, {"error": "Idempotency-Key header required"}
        fingerprint = json.dumps(body, sort_keys=True)
        with self.state.lock:
            saved = self.state.keys.get((vendor, key))
            if saved is not None:
                answer, saved_fp = saved
                if saved_fp != fingerprint:
                    return 400, {"error": {"type": "idempotency_error", "message": "Keys for idempotent requests "
                                           "can only be used with the same parameters they were first used with."}}
                if answer == "in_flight":
                    return 409, {"error": {"type": "idempotency_error", "code": "idempotency_key_in_use",
                                           "message": "There is currently another in-progress request using "
                                                      "this Idempotent Key."}}
                status, replay = answer
                return status, {**replay, "idempotent_replayed": True}
            self.state.keys[(vendor, key)] = ("in_flight", fingerprint)
        status, answer = perform()
        with self.state.lock:
            self.state.keys[(vendor, key)] = ((status, answer), fingerprint)
        return status, answer

    def _email(self, key: str | None, body: Any) -> tuple[int, Any]:
        """Resend's ``POST /emails``: its idempotency answers are 409s with a name."""
        if not isinstance(body, dict) or not body.get("to") or not body.get("from"):
            return 422, {"statusCode": 422, "name": "validation_error", "message": "from and to are required"}
        if not key:
            return self._effect("emails", str(body.get("to")), "email sent", body)
        status, answer = self._keyed("emails", key, body, lambda: self._effect("emails", key, "email sent", body))
        if status == 400:
            return 409, {"statusCode": 409, "name": "invalid_idempotent_request",
                         "message": "Same idempotency key used with a different request payload."}
        if status == 409:
            return 409, {"statusCode": 409, "name": "concurrent_idempotent_requests",
                         "message": "Same idempotency key used while original request is still in progress."}
        return status, answer

    def _hook(self, name: str, body: Any) -> tuple[int, Any]:
        """A Standard Webhooks receiver: verify, then perform each webhook-id once. It checks the
        signature with code of its own, not connectors/vendors/webhooks.py's signer, so a fault in that
        signer is refused here instead of being mirrored."""
        hook_id, stamp, signatures = (self.headers.get(h) or "" for h in
                                      ("webhook-id", "webhook-timestamp", "webhook-signature"))
        if not (hook_id and stamp and signatures):
            return 400, {"error": "missing webhook-id, webhook-timestamp or webhook-signature"}
        if not stamp.isdigit() or abs(time.time() - int(stamp)) > HOOK_TOLERANCE_S:
            return 401, {"error": "webhook-timestamp outside the tolerance"}
        secret = self.state.webhook_secret.removeprefix("whsec_")
        key = base64.b64decode(secret + "=" * (-len(secret) % 4))
        expected = base64.b64encode(hmac.new(key, f"{hook_id}.{stamp}.".encode() + self.raw_body,
                                             hashlib.sha256).digest()).decode()
        given = [sig.split(",", 1)[1] for sig in signatures.split(" ") if sig.startswith("v1,")]
        if not any(hmac.compare_digest(expected, sig) for sig in given):
            return 401, {"error": "no matching signature"}
        with self.state.lock:
            done = self.state.hook_ids.get((name, hook_id))
            if done is None:
                self.state.hook_ids[(name, hook_id)] = done = {"id": f"hook_{uuid.uuid4().hex[:12]}"}
                fresh = True
            else:
                fresh = False
        if fresh:
            self.state.ledger.record(Effect(f"webhook:{name}", hook_id, "delivered", {"ref": done["id"], "body": body}))
        return 200, dict(done)

    def _slack_api(self, method_name: str, body: dict[str, Any]) -> tuple[int, Any]:
        """Slack's Web API: HTTP 200 with ``ok`` and, on failure, an error code."""
        auth = self.headers.get("Authorization") or ""
        if not auth:
            return 200, {"ok": False, "error": "not_authed"}
        if not hmac.compare_digest(auth, f"Bearer {self.state.slack_token}"):
            return 200, {"ok": False, "error": "invalid_auth"}
        if method_name == "auth.test":
            return 200, {"ok": True, "url": "https://runonce-sandbox.slack.com/", "team": "runonce sandbox",
                         "user": "runonce", "team_id": "T0SANDBOX0", "user_id": "U0SANDBOX0", "bot_id": "B0SANDBOX0"}
        if method_name != "chat.postMessage":
            return 200, {"ok": False, "error": "unknown_method"}
        channel = str(body.get("channel") or "")
        name = channel.lstrip("#")
        if not name or name in MISSING_CHANNELS:
            return 200, {"ok": False, "error": "channel_not_found"}
        if name in ARCHIVED_CHANNELS:
            return 200, {"ok": False, "error": "is_archived"}
        text = str(body.get("text") or "")
        if not text and not body.get("blocks"):
            return 200, {"ok": False, "error": "no_text"}
        channel_id = channel if channel[:1] in "CGD" and channel.isupper() else \
            "C" + hashlib.sha256(name.encode()).hexdigest()[:10].upper()
        with self.state.lock:
            self.state.slack_posts += 1
            ts = f"{int(time.time())}.{self.state.slack_posts % 1_000_000:06d}"
        self.state.ledger.record(Effect("slack", text, f"posted to {channel}", {"ref": f"{channel_id}/{ts}", "body": body}))
        return 200, {"ok": True, "channel": channel_id, "ts": ts,
                     "message": {"type": "message", "text": text, "ts": ts, "bot_id": "B0SANDBOX0"}}

    def _slack_incoming(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """An incoming webhook: its URL is its credential; plain-text answers."""
        if not hmac.compare_digest(path, self.state.slack_hook_path):
            return 404, "no_service"
        if not body.get("text") and not body.get("blocks"):
            return 400, "no_text"
        self.state.ledger.record(Effect("slack", str(body.get("text") or ""), "posted by the incoming webhook",
                                        {"ref": "posted", "body": body}))
        return 200, "ok"

    def _effect(self, vendor: str, key: str, what: str, detail: Any) -> tuple[int, Any]:
        ref = f"{vendor.split(':')[0]}_{uuid.uuid4().hex[:12]}"
        self.state.ledger.record(Effect(vendor, key, what, {"ref": ref, "body": detail}))
        return 200, {"id": ref}

    def _charge(self, key: str, body: Any) -> tuple[int, Any]:
        """Stripe's Charge: form fields, so the amount arrives as digits."""
        amount = str((body or {}).get("amount", "")) if isinstance(body, dict) else ""
        if not amount.isdigit() or int(amount) <= 0:
            return 400, {"error": {"type": "invalid_request_error", "param": "amount",
                                   "message": "Invalid positive integer"}}
        if not (body.get("source") or body.get("customer")):
            return 400, {"error": {"type": "invalid_request_error",
                                   "message": "Must provide source or customer."}}
        if body.get("source") == "tok_chargeDeclined":  # Stripe's test token for a decline
            return 402, {"error": {"type": "card_error", "code": "card_declined", "message": "Your card was declined."}}
        ref = f"ch_{uuid.uuid4().hex[:14]}"
        self.state.ledger.record(Effect("payments", key, f"charged {amount}", {"ref": ref, "body": body}))
        return 200, {"id": ref, "object": "charge", "amount": int(amount), "currency": body.get("currency", "usd"),
                     "paid": True, "status": "succeeded"}

    def _jira(self, method: str, rest: list[str], body: Any) -> tuple[int, Any]:
        """Jira Cloud REST v3, with its error shape: ``errorMessages`` and ``errors``."""
        email, token = self.state.jira_account
        basic = "Basic " + base64.b64encode(f"{email}:{token}".encode()).decode()
        if not hmac.compare_digest(self.headers.get("Authorization") or "", basic):
            return 401, {"errorMessages": ["Client must be authenticated to access this resource."], "errors": {}}
        if method == "GET" and rest == ["myself"]:
            return 200, {"accountId": "5b10ac8d82e05b22cc7d4ef5", "emailAddress": email, "active": True}
        if method == "POST" and rest == ["issue"]:
            fields = (body or {}).get("fields") if isinstance(body, dict) else None
            errors = _jira_issue_errors(fields if isinstance(fields, dict) else {})
            if errors:
                return 400, {"errorMessages": [], "errors": errors}
            assert isinstance(fields, dict)
            with self.state.lock:
                number = len(self.state.issues) + 10001
                issue = {"id": str(number), "key": f"{fields['project']['key']}-{len(self.state.issues) + 1}",
                         "fields": fields, "indexed_at": time.monotonic()}
                self.state.issues.append(issue)
            labels = fields.get("labels") or [""]
            self.state.ledger.record(Effect("jira", labels[0], "issue created", {"ref": issue["key"]}))
            return 201, {"id": issue["id"], "key": issue["key"], "self": f"/rest/api/3/issue/{issue['id']}"}
        if method == "GET" and rest == ["search", "jql"]:
            jql = parse_qs(urlsplit(self.path).query).get("jql", [""])[0]
            wanted = re.fullmatch(r'\s*labels\s*=\s*"([^"]+)"\s*', jql)
            if wanted is None:
                return 400, {"errorMessages": [f"The sandbox's JQL knows only labels = \"...\": {jql!r}"],
                             "errors": {}}
            visible_before = time.monotonic() - self.state.faults.index_lag_for("/rest/api/3/search/jql")
            with self.state.lock:
                found = [i for i in self.state.issues
                         if wanted.group(1) in (i["fields"].get("labels") or []) and i["indexed_at"] <= visible_before]
            return 200, {"issues": [{"id": i["id"], "key": i["key"]} for i in found], "isLast": True}
        return 404, {"errorMessages": ["No such route in the sandbox's Jira"], "errors": {}}

    def _salesforce(self, method: str, rest: list[str], body: Any) -> tuple[int, Any]:
        """Salesforce REST: ``<version>/sobjects/<SObject>/<Id>`` read and written, ``<version>/limits``."""
        if not hmac.compare_digest(self.headers.get("Authorization") or "", f"Bearer {self.state.salesforce_token}"):
            return 401, [{"message": "Session expired or invalid", "errorCode": "INVALID_SESSION_ID"}]
        if rest[1:] == ["limits"] and method == "GET":
            return 200, {"DailyApiRequests": {"Max": 15000, "Remaining": 14999}}
        if len(rest) != 4 or rest[1] != "sobjects":
            return 404, [{"message": "The requested resource does not exist", "errorCode": "NOT_FOUND"}]
        obj, rec_id = rest[2], rest[3]
        with self.state.lock:
            record = self.state.records.setdefault((obj, rec_id), {"attributes": {"type": obj}, "Id": rec_id})
            if method == "GET":
                wanted = parse_qs(urlsplit(self.path).query).get("fields", [""])[0]
                names = [n for n in wanted.split(",") if n]
                return 200, {k: v for k, v in record.items() if not names or k in names or k in ("attributes", "Id")}
            if method == "PATCH" and isinstance(body, dict):
                bad = [k for k in body if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", k)]
                if bad:
                    return 400, [{"message": f"No such column '{bad[0]}' on sobject of type {obj}",
                                  "errorCode": "INVALID_FIELD"}]
                record.update(body)
        if method == "PATCH":
            self.state.ledger.record(Effect("salesforce", f"{obj}/{rec_id}", "field updated", {"body": body}))
            return 204, None
        return 405, [{"message": f"HTTP Method '{method}' not allowed", "errorCode": "METHOD_NOT_ALLOWED"}]

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._route("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._route("PATCH")


class _Server(ThreadingHTTPServer):
    #: connections waiting to be accepted: an executor calls with many requests in flight
    #: (socketserver's default of 5 refuses the rest)
    request_queue_size = 256


class _TlsServer(_Server):
    """HTTPS: each connection's handshake in its own handler thread (a client that never
    completes one holds only its thread, not the accept loop)."""

    def __init__(self, tls: ssl.SSLContext, address: tuple[str, int], handler: type[_Handler]) -> None:
        self.tls = tls
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address


class VendorServer:
    """The HTTP vendors on 127.0.0.1:<port> (0 picks a free one), served from a thread."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", stripe_key: str = "sk_test_runonce_sandbox",
                 email_api_key: str = "re_runonce_sandbox", slack_token: str = "xoxb-runonce-sandbox",
                 webhook_secret: str | None = None, jira_token: str = "jira-sandbox-token",
                 salesforce_token: str = "00Dsandbox!runonce", google_token: str = "ya29.sandbox-static",
                 kubernetes_token: str = "sandbox-cluster-token", tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.state = VendorState({"/v1/": stripe_key, "/emails": email_api_key}, slack_token,
                                 webhook_secret or "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode(),
                                 f"/services/T0SANDBOX/B0SANDBOX/{secrets.token_hex(12)}",
                                 ("agent@runonce.local", jira_token), salesforce_token, google_token,
                                 kubernetes_token)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = _Server((host, port), handler) if tls is None else _TlsServer(tls, (host, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host = self.httpd.server_address[0]
        host = host.decode() if isinstance(host, bytes) else host
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://{'127.0.0.1' if host == '0.0.0.0' else host}:{self.httpd.server_address[1]}"

    @property
    def ledger(self) -> Ledger:
        return self.state.ledger

    @property
    def slack_hook_url(self) -> str:
        """The incoming webhook's URL: a credential (its last segment is the secret)."""
        return self.url + self.state.slack_hook_path

    def start(self) -> VendorServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
