"""Across chains, offline (runonce/receipts/cross.py): every action an executor signed an
outcome for was approved exactly once by a signed decision, and a held one by its approver."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runonce.receipts.cross import cross_check
from runonce.receipts.receipt import Kind, Receipt


def _r(action: str, kind: Kind, outcome: str, approver: str | None = None, seq: int = 0) -> Receipt:
    chain = "decisions/0" if kind is Kind.DECISION else "outcomes/runonce-exec-payments/0"
    return Receipt(chain, seq, "", kind, action, "t", "a", "charge_payment", "p" * 64, "", outcome, "",
                   "r" * 64, 1, approver)


def _history(action: str, held: bool) -> list[Receipt]:
    """An action's receipts as runonce writes them: held then released by a person, or approved; performed."""
    decisions = ([_r(action, Kind.DECISION, "HELD"), _r(action, Kind.DECISION, "APPROVED", approver="ana")]
                 if held else [_r(action, Kind.DECISION, "APPROVED")])
    return [*decisions, _r(action, Kind.OUTCOME, "succeeded")]


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=20, unique_by=lambda t: t[0]))
def test_actions_decided_and_performed_as_runonce_does_pass(actions: list[tuple[int, bool]]) -> None:
    found = cross_check([r for a, held in actions for r in _history(f"a{a}", held)])
    assert found.ok and found.outcomes == len(actions), found.problems()


def test_an_effect_no_decision_approved_is_named() -> None:
    found = cross_check([*_history("a1", False), _r("a2", Kind.OUTCOME, "succeeded", seq=7),
                         _r("a3", Kind.DECISION, "DROPPED"), _r("a3", Kind.OUTCOME, "succeeded", seq=8)])
    assert found.unapproved == {"a2": "outcomes/runonce-exec-payments/0#7", "a3": "outcomes/runonce-exec-payments/0#8"}
    assert "outcomes/runonce-exec-payments/0#7: an outcome of action a2, which no decision receipt approves" in (
        found.problems())


def test_an_action_approved_twice_is_named() -> None:
    found = cross_check([*_history("a1", False), _r("a1", Kind.DECISION, "APPROVED", seq=5)])
    assert found.approved_twice == {"a1": 2} and not found.ok


def test_a_held_action_performed_on_an_approval_that_names_no_approver_is_named() -> None:
    found = cross_check([_r("a1", Kind.DECISION, "HELD"), _r("a1", Kind.DECISION, "APPROVED", seq=1),
                         _r("a1", Kind.OUTCOME, "succeeded")])
    assert found.released_by_no_one == {"a1": "decisions/0#1"} and not found.ok
