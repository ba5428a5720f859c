"""The HTTP API beside MCP: any language's agent calls a tool with one POST, the way every
vendor in the seeds already takes retries (Stripe's ``Idempotency-Key``).

    POST /v1/actions/{tool}?wait=S    JSON params; header Idempotency-Key (else the policy's
                                      content key decides what a retry is)
    GET  /v1/actions/{id}?wait=S      the outcome of a call this gateway took
    GET  /openapi.json                 this API for the tools the policies serve

What a retry sees (Stripe's rule): the same body as the first call, with
``Idempotent-Replayed: true``; the action this call published is in ``Runonce-Action-Id``.
The body's ``action_id`` is the action whose result it is (the original, for a repeat).

Statuses: 200 a final outcome (``status`` succeeded, failed, in_doubt, or dropped with its
``reason``); 202 no outcome yet (pending, or held for a person's approval), with a Location
to GET; 400 a call that cannot be an action (not JSON, a missing key the policy requires),
refused before anything is published; 415 a body that is not ``application/json``;
401 no valid token; 403 a tool the token may not call, or one runonce's policy denies; 404 an
unknown tool or action (or another tenant's); 413 a body over ``MAX_REQUEST_BODY_BYTES``
(refused from its Content-Length or while reading, never read whole); 422 an Idempotency-Key
already used with other params; 503 with Retry-After: Kafka unreachable or refusing (retrying
is safe). Never a 500 with a trace: the log has it, the answer says what to do."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from runonce.core import limits
from runonce.core.decision import Reason
from runonce.errors import InvalidInput, RunonceError
from runonce.gateway.auth import caller_of
from runonce.gateway.calls import Calls, Taken
from runonce.tools.specs import Refusal
from runonce.wire.results import CallStatus
from runonce.wire.trace import TRACEPARENT, TRACESTATE

log = logging.getLogger("runonce.gateway")

IDEMPOTENCY_KEY = "Idempotency-Key"
#: what a 503 asks the agent to wait, in seconds
RETRY_AFTER_S = "2"
REPLAYED = "Idempotent-Replayed"
ACTION_ID = "Runonce-Action-Id"

#: a drop that refuses the request itself, as the HTTP status a client library understands
_REFUSED = {Reason.TOOL_DENIED.value: HTTPStatus.FORBIDDEN,
            Reason.KEY_PAYLOAD_MISMATCH.value: HTTPStatus.UNPROCESSABLE_ENTITY,
            Reason.MISSING_KEY.value: HTTPStatus.BAD_REQUEST}

_ADVICE = {
    CallStatus.SUCCEEDED: "done; a retry returns this same answer",
    CallStatus.FAILED: "the vendor refused it and it was not performed; change the params before calling again",
    CallStatus.IN_DOUBT: "do not retry: the vendor did not confirm whether it happened, and calling again will "
                           "neither perform it twice nor tell you more; ask an operator to check this action",
    CallStatus.DROPPED: "not performed: runonce's policy dropped it (see reason); retrying gives the same answer",
    CallStatus.PENDING: "no outcome yet: GET the Location, or POST again with the same Idempotency-Key (safe)",
    CallStatus.HELD: "waiting for a person's approval; GET the Location later (retrying is safe)",
}


class HttpApi:
    def __init__(self, calls: Calls, *, default_wait_s: float, max_wait_s: float, held_retry_after_s: int = 60) -> None:
        self.calls = calls
        self.default_wait_s = default_wait_s
        self.max_wait_s = max_wait_s
        #: a held action's Retry-After: a person decides in minutes or hours, not in a second
        self.held_retry_after_s = held_retry_after_s

    async def post_action(self, request: Request) -> Response:
        caller = caller_of(request)
        if caller is None:  # RequireAuthMiddleware stands in front; this is its invariant
            return _error(HTTPStatus.UNAUTHORIZED, "no valid bearer token")
        tool = request.path_params["tool"]
        key = request.headers.get(IDEMPOTENCY_KEY) or None
        refusal = self.calls.refusal(caller, tool, key_given=key is not None)
        if refusal is Refusal.UNKNOWN_TOOL:
            return _error(HTTPStatus.NOT_FOUND, f"unknown tool {tool!r}: GET /openapi.json lists the tools served")
        if refusal is Refusal.NOT_ALLOWED:
            return _error(HTTPStatus.FORBIDDEN, f"this token (agent {caller.agent_id}) may not call {tool}")
        if refusal is Refusal.MISSING_KEY:
            return _error(HTTPStatus.BAD_REQUEST, f"{tool} needs an {IDEMPOTENCY_KEY} header (its policy requires "
                                                  f"one); nothing was published")
        wait_s = self._wait_s(request)
        if isinstance(wait_s, Response):
            return wait_s
        if not _is_json(request.headers.get("content-type"), request.headers.get("content-length")):
            return _error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                          "the body must be JSON params with Content-Type: application/json; nothing was published")
        body = await _bounded_body(request)
        if body is None:
            return _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                          f"the body is over {limits.MAX_REQUEST_BODY_BYTES} bytes (params_json may hold "
                          f"{limits.MAX_PARAMS_BYTES})")
        try:
            params = json.loads(body or b"{}")
        except ValueError as exc:
            return _error(HTTPStatus.BAD_REQUEST, f"the body must be a JSON object of params: {exc}")
        if not isinstance(params, dict):
            return _error(HTTPStatus.BAD_REQUEST, "the body must be a JSON object of params")
        try:
            taken = await self.calls.take(caller, tool, params, key, wait_s, trace={
                name: value for name in (TRACEPARENT, TRACESTATE) if (value := request.headers.get(name)) is not None})
        except InvalidInput as exc:
            return _error(HTTPStatus.BAD_REQUEST, str(exc))
        except RunonceError as exc:  # BrokerUnavailable, or Kafka refusing the record
            log.warning("agent %s, %s: not published: %s", caller.agent_id, tool, exc)
            return _error(HTTPStatus.SERVICE_UNAVAILABLE, f"not published: {exc}; retrying with the same "
                                                          f"Idempotency-Key is safe", {"Retry-After": RETRY_AFTER_S})
        return _answer(tool, taken, self.held_retry_after_s)

    async def get_action(self, request: Request) -> Response:
        caller = caller_of(request)
        if caller is None:
            return _error(HTTPStatus.UNAUTHORIZED, "no valid bearer token")
        action_id = request.path_params["action_id"]
        handle = self.calls.handle(action_id, caller)
        if handle is None:  # another tenant's action is not found either: 404, never 403
            return _error(HTTPStatus.NOT_FOUND, f"action {action_id} was not taken by this gateway for your tenant "
                                                f"(or is forgotten)")
        wait_s = self._wait_s(request)
        if isinstance(wait_s, Response):
            return wait_s
        return _answer(None, await self.calls.wait(handle, wait_s, caller.tenant), self.held_retry_after_s)

    def _wait_s(self, request: Request) -> float | Response:
        unknown = sorted(set(request.query_params) - {"wait"})
        if unknown:  # a misspelt ?wiat=30 must not silently mean the default wait
            return _error(HTTPStatus.BAD_REQUEST, f"unknown query parameter {unknown[0]!r}; the one known is wait")
        raw = request.query_params.get("wait")
        if raw is None:
            return self.default_wait_s
        try:
            wait_s = float(raw)
        except ValueError:
            wait_s = -1.0
        if not 0 <= wait_s <= self.max_wait_s:
            return _error(HTTPStatus.BAD_REQUEST, f"wait must be seconds from 0 to {self.max_wait_s:g}, got {raw!r}")
        return wait_s


def body_of(tool: str | None, taken: Taken) -> tuple[HTTPStatus, dict[str, Any]]:
    """The answer to a call as (HTTP status, JSON body). The body is the same for every retry
    of one action (what differs per call goes in headers)."""
    outcome = taken.outcome
    if outcome is None:
        body: dict[str, Any] = {"action_id": taken.action_id, "tool": tool, "status": CallStatus.PENDING}
        if taken.held is not None:
            body.update(status=CallStatus.HELD, why=taken.held.why, expires_at_ms=taken.held.expires_at_ms)
        return HTTPStatus.ACCEPTED, {**body, "advice": _ADVICE[body["status"]]}
    body = {"action_id": outcome.result_of, "tool": tool, "status": outcome.status,
            "vendor_ref": outcome.vendor_ref, "error": outcome.error}
    if outcome.receipt is not None:  # the caller's own copy of the signed receipt (docs/receipts.md)
        body["receipt"] = json.loads(outcome.receipt)
    if outcome.status is CallStatus.DROPPED:
        reason = outcome.drop_reason or "?"
        return _REFUSED.get(reason, HTTPStatus.OK), {**body, "reason": reason, "advice": _ADVICE[CallStatus.DROPPED]}
    return HTTPStatus.OK, {**body, "advice": _ADVICE[outcome.status]}


def _answer(tool: str | None, taken: Taken, held_retry_after_s: int) -> Response:
    status, body = body_of(tool, taken)
    if body["tool"] is None:
        body.pop("tool")
    headers = {ACTION_ID: taken.action_id}
    if taken.outcome is not None and taken.outcome.repeated:
        headers[REPLAYED] = "true"
        if taken.outcome.repeat_reason:
            headers["Runonce-Repeat-Reason"] = taken.outcome.repeat_reason
    if taken.outcome is None:
        headers["Location"] = f"/v1/actions/{taken.action_id}"
        headers["Retry-After"] = str(held_retry_after_s if taken.held is not None else 1)
    return JSONResponse(body, status_code=status, headers=headers)


def _error(status: HTTPStatus, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _is_json(content_type: str | None, content_length: str | None) -> bool:
    """application/json or a ``+json`` type, parameters aside; a call with no body at all may
    leave it out (its params are ``{}``). A form or text body is refused, never guessed at:
    curl's default ``-d`` sends application/x-www-form-urlencoded."""
    if content_type is None:
        return content_length in (None, "0")
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


async def _bounded_body(request: Request) -> bytes | None:
    """The body, or None once it is over ``MAX_REQUEST_BODY_BYTES``: by its Content-Length
    before anything is read, else while reading (a chunked body states no length)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limits.MAX_REQUEST_BODY_BYTES):
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limits.MAX_REQUEST_BODY_BYTES:
            return None
    return bytes(body)
