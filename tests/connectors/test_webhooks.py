"""The ``webhook`` kind: Standard Webhooks 1.0. Every request the sandbox's receiver recorded
is verified with the specification's reference library for Python (``standardwebhooks``), as a
receiver of yours would verify it; the receiver performs each ``webhook-id`` once."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from runonce.connectors.executor import registry
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.toolkit.errors import PermanentVendorError
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import VendorHttp
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.connectors.vendors.webhooks import StandardWebhookConnector
from runonce.errors import ConfigError
from runonce.wire.results import Status

HOOK = "/hooks/ops"
FAST = RetryPolicy(max_attempts=4, base_backoff_s=0.01)


def _restart(key: str) -> ActionCall:
    return ActionCall(str(uuid.uuid4()), "restart_service", {"service": "api", "host": "srv-2"}, key)


def _verified(local: LocalVendors, vendors: VendorServer, key: str) -> list[object]:
    """Each recorded request for ``key``, verified by the reference library (raises if one fails)."""
    receiver = Webhook(local.webhook_secret)
    requests = vendors.ledger.requests(HOOK, key)
    return [receiver.verify(r.raw, r.headers) for r in requests]


def test_a_webhook_verifies_with_the_reference_library_and_carries_the_event(
        local: LocalVendors, vendors: VendorServer, connectors: dict[str, object]) -> None:
    key = f"restart-{uuid.uuid4().hex[:8]}"
    connector = connectors["webhook"]
    assert isinstance(connector, StandardWebhookConnector)
    connector.perform(_restart(key))
    [event] = _verified(local, vendors, key)
    assert event == {"type": "restart_service", "timestamp": event["timestamp"],  # type: ignore[index]
                     "data": {"service": "api", "host": "srv-2"}}
    [request] = vendors.ledger.requests(HOOK, key)
    assert request.headers["webhook-id"] == key and request.headers["webhook-signature"].startswith("v1,")


def test_a_retry_after_a_lost_answer_sends_the_same_id_and_the_receiver_acts_once(
        local: LocalVendors, vendors: VendorServer, connectors: dict[str, object]) -> None:
    """The receiver restarted the service, then the answer was lost; the retry carries the
    same webhook-id (newly timestamped and signed), so the receiver does not restart it again."""
    vendors.state.faults.add(VendorFault(HOOK, drop_response=1))
    key = f"restart-{uuid.uuid4().hex[:8]}"
    outcome = ActionRunner(connectors["webhook"], FAST, sleep=lambda _s: None).perform(_restart(key))  # type: ignore[arg-type]
    assert outcome is not None and outcome.status is Status.SUCCEEDED, outcome
    assert len(_verified(local, vendors, key)) == 2  # two deliveries, both genuine ...
    assert {r.headers["webhook-id"] for r in vendors.ledger.requests(HOOK, key)} == {key}
    assert vendors.ledger.count("webhook:ops", key) == 1  # ... one restart


def test_a_wrong_secret_is_refused_clearly_and_never_shown(vendors: VendorServer) -> None:
    wrong = "whsec_" + "QUJD" * 8
    connector = StandardWebhookConnector("ops", VendorHttp(f"{vendors.url}{HOOK}"), Secret("env:OPS_WEBHOOK_SECRET", wrong),
                                         frozenset({"restart_service"}))
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(_restart("k-wrong"))
    assert outcome is not None and outcome.status is Status.FAILED, outcome
    assert "HTTP 401" in (outcome.error or "") and HOOK in (outcome.error or "")
    assert wrong not in (outcome.error or "") and wrong not in repr(connector)
    assert vendors.ledger.count("webhook:ops", "k-wrong") == 0
    with pytest.raises(PermanentVendorError):
        connector.perform(_restart("k-wrong"))


@pytest.mark.parametrize("fields, secret, error", [
    ('url = "https://ops.example.com/hooks"\ntools = ["restart_service"]', "whsec_not*base64",
     "vendors.ops.secret: a webhook secret is whsec_ followed by base64"),
    ('url = "https://ops.example.com/hooks"', "whsec_QUJD", "vendors.ops.tools: name the tools"),
    ('url = "http://ops.example.com/hooks"\ntools = ["restart_service"]', "whsec_QUJD",
     "vendors.ops.url: plain http is refused"),
])
def test_the_connectors_file_refuses_a_webhook_it_cannot_sign_for(tmp_path: Path, fields: str, secret: str,
                                                                  error: str) -> None:
    path = tmp_path / "connectors.toml"
    path.write_text(f'[vendors.ops]\nkind = "webhook"\nsecret = {{ env = "OPS_SECRET" }}\n{fields}\n')
    with pytest.raises(ConfigError, match=error) as refused:
        registry.load(path, {"OPS_SECRET": secret})
    assert secret not in str(refused.value)
