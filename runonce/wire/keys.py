"""The key rule of ``actions.requested``: the caller's idempotency key, else the action id.

Kafka's partitioner puts every retry carrying one key in one partition, so stage 1 sees them
in order; an unkeyed action is re-keyed by its content key in the stream job. Executors pass
the same value to the vendor as its idempotency key.

The SDK does better for unkeyed actions (``routing_key``): it keys them by the content key
the stream job would derive, with the same policy code, so stage 1 decides them where they
land and the re-key hop (a transaction and a read_committed read) is skipped."""

from __future__ import annotations

from typing import Any, Mapping

from runonce.core.action import Action
from runonce.core.decide import dedup_key
from runonce.core.policy import PolicyBook
from runonce.core.tenant import DEFAULT_TENANT, scoped
from runonce.errors import InvalidInput


def decision_key(dedup_key: str | None, action_id: str) -> str:
    """The key of a decision on ``actions.approved`` and ``actions.dropped``: the action's dedup
    key (so one executor partition owns a key and every action under it), else its action id.
    The stream job writes with it; the SDK finds a decision by it."""
    return dedup_key or action_id


def request_key(request: Mapping[str, Any]) -> str:
    """The action's key on actions.requested and its vendor key: the caller's idempotency key as
    its tenant's own (two tenants' equal keys are two charges at Stripe), else the action id."""
    key = request["idempotency_key"]
    return scoped(str(request.get("tenant") or DEFAULT_TENANT), str(key)) if key else str(request["action_id"])


def routing_key(request: Mapping[str, Any], policies: PolicyBook | None) -> str:
    """The Kafka key the SDK produces a request with: the caller's key; else the content key
    the stream job derives (policy permitting); else the action id."""
    if request["idempotency_key"] or policies is None:
        return request_key(request)
    try:
        action = Action.from_record(request, policies)
    except InvalidInput:
        return request_key(request)  # the stream job dead-letters it, with the reason
    return dedup_key(action, policies.for_tool(action.tool)) or request_key(request)
