"""``actions.approved`` / ``actions.dropped`` records read as the core's Enums.

Readers outside the stream job (the SDK, the oracle, tail, stats, the demo) look at a
decision through ``DecisionView`` instead of comparing strings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from runonce.core.decision import Outcome, Reason

#: drops whose original's result is not this action's result: a different payload under the
#: same key, or a budget slot that ran out (the earlier actions were other actions)
NOT_THE_ORIGINALS_RESULT = frozenset({Reason.KEY_PAYLOAD_MISMATCH, Reason.BUDGET_EXHAUSTED})


@dataclass(frozen=True, slots=True)
class DecisionView:
    action_id: str
    tool: str
    agent_id: str
    outcome: Outcome
    reason: Reason
    #: the action this one repeats (drops, and audit-flagged approvals)
    first_action_id: str | None
    #: where that action is in actions.requested: (partition, offset)
    first_requested_at: tuple[int, int] | None = None
    #: who ended its hold: an approver, ``expiry``, or ``agent:<id>`` for its agent's cancel
    verdict_by: str | None = None

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> DecisionView:
        request = record["request"]
        first_at = ((int(record["first_partition"]), int(record["first_offset"]))
                    if record.get("first_partition") is not None and record.get("first_offset") is not None else None)
        return cls(request["action_id"], request["tool"], request["agent_id"], Outcome(record["outcome"]),
                   Reason(record["reason"]), record["first_action_id"], first_at, record.get("verdict_by"))

    @property
    def approved(self) -> bool:
        return self.outcome is Outcome.APPROVE

    @property
    def dropped(self) -> bool:
        return self.outcome is Outcome.DROP

    @property
    def resolves_to_original(self) -> bool:
        """A drop whose outcome, for the caller, is the original action's result."""
        return (self.dropped and self.first_action_id is not None
                and self.reason not in NOT_THE_ORIGINALS_RESULT)
