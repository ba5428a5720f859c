from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from tests.support.worker import RUNTIMES, WorkerProcess


@pytest.fixture(scope="module", autouse=True)
def module_since_ms() -> int:
    """When this module began (autouse: taken before its first test), for the oracle's window
    (``verify(since_ms=...)``): its tests account for the records they requested, not for the
    whole session's history."""
    return int(time.time() * 1000) - 1000


@pytest.fixture(scope="session")
def decision_log(broker: Settings) -> Iterator[DecisionWatcher]:
    log = DecisionWatcher(broker.bootstrap_servers())
    yield log
    log.close()


@pytest.fixture(scope="module", params=RUNTIMES)
def stream_worker(request: pytest.FixtureRequest, broker: Settings, decision_log: DecisionWatcher,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """One real stream worker process for the module, once per runtime (the module's tests run
    against each); ready once it has decided a probe action."""
    worker = WorkerProcess(broker, f"it-worker-{request.param}", tmp_path_factory.mktemp("worker-logs"),
                           runtime=request.param)
    worker.start()
    try:
        with Submitter(broker.bootstrap_servers(), agent_id="probe") as sub:
            probe = sub.submit("update_salesforce_field", {"probe": True}, idempotency_key=None)
        try:
            decision_log.wait([probe], timeout_s=120)
        except TimeoutError:
            raise AssertionError(f"stream worker never decided a probe; its log:\n{worker.log_tail()}") from None
        yield worker
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalVendors]:
    """The HTTP vendors and the SMTP relay (STARTTLS and AUTH), sharing one ledger of side
    effects; ``sandboxes.env()`` points an executor at them through a connectors file."""
    local = LocalVendors(tmp_path_factory.mktemp("sandbox")).start()
    yield local
    local.stop()


@pytest.fixture(scope="session")
def receipts_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The Ed25519 key the session's receipt-writing workers sign with (one broker a session:
    every checkpoint on it verifies with this key's public half)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = tmp_path_factory.mktemp("receipts") / "receipts.pem"
    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    yield path
