"""Where every dedup decision is made. Pure functions: action + prior state + event time in,
Decision out. No clock, no I/O; the stream job only loads state, calls these, and stores
``decision.new_state``.

Two stages, each decided by the single owner of its key, so two workers can never both win:

1. ``decide_key``   keyed by idempotency key (or a content-derived key): retries and key reuse.
2. ``decide_scope`` keyed by the policy's scope (recipient, channel, service...):
                    write-once natural ids, content windows, budgets.

Replays are harmless by design: state records *which action* claimed each key, so
deciding the same action again (an at-least-once redelivery) gives the same outcome and
never a second approval or a false drop.
"""

from __future__ import annotations

from runonce.core.action import Action
from runonce.core.decision import Claim, Decision, KeyState, Origin, Outcome, Reason, ScopeState
from runonce.core.policy import KeyMode, Policy, WindowMode
from runonce.core.tenant import scoped

CONTENT_KEY_PREFIX = "content:"


def dedup_key(action: Action, policy: Policy) -> str | None:
    """The stage-1 key, the tenant's own: the caller's idempotency key, else one derived from
    content (policy permitting)."""
    if action.idempotency_key is not None:
        return scoped(action.tenant, action.idempotency_key)
    if policy.key_mode is KeyMode.DERIVE:
        return scoped(action.tenant, CONTENT_KEY_PREFIX + action.content_hash)
    return None


def scope_of(action: Action, policy: Policy) -> tuple[str | None, str | None]:
    """(scope key, natural id) of an action, the scope the tenant's own: the resource it touches
    (its natural ids, content windows and budget live there); (None, None) without scope rules."""
    scope, natural_id = policy.scope_of(action.params, action.natural_id, action.action_id)
    return (scoped(action.tenant, scope) if scope is not None else None), natural_id


def _claim(action: Action, origin: Origin, ttl_ms: int) -> Claim:
    return Claim(action.action_id, origin.partition, origin.offset, origin.event_time_ms,
                 origin.event_time_ms + ttl_ms)


def _outcome_after_keys(policy: Policy) -> Outcome:
    return Outcome.PASS if policy.has_scope_rules else Outcome.APPROVE


# Replays write again. A replay (a redelivered action that finds its own claim) writes its
# state again though nothing changed: the claim it finds may exist only where this worker
# stored it. An at-least-once runtime (faust) stores a change locally at once and makes it
# durable later; a worker killed in between and restarted over its own disk finds the claim,
# decides the same outcome and, writing nothing, would leave the claim on that one disk: the
# partition's next owner, restoring from the changelog, would approve the action's repeat.
# Writing it again makes the state a decision rests on as durable as the decision. (Seen in
# the faust crash test; reproduced by tests/integration/test_local_state.py.)


def decide_key(action: Action, prior: KeyState | None, *, policy: Policy, key: str | None,
               origin: Origin) -> Decision[KeyState]:
    """Stage 1. ``key`` is ``dedup_key(action, policy)``; ``prior`` is what the store holds for it."""
    if policy.denied:
        return Decision(Outcome.DROP, Reason.TOOL_DENIED, matched_key=action.tool)
    if key is None:
        if policy.key_mode is KeyMode.REQUIRE:
            return Decision(Outcome.DROP, Reason.MISSING_KEY, matched_key=action.tool)
        return Decision(_outcome_after_keys(policy), Reason.UNIQUE)  # key = "none": scope rules only
    t = origin.event_time_ms
    if prior is not None and prior.claim.live_at(t):
        if prior.claim.action_id == action.action_id:
            # A redelivery: the same outcome, and its claim written again ("Replays write again").
            return Decision(_outcome_after_keys(policy), Reason.UNIQUE, new_state=prior, replay=True)
        reason = Reason.DUPLICATE_KEY if prior.content_hash == action.content_hash else Reason.KEY_PAYLOAD_MISMATCH
        return Decision(Outcome.DROP, reason, repeat_of=prior.claim, matched_key=key, window_ms=policy.key_ttl_ms)
    state = KeyState(_claim(action, origin, policy.key_ttl_ms), action.content_hash)
    return Decision(_outcome_after_keys(policy), Reason.UNIQUE, new_state=state)


def expire(state: ScopeState, event_time_ms: int) -> ScopeState:
    """Drop every entry that has expired at this event time."""
    return ScopeState(
        {k: c for k, c in state.natural_ids.items() if c.live_at(event_time_ms)},
        {k: c for k, c in state.contents.items() if c.live_at(event_time_ms)},
        tuple(c for c in state.budget if c.live_at(event_time_ms)),
    )


def decide_scope(action: Action, prior: ScopeState | None, *, policy: Policy, scope: str,
                 natural_id: str | None, origin: Origin) -> Decision[ScopeState]:
    """Stage 2, for actions whose policy has scope rules. ``natural_id`` is ``policy.natural_id_for(...)``."""
    t = origin.event_time_ms
    state = expire(prior, t) if prior is not None else ScopeState()
    me = action.action_id
    natural_ids = dict(state.natural_ids)
    contents = dict(state.contents)
    budget = state.budget
    reason = Reason.UNIQUE
    repeat_of: Claim | None = None
    matched: str | None = None
    window_ms: int | None = None

    if policy.natural_id is not None and natural_id is not None:
        taken = natural_ids.get(natural_id)
        if taken is not None and taken.action_id != me:
            return Decision(Outcome.DROP, Reason.NATURAL_ID_TAKEN, repeat_of=taken, matched_key=natural_id,
                            window_ms=policy.natural_id.ttl_ms)
        if taken is None:
            natural_ids[natural_id] = _claim(action, origin, policy.natural_id.ttl_ms)

    if policy.content_window is not None:
        seen = contents.get(action.content_hash)
        if seen is not None and seen.action_id != me:
            if policy.content_window.mode is WindowMode.STRICT:
                return Decision(Outcome.DROP, Reason.CONTENT_WINDOW, repeat_of=seen, matched_key=scope,
                                window_ms=policy.content_window.window_ms)
            reason, repeat_of, matched = Reason.CONTENT_WINDOW_AUDIT, seen, scope
            window_ms = policy.content_window.window_ms
        if seen is None:
            contents[action.content_hash] = _claim(action, origin, policy.content_window.window_ms)

    if policy.budget is not None and not any(c.action_id == me for c in budget):
        if len(budget) >= policy.budget.max_actions:
            return Decision(Outcome.DROP, Reason.BUDGET_EXHAUSTED, repeat_of=budget[0], matched_key=scope,
                            window_ms=policy.budget.window_ms)
        budget = (*budget, _claim(action, origin, policy.budget.window_ms))

    new_state = ScopeState(natural_ids, contents, budget)
    held = (*state.natural_ids.values(), *state.contents.values(), *state.budget)
    replay = any(c.action_id == me for c in held)
    changed = prior is None or new_state != prior or replay  # "Replays write again"
    return Decision(Outcome.APPROVE, reason, new_state=new_state if changed else None, repeat_of=repeat_of,
                    matched_key=matched, window_ms=window_ms, replay=replay)
