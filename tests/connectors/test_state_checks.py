"""State checks against the sandbox over real HTTP: a check that cannot answer (500s, a
timeout) leaves the action in_doubt and never creates a second ticket or a second write; a
lagging search is waited out."""

from __future__ import annotations

import uuid

import pytest

from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import VendorHttp
from runonce.connectors.vendors.jira import label
from runonce.connectors.vendors.salesforce import SalesforceConnector
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.wire.results import Status
from tests.support.jira import ISSUE, SEARCH, jira_connector

FAST = RetryPolicy(max_attempts=3, base_backoff_s=0.01, check_attempts=3, lag_poll_s=0.1)


def jira_call() -> ActionCall:
    key = f"k-{uuid.uuid4().hex[:8]}"
    return ActionCall(str(uuid.uuid4()), "create_jira_ticket", {"project": "SUP", "description": key}, key)


@pytest.mark.parametrize("fault", [VendorFault(SEARCH, fail_500=10), VendorFault(SEARCH, delay_s=0.6)],
                         ids=["search answers 500", "search times out"])
def test_a_redelivered_ticket_whose_search_cannot_answer_is_in_doubt(vendors: VendorServer, fault: VendorFault) -> None:
    jira = jira_connector(vendors, timeout_s=0.3, check_lag_s=0.0)
    call = jira_call()
    jira.perform(call)  # the crashed executor's call: the ticket exists
    vendors.state.faults.add(fault)
    out = ActionRunner(jira, FAST).reconcile(call, 1)
    assert out is not None and out.status is Status.IN_DOUBT, out
    assert "state check unanswered" in (out.error or "")
    assert vendors.ledger.count("jira", label(call)) == 1


def test_a_salesforce_read_that_fails_never_writes(vendors: VendorServer) -> None:
    sf = SalesforceConnector("salesforce", VendorHttp(vendors.url, timeout_s=0.3),
                             Secret("test", vendors.state.salesforce_token))
    call = ActionCall("a1", "update_salesforce_field", {"record_id": "006B", "field": "Stage", "value": "Won"}, "k")
    vendors.state.faults.add(VendorFault("/services/data/", fail_500=10))
    out = ActionRunner(sf, FAST).reconcile(call, 1)
    assert out is not None and out.status is Status.IN_DOUBT and vendors.ledger.count("salesforce") == 0


def test_an_unknown_create_under_a_lagging_search_makes_one_ticket(vendors: VendorServer) -> None:
    jira = jira_connector(vendors, timeout_s=5.0, check_lag_s=1.5)
    call = jira_call()
    vendors.state.faults.add(VendorFault(SEARCH, index_lag_s=1.0))
    vendors.state.faults.add(VendorFault(ISSUE, drop_response=1))  # created, answer lost
    out = ActionRunner(jira, FAST).perform(call)
    assert out is not None and out.status is Status.SUCCEEDED, out
    assert vendors.ledger.count("jira", label(call)) == 1
