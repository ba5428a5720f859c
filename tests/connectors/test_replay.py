"""The replay test passes for every shipped connector, against sandboxes speaking the real protocols."""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from runonce.connectors.toolkit.base import ActionCall, Connector
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.names import SANDBOX_VENDORS
from runonce.wire.results import Result
from tests.support.slack import POST, slack_connector

PARAMS: dict[str, tuple[str, dict[str, Any], str]] = {
    "smtp": ("send_email", {"to": "john@prospect.example", "subject": "Following up", "body": "Hi"}, "smtp"),
    "webhook": ("notify_ops", {"service": "api", "event": "deployed"}, "webhook:ops"),
    "kubernetes": ("restart_service", {"service": "api", "host": "srv-2"}, "kubernetes"),
    "payments": ("charge_payment", {"card": "tok_visa", "amount_cents": 41900}, "payments"),
    "slack": ("post_slack_message", {"channel": "#incidents", "text": "DB latency"}, "slack"),
    "jira": ("create_jira_ticket", {"project": "SUP", "customer_id": "c1", "description": "SSO"}, "jira"),
    "calendar": ("schedule_calendar_event", {"calendar_id": "exec", "start": "2026-12-01T15:00Z"}, "calendar"),
    "salesforce": ("update_salesforce_field", {"record_id": "006A", "field": "StageName", "value": "Won"},
                   "salesforce"),
}


def test_every_sandbox_vendor_is_covered() -> None:
    assert set(PARAMS) == set(SANDBOX_VENDORS)


@pytest.mark.parametrize("vendor", sorted(SANDBOX_VENDORS))
def test_replay(vendor: str, vendors: VendorServer, connectors: dict[str, Connector],
                replay: Callable[[Connector, ActionCall, Callable[[], int]], Result]) -> None:
    connector = connectors[vendor]
    tool, params, ledger_vendor = PARAMS[vendor]
    assert tool in connector.tools
    # a natural id for the calendar, so its replay also runs step 5 (a twin with a key of its own)
    natural_id = f"schedule_calendar_event:nid={uuid.uuid4().hex}" if vendor == "calendar" else None
    call = ActionCall(str(uuid.uuid4()), tool, params, vendor_key=f"key-{uuid.uuid4().hex[:8]}", natural_id=natural_id)
    outcome = replay(connector, call, lambda: vendors.ledger.count(ledger_vendor))
    assert outcome.vendor_ref


def test_the_replay_test_catches_a_connector_that_is_not_idempotent(vendors: VendorServer,
                                                                    replay: Callable[..., Result]) -> None:
    """The check can fail: a connector that bypasses the protocol and posts twice is caught."""
    from runonce.connectors.vendors.slack import SlackConnector

    class Leaky(SlackConnector):
        def perform(self, call: ActionCall):  # type: ignore[no-untyped-def]
            super().perform(call)  # a hidden second post
            return super().perform(call)

    call = ActionCall("a", "post_slack_message", {"channel": "#c", "text": "t"}, "k")
    with pytest.raises(AssertionError, match="first call made 2 side effects"):
        replay(slack_connector(vendors, Leaky), call, lambda: vendors.ledger.count("slack"))


def test_the_replay_calls_the_vendor_again_and_sees_a_vendor_that_deduplicates_nothing(
        vendors: VendorServer, replay: Callable[..., Result]) -> None:
    """A connector that claims a vendor key its vendor ignores: the replay really posts again,
    and the second message is caught (a replay that answered from its own store could not)."""
    from runonce.connectors.toolkit.base import Capability
    from runonce.connectors.vendors.slack import SlackConnector

    class Overconfident(SlackConnector):
        capability = Capability.VENDOR_KEY

    call = ActionCall("a", "post_slack_message", {"channel": "#c", "text": f"t-{uuid.uuid4().hex}"}, "k")
    with pytest.raises(AssertionError, match="replay with the same key made 1 more side effect"):
        replay(slack_connector(vendors, Overconfident), call, lambda: vendors.ledger.count("slack"))
    assert len(vendors.ledger.requests(POST, call.params["text"])) == 2


def test_a_dropped_response_and_500s_are_retried_with_the_same_key(vendors: VendorServer,
                                                                   connectors: dict[str, Connector]) -> None:
    """The vendor charged, but the answer was lost; then it failed twice: one charge in the end."""
    from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
    from runonce.connectors.vendors.sandbox.faults import VendorFault
    from runonce.wire.results import Status

    vendors.state.faults.add(VendorFault("/v1/charges", drop_response=1))
    vendors.state.faults.add(VendorFault("/v1/charges", fail_500=2))
    runner = ActionRunner(connectors["payments"], RetryPolicy(max_attempts=5, base_backoff_s=0.01))
    call = ActionCall("a1", "charge_payment", {"card": "tok", "amount_cents": 700}, "booking-9")
    outcome = runner.perform(call)
    assert outcome is not None and outcome.status is Status.SUCCEEDED and outcome.attempts == 4
    assert vendors.ledger.count("payments", "booking-9") == 1


def test_a_slow_vendor_is_outcome_unknown_not_failed(vendors: VendorServer) -> None:
    from runonce.connectors.toolkit.errors import OutcomeUnknown
    from runonce.connectors.vendors.sandbox.faults import VendorFault
    vendors.state.faults.add(VendorFault(POST, delay_s=1.5))
    with pytest.raises(OutcomeUnknown, match="no answer within 1 s"):
        slack_connector(vendors, timeout_s=1.0).perform(ActionCall("a", "post_slack_message",
                                                                   {"channel": "#c", "text": "t"}, "k"))
