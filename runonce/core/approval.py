"""Human approval, decided like every other decision: pure functions of a held action's state,
a verdict and the verdict's event time. No clock, no I/O.

An action whose policy asks for a person's yes is *held* (``hold``), not approved. Verdicts
(approve or deny, by an approver) are records routed to the owner of the held action, who
calls ``decide_verdict`` once per verdict, in order:

    HELD ──first approve before expiry──▶ RELEASED   (the action goes on, with its approver)
     │  ──first deny before expiry─────▶ DENIED     (dropped: approval_denied)
     └──any verdict or sweep at/after expiry─▶ EXPIRED (dropped: approval_expired)

Every other verdict changes nothing and says why (already released, by whom). Two people
clicking approve at once are two records in one partition: the first releases, the second
finds RELEASED.

An agent that gives up on its held action cancels it (``decide_cancel``): a deny whose decider
is the agent (``agent:<agent id>``), decided as a verdict is, so a release that came first
stands. Only the agent that asked for the action may cancel it, and a cancel can only deny:
agents write cancels to a topic of their own (actions.cancels), never a verdict, so no agent
can approve its own action. An approver's name never starts ``agent:``.

A verdict decided again (a redelivery) repeats its own change and writes its state again, as
stage 1 and 2 replays do ("Replays write again" in decide.py).

A policy asks for approval with ``approval = {...}`` (core/policy.py); the stream job
holds, routes verdicts and sweeps expiries in streams/holds.py.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping


class HoldStatus(enum.Enum):
    HELD = "held"
    RELEASED = "released"
    DENIED = "denied"
    EXPIRED = "expired"


class Verdict(enum.Enum):
    APPROVE = "approve"
    DENY = "deny"


class Change(enum.Enum):
    RELEASE = "release"
    DENY = "deny"
    EXPIRE = "expire"
    #: recorded as having changed nothing (a late, repeated or unknown verdict)
    NONE = "none"


#: who decides an expiry
EXPIRY = "expiry"
#: how the decider of a hold its own agent cancelled is named: ``agent:<agent id>``
AGENT_DECIDER_PREFIX = "agent:"


def agent_decider(agent_id: str) -> str:
    """The decider's name of a hold ``agent_id`` cancelled."""
    return AGENT_DECIDER_PREFIX + agent_id


def cancelled_by_agent(decided_by: str | None) -> bool:
    """Whether a hold ended by ``decided_by`` was its agent's cancel, not a person's deny."""
    return decided_by is not None and decided_by.startswith(AGENT_DECIDER_PREFIX)


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """When a tool's action needs a person's yes: always, or when a numeric params field is
    above a threshold, or a list field has more than N items; for at most ``expires_ms``."""

    expires_ms: int
    always: bool = False
    above: Mapping[str, float] = field(default_factory=dict)
    max_items: Mapping[str, int] = field(default_factory=dict)

    def why(self, params: Mapping[str, Any]) -> str | None:
        """Why these params need approval, or None when they do not."""
        if self.always:
            return "always"
        for name, limit in sorted(self.above.items()):
            value = params.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > limit:
                return f"{name} {value} > {int(limit) if float(limit).is_integer() else limit}"
        for name, most in sorted(self.max_items.items()):
            value = params.get(name)
            if isinstance(value, list) and len(value) > most:
                return f"{name} has {len(value)} items > {most}"
        return None


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    verdict_id: str
    action_id: str
    verdict: Verdict
    approver: str
    at_ms: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CancelRecord:
    """An agent's cancel of its own held action (actions.cancels)."""

    cancel_id: str
    action_id: str
    agent_id: str
    at_ms: int
    reason: str = ""

    def as_verdict(self) -> VerdictRecord:
        """The deny it is, decided by the agent."""
        return VerdictRecord(self.cancel_id, self.action_id, Verdict.DENY, agent_decider(self.agent_id), self.at_ms,
                             self.reason)


@dataclass(frozen=True, slots=True)
class Hold:
    """The state of one held action."""

    action_id: str
    held_at_ms: int
    expires_at_ms: int
    why: str
    status: HoldStatus = HoldStatus.HELD
    #: the approver (or ``EXPIRY``) and the verdict that ended the hold
    decided_by: str | None = None
    decided_verdict: str | None = None
    decided_at_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"a": self.action_id, "t": self.held_at_ms, "x": self.expires_at_ms, "w": self.why,
                "s": self.status.value, "b": self.decided_by, "v": self.decided_verdict, "d": self.decided_at_ms}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Hold:
        return cls(str(raw["a"]), int(raw["t"]), int(raw["x"]), str(raw["w"]), HoldStatus(raw["s"]),
                   raw["b"], raw["v"], raw["d"])

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class VerdictDecision:
    change: Change
    #: the state to store; None leaves the store as it is
    new_hold: Hold | None = None
    #: for Change.NONE: why nothing changed
    note: str = ""
    replay: bool = False


def hold(action_id: str, rule: ApprovalRule, why: str, event_time_ms: int, prior: Hold | None = None) -> Hold:
    """The hold of an action its policy holds. ``prior``: the hold this action already has (its
    decision replayed): kept as it is, so a replay never reopens a released or denied hold."""
    if prior is not None:
        return prior
    return Hold(action_id, event_time_ms, event_time_ms + rule.expires_ms, why)


def decide_verdict(prior: Hold | None, verdict: VerdictRecord) -> VerdictDecision:
    """An approver's verdict (actions.approvals)."""
    if cancelled_by_agent(verdict.approver):
        return VerdictDecision(Change.NONE, note=f"an approver's name never starts {AGENT_DECIDER_PREFIX!r}: "
                                                 "that is an agent's cancel, which only actions.cancels carries")
    return _decide(prior, verdict)


def decide_cancel(prior: Hold | None, cancel: CancelRecord, asked_by: str | None) -> VerdictDecision:
    """An agent's cancel (actions.cancels) of the held action ``asked_by`` asked for: a deny by
    that agent, or nothing (another agent's cancel, an action not held)."""
    if prior is not None and cancel.agent_id != asked_by:
        return VerdictDecision(Change.NONE, note="only the agent that asked for an action may cancel it")
    return _decide(prior, cancel.as_verdict())


def _decide(prior: Hold | None, verdict: VerdictRecord) -> VerdictDecision:
    if prior is None:
        return VerdictDecision(Change.NONE, note=f"no action {verdict.action_id} is held")
    if prior.status is not HoldStatus.HELD:
        if verdict.verdict_id == prior.decided_verdict:  # a redelivery of the deciding verdict
            return VerdictDecision(_change_of(prior.status), new_hold=prior, replay=True)
        return VerdictDecision(Change.NONE, note=f"already {prior.status.value} by {prior.decided_by}")
    if verdict.at_ms >= prior.expires_at_ms:
        return _end(prior, HoldStatus.EXPIRED, EXPIRY, verdict.verdict_id, prior.expires_at_ms)
    status = HoldStatus.RELEASED if verdict.verdict is Verdict.APPROVE else HoldStatus.DENIED
    return _end(prior, status, verdict.approver, verdict.verdict_id, verdict.at_ms)


def sweep(prior: Hold, event_time_ms: int) -> VerdictDecision:
    """The expiry of a hold no verdict ended, once event time passes it."""
    if prior.status is HoldStatus.HELD and event_time_ms >= prior.expires_at_ms:
        return _end(prior, HoldStatus.EXPIRED, EXPIRY, None, prior.expires_at_ms)
    return VerdictDecision(Change.NONE, note="not due")


def _end(prior: Hold, status: HoldStatus, by: str, verdict_id: str | None, at_ms: int) -> VerdictDecision:
    return VerdictDecision(_change_of(status), new_hold=replace(prior, status=status, decided_by=by,
                                                                decided_verdict=verdict_id, decided_at_ms=at_ms))


def _change_of(status: HoldStatus) -> Change:
    return {HoldStatus.RELEASED: Change.RELEASE, HoldStatus.DENIED: Change.DENY,
            HoldStatus.EXPIRED: Change.EXPIRE, HoldStatus.HELD: Change.NONE}[status]
