"""Properties of the pure decision core."""

from __future__ import annotations

import json
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runonce.core.action import Action
from runonce.core.content import canonical_json
from runonce.core.decide import decide_key, decide_scope, dedup_key
from runonce.core.decision import KeyState, Origin, Outcome, Reason, ScopeState
from runonce.core.policy import Budget, ContentWindow, KeyMode, NaturalIdRule, Policy, WindowMode

HOUR = 3_600_000


def action(tool: str = "send_email", params: dict[str, Any] | None = None, key: str | None = None,
           action_id: str | None = None) -> Action:
    return Action.from_record({"action_id": action_id or str(uuid.uuid4()), "agent_id": "a", "tool": tool,
                               "params_json": canonical_json(params or {"to": "x"}), "idempotency_key": key,
                               "natural_id": None, "requested_at_ms": 0})


def at(t: int, offset: int = 0) -> Origin:
    return Origin(0, offset, t)


KEYED = Policy("send_email", key_mode=KeyMode.DERIVE, key_ttl_ms=24 * HOUR)
params_st = st.dictionaries(st.sampled_from(["to", "subject", "body", "n"]), st.text(max_size=5) | st.integers(),
                            min_size=1)
key_st = st.none() | st.text(min_size=1, max_size=8).filter(lambda s: s.strip() != "")


def run_key(act: Action, state: KeyState | None, t: int, policy: Policy = KEYED) -> tuple[Any, KeyState | None]:
    key = dedup_key(act, policy)
    d = decide_key(act, state, policy=policy, key=key, origin=at(t))
    return d, d.new_state if d.new_state is not None else state


@given(params_st, key_st, st.integers(0, 10**12), st.integers(0, 23 * HOUR))
def test_deciding_the_same_action_twice_drops_the_second(params: dict[str, Any], key: str | None, t0: int,
                                                         gap: int) -> None:
    first, second = action(params=params, key=key), action(params=params, key=key)
    d1, state = run_key(first, None, t0)
    d2, _ = run_key(second, state, t0 + gap)
    assert d1.outcome is Outcome.APPROVE and d1.reason is Reason.UNIQUE
    assert d2.outcome is Outcome.DROP and d2.reason is Reason.DUPLICATE_KEY
    assert d2.repeat_of is not None and d2.repeat_of.action_id == first.action_id


@given(params_st, key_st, st.integers(0, 10**12), st.integers(0, 10 * HOUR))
def test_a_redelivered_action_gets_the_same_outcome_and_writes_its_claim_again(
        params: dict[str, Any], key: str | None, t0: int, gap: int) -> None:
    act = action(params=params, key=key)
    d1, state = run_key(act, None, t0)
    d2, state2 = run_key(act, state, t0 + gap)
    # the same claim, written again: it may have reached only a killed worker's disk (core/decide.py)
    assert (d2.outcome, d2.reason, d2.replay, d2.new_state) == (d1.outcome, d1.reason, True, state)
    assert state2 == state


@given(params_st, st.integers(0, 10**12))
def test_same_key_other_payload_is_a_mismatch(params: dict[str, Any], t0: int) -> None:
    d1, state = run_key(action(params=params, key="K"), None, t0)
    d2, _ = run_key(action(params={**params, "extra": 1}, key="K"), state, t0 + 1)
    assert d2.reason is Reason.KEY_PAYLOAD_MISMATCH and d2.outcome is Outcome.DROP


def test_a_key_expires_with_its_ttl_on_event_time() -> None:
    first = action(key="K")
    _, state = run_key(first, None, 1000)
    d_inside, _ = run_key(action(key="K"), state, 1000 + 24 * HOUR - 1)
    d_after, _ = run_key(action(key="K"), state, 1000 + 24 * HOUR)
    assert d_inside.reason is Reason.DUPLICATE_KEY
    assert d_after.outcome is Outcome.APPROVE and d_after.new_state is not None


def test_require_key_policy_drops_unkeyed_and_denied_tools_never_pass() -> None:
    require = Policy("charge_payment", key_mode=KeyMode.REQUIRE)
    d, _ = run_key(action("charge_payment"), None, 0, require)
    assert (d.outcome, d.reason) == (Outcome.DROP, Reason.MISSING_KEY)
    denied = Policy("execute_database_write", denied=True)
    d, _ = run_key(action("execute_database_write", key="K"), None, 0, denied)
    assert (d.outcome, d.reason, d.new_state) == (Outcome.DROP, Reason.TOOL_DENIED, None)


def test_unkeyed_actions_get_a_content_key_or_none() -> None:
    act = action()
    assert dedup_key(act, KEYED) == f"content:{act.content_hash}"
    assert dedup_key(act, Policy("x", key_mode=KeyMode.NONE)) is None
    assert dedup_key(action(key="mine"), Policy("x", key_mode=KeyMode.NONE)) == "mine"


# -- stage 2 -------------------------------------------------------------------------------
EMAIL = Policy("send_email", scope=("to",), content_window=ContentWindow(24 * HOUR, WindowMode.STRICT))
SLACK = Policy("post_slack_message", key_mode=KeyMode.NONE, scope=("channel",),
               content_window=ContentWindow(5 * 60_000, WindowMode.AUDIT))
JIRA = Policy("create_jira_ticket", scope=("project",), natural_id=NaturalIdRule(("project", "d"), 24 * HOUR))
RESTART = Policy("restart_service", key_mode=KeyMode.NONE, scope=("service",), budget=Budget(5, 20 * 60_000))


def run_scope(act: Action, state: ScopeState | None, t: int, policy: Policy) -> tuple[Any, ScopeState | None]:
    d = decide_scope(act, state, policy=policy, scope=policy.scope_key(act.params, act.action_id),
                     natural_id=policy.natural_id_for(act.params, None, act.action_id), origin=at(t))
    return d, d.new_state if d.new_state is not None else state


def test_content_window_strict_drops_and_audit_approves_with_a_record() -> None:
    e1, e2 = action(params={"to": "j", "body": "b"}), action(params={"to": "j", "body": "b"})
    _, s = run_scope(e1, None, 0, EMAIL)
    d, _ = run_scope(e2, s, 1000, EMAIL)
    assert (d.outcome, d.reason, d.repeat_of.action_id) == (Outcome.DROP, Reason.CONTENT_WINDOW, e1.action_id)
    other, _ = run_scope(action(params={"to": "j", "body": "other"}), s, 1000, EMAIL)
    assert other.outcome is Outcome.APPROVE

    p1, p2 = action("post_slack_message", {"channel": "#c", "text": "t"}), action("post_slack_message",
                                                                                  {"channel": "#c", "text": "t"})
    _, s = run_scope(p1, None, 0, SLACK)
    d, _ = run_scope(p2, s, 1000, SLACK)
    assert (d.outcome, d.reason) == (Outcome.APPROVE, Reason.CONTENT_WINDOW_AUDIT)
    d, _ = run_scope(p2, s, 5 * 60_000, SLACK)  # the window is over
    assert (d.outcome, d.reason) == (Outcome.APPROVE, Reason.UNIQUE)


def test_natural_id_is_write_once_whatever_the_key() -> None:
    t1 = action("create_jira_ticket", {"project": "P", "d": "x"}, key="k1")
    t2 = action("create_jira_ticket", {"project": "P", "d": "x"}, key="k2")
    _, s = run_scope(t1, None, 0, JIRA)
    d, _ = run_scope(t2, s, 10, JIRA)
    assert (d.outcome, d.reason, d.repeat_of.action_id) == (Outcome.DROP, Reason.NATURAL_ID_TAKEN, t1.action_id)


@given(st.integers(1, 60), st.integers(0, 10**12))
@settings(max_examples=30)
def test_budget_approves_at_most_max_per_window(n: int, t0: int) -> None:
    state, approved = None, []
    acts = [action("restart_service", {"service": "api"}) for _ in range(n)]
    for i, act in enumerate(acts):
        d, state = run_scope(act, state, t0 + i, RESTART)
        if d.outcome is Outcome.APPROVE:
            approved.append(act)
        else:
            assert d.reason is Reason.BUDGET_EXHAUSTED
    assert len(approved) == min(n, 5)
    # Replaying every action in order decides each the same way (at-least-once redelivery).
    for i, act in enumerate(acts):
        d, _ = run_scope(act, state, t0 + i, RESTART)
        assert (d.outcome is Outcome.APPROVE) == (act in approved)


def test_budget_window_slides_on_event_time() -> None:
    state = None
    for i in range(5):
        _, state = run_scope(action("restart_service", {"service": "api"}), state, i, RESTART)
    d, _ = run_scope(action("restart_service", {"service": "api"}), state, 20 * 60_000 - 1, RESTART)
    assert d.reason is Reason.BUDGET_EXHAUSTED
    d, _ = run_scope(action("restart_service", {"service": "api"}), state, 20 * 60_000, RESTART)
    assert d.outcome is Outcome.APPROVE


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"])), min_size=1, max_size=25))
@settings(max_examples=50)
def test_decisions_are_a_function_of_the_input_order(items: list[tuple[str, str]]) -> None:
    acts = [action(params={"to": to, "body": body}) for to, body in items]

    def replay() -> list[tuple[Outcome, Reason]]:
        states: dict[str, ScopeState | None] = {}
        out = []
        for i, act in enumerate(acts):
            scope = EMAIL.scope_key(act.params, act.action_id)
            d, states[scope] = run_scope(act, states.get(scope), i * 1000, EMAIL)
            out.append((d.outcome, d.reason))
        return out

    first = replay()
    assert first == replay()
    approved = [(a.params["to"], a.params["body"]) for a, (o, _) in zip(acts, first) if o is Outcome.APPROVE]
    assert sorted(approved) == sorted(set(items))  # exactly one approval per distinct (recipient, content)


def test_state_round_trips_through_bytes() -> None:
    p = action("restart_service", {"service": "s"})
    _, s = run_scope(p, None, 5, RESTART)
    assert s is not None and ScopeState.from_bytes(s.to_bytes()) == s
    _, k = run_key(action(key="K"), None, 5)
    assert k is not None and KeyState.from_bytes(k.to_bytes()) == k


@given(action_id=st.text(), content_hash=st.text(), n=st.integers(0, 2**62))
def test_the_sweeps_quick_read_of_expiry_agrees_with_the_full_parse(action_id: str, content_hash: str, n: int) -> None:
    from runonce.core.decision import Claim

    raw = KeyState(Claim(action_id, 3, n, n, n + 7), content_hash).to_bytes()
    assert KeyState.expires_at_of(raw) == KeyState.from_bytes(raw).expires_at_ms == n + 7


@given(action_id=st.text(), content_hash=st.text(), numbers=st.lists(st.integers(-1, 2**62), min_size=4, max_size=4),
       traceparent=st.none() | st.text())
def test_a_keys_state_is_stored_as_compact_json(action_id: str, content_hash: str, numbers: list[int],
                                                traceparent: str | None) -> None:
    """What a worker of any version wrote and reads: its bytes never change with its writer."""
    from runonce.core.decision import Claim

    state = KeyState(Claim(action_id, *numbers), content_hash, traceparent)
    stored: dict[str, object] = {"c": [action_id, *numbers], "h": content_hash}
    if traceparent is not None:
        stored["t"] = traceparent
    assert state.to_bytes() == json.dumps(stored, separators=(",", ":")).encode()
    assert KeyState.from_bytes(state.to_bytes()) == state


_claims = st.builds(lambda a, n, d: (a, n, n + d), st.text(max_size=8), st.integers(0, 2**50), st.integers(0, 2**20))


@given(natural=st.dictionaries(st.text(max_size=8), _claims, max_size=3),
       contents=st.dictionaries(st.text(max_size=8), _claims, max_size=3), budget=st.lists(_claims, max_size=3))
def test_the_sweeps_quick_read_of_a_scopes_expiry_agrees_with_the_full_parse(
        natural: dict[str, tuple[str, int, int]], contents: dict[str, tuple[str, int, int]],
        budget: list[tuple[str, int, int]]) -> None:
    from runonce.core.decision import Claim

    def claim(c: tuple[str, int, int]) -> Claim:
        return Claim(c[0], 1, c[1], c[1], c[2])

    state = ScopeState({k: claim(c) for k, c in natural.items()}, {k: claim(c) for k, c in contents.items()},
                       tuple(claim(c) for c in budget))
    assert ScopeState.expires_at_of(state.to_bytes()) == state.expires_at_ms
    # as stored before the expiry led the bytes (a changelog restored after an upgrade)
    earlier = json.loads(state.to_bytes())
    del earlier["e"]
    before = json.dumps(earlier, separators=(",", ":")).encode()
    assert ScopeState.expires_at_of(before) == state.expires_at_ms
    assert ScopeState.from_bytes(before) == ScopeState.from_bytes(state.to_bytes()) == state


@given(st.sampled_from([EMAIL, JIRA, RESTART]), st.integers(0, 10**12), st.integers(0, 60_000))
def test_a_redelivered_action_writes_its_scope_state_again(policy: Policy, t0: int, gap: int) -> None:
    params = {"to": "j@x", "body": "b", "project": "OPS", "d": "1", "service": "api"}
    act = action(policy.tool, params)
    d1, state = run_scope(act, None, t0, policy)
    d2, _ = run_scope(act, state, t0 + gap, policy)
    assert d1.outcome is Outcome.APPROVE and d2.replay
    # written again although unchanged: the claim may have reached only a killed worker's disk
    assert d2.outcome is Outcome.APPROVE and d2.new_state == state
