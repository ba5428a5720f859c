"""What a report shows, counted from flat rows (``runonce/ops/export.py``'s ``row``): pure,
so the page's numbers can be checked against the oracle's for the same range."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from runonce.core.decision import Outcome, Reason
from runonce.core.tenant import DEFAULT_TENANT
from runonce.wire.results import Status

#: a chart's time axis has at least this many buckets, each of one of the STEPS
BUCKETS = 24
#: bucket widths a reader counts in: 1 s .. 1 day
STEPS_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 300_000, 600_000, 1_800_000, 3_600_000, 3 * 3_600_000,
            6 * 3_600_000, 12 * 3_600_000, 86_400_000)


@dataclass(frozen=True, slots=True)
class Budget:
    tool: str
    scope: str
    stopped: int
    first_ms: int
    last_ms: int


@dataclass(frozen=True, slots=True)
class Doubt:
    action_id: str
    tool: str
    vendor_ref: str | None
    error: str | None
    at_ms: int


@dataclass
class Summary:
    since_ms: int
    until_ms: int
    approved: int = 0
    dropped: int = 0
    unreadable: int = 0
    drops_by_reason: Counter[str] = field(default_factory=Counter)
    drops_by_tool: Counter[str] = field(default_factory=Counter)
    #: drops by the tenant whose action was dropped (a row without one is the default tenant's)
    drops_by_tenant: Counter[str] = field(default_factory=Counter)
    #: bucket start (ms) -> reason -> drops
    drops_over_time: dict[int, Counter[str]] = field(default_factory=dict)
    #: (tool, key or scope matched) -> repeats dropped
    repeated: Counter[tuple[str, str]] = field(default_factory=Counter)
    budgets: list[Budget] = field(default_factory=list)
    in_doubt: list[Doubt] = field(default_factory=list)
    dead_letters_by_type: Counter[str] = field(default_factory=Counter)
    bucket_ms: int = 60_000
    #: held for a person's approval in the range, and of the approvals, those a person released
    #: (denied and expired holds are drops: approval_denied, approval_expired)
    held: int = 0
    released: int = 0

    @property
    def decided(self) -> int:
        return self.approved + self.dropped


def bucket_ms(since_ms: int, until_ms: int) -> int:
    """The widest of ``STEPS_MS`` that still gives ``BUCKETS`` bars across the range."""
    fitting = [step for step in STEPS_MS if (until_ms - since_ms) / step >= BUCKETS]
    return fitting[-1] if fitting else STEPS_MS[0]


def summarize(decisions: Iterable[dict[str, Any]], results: Iterable[dict[str, Any]],
              dead_letters: Iterable[dict[str, Any]], since_ms: int, until_ms: int) -> Summary:
    """Count one range's rows: decisions (approved and dropped), results, dead letters."""
    s = Summary(since_ms, until_ms, bucket_ms=bucket_ms(since_ms, until_ms))
    budgets: dict[tuple[str, str], list[int]] = {}
    for r in decisions:
        if r.get("kind") != "decision":
            s.unreadable += 1
            continue
        if r["decision"] == Outcome.HOLD.value:
            s.held += 1
            continue
        if r["decision"] == Outcome.APPROVE.value:
            s.approved += 1
            s.released += bool(r.get("verdict_by"))
            continue
        s.dropped += 1
        reason, tool, at = r["reason"], r["tool"], int(r["broker_time"])
        s.drops_by_reason[reason] += 1
        s.drops_by_tool[tool] += 1
        s.drops_by_tenant[r.get("tenant") or DEFAULT_TENANT] += 1
        start = since_ms + (at - since_ms) // s.bucket_ms * s.bucket_ms
        s.drops_over_time.setdefault(start, Counter())[reason] += 1
        matched = r.get("matched") or r.get("key") or ""
        s.repeated[(tool, matched)] += 1
        if reason == Reason.BUDGET_EXHAUSTED.value:
            seen = budgets.setdefault((tool, matched), [0, at, at])
            seen[0] += 1
            seen[1], seen[2] = min(seen[1], at), max(seen[2], at)
    s.budgets = sorted((Budget(tool, scope, n, first, last) for (tool, scope), (n, first, last) in budgets.items()),
                       key=lambda b: (-b.stopped, b.tool, b.scope))
    latest: dict[str, dict[str, Any]] = {}
    for r in results:
        if r.get("kind") == "result":
            latest[r["action_id"]] = r  # a later status of the same action replaces an earlier one
    s.in_doubt = sorted((Doubt(a, r["tool"], r.get("vendor_ref"), r.get("error"), int(r["broker_time"]))
                         for a, r in latest.items() if r["status"] == Status.IN_DOUBT.value), key=lambda d: d.at_ms)
    for r in dead_letters:
        s.dead_letters_by_type[r.get("error_type") or "unknown"] += 1
    return s
