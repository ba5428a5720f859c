"""The whole path on the secured broker, every component with its own least-privilege
principal: an agent submits (with retries), the stream job decides, the payments executor
charges once, an analyst reads the drops, and the oracle (admin) accounts for everything.
It runs over SASL_SSL with SCRAM-SHA-512, then again over mTLS, where each process's client
certificate is its principal (``ssl.principal.mapping.rules``)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from runonce.audit.oracle import verify
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.kafka import topics
from runonce.kafka.reader import read_all
from runonce.sdk.client import ActionClient
from runonce.wire.codec import Codec
from tests.security.conftest import SecuredCluster, Transport
from tests.support.worker import RunonceProcess, WorkerProcess

pytestmark = pytest.mark.broker


@pytest.fixture()
def sandbox(tmp_path: Path) -> Iterator[LocalVendors]:
    local = LocalVendors(tmp_path / "sandbox").start()
    yield local
    local.stop()


def test_each_component_works_with_its_own_principal(cluster: SecuredCluster, transport: Transport,
                                                     sandbox: LocalVendors, tmp_path: Path) -> None:
    vendors = sandbox.vendors
    settings = cluster.admin
    worker = WorkerProcess(settings, "sec-worker", tmp_path, transport.env("stream"))
    executor = RunonceProcess(settings, "sec-exec", ["executor", "--vendor", "payments"], tmp_path,
                              {**transport.env("executor"), **sandbox.env()})
    worker.start()
    executor.start()
    key = f"charge-{uuid.uuid4().hex[:8]}"
    try:
        # The agent writes with `agent` and awaits with `agent-reader` (it may read nothing as `agent`).
        with ActionClient(transport.access("agent"), agent_id="sec-billing",
                          outcomes=transport.access("agent-reader")) as client:
            handles = [client.submit("charge_payment", {"card": "tok_visa", "amount_cents": 12900},
                                     idempotency_key=key)
                       for _ in range(4)]  # the seed's card charged four times: a framework retrying
            outcomes = [h.result(120) for h in handles]
        time.sleep(2)  # room for a wrong second charge to show up
    finally:
        executor.stop()
        worker.stop()
    assert vendors.ledger.count("payments", key) == 1, (worker.log_tail(), executor.log_tail())
    assert len(vendors.ledger.requests("/v1/charges", key)) == 1  # no second call the vendor's dedup hid
    assert {(o.status, o.vendor_ref, o.result_of) for o in outcomes} == {
        ("succeeded", outcomes[0].vendor_ref, handles[0].action_id)}

    codec = Codec()
    drops = [codec.decode(r.value)[1] for r in read_all(transport.access("analyst"), topics.DROPPED)]
    ours = [d for d in drops if d["dedup_key"] == key]
    assert len(ours) == 3 and {d["reason"] for d in ours} == {"duplicate_key"}
    report = verify(settings.kafka_access())
    assert report.ok, report.summary()
    # Planted: every principal's password, and the private keys of the CA and the client
    # certificates. None may appear in a log of the run, the broker's included.
    planted = [*cluster.users.values()] + [
        "".join(line for line in path.read_text().splitlines() if "PRIVATE KEY" not in line)[:64]
        for path in (cluster.broker.pki.folder / "ca.key", cluster.broker.pki.client_key("agent"))]
    logs = {p.name: p.read_text(errors="replace") for p in [*tmp_path.glob("*.log"), cluster.broker.log_file]}
    leaked = [(name, secret[:4] + "...") for name, text in logs.items() for secret in planted if secret in text]
    assert not leaked and len(logs) >= 3, leaked
