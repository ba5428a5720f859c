"""`runonce up` serves every component's metrics on a port of its own, kept across restarts,
and Prometheus scrapes them as one job per kind of component."""

from __future__ import annotations

from pathlib import Path

from runonce.ops.stack import Stack, services
from runonce.settings import Settings


def test_each_component_gets_a_kept_port_and_a_job(tmp_path: Path) -> None:
    stack = Stack(Settings.from_env({"RUNONCE_HOME": str(tmp_path)}))
    ports = stack.metrics_ports()
    serving = [s.name for s in services() if s.job]
    assert set(ports) == set(serving) and "sandbox" not in ports
    assert len(set(ports.values())) == len(ports)
    assert Stack(Settings.from_env({"RUNONCE_HOME": str(tmp_path)})).metrics_ports() == ports  # kept
    jobs = {t.job: t.addresses for t in stack.targets()}
    assert jobs["runonce-worker"] == (f"127.0.0.1:{ports['worker']}",)
    assert len(jobs["runonce-executor"]) == len([n for n in serving if n.startswith("executor-")])


def test_status_chooses_no_ports(tmp_path: Path) -> None:
    stack = Stack(Settings.from_env({"RUNONCE_HOME": str(tmp_path)}))
    rows = dict(stack.status())
    assert not (tmp_path / "metrics-ports.json").exists()
    assert rows["worker"] == "stopped" and "metrics" not in rows["worker"]


def test_ports_chosen_together_are_distinct() -> None:
    # one at a time, a closed socket's port can come straight back (this test's twin above once
    # got 7 ports for 8 components that way)
    from runonce.devbroker.broker import free_ports

    for _ in range(20):
        assert len(set(free_ports(16))) == 16
