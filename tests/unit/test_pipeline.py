"""The stream job's logic (the same KeyStage/ScopeStage faust runs) over in-memory state."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.ops.scenarios import incidents
from runonce.sdk.submit import build_request
from runonce.wire.headers import (
    H_ALERT,
    H_ERROR_MESSAGE,
    H_ERROR_TYPE,
    H_ORIGIN_OFFSET,
    H_ORIGIN_PARTITION,
    H_ORIGIN_TOPIC,
)
from runonce.wire.keys import routing_key
from tests.support.memory import MemoryPipeline

T0 = 1_800_000_000_000


def test_every_incident_is_cut_to_its_expected_count() -> None:
    def go() -> None:
        pipe = MemoryPipeline()
        for incident in incidents("unit"):
            approved_before = len(pipe.outputs[topics.APPROVED])
            reasons: Counter[str] = Counter()
            for i, r in enumerate(incident.requests):
                record = pipe.feed(r.tool, r.params, key=r.idempotency_key, timestamp_ms=T0 + i * 100)
                reasons[pipe.decision_for(record["action_id"])["reason"]] += 1
            approved = len(pipe.outputs[topics.APPROVED]) - approved_before
            assert approved == incident.expected_approved, incident.name
            assert reasons[incident.expected_reason] == len(incident.requests) - (
                incident.expected_approved if incident.expected_reason != "content_window_audit" else 1), incident.name
    go()


def test_a_record_on_the_wrong_partition_is_rekeyed_not_misjudged() -> None:
    def go() -> None:
        pipe = MemoryPipeline()
        right = partition_for("K", 6)
        wrong = (right + 1) % 6
        a = pipe.feed("send_email", {"to": "x", "b": 1}, key="K", timestamp_ms=T0, partition=wrong)
        b = pipe.feed("send_email", {"to": "x", "b": 1}, key="K", timestamp_ms=T0 + 5, partition=right)
        assert pipe.decision_for(a["action_id"])["outcome"] == "APPROVED"
        drop = pipe.decision_for(b["action_id"])
        assert drop["reason"] == "duplicate_key" and drop["first_action_id"] == a["action_id"]
        # The rekeyed action still reports where it first arrived.
        assert (drop["first_partition"], drop["first_offset"]) == (wrong, 0)
        assert pipe.key_stage.metrics.registry.get_sample_value("runonce_rekeyed_total") == 1
    go()


def test_redelivery_after_a_crash_re_emits_the_same_decision() -> None:
    def go() -> None:
        pipe = MemoryPipeline()
        first = pipe.feed_raw(None, key=b"x", timestamp_ms=T0)  # warm offsets; goes to DLQ
        rec1 = pipe.feed("send_email", {"to": "r", "b": 2}, key="K1", timestamp_ms=T0)
        rec2 = pipe.feed("send_email", {"to": "r", "b": 2}, key="K2", timestamp_ms=T0 + 1)
        approved, dropped = pipe.decisions(topics.APPROVED), pipe.decisions(topics.DROPPED)
        # Feed every requested record again, as if no offset had been committed.
        for key, value in ((b"K1", rec1), (b"K2", rec2)):
            pipe.feed_raw(pipe.codec.encode("ActionRequested", value), key=key, timestamp_ms=T0,
                                partition=partition_for(key, 6))
        assert first.value is None
        again_a = [d for d in pipe.decisions(topics.APPROVED) if d["request"]["action_id"] == rec1["action_id"]]
        again_d = [d for d in pipe.decisions(topics.DROPPED) if d["request"]["action_id"] == rec2["action_id"]]
        assert len(approved) == 1 and len(dropped) == 1
        assert [d["reason"] for d in again_a] == ["unique", "unique"]
        assert [d["reason"] for d in again_d] == ["content_window", "content_window"]
    go()


@pytest.mark.parametrize("value, kind, message", [
    (b"garbage", "decode_error", "not Avro single-object encoded"),
    (b"\xc3\x01" + b"\x00" * 8, "unknown_schema", "unknown schema fingerprint"),
    (None, "decode_error", "record value is null"),
])
def test_undecodable_input_is_dead_lettered_with_reason_and_origin(value: bytes | None, kind: str,
                                                                   message: str) -> None:
    def go() -> None:
        pipe = MemoryPipeline()
        inbound = pipe.feed_raw(value, key=b"k", timestamp_ms=T0, partition=3)
        [(key, body, headers)] = pipe.outputs[topics.DLQ]
        h = dict(headers)
        assert h[H_ERROR_TYPE] == kind.encode() and message in h[H_ERROR_MESSAGE].decode()
        assert (h[H_ORIGIN_TOPIC], h[H_ORIGIN_PARTITION], h[H_ORIGIN_OFFSET]) == (
            b"actions.requested", b"3", str(inbound.offset).encode())
        assert key == b"k" and body == (value or b"")
    go()


@pytest.mark.parametrize("tool, params, natural_id, message", [
    ("", {}, None, "tool is empty"),
    ("send_email", {"subject": "no recipient"}, None, "needs params field 'to'"),
    ("charge_payment", {"amount": 1}, "N-1", "has no write-once rule"),
])
def test_invalid_actions_are_dead_lettered(tool: str, params: dict[str, Any], natural_id: str | None,
                                           message: str) -> None:
    def go() -> None:
        pipe = MemoryPipeline()
        pipe.feed(tool, params, key="K", natural_id=natural_id, timestamp_ms=T0)
        [(_, _, headers)] = pipe.outputs[topics.DLQ]
        assert dict(headers)[H_ERROR_TYPE] == b"invalid_action"
        assert message in dict(headers)[H_ERROR_MESSAGE].decode()
        assert not pipe.outputs[topics.APPROVED] and pipe.keys.size() == 0  # no claim taken
    go()


@pytest.mark.parametrize("record_changes, message", [
    ({"params_json": '{"to": "' + "x" * 300_000 + '"}'}, "params_json is 300"),
    ({"params_json": "[1, 2]"}, "params_json must be a JSON object"),
    ({"params_json": "{not json"}, "params_json is not JSON"),
    ({"idempotency_key": "   "}, "idempotency_key must be 1..512 non-blank chars"),
    ({"action_id": ""}, "action_id is empty"),
])
def test_schema_valid_but_invalid_records_are_dead_lettered(record_changes: dict[str, Any], message: str) -> None:
    from runonce.sdk.submit import build_request

    def go() -> None:
        pipe = MemoryPipeline()
        record = {**build_request("send_email", {"to": "a"}, agent_id="t", idempotency_key="k"), **record_changes}
        pipe.feed_raw(pipe.codec.encode("ActionRequested", record), key=b"k", timestamp_ms=T0)
        [(_, _, headers)] = pipe.outputs[topics.DLQ]
        assert dict(headers)[H_ERROR_TYPE] == b"invalid_action"
        assert message in dict(headers)[H_ERROR_MESSAGE].decode()
    go()


def test_budget_drop_carries_an_alert_header() -> None:
    def go() -> None:
        pipe = MemoryPipeline()
        for i in range(6):
            pipe.feed("restart_service", {"service": "api"}, timestamp_ms=T0 + i)
        [(_, _, headers)] = pipe.outputs[topics.DROPPED]
        assert dict(headers)[H_ALERT] == b"budget_exhausted"
    go()


def test_expired_state_is_swept_on_event_time() -> None:
    def go() -> None:
        pipe = MemoryPipeline(partitions=1)
        for i in range(40):
            pipe.feed("send_email", {"to": f"r{i}", "b": 1}, key=f"K{i}", timestamp_ms=T0 + i)
        assert pipe.keys.size() == 40 and pipe.scopes.size() == 40
        # A day later every key and content claim has expired; new records sweep them.
        day = 24 * 3_600_000
        for i in range(64):
            pipe.feed("update_salesforce_field", {"id": i}, key=f"late{i}", timestamp_ms=T0 + day + 100 + i)
        assert pipe.keys.size() == 64  # only the new claims remain
        assert pipe.key_stage.sweeper.deleted == 40
    go()


_TOOLS = ("send_email", "create_jira_ticket", "post_slack_message", "restart_service", "schedule_calendar_event",
          "update_salesforce_field")
# (tool, scope variant, content variant, key: none / its own / shared, ms since the last action)
_actions = st.lists(st.tuples(st.sampled_from(_TOOLS), st.integers(0, 2), st.integers(0, 2),
                              st.sampled_from(("none", "own", "shared")), st.integers(0, 600_000)),
                    min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(_actions)
def test_stage_two_in_place_decides_as_the_hop_through_the_scoped_topic(actions: list[Any]) -> None:
    """The transactional runtime decides a pass in place when it owns the scope's partition;
    every decision record must equal the one the scoped-topic hop would have written."""
    def go() -> None:
        hop, inline = MemoryPipeline(), MemoryPipeline(inline_scopes=True)
        t = T0
        for i, (tool, scope, content, key_kind, gap_ms) in enumerate(actions):
            t += gap_ms
            # Every tool's scope fields, so stage 2 sees natural-id, content-window and budget repeats.
            params = {"to": f"lead-{scope}@x.test", "channel": f"c{scope}", "service": f"svc-{scope}",
                      "project": "OPS", "customer_id": f"cust-{scope}", "calendar_id": f"cal-{scope}",
                      "start": "2026-12-01T10:00", "attendees": ["a", "b"], "description": f"d{content}",
                      "subject": f"s{content}", "record_id": f"r{scope}", "field": "f", "value": f"v{content}"}
            key = {"none": None, "own": f"k{i}", "shared": f"shared-{tool}"}[key_kind]
            ids = f"a{i}"
            hop.feed(tool, params, key=key, timestamp_ms=t, action_id=ids)
            inline.feed(tool, params, key=key, timestamp_ms=t, action_id=ids)
            assert inline.last_decision.get(ids) == hop.last_decision.get(ids)
        assert inline.scopes.parts == hop.scopes.parts  # the same stage-2 state
        assert inline.outputs[topics.DLQ] == hop.outputs[topics.DLQ]
        assert not inline.outputs[topics.SCOPED] and inline.offsets.get((topics.SCOPED, 0), 0) == 0
    go()


def test_an_approved_decision_carries_the_natural_id_its_tenants_own() -> None:
    """A natural-key vendor's executor derives its id from the stream's natural id: the same one
    the write-once rule claimed, scoped to the tenant (two tenants' equal meetings are two)."""
    pipe = MemoryPipeline()
    params = {"calendar_id": "exec", "start": "2026-12-01T15:00Z", "attendees": ["a@x.com"]}
    meeting = pipe.feed("schedule_calendar_event", params, timestamp_ms=T0)
    named = pipe.feed("schedule_calendar_event", {**params, "calendar_id": "other"}, natural_id="QBR-2026",
                      timestamp_ms=T0 + 1)
    plain = pipe.feed("send_email", {"to": "x@y.com"}, timestamp_ms=T0 + 2)
    derived = pipe.decision_for(meeting["action_id"])["natural_id"]
    assert derived.startswith("schedule_calendar_event:nid=sha256:")
    assert pipe.decision_for(named["action_id"])["natural_id"] == "schedule_calendar_event:nid=QBR-2026"
    assert pipe.decision_for(plain["action_id"])["natural_id"] is None
    other_tenant = MemoryPipeline()
    record = build_request("schedule_calendar_event", params, agent_id="test", tenant="acme", requested_at_ms=T0)
    other_tenant.feed_raw(other_tenant.codec.encode("ActionRequested", record), key=record["action_id"].encode(),
                          timestamp_ms=T0)
    assert other_tenant.decision_for(record["action_id"])["natural_id"] == f"tenant/acme/{derived}"


@pytest.mark.parametrize("inline_scopes", [True, False], ids=["stage 2 in place", "through the scoped topic"])
def test_every_decision_is_its_record_encoded_whole_and_holds_its_request_as_sent(inline_scopes: bool) -> None:
    """A decision reuses its request's bytes (``Codec.body_of``): they must be exactly the
    request's encoding, and a request of an earlier schema version is encoded whole."""
    from tests.unit.test_codec import v1_request

    pipe = MemoryPipeline(inline_scopes=inline_scopes)
    sent = []
    for i, (tool, params, key) in enumerate([
            ("charge_payment", {"amount_cents": 500, "customer": "c1"}, "order-1"),   # stage 1 only
            ("send_email", {"to": "Lead@Example.com", "body": "hi"}, None),          # stage 2
            ("send_email", {"to": "lead@example.com", "body": "hi"}, None),          # its repeat
            ("post_slack_message", {"channel": "ops", "text": "é"}, "slack-1")]):
        for old in (False, True):
            request = build_request(tool, params, agent_id="a", idempotency_key=f"{key}-{old}" if key else None,
                                    requested_at_ms=T0 + i)
            if key is None:
                request["params_json"] = request["params_json"][:-1] + f', "v1": {str(old).lower()}}}'
            value = v1_request(pipe.codec, request) if old else pipe.codec.encode("ActionRequested", request)
            pipe.feed_raw(value, key=routing_key(request, pipe.pipeline.keys.policies).encode(),
                          timestamp_ms=T0 + i)
            sent.append(request)
    decisions = [value for topic in (topics.APPROVED, topics.DROPPED) for _, value, _ in pipe.outputs[topic]]
    assert len(decisions) == len(sent) and not pipe.outputs[topics.DLQ]
    for value in decisions:
        _, record = pipe.codec.decode(value, expect="ActionDecision")
        assert pipe.codec.encode("ActionDecision", record) == value
    by_id = {pipe.codec.decode(v)[1]["request"]["action_id"]: pipe.codec.decode(v)[1]["request"] for v in decisions}
    assert by_id == {r["action_id"]: r for r in sent}
