"""What the chains together say about each action, offline: every outcome an executor signed
has exactly one approving decision the stream job signed, and an action that was held was
approved by a person (its approving receipt names the approver). Chains that each verify can
still disagree with each other: an effect of an action never approved, an action approved
twice, a hold released by no one."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from runonce.core.decision import Outcome
from runonce.receipts.receipt import Kind, Receipt

APPROVED = Outcome.APPROVE.value
HELD = Outcome.HOLD.value


@dataclass(frozen=True, slots=True)
class CrossCheck:
    #: action ids with an outcome receipt
    outcomes: int = 0
    #: outcome receipts' actions with no approving decision receipt: action -> its outcome's place
    unapproved: dict[str, str] = field(default_factory=dict)
    #: actions with two or more approving decision receipts: action -> how many
    approved_twice: dict[str, int] = field(default_factory=dict)
    #: held actions performed on an approval that names no approver: action -> the approval's place
    released_by_no_one: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.unapproved or self.approved_twice or self.released_by_no_one)

    def problems(self) -> list[str]:
        """Each problem found, naming the action and the receipt (first few of each kind)."""
        out = [f"{where}: an outcome of action {a}, which no decision receipt approves"
               for a, where in sorted(self.unapproved.items())[:5]]
        out += [f"action {a}: approved by {n} decision receipts" for a, n in sorted(self.approved_twice.items())[:5]]
        out += [f"{where}: action {a} was held, and its approval names no approver"
                for a, where in sorted(self.released_by_no_one.items())[:5]]
        return out


def cross_check(receipts: Iterable[Receipt]) -> CrossCheck:
    approvals: dict[str, list[Receipt]] = defaultdict(list)
    held: set[str] = set()
    outcomes: dict[str, Receipt] = {}
    for r in receipts:
        if r.kind is Kind.OUTCOME:
            outcomes.setdefault(r.action_id, r)
        elif r.outcome == APPROVED:
            approvals[r.action_id].append(r)
        elif r.outcome == HELD:
            held.add(r.action_id)
    unapproved = {a: f"{r.chain}#{r.seq}" for a, r in outcomes.items() if not approvals.get(a)}
    twice = {a: len(found) for a, found in approvals.items() if len(found) > 1}
    by_no_one = {a: f"{found[0].chain}#{found[0].seq}" for a, found in approvals.items()
                 if a in held and a in outcomes and found[0].approver is None}
    return CrossCheck(len(outcomes), unapproved, twice, by_no_one)
