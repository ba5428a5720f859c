"""Vendor answers that do not say whether the effect happened (a 5xx after the vendor acted,
an SMTP connection dropped after DATA) are unknowns, never blind retries. The sandboxes
record every request, so a second call is visible even where the vendor deduplicates."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall, Connector
from runonce.connectors.toolkit.errors import OutcomeUnknown, TransientVendorError
from runonce.connectors.vendors.jira import label
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.smtp_server import SmtpServer
from runonce.connectors.vendors.smtp import SmtpConnector
from runonce.wire.results import Status
from tests.support.jira import ISSUE, jira_connector
from tests.support.slack import POST, post, slack_connector

FAST = RetryPolicy(max_attempts=4, base_backoff_s=0.01)


@pytest.mark.parametrize("status", [500, 502, 504])
def test_a_5xx_may_have_been_performed(vendors: VendorServer, status: int) -> None:
    vendors.state.faults.add(VendorFault(POST, fail_after_effect=1, after_effect_status=status))
    with pytest.raises(OutcomeUnknown, match=f"HTTP {status} may have been performed"):
        post(vendors, "#c", "t")


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_say_not_performed(vendors: VendorServer, status: int) -> None:
    vendors.state.faults.add(VendorFault(POST, fail_after_effect=1, after_effect_status=status))
    with pytest.raises(TransientVendorError, match=f"HTTP {status}"):
        post(vendors, "#c", "t")


def test_slack_posted_then_502_is_in_doubt_never_posted_again(vendors: VendorServer) -> None:
    vendors.state.faults.add(VendorFault(POST, fail_after_effect=1, after_effect_status=502))
    text = f"deploy done {uuid.uuid4().hex[:6]}"
    call = ActionCall("a1", "post_slack_message", {"channel": "#ops", "text": text}, "k1")
    outcome = ActionRunner(slack_connector(vendors), FAST, sleep=lambda _s: None).perform(call)
    assert outcome is not None and outcome.status is Status.IN_DOUBT, outcome
    assert vendors.ledger.count("slack", text) == 1
    assert len(vendors.ledger.requests(POST, text)) == 1  # one request: no blind retry


def test_jira_created_then_504_is_found_by_its_state_check(vendors: VendorServer) -> None:
    vendors.state.faults.add(VendorFault(ISSUE, fail_after_effect=1, after_effect_status=504))
    jira = jira_connector(vendors, check_lag_s=0.0)
    call = ActionCall("a2", "create_jira_ticket", {"project": "SUP", "customer_id": "c", "description": "d"},
                      f"k-{uuid.uuid4().hex[:6]}")
    outcome = ActionRunner(jira, FAST, sleep=lambda _s: None).perform(call)
    created = vendors.ledger.effects("jira", label(call))
    assert outcome is not None and (outcome.status, outcome.vendor_ref) == (Status.SUCCEEDED,
                                                                            created[0].detail["ref"])
    assert len(created) == 1 and len(vendors.ledger.requests(ISSUE, label(call))) == 1


def test_payments_charged_then_502_asks_again_with_the_same_key(vendors: VendorServer,
                                                                connectors: dict[str, Connector]) -> None:
    vendors.state.faults.add(VendorFault("/v1/charges", fail_after_effect=1, after_effect_status=502))
    key = f"order-{uuid.uuid4().hex[:6]}"
    call = ActionCall("a3", "charge_payment", {"card": "tok", "amount_cents": 500}, key)
    outcome = ActionRunner(connectors["payments"], FAST, sleep=lambda _s: None).perform(call)
    charged = vendors.ledger.effects("payments", key)
    assert outcome is not None and (outcome.status, outcome.vendor_ref) == (Status.SUCCEEDED,
                                                                            charged[0].detail["ref"])
    # the second request is the protocol's (same key, replayed by the vendor), and is counted
    assert len(charged) == 1 and [r.key for r in vendors.ledger.requests("/v1/charges")] == [key, key]


def test_smtp_hung_up_after_data_is_in_doubt_never_resent(vendors: VendorServer, smtp: SmtpServer,
                                                           connectors: dict[str, Connector]) -> None:
    smtp.drop_after_data(1)
    connector = connectors["smtp"]
    assert isinstance(connector, SmtpConnector)
    call = ActionCall("a4", "send_email", {"to": "lead@prospect.example", "subject": "s"}, f"k-{uuid.uuid4().hex}")
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(call)
    message_id = connector.message_id(call)
    assert outcome is not None and outcome.status is Status.IN_DOUBT, outcome
    assert vendors.ledger.count("smtp", message_id) == 1 and len(vendors.ledger.requests("DATA", message_id)) == 1


def test_payments_charged_then_500_until_the_retries_run_out_is_in_doubt_never_failed(
        vendors: VendorServer, connectors: dict[str, Connector]) -> None:
    """The charge is made, and every answer, the replays with the same key included, is a 500:
    in_doubt, one charge. Catches a Stripe 5xx classified as "not performed"
    (TransientVendorError in ``stripe._raise_for_stripe``): the action would end failed with
    the card charged."""
    vendors.state.faults.add(VendorFault("/v1/charges", fail_after_effect=FAST.max_attempts, after_effect_status=500))
    key = f"order-{uuid.uuid4().hex[:6]}"
    call = ActionCall("a5", "charge_payment", {"card": "tok", "amount_cents": 500}, key)
    outcome = ActionRunner(connectors["payments"], FAST, sleep=lambda _s: None).perform(call)
    assert outcome.status is Status.IN_DOUBT and "HTTP 500" in (outcome.error or ""), outcome
    assert len(vendors.ledger.effects("payments", key)) == 1
    assert [r.key for r in vendors.ledger.requests("/v1/charges")] == [key] * FAST.max_attempts


def test_a_relay_that_offers_no_starttls_gets_no_mail_in_clear(tmp_path: Path) -> None:
    """``tls = "starttls"`` (the default) against a relay that does not offer it: failed, nothing
    sent. Catches the session carrying on in plaintext when STARTTLS is missing (the check in
    ``transport.smtp_session`` made conditional): the mail would go out in clear."""
    from runonce.connectors.executor import registry
    from runonce.connectors.vendors.sandbox.ledger import Ledger

    plain = SmtpServer(Ledger(), tls=None).start()  # no STARTTLS, no AUTH
    try:
        path = tmp_path / "connectors.toml"
        path.write_text(f'[vendors.email]\nkind = "smtp"\nhost = "127.0.0.1"\nport = {plain.port}\n'
                        f'sender = "agent@example.com"\n')
        connector = registry.load(path, {})["email"].connector
        call = ActionCall("a6", "send_email", {"to": "lead@prospect.example", "subject": "s"}, "k-plain")
        outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(call)
    finally:
        plain.stop()
    assert outcome.status is Status.FAILED and "does not offer STARTTLS" in (outcome.error or ""), outcome
    assert plain.ledger.count("smtp") == 0


def test_a_relay_silent_after_data_beyond_the_timeout_is_an_unknown(tmp_path: Path) -> None:
    """smtplib reports a timeout after DATA as SMTPServerDisconnected ("timed out"), which the
    one ``except`` after DATA turns into OutcomeUnknown: the mail may have been accepted."""
    from runonce.connectors.executor import registry
    from runonce.connectors.vendors.sandbox.ledger import Ledger

    slow = SmtpServer(Ledger(), tls=None).start()
    slow.set_delay(3.0)
    try:
        path = tmp_path / "connectors.toml"
        path.write_text(f'[vendors.email]\nkind = "smtp"\nhost = "127.0.0.1"\nport = {slow.port}\ntls = "none"\n'
                        f'sender = "agent@example.com"\ntimeout_s = 1\n')
        connector = registry.load(path, {})["email"].connector
        with pytest.raises(OutcomeUnknown, match="timed out"):
            connector.perform(ActionCall("a7", "send_email", {"to": "lead@prospect.example", "subject": "s"}, "k-slow"))
    finally:
        slow.stop()
