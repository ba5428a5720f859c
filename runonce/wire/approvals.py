"""Verdicts on held actions, as records: where one goes and what it holds.

A held action's record (``actions.held``, outcome HELD) names the partition of its hold
(``hold_partition``). A verdict on it is written to that partition of ``actions.approvals``,
keyed by the action id: the worker that owns the partition owns the hold (it owns partition
p of every input topic), so it decides the action's verdicts one at a time, in order. An
agent's cancel of its own held action goes the same way, to ``actions.cancels``."""

from __future__ import annotations

import uuid
from typing import Any, Mapping

from runonce.core.approval import Verdict


def verdict_partition(held: Mapping[str, Any]) -> int:
    """The ``actions.approvals`` partition of a verdict on ``held`` (an ActionDecision, HELD)."""
    partition = held.get("hold_partition")
    if not isinstance(partition, int):
        raise ValueError(f"action {held['request']['action_id']} names no hold partition: it was not held")
    return partition


def cancel_record(action_id: str, agent_id: str, reason: str = "", cancel_id: str | None = None) -> dict[str, Any]:
    """An ActionCancel: ``agent_id`` cancels the held action it asked for."""
    return {"cancel_id": cancel_id or str(uuid.uuid4()), "action_id": action_id, "agent_id": agent_id,
            "reason": reason}


def verdict_record(action_id: str, verdict: Verdict, approver: str, reason: str = "",
                   verdict_id: str | None = None) -> dict[str, Any]:
    """An ApprovalVerdict. ``verdict_id`` is one per click: sent again, it is one verdict."""
    return {"verdict_id": verdict_id or str(uuid.uuid4()), "action_id": action_id, "verdict": verdict.value,
            "approver": approver, "reason": reason}
