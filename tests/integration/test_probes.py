"""Every long-running process answers a Kubernetes probe on its metrics port, against the real
broker: a stream worker and an executor are not ready until their transactional producer is
initialised and their group has handed them their (restored) partitions, then ready; on SIGTERM
they finish and exit 0. The gateway is ready once it can publish.

Catches: ``--metrics-port`` serving /metrics alone again (no probe to ask); a process that never
becomes ready (``ConsumerLoop.run`` not saying it started, ``_on_assign`` not saying it
restored); a SIGTERM that exits non-zero (a pod's rolling restart counted as a crash)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.devbroker.broker import free_ports
from runonce.settings import Settings
from tests.support.probes import get
from tests.support.worker import RunonceProcess, WorkerProcess, start_group_at_end

pytestmark = pytest.mark.broker




def _await_ready(proc: RunonceProcess, base: str, timeout_s: float = 120.0,
                 until: Callable[[tuple[int, str]], bool] = lambda answer: answer[0] == 200
                 ) -> list[tuple[int, str]]:
    """Every distinct answer /readyz gave until one met ``until`` (by default: said 200)."""
    said: list[tuple[int, str]] = []
    deadline = time.monotonic() + timeout_s
    while True:
        answer = get(f"{base}/readyz")
        if not said or said[-1] != answer:
            said.append(answer)
        if until(answer):
            return said
        assert proc.alive(), proc.describe()
        assert time.monotonic() < deadline, f"never ready: {said}\n{proc.describe()}"
        time.sleep(0.1)


def _stop_and_exit_code(proc: RunonceProcess) -> int:
    assert proc.proc is not None
    os.killpg(proc.proc.pid, signal.SIGTERM)
    return proc.wait_exit(60)


def test_a_stream_worker_is_ready_once_its_partitions_are_restored_and_exits_0_on_sigterm(
        broker: Settings, tmp_path: Path) -> None:
    port = free_ports(1)[0]
    worker = WorkerProcess(broker, f"probe-worker-{uuid.uuid4().hex[:6]}", tmp_path,
                           extra_env={"RUNONCE_METRICS_PORT": str(port)})
    worker.start()
    try:
        said = _await_ready(worker, f"http://127.0.0.1:{port}")
        assert said[-1] == (200, f"stream worker {worker.name}: ready\n"), said
        assert all(status != 200 for status, _ in said[:-1])
        assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        assert "runonce_" in get(f"http://127.0.0.1:{port}/metrics")[1]
        assert _stop_and_exit_code(worker) == 0, worker.describe()
    finally:
        worker.stop()


def test_an_executor_is_ready_once_assigned_and_exits_0_on_sigterm(broker: Settings, tmp_path: Path) -> None:
    port = free_ports(1)[0]
    group = f"runonce-exec-probe-{uuid.uuid4().hex[:6]}"
    start_group_at_end(broker.bootstrap_servers(), group)  # earlier tests' approvals are not its to perform
    sandbox = LocalVendors(tmp_path / "sandbox").start()
    executor = RunonceProcess(broker, "probe-executor", ["executor", "--vendor", "payments", "--group", group,
                                                         "--metrics-port", str(port)], tmp_path, sandbox.env())
    executor.start()
    try:
        said = _await_ready(executor, f"http://127.0.0.1:{port}")
        assert said[-1][0] == 200 and "ready" in said[-1][1], said
        assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        assert _stop_and_exit_code(executor) == 0, executor.describe()
    finally:
        executor.stop()
        sandbox.stop()


def test_the_gateway_is_ready_once_it_can_publish(broker: Settings, tmp_path: Path) -> None:
    port = free_ports(1)[0]
    gateway = RunonceProcess(broker, "probe-gateway", ["gateway", "serve", "--port", str(port),
                                                       "--tokens", str(tmp_path / "gateway.tokens")], tmp_path)
    gateway.start()
    try:
        # ready as soon as it serves (calls answer 503 until the broker is asked and found); the
        # broker's state in the body once its watch has asked, moments later
        said = _await_ready(gateway, f"http://127.0.0.1:{port}", until=lambda a: a == (200, "gateway: ready\n"))
        assert all(status in (0, 200) for status, _ in said), said  # never unready while it serves
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, "gateway: serving\n")
    finally:
        gateway.stop()
