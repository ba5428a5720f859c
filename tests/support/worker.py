"""runonce processes (stream workers, executors) as real OS processes, so tests can SIGKILL them."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from runonce.kafka import groups, topics
from runonce.ops import child
from runonce.settings import Settings


class RunonceProcess:
    """``python -m runonce <argv>`` with the test's settings in its environment."""

    def __init__(self, settings: Settings, name: str, argv: list[str], log_dir: Path,
                 extra_env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = {**os.environ, "RUNONCE_HOME": str(self.settings.home),
               "RUNONCE_BOOTSTRAP": self.settings.bootstrap_servers(),
               "RUNONCE_PARTITIONS": str(self.settings.partitions), **self.extra_env}
        self.proc = child.start(self.argv, env, self.log_path)
        self.starts += 1

    def wait_exit(self, timeout_s: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout_s)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, nothing is flushed."""
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def describe(self, lines: int = 25) -> str:
        """How often it started, whether it runs (or how it exited), and its log's tail: what a
        failing test prints for each process."""
        state = "alive" if self.alive() else f"exited {self.proc.returncode if self.proc else None}"
        return f"--- {self.name} (started {self.starts}x, {state})\n{self.log_tail(lines)}"


#: the stream job's runtimes, the default first: the stream-job and crash tests run each
RUNTIMES = ("transactional", "faust")


class WorkerProcess(RunonceProcess):
    """A stream worker: ``runonce worker --name NAME [--runtime R]``."""

    def __init__(self, settings: Settings, name: str, log_dir: Path, extra_env: dict[str, str] | None = None,
                 runtime: str | None = None, loglevel: str = "warn") -> None:
        argv = ["worker", "--name", name, "--loglevel", loglevel] + (["--runtime", runtime] if runtime else [])
        # The broker's minimum session: a killed worker's partitions move after 6 s, not 10, so a
        # kill test waits less; no claim under test depends on how long that wait is.
        env = {"RUNONCE_WORKER_SESSION_TIMEOUT_MS": "6000", **(extra_env or {})}
        super().__init__(settings, name, argv, log_dir, env)
        self.runtime = runtime


def start_group_at_end(bootstrap: str, group: str) -> None:
    """A new executor group starts at the earliest record; here, skip what earlier tests approved."""
    groups.start_group_at_end(bootstrap, group, topics.APPROVED)


class Supervisor:
    """What systemd or Kubernetes would do: restart a process that exited, and remember how it ended."""

    def __init__(self, procs: list[RunonceProcess], interval_s: float = 0.5) -> None:
        import threading

        self.procs = procs
        self.interval_s = interval_s
        self.exits: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Supervisor:
        for proc in self.procs:
            proc.start()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for proc in self.procs:
                if proc.proc is not None and not proc.alive():
                    self.exits.append((proc.name, proc.proc.returncode))
                    proc.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for proc in self.procs:
            if proc.alive():
                assert proc.proc is not None
                os.killpg(proc.proc.pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
            proc.stop()
