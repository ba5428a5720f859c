"""The key rule of ``actions.requested``: the caller's idempotency key, else the action id.

Kafka's partitioner puts every retry carrying one key in one partition, so stage 1 sees them
in order; an unkeyed action is re-keyed by its content key in the stream job. Executors pass
the same value to the vendor as its idempotency key."""

from __future__ import annotations

from typing import Any, Mapping


def request_key(request: Mapping[str, Any]) -> str:
    return str(request["idempotency_key"] or request["action_id"])
