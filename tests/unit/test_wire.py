"""The wire contract's readers: the key rule, decisions as the core's Enums, results."""

from __future__ import annotations

import pytest

from runonce.core.decision import Outcome, Reason
from runonce.wire.decisions import DecisionView
from runonce.wire.keys import request_key, routing_key
from runonce.wire.results import Result, Status, result_of, result_record


def _decision(outcome: str, reason: str, first: str | None) -> dict:
    return {"request": {"action_id": "a2", "tool": "send_email", "agent_id": "ag"}, "outcome": outcome,
            "reason": reason, "first_action_id": first}


def test_requested_records_are_keyed_by_the_callers_key_else_the_action_id() -> None:
    assert request_key({"idempotency_key": "k-1", "action_id": "a"}) == "k-1"
    assert request_key({"idempotency_key": None, "action_id": "a"}) == "a"
    assert request_key({"idempotency_key": "", "action_id": "a"}) == "a"


@pytest.mark.parametrize("reason, resolves", [
    (Reason.DUPLICATE_KEY, True), (Reason.CONTENT_WINDOW, True), (Reason.NATURAL_ID_TAKEN, True),
    (Reason.KEY_PAYLOAD_MISMATCH, False), (Reason.BUDGET_EXHAUSTED, False),
])
def test_a_drop_resolves_to_the_originals_result_unless_it_was_another_action(reason: Reason, resolves: bool) -> None:
    view = DecisionView.of(_decision("DROPPED", reason.value, "a1"))
    assert (view.outcome, view.reason, view.first_action_id) == (Outcome.DROP, reason, "a1")
    assert view.dropped and not view.approved
    assert view.resolves_to_original is resolves


def test_approvals_and_drops_without_an_original_resolve_to_nothing() -> None:
    assert not DecisionView.of(_decision("APPROVED", "content_window_audit", "a1")).resolves_to_original
    assert not DecisionView.of(_decision("DROPPED", "tool_denied", None)).resolves_to_original


def test_an_unknown_outcome_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError):
        DecisionView.of(_decision("MAYBE", "unique", None))


def test_a_result_round_trips_through_its_record() -> None:
    result = Result(Status.IN_DOUBT, None, "timeout", 3)
    record = result_record("a1", None, "send_email", result, completed_at_ms=1_700_000_000_000)
    assert record["status"] == "in_doubt" and record["completed_at_ms"] == 1_700_000_000_000
    assert result_of(record) == result
    assert [s.final for s in Status] == [False, True, True, True]


def test_the_sdk_keys_an_unkeyed_action_where_stage_1_decides_it_without_a_rekey() -> None:

    from runonce.core.policy import PolicyBook
    from runonce.kafka import topics
    from runonce.sdk.submit import build_request
    from runonce.wire.keys import routing_key
    from tests.support.memory import MemoryPipeline

    book = PolicyBook.load()

    def go() -> None:
        pipe = MemoryPipeline()
        for i, (tool, params) in enumerate([("send_email", {"to": "a@b", "body": "hi"}),
                                            ("update_salesforce_field", {"record_id": "r1", "value": 1}),
                                            ("send_email", {"to": "a@b", "body": "hi"})]):  # a retry
            record = build_request(tool, params, agent_id="sdk", requested_at_ms=1_800_000_000_000 + i)
            key = routing_key(record, book)
            assert key.startswith("content:")
            pipe.feed_raw(pipe.codec.encode("ActionRequested", record), key=key.encode(),
                                timestamp_ms=record["requested_at_ms"])
        assert pipe.key_stage.metrics.registry.get_sample_value("runonce_rekeyed_total") == 0
        assert len(pipe.outputs[topics.REKEY]) == 0
        assert len(pipe.decisions(topics.APPROVED)) == 2
        assert [d["reason"] for d in pipe.decisions(topics.DROPPED)] == ["duplicate_key"]

    go()


def test_routing_key_keeps_the_callers_key_and_falls_back_to_the_action_id() -> None:
    from runonce.core.policy import PolicyBook

    book = PolicyBook.load()
    keyed = {"idempotency_key": "k", "action_id": "a", "tool": "send_email", "params_json": "{}"}
    assert routing_key(keyed, book) == "k"
    slack = {"idempotency_key": None, "action_id": "a", "tool": "post_slack_message", "agent_id": "x",
             "params_json": '{"channel": "c"}', "natural_id": None, "requested_at_ms": 1}
    assert routing_key(slack, book) == "a"  # key = "none": no content key
    assert routing_key({**slack, "tool": "send_email"}, None) == "a"  # no policies: the wire rule
