"""Building the records the stream job writes: decisions (Avro) and dead letters (headers)."""

from __future__ import annotations

from typing import Any, Mapping

from runonce.core.decision import Decision, Origin
from runonce.errors import InvalidInput

# Headers on a dead letter: what went wrong, and where the record came from.
H_ERROR_TYPE = "runonce.error.type"
H_ERROR_MESSAGE = "runonce.error.message"
H_ORIGIN_TOPIC = "runonce.origin.topic"
H_ORIGIN_PARTITION = "runonce.origin.partition"
H_ORIGIN_OFFSET = "runonce.origin.offset"
H_ORIGIN_TIMESTAMP = "runonce.origin.timestamp_ms"
H_ALERT = "runonce.alert"


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


def carry_on(record: Mapping[str, Any], decision: Decision[Any]) -> dict[str, Any]:
    """A stage-2 decision on top of the stage-1 record it received."""
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
    })
    return out


def output_key(record: Mapping[str, Any]) -> bytes:
    """Approved/dropped records are keyed by dedup key (so one executor partition owns a key),
    falling back to the action id for actions without one."""
    key = record["dedup_key"] or record["request"]["action_id"]
    return str(key).encode("utf-8")


def dead_letter_headers(error: InvalidInput, topic: str, partition: int, offset: int,
                        timestamp_ms: int) -> list[tuple[str, bytes]]:
    return [
        (H_ERROR_TYPE, error.kind.encode()),
        (H_ERROR_MESSAGE, str(error)[:4000].encode("utf-8", "replace")),
        (H_ORIGIN_TOPIC, topic.encode()),
        (H_ORIGIN_PARTITION, str(partition).encode()),
        (H_ORIGIN_OFFSET, str(offset).encode()),
        (H_ORIGIN_TIMESTAMP, str(timestamp_ms).encode()),
    ]
