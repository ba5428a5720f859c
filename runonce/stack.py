"""The local stack as background processes: the broker, a stream worker, the sandbox vendors
and one executor per vendor. ``runonce up`` / ``down`` / ``status``. Pid files live in
``<home>/pids``, logs in ``<home>/logs``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

from runonce.connectors.registry import FACTORIES
from runonce.kafka.broker import Broker, BrokerStatus, _pid_alive
from runonce.kafka.topics import create_topics
from runonce.settings import Settings


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    argv: tuple[str, ...]


def services() -> list[Service]:
    out = [Service("sandbox", ("sandbox",)), Service("worker", ("worker", "--name", "worker-0"))]
    out += [Service(f"executor-{v}", ("executor", "--vendor", v)) for v in sorted(FACTORIES)]
    return out


class Stack:
    def __init__(self, settings: Settings, progress: Callable[[str], None] = lambda _m: None) -> None:
        self.settings = settings
        self.progress = progress
        self.pids = settings.home / "pids"
        self.logs = settings.home / "logs"

    def _pid(self, name: str) -> int | None:
        try:
            return int((self.pids / f"{name}.pid").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def up(self, with_executors: bool = True) -> BrokerStatus:
        status = Broker(self.settings, progress=self.progress).start()
        self.progress(status.describe())
        create_topics(self.settings.kafka_access(), self.settings.partitions)
        self.pids.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "RUNONCE_HOME": str(self.settings.home),
               "RUNONCE_BOOTSTRAP": self.settings.bootstrap_servers(),
               "RUNONCE_VENDOR_URL": self.settings.vendor_url, "RUNONCE_SMTP": self.settings.smtp_address}
        for svc in services():
            if not with_executors and svc.name != "worker":
                continue
            pid = self._pid(svc.name)
            if pid is not None and _pid_alive(pid):
                continue
            with open(self.logs / f"{svc.name}.log", "ab") as log:
                proc = subprocess.Popen([sys.executable, "-m", "runonce", *svc.argv], stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                        start_new_session=True)
            (self.pids / f"{svc.name}.pid").write_text(str(proc.pid))
            self.progress(f"{svc.name} started (pid {proc.pid}, log {self.logs / (svc.name + '.log')})")
        return status

    def down(self) -> BrokerStatus:
        for svc in reversed(services()):
            pid = self._pid(svc.name)
            if pid is None:
                continue
            if _pid_alive(pid):
                _stop(pid)
                self.progress(f"{svc.name} stopped")
            (self.pids / f"{svc.name}.pid").unlink(missing_ok=True)
        return Broker(self.settings).stop()

    def status(self) -> list[tuple[str, str]]:
        rows = [("broker", Broker(self.settings).status().describe())]
        for svc in services():
            pid = self._pid(svc.name)
            state = "stopped" if pid is None else (f"running (pid {pid})" if _pid_alive(pid)
                                                   else f"crashed (pid {pid}; see {self.logs / (svc.name + '.log')})")
            rows.append((svc.name, state))
        return rows


def _stop(pid: int, timeout_s: float = 20.0) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _pid_alive(pid):
        os.killpg(pid, signal.SIGKILL)


__all__ = ["Stack", "services"]
