"""The SDK's memory is bounded by what it waits for: the cache of others' results by count
and age."""

from __future__ import annotations

from runonce.sdk.outcomes import RecentResults


def test_recent_results_keep_at_most_n_and_forget_the_oldest_first() -> None:
    recent = RecentResults(max_entries=3, max_age_s=60, clock=lambda: 0.0)
    for i in range(5):
        recent.put(f"a{i}", {"action_id": f"a{i}"})
    assert len(recent) == 3
    assert recent.get("a0") is None and recent.get("a1") is None
    assert recent.get("a4") == {"action_id": "a4"}


def test_recent_results_expire_by_age() -> None:
    now = [0.0]
    recent = RecentResults(max_entries=10, max_age_s=60, clock=lambda: now[0])
    recent.put("a", {"action_id": "a"})
    now[0] = 59.0
    assert recent.get("a") is not None
    now[0] = 61.0
    assert recent.get("a") is None and len(recent) == 0


def test_a_newer_result_replaces_the_older_and_counts_as_recent() -> None:
    recent = RecentResults(max_entries=2, max_age_s=60, clock=lambda: 0.0)
    recent.put("a", {"status": "attempting"})
    recent.put("b", {})
    recent.put("a", {"status": "succeeded"})  # a is now the newest
    recent.put("c", {})
    assert recent.get("a") == {"status": "succeeded"} and recent.get("b") is None
