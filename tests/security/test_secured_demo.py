"""`runonce demo` on a secured broker (what `runonce up --secure`, then `runonce demo`, runs):
every part connects as its own least-privilege principal over SASL_SSL, and the incident
table is the plain broker's, figure for figure (each row's ``surprise`` is None)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runonce.audit.oracle import verify
from runonce.ops.demo import DemoAccess, format_table, run_demo, surprises
from tests.security.conftest import SecuredCluster
from tests.support.worker import WorkerProcess

pytestmark = pytest.mark.broker


def test_the_demo_on_a_secured_broker_shows_the_same_table(cluster: SecuredCluster, tmp_path: Path) -> None:
    # No principal of its own: a part that fell back to the demo's settings, not its role's
    # principal, would be refused, and the test with it.
    settings = cluster.admin.with_(home=tmp_path / "home", sasl_username=None, sasl_password=None)
    access = DemoAccess(agent=cluster.access("agent"), approver=cluster.access("approver"),
                        observer=cluster.access("admin"), executor=cluster.access("executor"),
                        executor_env={**settings.child_env(os.environ), **cluster.env("executor")})
    worker = WorkerProcess(cluster.admin, "sec-demo-worker", tmp_path, cluster.env("stream"))
    worker.start()
    try:
        _wait_until_every_earlier_request_is_decided(cluster)
        rows = run_demo(settings, progress=print, access=access)
    finally:
        worker.stop()
    wrong = surprises(rows)
    logs = [p.read_text(errors="replace") for p in (settings.home / "demo-logs").glob("*.log")]
    tails = "\n".join(text[-2000:] for text in logs)
    assert len(logs) >= 5, "the executors wrote no logs: the leak check below would see nothing"
    assert rows and not wrong, f"{wrong}\n{format_table(rows)}\n{worker.log_tail()}\n{tails}"
    leaked = [name for name, password in cluster.users.items() if any(password in text for text in logs)]
    assert not leaked, f"passwords of {leaked} in the executors' logs"


def _wait_until_every_earlier_request_is_decided(cluster: SecuredCluster) -> None:
    """The demo counts every effect in its sandbox's ledger while a row runs. Earlier tests of
    this session asked for emails (test_authorization's, test_oidc's) that no worker had decided
    yet; decided late, after the demo's executors took their place at the end of
    actions.approved, they were sent in the first row's window and counted as its repeats (3
    emails, not 1). Decided first, they are behind the executors' start."""
    deadline = time.monotonic() + 120
    while (lost := verify(cluster.admin.kafka_access()).lost) and time.monotonic() < deadline:
        time.sleep(1)
    assert not lost, f"the worker did not decide the requests of earlier tests: {lost}"
