"""Building the decision records the stream job writes (Avro); their headers are in runonce/wire/headers.py."""

from __future__ import annotations

from typing import Any, Mapping

from runonce.core.decision import Decision, Origin
from runonce.wire.keys import decision_key
from runonce.wire.trace import Decided


def decision_record(request: Mapping[str, Any], decision: Decision[Any], *, dedup_key: str | None,
                    content_hash: str, unkeyed: bool, origin: Origin) -> dict[str, Any]:
    repeat = decision.repeat_of
    return {
        "request": dict(request),
        "outcome": decision.outcome.value,
        "reason": decision.reason.value,
        "dedup_key": dedup_key or "",
        "unkeyed": unkeyed,
        "content_hash": content_hash,
        "matched_key": decision.matched_key,
        "first_action_id": repeat.action_id if repeat else None,
        "first_partition": repeat.partition if repeat else None,
        "first_offset": repeat.offset if repeat else None,
        "window_ms": decision.window_ms,
        "event_time_ms": origin.event_time_ms,
        "source_partition": origin.partition,
        "source_offset": origin.offset,
    }


def stage2_record(record: Mapping[str, Any], decision: Decision[Any], natural_id: str | None) -> dict[str, Any]:
    """A stage-2 decision on top of the stage-1 record it received. ``natural_id``: the
    action's, its tenant's own (``scope_of``), which a natural-key vendor's executor uses."""
    repeat = decision.repeat_of
    out = dict(record)
    out.update({
        "outcome": decision.outcome.value,
        "reason": decision.reason.value,
        "matched_key": decision.matched_key,
        "first_action_id": repeat.action_id if repeat else None,
        "first_partition": repeat.partition if repeat else None,
        "first_offset": repeat.offset if repeat else None,
        "window_ms": decision.window_ms,
        "natural_id": natural_id,
    })
    return out


def output_key(record: Mapping[str, Any]) -> bytes:
    """An ActionDecision record's Kafka key (the rule: ``wire.keys.decision_key``)."""
    return decision_key(record["dedup_key"], str(record["request"]["action_id"])).encode("utf-8")



def decided(record: Mapping[str, Any], first_traceparent: str | None = None) -> Decided:
    """A decision record's facts, as its span shows them (runonce/telemetry)."""
    return Decided(str(record["request"]["tool"]), str(record["request"]["action_id"]), str(record["outcome"]),
                   str(record["reason"]), record.get("first_action_id"), first_traceparent)
