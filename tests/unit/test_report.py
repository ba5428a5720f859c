"""The report's counts (runonce/ops/report/summary.py) over rows as `runonce export` writes
them, and the page (page.py) carrying exactly those numbers, escaped, with no script."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from runonce.ops.report.page import render
from runonce.ops.report.summary import summarize
from tests.support.browser import PageCounts

T0 = 1_796_000_000_000
HOUR = 3_600_000


def decision(at_ms: int, decision: str, reason: str, tool: str, matched: str | None = None) -> dict[str, object]:
    return {"kind": "decision", "decision": decision, "reason": reason, "tool": tool, "broker_time": at_ms,
            "matched": matched, "key": f"k-{matched}", "action_id": f"a{at_ms}"}


def page_counts(html: str) -> PageCounts:
    return PageCounts(html)


def test_a_restart_loop_and_a_doubt_are_counted_and_shown() -> None:
    rows = [decision(T0 + i * 1000, "APPROVED", "unique", "restart_service", "svc") for i in range(5)]
    rows += [decision(T0 + (5 + i) * 1000, "DROPPED", "budget_exhausted", "restart_service", "svc=api<1>")
             for i in range(42)]
    rows += [decision(T0 + 60_000, "DROPPED", "duplicate_key", "send_email", "key-1"),
             {"kind": "unreadable", "error": "not avro", "broker_time": T0}]
    results = [{"kind": "result", "action_id": "c1", "tool": "charge_payment", "status": "attempting",
                "broker_time": T0, "vendor_ref": None, "error": None},
               {"kind": "result", "action_id": "c1", "tool": "charge_payment", "status": "in_doubt",
                "broker_time": T0 + 5, "vendor_ref": "ch_1", "error": "timeout"},
               {"kind": "result", "action_id": "c2", "tool": "charge_payment", "status": "succeeded",
                "broker_time": T0 + 6, "vendor_ref": "ch_2", "error": None}]
    dlq = [{"kind": "dead_letter", "error_type": "decode_error"}] * 2
    s = summarize(rows, results, dlq, T0, T0 + HOUR)
    assert (s.approved, s.dropped, s.decided, s.unreadable) == (5, 43, 48, 1)
    assert s.drops_by_reason == Counter({"budget_exhausted": 42, "duplicate_key": 1})
    assert [(b.tool, b.scope, b.stopped, b.first_ms, b.last_ms) for b in s.budgets] == \
        [("restart_service", "svc=api<1>", 42, T0 + 5000, T0 + 46_000)]
    assert [d.action_id for d in s.in_doubt] == ["c1"]  # its latest status, not its first
    assert sum(sum(c.values()) for c in s.drops_over_time.values()) == 43 and s.bucket_ms == 60_000  # 60 bars of 1 min

    page = render(s, "Kafka at test")
    counts = page_counts(page).counts
    assert counts["decided"] == 48 and counts["dropped"] == 43 and counts["budget_exhausted"] == 42
    assert counts["in_doubt"] == 1 and counts["dead_letters"] == 2 and counts["unreadable"] == 1
    assert counts["drops_by_reason:budget_exhausted"] == 42 and counts["dead_letters_by_type:decode_error"] == 2
    assert counts["budget:restart_service:svc=api<1>"] == 42
    assert "svc=api&lt;1&gt;" in page and "svc=api<1>" not in page  # escaped
    assert page_counts(page).scripts == 0 and "http" not in re.sub(r"Kafka at \S+", "", page).lower().replace(
        'xmlns="http', "")


@given(st.lists(st.tuples(st.integers(0, HOUR - 1), st.sampled_from(["APPROVED", "DROPPED"]),
                          st.sampled_from(["unique", "duplicate_key", "content_window", "budget_exhausted"]),
                          st.sampled_from(["send_email", "restart_service"])), max_size=60))
def test_every_decision_is_counted_once_and_the_page_agrees(items: list[tuple[int, str, str, str]]) -> None:
    rows = [decision(T0 + at, d, r, t, "m") for at, d, r, t in items]
    s = summarize(rows, [], [], T0, T0 + HOUR)
    dropped = [r for r in rows if r["decision"] == "DROPPED"]
    assert s.decided == len(rows) and s.dropped == len(dropped)
    assert sum(s.drops_by_tool.values()) == sum(s.drops_by_reason.values()) == len(dropped)
    assert all(T0 <= start < T0 + HOUR for start in s.drops_over_time)
    counts = page_counts(render(s, "x")).counts
    assert counts["decided"] == len(rows) and counts["dropped"] == len(dropped)
    assert {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("drops_by_reason:")} == s.drops_by_reason


def test_drops_are_grouped_by_tenant_a_row_without_one_the_default_tenants() -> None:
    rows = [{**decision(T0 + i, "DROPPED", "duplicate_key", "send_email", "m"), "tenant": t}
            for i, t in enumerate(["acme", "acme", "globex"])] + [decision(T0 + 9, "DROPPED", "unique", "send_email")]
    s = summarize(rows, [], [], T0, T0 + HOUR)
    assert s.drops_by_tenant == {"acme": 2, "globex": 1, "default": 1}
    counts = page_counts(render(s, "x")).counts
    assert {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("drops_by_tenant:")} == s.drops_by_tenant


def test_buckets_are_round_widths_and_at_least_24_bars() -> None:
    from runonce.ops.report.summary import bucket_ms
    assert bucket_ms(0, 8_000) == 1_000  # shorter than 24 s: seconds
    assert bucket_ms(0, 3_600_000) == 60_000 and bucket_ms(0, 86_400_000) == 3_600_000
    assert bucket_ms(0, 7 * 86_400_000) == 6 * 3_600_000


def test_held_released_denied_and_expired_are_counted_and_shown() -> None:
    rows = [decision(T0 + i, "HELD", "unique", "charge_payment") for i in range(4)]
    rows += [{**decision(T0 + 10, "APPROVED", "unique", "charge_payment"), "verdict_by": "alice"},
             decision(T0 + 11, "APPROVED", "unique", "charge_payment"),  # approved without a hold
             decision(T0 + 12, "DROPPED", "approval_denied", "charge_payment"),
             decision(T0 + 13, "DROPPED", "approval_expired", "charge_payment")]
    s = summarize(rows, [], [], T0, T0 + HOUR)
    assert (s.held, s.released, s.approved, s.dropped) == (4, 1, 2, 2)
    counts = page_counts(render(s, "Kafka at test")).counts
    assert (counts["held"], counts["released"], counts["approval_denied"], counts["approval_expired"]) == (4, 1, 1, 1)
