"""What the MCP gateway offers a model and what it tells it: pure functions of the policies
and of an outcome."""

from __future__ import annotations

import jsonschema
import pytest

from runonce.core.policy import PolicyBook
from runonce.sdk.client import ActionOutcome
from runonce.tools.answers import answer, timed_out
from runonce.tools.specs import served_tools

BOOK = PolicyBook.load()


def _specs() -> dict:
    return {s.name: s for s in served_tools(BOOK)}


def test_served_tools_are_the_policies_minus_the_denied() -> None:
    assert set(_specs()) == {t for t, p in BOOK.tools.items() if not p.denied}
    assert "execute_database_write" not in _specs()


def test_a_tools_schema_requires_what_its_rules_read() -> None:
    email, charge = _specs()["send_email"].input_schema, _specs()["charge_payment"].input_schema
    jsonschema.validate({"to": "a@b", "subject": "s", "body": "b"}, email)
    with pytest.raises(jsonschema.ValidationError, match="'to' is a required property"):
        jsonschema.validate({"subject": "s"}, email)
    with pytest.raises(jsonschema.ValidationError, match="'idempotency_key' is a required property"):
        jsonschema.validate({"card": "tok", "amount_cents": 1}, charge)  # key = "require"


def test_descriptions_say_what_runonce_does_with_a_repeat() -> None:
    assert "within 1d is dropped" in _specs()["send_email"].description
    assert "at most 5 per `service` every 20m" in _specs()["restart_service"].description
    assert "is performed and flagged" in _specs()["post_slack_message"].description


def test_a_repeat_gets_the_originals_result_and_is_not_an_error() -> None:
    a = answer("send_email", ActionOutcome("a2", "succeeded", "a1", "msg-1", repeat_reason="content_window"))
    assert not a.is_error and a.facts["vendor_ref"] == "msg-1"
    assert a.text.startswith("Not performed again: this call repeats action a1 (content_window)")
    own = answer("send_email", ActionOutcome("a1", "succeeded", "a1", "msg-1"))
    assert own.text == "Done: send_email succeeded (vendor reference msg-1)."


@pytest.mark.parametrize("outcome, starts", [
    (ActionOutcome("a", "dropped", "a", drop_reason="tool_denied"), "Denied"),
    (ActionOutcome("a", "dropped", "a", drop_reason="budget_exhausted"), "Not performed: this tool's budget"),
    (ActionOutcome("a", "failed", "a", error="card declined"), "Failed: the vendor refused it (card declined)"),
    (ActionOutcome("a", "in_doubt", "a", error="timeout"), "Outcome unknown (in_doubt)"),
])
def test_what_did_not_happen_is_an_error_the_model_can_act_on(outcome: ActionOutcome, starts: str) -> None:
    a = answer("t", outcome)
    assert a.is_error and a.text.startswith(starts)


def test_in_doubt_says_calling_again_will_not_help_and_a_timeout_says_it_is_safe() -> None:
    assert "Calling again will not perform it twice" in answer("t", ActionOutcome("a", "in_doubt", "a")).text
    late = timed_out("t", "a9", 30)
    assert late.facts["status"] == "pending" and "calling again with the same arguments is safe" in late.text


def test_a_held_call_says_it_waits_for_a_person_and_that_calling_again_is_safe() -> None:
    from runonce.sdk.client import HeldFor
    from runonce.tools.answers import waiting_for_approval

    held = waiting_for_approval("charge_payment", "a7", HeldFor("amount_cents 75000 > 50000", 1_800_000_000_000))
    assert held.text.startswith("Waiting for approval (action a7): amount_cents 75000 > 50000.")
    assert "calling again will not perform it twice" in held.text and not held.is_error
    assert held.facts["status"] == "held"


def test_over_http_every_retry_of_one_action_gets_the_same_body() -> None:
    from runonce.gateway.calls import Taken
    from runonce.gateway.http_api import body_of

    original = ActionOutcome("a1", "succeeded", "a1", vendor_ref="ch_1")
    retry = ActionOutcome("a2", "succeeded", "a1", vendor_ref="ch_1", repeat_reason="duplicate_key")
    assert body_of("charge_payment", Taken("a1", original)) == body_of("charge_payment", Taken("a2", retry))
    status, body = body_of("charge_payment", Taken("a2", retry))
    assert status == 200 and body["action_id"] == "a1"


@pytest.mark.parametrize("reason, status", [("key_payload_mismatch", 422), ("tool_denied", 403),
                                            ("missing_key", 400), ("budget_exhausted", 200)])
def test_over_http_a_drop_that_refuses_the_request_is_a_4xx(reason: str, status: int) -> None:
    from runonce.gateway.calls import Taken
    from runonce.gateway.http_api import body_of

    got, body = body_of("t", Taken("a1", ActionOutcome("a1", "dropped", "a1", drop_reason=reason)))
    assert (got, body["status"], body["reason"]) == (status, "dropped", reason)


def test_over_http_no_outcome_yet_is_a_202_and_a_hold_says_why() -> None:
    from runonce.gateway.calls import Taken
    from runonce.gateway.http_api import body_of
    from runonce.sdk.client import HeldFor

    assert body_of("t", Taken("a1", None))[0] == 202
    status, body = body_of("t", Taken("a1", None, HeldFor("amount_cents above 1000000", 99)))
    assert (status, body["status"], body["why"], body["expires_at_ms"]) == (202, "held", "amount_cents above 1000000", 99)


def test_the_openapi_document_is_valid_and_lists_the_served_tools() -> None:
    from openapi_spec_validator import validate

    from runonce.gateway.openapi import document

    policies = PolicyBook.load()
    spec = document(policies)
    validate(spec)  # raises on an invalid document
    assert {p.rsplit("/", 1)[1] for p in spec["paths"] if p != "/v1/actions/{action_id}"} == {
        s.name for s in served_tools(policies)}


def test_a_signed_results_receipt_reaches_the_caller_over_http_and_mcp() -> None:
    """The agent's own copy (docs/receipts.md): the result's proof, as the SDK got it, in the
    HTTP body and in the model's structured facts; absent when the executor does not sign."""
    import json

    from runonce.gateway.calls import Taken
    from runonce.gateway.http_api import body_of

    proof = json.dumps({"receipt": {"action_id": "a1"}, "checkpoint": {"chain": "c"}, "path": []})
    signed = ActionOutcome("a1", "succeeded", "a1", "ch_1", receipt=proof)
    assert body_of("charge_payment", Taken("a1", signed))[1]["receipt"] == json.loads(proof)
    assert answer("charge_payment", signed).facts["receipt"] == json.loads(proof)
    unsigned = ActionOutcome("a1", "succeeded", "a1", "ch_1")
    assert "receipt" not in body_of("charge_payment", Taken("a1", unsigned))[1]
    assert "receipt" not in answer("charge_payment", unsigned).facts
