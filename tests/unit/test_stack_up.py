"""`runonce up` in two homes on one machine at once, and an `up` that fails leaves nothing running.

Catches: the sandbox back on fixed ports (8787 and 8025: the second home's sandbox fails with
"Address already in use" and its executors wait 30 s for a connectors file); ``Stack.up`` no
longer stopping what it started when a later step fails (the broker and the worker it started
kept running); ``_await_connectors_file`` no longer looking at the sandbox's process (a dead
sandbox said only after 30 s)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from runonce.devbroker.broker import BrokerState, BrokerStatus, pid_alive
from runonce.errors import ConfigError
from runonce.ops import child
from runonce.ops import stack as stack_module
from runonce.ops.stack import Stack, services
from runonce.settings import Settings


def _sandbox_argv() -> tuple[str, ...]:
    (sandbox,) = [svc for svc in services() if svc.name == "sandbox"]
    return sandbox.argv


def test_two_homes_run_their_sandboxes_side_by_side(tmp_path: Path) -> None:
    procs, files = [], []
    try:
        for home in ("a", "b"):
            files.append(tmp_path / home / "connectors.toml")
            procs.append(subprocess.Popen(
                child.argv(*_sandbox_argv()), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env={**os.environ, "RUNONCE_HOME": str(tmp_path / home)}))
        deadline = time.monotonic() + 60
        while not all(f.exists() for f in files):
            assert all(p.poll() is None for p in procs), [p.communicate()[0] for p in procs if p.poll() is not None]
            assert time.monotonic() < deadline, "a sandbox wrote no connectors file in 60 s"
            time.sleep(0.1)
        urls = [tomllib.loads(f.read_text())["vendors"]["payments"]["base_url"] for f in files]
        assert urls[0] != urls[1], urls
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=20)


class _Broker:
    """Stands in for the dev broker: what up() may ask of it, and whether it was stopped."""

    stopped = 0

    def __init__(self, settings: Settings, progress: object = None) -> None:
        self.settings = settings

    @property
    def secured(self) -> bool:
        return False

    def status(self) -> BrokerStatus:
        return BrokerStatus(BrokerState.STOPPED, None, None, self.settings.home / "broker.log")

    def start(self) -> BrokerStatus:
        return BrokerStatus(BrokerState.RUNNING, 1, "127.0.0.1:9", self.settings.home / "broker.log")

    def stop(self) -> BrokerStatus:
        type(self).stopped += 1
        return self.status()


def test_an_up_that_fails_stops_what_it_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack = Stack(Settings.from_env({"RUNONCE_HOME": str(tmp_path)}))
    worker = subprocess.Popen(["sleep", "120"], start_new_session=True)

    def start_services(status: BrokerStatus, admin: Settings, users: dict[str, str], secure: bool,
                       with_executors: bool, started: list[str]) -> None:
        stack.pids.mkdir(parents=True, exist_ok=True)
        (stack.pids / "worker.pid").write_text(str(worker.pid))
        started.append("worker")
        raise ConfigError("the sandbox vendors exited before writing connectors.toml")

    monkeypatch.setattr(stack_module, "Broker", _Broker)
    monkeypatch.setattr(stack, "_start_services", start_services)
    try:
        with pytest.raises(ConfigError, match="sandbox vendors exited"):
            stack.up()
        worker.wait(timeout=30)
        assert not pid_alive(worker.pid) and not (stack.pids / "worker.pid").exists()
        assert _Broker.stopped == 1
    finally:
        worker.kill()
        worker.wait()


def test_a_sandbox_that_died_is_said_at_once_with_its_last_line(tmp_path: Path) -> None:
    stack = Stack(Settings.from_env({"RUNONCE_HOME": str(tmp_path)}))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stack.pids.mkdir(parents=True)
    stack.logs.mkdir(parents=True)
    (stack.pids / "sandbox.pid").write_text(str(dead.pid))
    (stack.logs / "sandbox.log").write_text("starting\nOSError: [Errno 98] Address already in use\n")
    with pytest.raises(ConfigError, match=r"exited before writing .*: OSError: \[Errno 98\] Address already in use"):
        stack._await_connectors_file(timeout_s=3600)  # noqa: SLF001  (the step up() runs before each executor)



# A stand-in process serving /readyz on the port it is given: 503 until READY_AFTER_S have passed,
# then 200 (a negative READY_AFTER_S: it prints a last line and exits at once).
_PROBE = """
import http.server, sys, time
start, port, after = time.monotonic(), int(sys.argv[1]), float(sys.argv[2])
if after < 0:
    sys.exit(print("ValueError: RUNONCE_POLICY_FILE names no file"))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if time.monotonic() - start >= after else 503)
        self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@contextmanager
def _stack_starting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ready_after_s: float) -> Iterator[tuple[Stack, int]]:
    """A Stack whose up() starts one process, ``worker``: the probe above on a free port (the
    broker stands in). Yields the stack and the port; the process is killed after."""
    from runonce.devbroker.broker import free_ports

    stack = Stack(Settings.from_env({"RUNONCE_HOME": str(tmp_path)}))
    (port,) = free_ports(1)
    stack.pids.mkdir(parents=True, exist_ok=True)
    stack.logs.mkdir(parents=True, exist_ok=True)
    (tmp_path / "metrics-ports.json").write_text(f'{{"worker": {port}}}')
    procs: list[subprocess.Popen[bytes]] = []

    def start_services(status: BrokerStatus, admin: Settings, users: dict[str, str], secure: bool,
                       with_executors: bool, started: list[str]) -> None:
        with open(stack.logs / "worker.log", "ab") as log:
            procs.append(subprocess.Popen([sys.executable, "-c", _PROBE, str(port), str(ready_after_s)], stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        (stack.pids / "worker.pid").write_text(str(procs[0].pid))
        started.append("worker")

    monkeypatch.setattr(stack_module, "Broker", _Broker)
    monkeypatch.setattr(stack, "_start_services", start_services)
    try:
        yield stack, port
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=20)


def test_up_returns_when_what_it_started_answers_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches: up() returning once its processes are started, not once ready (17 of 18 probes
    asked right after it returned were not 200)."""
    with _stack_starting(tmp_path, monkeypatch, ready_after_s=3.0) as (stack, port):
        stack.up()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
            assert answer.status == 200


def test_up_names_a_process_that_exits_before_it_is_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches: a process that died waited for until the timeout, or not named with its last line."""
    with _stack_starting(tmp_path, monkeypatch, ready_after_s=-1) as (stack, _port):
        started = time.monotonic()
        with pytest.raises(ConfigError, match="worker exited before it was ready: ValueError: RUNONCE_POLICY_FILE"):
            stack.up(ready_timeout_s=600)
        assert time.monotonic() - started < 60


def test_up_names_a_process_not_ready_in_time_and_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches: up() returning with a process that never became ready."""
    with _stack_starting(tmp_path, monkeypatch, ready_after_s=3600) as (stack, port):
        with pytest.raises(ConfigError, match=rf"not ready after 2 s: worker \(their /readyz on 127.0.0.1:{port}"):
            stack.up(ready_timeout_s=2)
        assert not (stack.pids / "worker.pid").exists()
