"""An approved ActionDecision written directly, as the stream job would: what executor tests
and benchmarks feed an executor when the stream job is not what they measure."""

from __future__ import annotations

from typing import Any


def approved_decision(request: dict[str, Any], dedup_key: str | None, source_offset: int = 0,
                      natural_id: str | None = None) -> dict[str, Any]:
    """The decision record approving ``request`` (``dedup_key`` None: an unkeyed action;
    ``natural_id``: the one stage 2 gave it, for a tool with a write-once rule)."""
    return {"request": request, "outcome": "APPROVED", "reason": "unique", "dedup_key": dedup_key or "",
            "unkeyed": dedup_key is None, "content_hash": "h", "matched_key": None, "first_action_id": None,
            "first_partition": None, "first_offset": None, "window_ms": None, "event_time_ms": 0,
            "source_partition": 0, "source_offset": source_offset, "natural_id": natural_id}
