"""The HTTP API as an OpenAPI 3.1 document, built from the same policies the stream job decides
with (``tools.served_tools``): what a client generator sees and what runonce enforces cannot
drift apart."""

from __future__ import annotations

from typing import Any

from runonce.core.policy import PolicyBook
from runonce.tools.specs import KEY_ARGUMENT, served_tools
from runonce.wire.results import CallStatus

_ANSWER = {
    "type": "object",
    "required": ["action_id", "status", "advice"],
    "properties": {
        "action_id": {"type": "string", "description": "the action whose result this is (the original, for a repeat)"},
        "tool": {"type": "string"},
        "status": {"type": "string", "enum": [s.value for s in CallStatus]},
        "vendor_ref": {"type": ["string", "null"]},
        "error": {"type": ["string", "null"]},
        "reason": {"type": "string", "description": "why runonce dropped it (status dropped)"},
        "why": {"type": "string", "description": "why it waits for approval (status held)"},
        "expires_at_ms": {"type": "integer", "description": "when an unapproved hold is dropped"},
        "advice": {"type": "string", "description": "what to do next, in one sentence"},
        "receipt": {"type": "object", "description": "with signing on: the result's receipt, its signed checkpoint "
                                                     "and audit path; `runonce audit verify` proves it with the "
                                                     "public key alone (keep it as one JSON line)"},
    },
}
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}
_WAIT = {"name": "wait", "in": "query", "required": False,
         "description": "seconds to wait for the outcome before answering 202 (0: answer at once)",
         "schema": {"type": "number", "minimum": 0}}


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


def _responses(*codes: int) -> dict[str, Any]:
    words = {200: "the outcome (the same body for every retry; Idempotent-Replayed: true on a retry)",
             202: "no outcome yet (pending or held): GET the Location", 400: "not a valid call",
             401: "no valid bearer token", 403: "a tool this token may not call, or one the policy denies",
             404: "unknown", 422: "the Idempotency-Key was used with other params",
             503: "Kafka unreachable: retrying with the same key is safe"}
    out: dict[str, Any] = {}
    for code in codes:
        schema = "Answer" if code in (200, 202, 403, 422) else "Error"
        out[str(code)] = {"description": words[code], "content": _json(schema)}
    return out


def document(policies: PolicyBook) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for spec in served_tools(policies):
        params = {k: v for k, v in spec.input_schema["properties"].items() if k != KEY_ARGUMENT}
        required = [n for n in spec.input_schema["required"] if n != KEY_ARGUMENT]
        needs_key = KEY_ARGUMENT in spec.input_schema["required"]
        paths[f"/v1/actions/{spec.name}"] = {"post": {
            "operationId": f"call_{spec.name}",
            "summary": spec.description,
            "parameters": [_WAIT, {"name": "Idempotency-Key", "in": "header", "required": needs_key,
                                   "description": spec.input_schema["properties"][KEY_ARGUMENT]["description"],
                                   "schema": {"type": "string"}}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "properties": params, "required": required, "additionalProperties": True}}}},
            "responses": _responses(200, 202, 400, 401, 403, 404, 422, 503),
        }}
    paths["/v1/actions/{action_id}"] = {"get": {
        "operationId": "get_action",
        "summary": "The outcome of an action this gateway took",
        "parameters": [{"name": "action_id", "in": "path", "required": True, "schema": {"type": "string"}}, _WAIT],
        "responses": _responses(200, 202, 401, 404),
    }}
    return {
        "openapi": "3.1.0",
        "info": {"title": "runonce", "version": "1",
                 "description": "Tools performed at most once: a retry returns the first call's result."},
        "paths": paths,
        "components": {"schemas": {"Answer": _ANSWER, "Error": _ERROR},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }
