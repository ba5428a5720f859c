"""The ``jira`` kind (Jira Cloud REST v3) against the sandbox's Jira, which checks Basic
credentials and refuses what Jira Cloud refuses (a description that is not an Atlassian
Document, a missing summary or issue type) with Jira's ``errorMessages`` / ``errors``.
A created-then-lost answer and a lagging search: tests/connectors/test_state_checks.py and
test_ambiguous_answers.py."""

from __future__ import annotations

import base64
import json
import uuid

from runonce.connectors.executor import registry
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import VendorHttp
from runonce.connectors.vendors.jira import JiraCloudConnector, label
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.wire.results import Status
from tests.support.jira import ISSUE, jira_connector

FAST = RetryPolicy(max_attempts=3, base_backoff_s=0.01, check_attempts=3, lag_poll_s=0.1)


def _ticket(description: str = "Login fails with SSO\nsince 9:00") -> ActionCall:
    key = f"t-{uuid.uuid4().hex[:8]}"
    return ActionCall(str(uuid.uuid4()), "create_jira_ticket",
                      {"project": "SUP", "customer_id": "c1", "description": description}, key)


def test_an_issue_is_created_as_jira_cloud_v3_defines_it(local: LocalVendors, vendors: VendorServer) -> None:
    connector = registry.load(local.write_connectors(), {})["jira"].connector
    assert isinstance(connector, JiraCloudConnector)
    call = _ticket()
    ref = connector.perform(call).vendor_ref
    [request] = vendors.ledger.requests(ISSUE, label(call))
    assert (request.method, request.path) == ("POST", ISSUE)
    assert request.headers["authorization"] == "Basic <redacted>"
    fields = json.loads(request.raw)["fields"]
    assert fields["project"] == {"key": "SUP"} and fields["issuetype"] == {"name": "Task"}
    assert fields["summary"] == "Login fails with SSO" and fields["labels"] == [label(call)]
    assert fields["description"] == {"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": "Login fails with SSO"}]},
        {"type": "paragraph", "content": [{"type": "text", "text": "since 9:00"}]}]}
    assert ref.startswith("SUP-") and connector.check(call) is not None  # the label finds it
    assert "agent@runonce.local" in connector.probe()


def test_wrong_credentials_are_a_clear_permanent_failure_that_never_shows_the_token(vendors: VendorServer) -> None:
    email, _ = vendors.state.jira_account
    wrong = uuid.uuid4().hex
    connector = JiraCloudConnector("jira", VendorHttp(vendors.url), email, Secret("env:JIRA_API_TOKEN", wrong), check_lag_s=0.0)
    call = _ticket()
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(call)
    assert outcome is not None and outcome.status is Status.FAILED, outcome
    assert "HTTP 401" in (outcome.error or "") and "Jira refused the credentials" in (outcome.error or "")
    encoded = base64.b64encode(f"{email}:{wrong}".encode()).decode()
    assert wrong not in (outcome.error or "") and encoded not in (outcome.error or "") and wrong not in repr(connector)
    assert vendors.ledger.count("jira", label(call)) == 0
    assert len(vendors.ledger.requests(ISSUE, label(call))) == 1  # refused once, not retried


def test_what_jira_refuses_is_failed_with_its_reason(vendors: VendorServer) -> None:
    call = ActionCall("a", "create_jira_ticket", {"customer_id": "c1", "description": "d"}, "k-noproject")
    outcome = ActionRunner(jira_connector(vendors, check_lag_s=0.0), FAST, sleep=lambda _s: None).perform(call)
    assert outcome is not None and outcome.status is Status.FAILED and "'project' is required" in (outcome.error or "")
    no_type = jira_connector(vendors, issue_type="", check_lag_s=0.0)
    outcome = ActionRunner(no_type, FAST, sleep=lambda _s: None).perform(_ticket())
    assert outcome is not None and outcome.status is Status.FAILED, outcome
    assert "HTTP 400" in (outcome.error or "") and "Specify an issue type" in (outcome.error or "")


def test_a_created_answer_without_an_issue_key_is_resolved_by_the_state_check(vendors: VendorServer) -> None:
    """A 201 whose body names no issue (a proxy's, a mock's): the issue exists, and its label
    finds its key. Catches ``perform`` recording it ``succeeded`` with vendor_ref 'None'."""
    from runonce.connectors.vendors.sandbox.faults import VendorFault

    vendors.state.faults.add(VendorFault(ISSUE, method="POST", fail_after_effect=1, after_effect_status=201))
    call = _ticket()
    outcome = ActionRunner(jira_connector(vendors, check_lag_s=0.0), FAST, sleep=lambda _s: None).perform(call)
    assert outcome.status is Status.SUCCEEDED and (outcome.vendor_ref or "").startswith("SUP-"), outcome
    assert vendors.ledger.count("jira", label(call)) == 1  # the one issue, found, never a second
