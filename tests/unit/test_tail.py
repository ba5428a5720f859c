"""``runonce tail``: times given as ISO or as a duration ago, filters, and the JSON view and
text line of each kind of record (no broker: records built here)."""

from __future__ import annotations

import json

import pytest

from runonce.errors import ConfigError
from runonce.kafka import topics
from runonce.kafka.record import Record
from runonce.ops.commands import broker_time_ms
from runonce.ops.tail import Filter, line, view
from runonce.sdk.submit import build_request
from runonce.wire.codec import Codec
from runonce.wire.headers import H_ERROR_MESSAGE, H_ERROR_TYPE, H_ORIGIN_OFFSET, H_ORIGIN_PARTITION, H_ORIGIN_TOPIC

NOW_MS = 1_796_050_000_000


def test_times_are_iso_or_a_duration_ago() -> None:
    assert broker_time_ms("15m", NOW_MS) == NOW_MS - 15 * 60_000
    assert broker_time_ms("7d", NOW_MS) == NOW_MS - 7 * 86_400_000
    assert broker_time_ms("2026-11-30T14:00:00Z", NOW_MS) == broker_time_ms("2026-11-30T14:00:00", NOW_MS)
    assert broker_time_ms("2026-11-30T15:00:00+01:00", NOW_MS) == broker_time_ms("2026-11-30T14:00:00Z", NOW_MS)
    with pytest.raises(ConfigError, match="ISO time"):
        broker_time_ms("yesterday", NOW_MS)


def _decision(reason: str, agent: str, tool: str = "send_email") -> Record:
    req = build_request(tool, {"to": "a@x.com"}, agent_id=agent, idempotency_key="k1")
    decision = {"request": req, "outcome": "DROPPED", "reason": reason, "dedup_key": "k1", "unkeyed": False,
                "content_hash": "ab", "matched_key": "k1", "first_action_id": "first-1", "first_partition": 2,
                "first_offset": 17, "window_ms": 86_400_000, "event_time_ms": NOW_MS, "source_partition": 2,
                "source_offset": 40}
    return Record(topics.DROPPED, 2, 41, NOW_MS, b"k1", Codec().encode("ActionDecision", decision))


def test_a_drop_as_json_names_what_it_repeats_and_when() -> None:
    v = view(Codec(), _decision("duplicate_key", "agent-7"))
    assert json.loads(json.dumps(v)) == v
    assert (v["kind"], v["decision"], v["reason"], v["agent"], v["tool"]) == (
        "decision", "DROPPED", "duplicate_key", "agent-7", "send_email")
    assert v["repeats"] == {"action_id": "first-1", "partition": 2, "offset": 17}
    assert v["broker_time"].endswith("Z") and (v["partition"], v["offset"]) == (2, 41)
    assert line(v).startswith("DROPPED   duplicate_key") and "repeats first-1 (requested[2]@17)" in line(v)


def test_filters_keep_only_what_matches_every_field_given() -> None:
    v = view(Codec(), _decision("duplicate_key", "agent-7"))
    assert Filter().keeps(v) and Filter(reason="duplicate_key", agent="agent-7", tool="send_email").keeps(v)
    assert not Filter(reason="content_window").keeps(v)
    assert not Filter(agent="agent-8").keeps(v)
    assert not Filter(tool="charge_payment", reason="duplicate_key").keeps(v)
    assert Filter(tenant="default").keeps(v) and not Filter(tenant="acme").keeps(v)  # a record's tenant, or default


def test_dead_letters_and_unreadable_records_still_show() -> None:
    headers = ((H_ERROR_TYPE, b"decode_error"), (H_ERROR_MESSAGE, b"not Avro"),
               (H_ORIGIN_TOPIC, b"actions.requested"), (H_ORIGIN_PARTITION, b"3"),
               (H_ORIGIN_OFFSET, b"99"))
    dead = view(Codec(), Record(topics.DLQ, 0, 5, NOW_MS, None, b"junk", headers))
    assert dead["origin"] == {"topic": "actions.requested", "partition": 3, "offset": 99}
    assert line(dead) == "DLQ   decode_error     from actions.requested[3]@99: not Avro"
    junk = view(Codec(), Record(topics.DROPPED, 0, 6, NOW_MS, None, b"junk"))
    assert junk["kind"] == "unreadable" and line(junk).startswith("???")
