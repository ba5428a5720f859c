"""One local HTTP server playing five vendors, each with its real idempotency semantics:

* payments  ``POST /v1/charges`` and ``GET /v1/balance`` as Stripe speaks them: a secret key as
  the Bearer token (else 401 and Stripe's error body), form-encoded parameters, Stripe's error
  bodies; ``Idempotency-Key``: a repeated key replays the saved response with
  ``Idempotent-Replayed: true``, a key in flight answers 409, a key reused with other parameters
  400 ``idempotency_error``.
* emails    ``POST /emails`` as Resend's email API speaks it: a Bearer API key, a JSON message,
  ``Idempotency-Key`` (a repeat replays the first answer; the key with another message is 409
  ``invalid_idempotent_request``): the worked example of docs/connectors.md.
* webhook   ``POST /webhook/<name>`` honours ``Idempotency-Key`` (replays, no second effect).
* slack     ``POST /slack/<channel>`` an incoming webhook: no idempotency at all.
* jira      ``POST /jira/rest/api/2/issue`` creates; ``GET /jira/rest/api/2/search?label=L`` finds
  (optionally lagging: a ``Fault`` with ``index_lag_s`` hides new issues from search for a while).
* calendar  ``PUT /calendar/<calendar>/events/<event_id>``: the client-chosen id makes it idempotent.
* salesforce ``GET|PATCH /salesforce/sobjects/<object>/<id>``: plain read and write.

``GET /_ledger`` lists every side effect, ``GET /_requests`` every request received (so a
second call is visible even where the vendor deduplicates it, and whether a rate limit refused
it); ``POST /_faults`` injects faults (connectors/sandbox/faults.py).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from runonce.connectors.sandbox.faults import Fault, Faults
from runonce.connectors.sandbox.ledger import Effect, Ledger, Request


class VendorState:
    def __init__(self, bearer_keys: dict[str, str]) -> None:
        #: path prefix -> the API key its vendor accepts as the Bearer token (Stripe's, the email API's)
        self.bearer_keys = bearer_keys
        self.lock = threading.Lock()
        self.ledger = Ledger()
        self.faults = Faults()
        #: Stripe-style idempotency: key -> ("in_flight" | (status, body), request fingerprint)
        self.keys: dict[tuple[str, str], tuple[Any, str]] = {}
        self.issues: list[dict[str, Any]] = []
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.records: dict[tuple[str, str], dict[str, Any]] = {}


class _Handler(BaseHTTPRequestHandler):
    state: VendorState  # set on the subclass built by VendorServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
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
                st.faults.add(Fault(**body))
            return self._send(200, {"ok": True})
        unauthorized = any(path.startswith(prefix) and self.headers.get("Authorization") != f"Bearer {key}"
                           for prefix, key in st.bearer_keys.items())
        retry_after_s = None if unauthorized else st.faults.rate_limited(path)
        st.ledger.received(Request(method, self.path, self.headers.get("Idempotency-Key") or "",
                                   json.dumps(body, sort_keys=True) if body is not None else "",
                                   refused=401 if unauthorized else 429 if retry_after_s is not None else 0))
        if unauthorized:
            return self._stripe_error(401, "invalid_request_error", "Invalid API Key provided")
        if retry_after_s is not None:
            return self._send(429, {"error": {"type": "invalid_request_error", "code": "rate_limit",
                                              "message": "rate limit exceeded"}}, {"Retry-After": str(retry_after_s)})
        if st.faults.take(path, "fail_500"):
            return self._send(500, {"error": "injected failure"})
        delay = st.faults.delay_for(path)
        if delay:
            time.sleep(delay)
        status, answer = self._dispatch(method, path, body)
        if st.faults.take(path, "drop_response"):
            return self._drop()  # the effect happened; the caller never hears of it
        after = st.faults.after_effect_status(path)
        if after is not None:  # the effect happened; the caller hears of a failure
            return self._send(after, {"error": f"injected {after} after the effect"})
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
        if method == "POST" and parts[0] == "webhook" and len(parts) == 2:
            return self._keyed(f"webhook:{parts[1]}", key, body, lambda: self._effect(f"webhook:{parts[1]}", key or "",
                                                                                    "delivered", body))
        if method == "POST" and parts[0] == "slack" and len(parts) == 2:
            return self._effect("slack", (body or {}).get("text", ""), f"posted to {parts[1]}", body)
        if parts[:4] == ["jira", "rest", "api", "2"]:
            return self._jira(method, parts[4:], body)
        if method == "PUT" and parts[0] == "calendar" and len(parts) == 4 and parts[2] == "events":
            return self._calendar(parts[1], parts[3], body)
        if parts[:2] == ["salesforce", "sobjects"] and len(parts) == 4:
            return self._salesforce(method, parts[2], parts[3], body)
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
        if method == "POST" and rest == ["issue"]:
            fields = (body or {}).get("fields", {})
            with self.state.lock:
                issue = {"key": f"SUP-{len(self.state.issues) + 1}", "fields": fields,
                         "indexed_at": time.monotonic()}
                self.state.issues.append(issue)
            labels = fields.get("labels") or [""]
            self.state.ledger.record(Effect("jira", labels[0], "issue created", {"ref": issue["key"]}))
            return 201, {"key": issue["key"]}
        if method == "GET" and rest == ["search"]:
            label = parse_qs(urlsplit(self.path).query).get("label", [""])[0]
            visible_before = time.monotonic() - self.state.faults.index_lag_for("/jira/rest/api/2/search")
            with self.state.lock:
                found = [i for i in self.state.issues
                         if label in (i["fields"].get("labels") or []) and i["indexed_at"] <= visible_before]
            return 200, {"issues": [{"key": i["key"]} for i in found]}
        return 404, {"error": "no such jira route"}

    def _calendar(self, calendar: str, event_id: str, body: Any) -> tuple[int, Any]:
        with self.state.lock:
            existing = self.state.events.get((calendar, event_id))
            if existing is None:
                self.state.events[(calendar, event_id)] = body
        if existing is not None:
            return 200, {"id": event_id, "status": "exists"}
        self.state.ledger.record(Effect("calendar", event_id, f"event on {calendar}", {"ref": event_id}))
        return 200, {"id": event_id, "status": "created"}

    def _salesforce(self, method: str, obj: str, rec_id: str, body: Any) -> tuple[int, Any]:
        with self.state.lock:
            record = self.state.records.setdefault((obj, rec_id), {"Id": rec_id})
            if method == "GET":
                return 200, dict(record)
            if method == "PATCH" and isinstance(body, dict):
                record.update(body)
        if method == "PATCH":
            self.state.ledger.record(Effect("salesforce", f"{obj}/{rec_id}", "field updated", {"body": body}))
            return 204, None
        return 405, {"error": "method not allowed"}

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


class VendorServer:
    """The HTTP vendors on 127.0.0.1:<port> (0 picks a free one), served from a thread."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", stripe_key: str = "sk_test_runonce_sandbox",
                 email_api_key: str = "re_runonce_sandbox") -> None:
        self.state = VendorState({"/v1/": stripe_key, "/emails": email_api_key})
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = _Server((host, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host = self.httpd.server_address[0]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{self.httpd.server_address[1]}"

    @property
    def ledger(self) -> Ledger:
        return self.state.ledger

    def start(self) -> VendorServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
