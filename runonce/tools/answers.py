"""What the model is told about a tool call: one short text it can act on, the same facts as
structured content, and whether it is an error.

A repeat is not an error: the model gets the original call's result and is told the action
was not performed again. ``in_doubt`` says plainly that calling again will not help, so a
model does not retry into a second side effect; a timeout says calling again is safe."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from runonce.core.decision import Reason
from runonce.sdk.client import ActionOutcome, HeldFor
from runonce.tools.specs import Refusal
from runonce.wire.results import CallStatus

_DROPS = {
    Reason.TOOL_DENIED.value: "Denied: runonce's policy never runs this tool.",
    Reason.BUDGET_EXHAUSTED.value: "Not performed: this tool's budget for this resource is used up "
                                   "(runonce stops loops like repeated restarts). Do not retry; escalate.",
    Reason.KEY_PAYLOAD_MISMATCH.value: "Refused: this idempotency key was already used with different "
                                       "arguments. Use a new key for a different action.",
    Reason.MISSING_KEY.value: "Refused: this tool needs an idempotency_key argument.",
}


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    facts: dict[str, Any]
    is_error: bool


def answer(tool: str, outcome: ActionOutcome) -> Answer:
    facts = {"tool": tool, "action_id": outcome.action_id, "status": outcome.status,
             "vendor_ref": outcome.vendor_ref, "result_of": outcome.result_of}
    if outcome.receipt is not None:  # the agent's own copy of the signed receipt (docs/receipts.md)
        facts["receipt"] = json.loads(outcome.receipt)
    if outcome.cancelled:
        return Answer(f"Cancelled: this agent cancelled action {outcome.action_id} while it waited for a person's "
                      "approval. It was not performed.", {**facts, "drop_reason": outcome.drop_reason,
                                                           "verdict_by": outcome.verdict_by}, True)
    if outcome.status is CallStatus.DROPPED:
        reason = outcome.drop_reason or "?"
        return Answer(_DROPS.get(reason, f"Not performed: dropped by runonce ({reason})."),
                      {**facts, "drop_reason": reason}, True)
    repeat = ""
    if outcome.repeated:
        repeat = (f"Not performed again: this call repeats action {outcome.result_of} "
                  f"({outcome.repeat_reason or 'a repeat'}). The original call's result: ")
        facts["repeat_reason"] = outcome.repeat_reason
    if outcome.status is CallStatus.SUCCEEDED:
        return Answer(f"{repeat}Done: {tool} succeeded (vendor reference {outcome.vendor_ref}).", facts, False)
    if outcome.status is CallStatus.FAILED:
        return Answer(f"{repeat}Failed: the vendor refused it ({outcome.error}). It was not performed; "
                      "change the arguments before calling again.", {**facts, "error": outcome.error}, True)
    return Answer(f"{repeat}Outcome unknown (in_doubt): the vendor did not confirm whether {tool} happened "
                  f"({outcome.error}). Calling again will not perform it twice and will not tell you more: "
                  f"ask an operator to check action {outcome.result_of}.", {**facts, "error": outcome.error}, True)


def timed_out(tool: str, action_id: str | None, timeout_s: float) -> Answer:
    return Answer(f"No outcome within {timeout_s:.0f} s. The call is recorded"
                  + (f" (action {action_id})" if action_id else "")
                  + "; calling again with the same arguments is safe: runonce will not perform it twice.",
                  {"tool": tool, "action_id": action_id, "status": CallStatus.PENDING}, True)


def waiting_for_approval(tool: str, action_id: str, held: HeldFor) -> Answer:
    return Answer(f"Waiting for approval (action {action_id}): {held.why}. A person must approve it before "
                  f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(held.expires_at_ms / 1000))}; calling again "
                  "will not perform it twice.",
                  {"tool": tool, "action_id": action_id, "status": CallStatus.HELD, "why": held.why,
                   "expires_at_ms": held.expires_at_ms}, False)


def refused(tool: str, agent_id: str, why: Refusal, served: list[str]) -> Answer:
    """A call the gateway did not take (nothing was published)."""
    if why is Refusal.UNKNOWN_TOOL:
        return Answer(f"Unknown tool {tool!r}: runonce serves {', '.join(served)}.", {"tool": tool}, True)
    return Answer(f"Refused: this agent ({agent_id}) is not allowed to call {tool}. Do not retry; ask an operator "
                  "for a token that allows it.", {"tool": tool, "refused": why.value}, True)
