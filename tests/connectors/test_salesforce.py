"""The ``salesforce`` kind against the sandbox's Salesforce REST API (a Bearer access token,
``/services/data/v62.0/sobjects/...``, errors as ``[{message, errorCode}]``)."""

from __future__ import annotations

import json
import uuid

from runonce.connectors.executor import registry
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import VendorHttp
from runonce.connectors.vendors.salesforce import SalesforceConnector
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.wire.results import Status

SOBJECTS = "/services/data/v62.0/sobjects/"
FAST = RetryPolicy(max_attempts=3, base_backoff_s=0.01, check_attempts=3, lag_poll_s=0.1)


def _update(field: str = "StageName", value: str = "Closed Won") -> ActionCall:
    record = f"006{uuid.uuid4().hex[:12].upper()}"
    return ActionCall(str(uuid.uuid4()), "update_salesforce_field",
                      {"record_id": record, "field": field, "value": value}, f"k-{record}")


def _connector(local: LocalVendors) -> SalesforceConnector:
    connector = registry.load(local.write_connectors(), {})["salesforce"].connector
    assert isinstance(connector, SalesforceConnector)
    return connector


def test_a_field_is_read_then_written_as_salesforce_rest_defines_it(local: LocalVendors, vendors: VendorServer) -> None:
    call = _update()
    _connector(local).perform(call)
    record = call.params["record_id"]
    requests = vendors.ledger.requests(f"{SOBJECTS}Opportunity/{record}")
    assert [(r.method, r.path) for r in requests] == [
        ("GET", f"{SOBJECTS}Opportunity/{record}?fields=StageName"), ("PATCH", f"{SOBJECTS}Opportunity/{record}")]
    assert all(r.headers["authorization"] == "Bearer <redacted>" for r in requests)
    assert json.loads(requests[1].raw) == {"StageName": "Closed Won"}
    assert vendors.ledger.count("salesforce", f"Opportunity/{record}") == 1


def test_a_write_whose_answer_was_lost_is_found_set_and_not_written_again(local: LocalVendors,
                                                                          vendors: VendorServer) -> None:
    """Salesforce wrote the field, then the answer was lost: the runner's state check reads the
    field, finds the value, and does not write it again."""
    call = _update()
    path = f"{SOBJECTS}Opportunity/{call.params['record_id']}"
    vendors.state.faults.add(VendorFault(path, method="PATCH", drop_response=1))
    outcome = ActionRunner(_connector(local), FAST, sleep=lambda _s: None).perform(call)
    assert outcome is not None and outcome.status is Status.SUCCEEDED, outcome
    methods = [r.method for r in vendors.ledger.requests(path)]
    assert methods.count("PATCH") == 1 and methods.count("GET") >= 2, methods  # read, write (lost), read: set
    assert vendors.ledger.count("salesforce", path.removeprefix(SOBJECTS)) == 1


def test_a_wrong_token_is_a_clear_permanent_failure_that_never_shows_it(vendors: VendorServer) -> None:
    wrong = "00D" + uuid.uuid4().hex
    connector = SalesforceConnector("salesforce", VendorHttp(vendors.url), Secret("env:SF_TOKEN", wrong))
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(_update())
    assert outcome is not None and outcome.status is Status.FAILED, outcome
    assert "INVALID_SESSION_ID" in (outcome.error or "") and "Salesforce refused the token" in (outcome.error or "")
    assert wrong not in (outcome.error or "") and wrong not in repr(connector)
    assert vendors.ledger.count("salesforce") == 0


def test_a_field_salesforce_does_not_know_is_failed_with_its_code(local: LocalVendors, vendors: VendorServer) -> None:
    outcome = ActionRunner(_connector(local), FAST, sleep=lambda _s: None).perform(_update(field="Stage Name"))
    assert outcome is not None and outcome.status is Status.FAILED and "must be an API name" in (outcome.error or "")
