"""Properties of human approval's pure core (runonce/core/approval.py): for any interleaving of
verdicts (approves and denies by several approvers, repeats, redeliveries, late ones), agents'
cancels (its own agent's, and another's) and expiry sweeps, a held action is released at most
once, never after a deny, a cancel or its expiry, and the first verdict, or its own agent's
cancel, in time order decides."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runonce.core.approval import (
    EXPIRY,
    ApprovalRule,
    CancelRecord,
    Change,
    Hold,
    HoldStatus,
    Verdict,
    VerdictRecord,
    agent_decider,
    decide_cancel,
    decide_verdict,
    hold,
    sweep,
)

HOUR = 3_600_000
RULE = ApprovalRule(expires_ms=24 * HOUR, above={"amount_cents": 50_000}, max_items={"to": 5})

verdict_st = st.builds(VerdictRecord, verdict_id=st.sampled_from([f"v{i}" for i in range(6)]),
                       action_id=st.just("a1"), verdict=st.sampled_from(Verdict),
                       approver=st.sampled_from(["alice", "bob", "carol"]),
                       at_ms=st.integers(0, 30 * HOUR))
#: the agent that asked for the held action
OWNER = "agent-a"
#: a cancel by the action's own agent, or by another
cancel_st = st.builds(lambda agent, i, at_ms: CancelRecord(f"{agent}-c{i}", "a1", agent, at_ms),
                      st.sampled_from([OWNER, "agent-b"]), st.integers(0, 3), st.integers(0, 30 * HOUR))
#: a verdict, a cancel, or an expiry sweep at some event time
step_st = st.one_of(verdict_st, cancel_st, st.integers(0, 30 * HOUR))
Step = VerdictRecord | CancelRecord | int


def run(steps: list[Step]) -> tuple[Hold, list[tuple[Step, Change, bool]]]:
    """What the partition owner does, record by record: decide, store the new state."""
    state = hold("a1", RULE, "amount_cents 75000 > 50000", 0)
    seen: dict[str, VerdictRecord | CancelRecord] = {}
    log: list[tuple[Step, Change, bool]] = []
    for step in steps:
        if isinstance(step, VerdictRecord):
            step = seen.setdefault(step.verdict_id, step)  # a redelivery is the same record again
            assert isinstance(step, VerdictRecord)
            d = decide_verdict(state, step)
        elif isinstance(step, CancelRecord):
            step = seen.setdefault(step.cancel_id, step)
            assert isinstance(step, CancelRecord)
            d = decide_cancel(state, step, OWNER)
        else:
            d = sweep(state, step)
        log.append((step, d.change, d.replay))
        if d.new_hold is not None:
            state = d.new_hold
    return state, log


@given(st.lists(step_st, max_size=25))
def test_a_held_action_is_released_at_most_once_and_never_after_a_deny_or_its_expiry(steps) -> None:
    final, log = run(steps)
    firsts = [(step, change) for step, change, replay in log if change is not Change.NONE and not replay]
    assert len(firsts) <= 1, f"the hold ended more than once: {firsts}"
    releases = [step for step, change, _ in log if change is Change.RELEASE]
    if releases:
        ended_by = firsts[0][0]
        assert isinstance(ended_by, VerdictRecord) and ended_by.verdict is Verdict.APPROVE
        assert ended_by.at_ms < final.expires_at_ms, "released at or after its expiry"
        assert all(r == ended_by for r in releases), "released again by another verdict"
        assert final.status is HoldStatus.RELEASED and final.decided_by == ended_by.approver


@given(st.lists(step_st, max_size=25))
def test_the_first_step_that_can_end_the_hold_decides_it(steps) -> None:
    final, log = run(steps)
    deciding = next((s for s in steps if isinstance(s, VerdictRecord)
                     or (isinstance(s, CancelRecord) and s.agent_id == OWNER)
                     or (isinstance(s, int) and s >= 24 * HOUR)), None)
    if deciding is None:
        assert final.status is HoldStatus.HELD
        return
    if isinstance(deciding, int) or deciding.at_ms >= 24 * HOUR:
        assert (final.status, final.decided_by) == (HoldStatus.EXPIRED, EXPIRY)
    elif isinstance(deciding, CancelRecord):
        assert (final.status, final.decided_by) == (HoldStatus.DENIED, agent_decider(OWNER))
    elif deciding.verdict is Verdict.APPROVE:
        assert (final.status, final.decided_by) == (HoldStatus.RELEASED, deciding.approver)
    else:
        assert (final.status, final.decided_by) == (HoldStatus.DENIED, deciding.approver)


def test_an_approvers_name_never_passes_for_an_agents_cancel() -> None:
    state = hold("a1", RULE, "always", 0)
    posing = decide_verdict(state, VerdictRecord("v1", "a1", Verdict.DENY, agent_decider(OWNER), 10))
    assert (posing.change, posing.new_hold) == (Change.NONE, None)
    assert "agent's cancel" in posing.note


@given(st.lists(verdict_st, min_size=1, max_size=10))
def test_a_redelivered_deciding_verdict_repeats_its_change_and_writes_its_state_again(verdicts) -> None:
    state, _ = run(list(verdicts))
    deciding = next(v for v in verdicts if v.verdict_id == state.decided_verdict) if state.decided_verdict else None
    if deciding is None:
        return
    again = decide_verdict(state, deciding)
    assert again.replay and again.new_hold == state
    assert again.change is {HoldStatus.RELEASED: Change.RELEASE, HoldStatus.DENIED: Change.DENY,
                            HoldStatus.EXPIRED: Change.EXPIRE}[state.status]


def test_every_later_verdict_says_who_ended_the_hold() -> None:
    state = hold("a1", RULE, "always", 0)
    first = decide_verdict(state, VerdictRecord("v1", "a1", Verdict.APPROVE, "alice", 10))
    assert first.change is Change.RELEASE and first.new_hold is not None
    second = decide_verdict(first.new_hold, VerdictRecord("v2", "a1", Verdict.APPROVE, "bob", 11))
    assert (second.change, second.new_hold, second.note) == (Change.NONE, None, "already released by alice")
    assert decide_verdict(None, VerdictRecord("v3", "a9", Verdict.DENY, "bob", 1)).note == "no action a9 is held"


@given(st.integers(-10**9, 10**9), st.lists(st.emails(), max_size=8))
def test_the_rule_holds_exactly_what_passes_a_threshold(amount: int, to: list[str]) -> None:
    why = RULE.why({"amount_cents": amount, "to": to})
    assert (why is not None) == (amount > 50_000 or len(to) > 5)
    assert ApprovalRule(expires_ms=HOUR, always=True).why({}) == "always"
    assert RULE.why({"amount_cents": True, "to": "x"}) is None  # a boolean is not an amount, a string no list


def test_the_expiry_is_exact_a_verdict_one_ms_before_decides_one_at_expires_at_ms_is_too_late() -> None:
    """The boundary itself, not expiry + 1: a hold lives for ``[held_at, expires_at_ms)``."""
    held = hold("a1", RULE, "why", 0)
    assert held.expires_at_ms == 24 * HOUR

    def verdict(at_ms: int) -> Change:
        return decide_verdict(held, VerdictRecord("v", "a1", Verdict.APPROVE, "alice", at_ms)).change

    assert verdict(held.expires_at_ms - 1) is Change.RELEASE
    assert verdict(held.expires_at_ms) is Change.EXPIRE
    assert sweep(held, held.expires_at_ms - 1).change is Change.NONE
    assert sweep(held, held.expires_at_ms).change is Change.EXPIRE
