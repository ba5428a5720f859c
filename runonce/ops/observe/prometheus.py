"""A real Prometheus for the local stack, from Debian's package.

The package is downloaded once (``apt-get download prometheus``: no root, no service started)
and its two programs, ``prometheus`` and ``promtool``, are unpacked into the cache beside the
Kafka jars. A server lives in ``<home>/prometheus``: its config, its data, its log and pid."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from runonce.devbroker.broker import free_port, pid_alive, stop_group
from runonce.errors import ObserveSetupError
from runonce.settings import Settings

#: the files of this package an operator reads and a server loads
RULES = "alerts.yml"
RULES_TEST = "alerts_test.yml"
DASHBOARD = "dashboard.json"


def bin_dir(settings: Settings) -> Path:
    return settings.cache_dir / "prometheus"


def fetch(settings: Settings, progress: Callable[[str], None] = lambda _m: None) -> Path:
    """``prometheus`` and ``promtool`` in the cache (downloaded and unpacked once); their folder."""
    target = bin_dir(settings)
    if (target / "prometheus").exists() and (target / "promtool").exists():
        return target
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise ObserveSetupError(f"{tool} not found: runonce takes Prometheus from Debian's packages; "
                                    f"install prometheus yourself and copy prometheus and promtool to {target}")
    progress("fetching Prometheus (Debian's prometheus package) ...")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(["apt-get", "download", "prometheus"], cwd=tmp, capture_output=True, text=True)
        if done.returncode != 0:  # a fresh machine may not have read the package lists yet
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
            done = subprocess.run(["apt-get", "download", "prometheus"], cwd=tmp, capture_output=True, text=True)
        debs = sorted(Path(tmp).glob("prometheus_*.deb"))
        if done.returncode != 0 or not debs:
            raise ObserveSetupError(f"apt-get download prometheus failed: {(done.stdout + done.stderr)[-2000:]}")
        unpacked = Path(tmp) / "x"
        done = subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], capture_output=True, text=True)
        if done.returncode != 0:
            raise ObserveSetupError(f"dpkg-deb -x {debs[0].name} failed: {done.stderr[-2000:]}")
        target.mkdir(parents=True, exist_ok=True)
        for tool in ("prometheus", "promtool"):
            shutil.copy2(unpacked / "usr" / "bin" / tool, target / tool)
    progress(f"Prometheus in {target}")
    return target


def packaged(name: str) -> str:
    """The text of one of this package's files (alerts.yml, alerts_test.yml, dashboard.json)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def check_rules(settings: Settings, say: Callable[[str], None] = print) -> int:
    """``promtool check rules`` and ``promtool test rules`` on the packaged rules; promtool's exit code."""
    promtool = fetch(settings) / "promtool"
    with tempfile.TemporaryDirectory() as tmp:
        for name in (RULES, RULES_TEST):
            (Path(tmp) / name).write_text(packaged(name), encoding="utf-8")
        for args in (("check", "rules", RULES), ("test", "rules", RULES_TEST)):
            done = subprocess.run([str(promtool), *args], cwd=tmp, capture_output=True, text=True)
            say((done.stdout + done.stderr).strip())
            if done.returncode != 0:
                return done.returncode
    return 0


@dataclass(frozen=True, slots=True)
class Target:
    """One scrape job: ``runonce-worker`` or ``runonce-executor``, and its metrics addresses."""
    job: str
    addresses: tuple[str, ...]


def config_text(targets: Sequence[Target], scrape_interval_s: float, rules_file: str) -> str:
    """prometheus.yml (JSON is YAML): one job per kind of component, runonce's rules loaded."""
    interval = f"{scrape_interval_s:g}s"
    return json.dumps({
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [rules_file],
        "scrape_configs": [{"job_name": t.job, "static_configs": [{"targets": list(t.addresses)}]}
                           for t in targets if t.addresses],
    }, indent=2)


class Prometheus:
    """A Prometheus server in ``<home>/prometheus`` on 127.0.0.1."""

    def __init__(self, settings: Settings, progress: Callable[[str], None] = lambda _m: None) -> None:
        self.settings = settings
        self.progress = progress
        self.dir = settings.home / "prometheus"
        self._pid_file = self.dir / "prometheus.pid"
        self._port_file = self.dir / "port"
        self.log_file = self.dir / "prometheus.log"

    @property
    def port(self) -> int | None:
        try:
            return int(self._port_file.read_text())
        except (FileNotFoundError, ValueError):
            return None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pid(self) -> int | None:
        try:
            pid = int(self._pid_file.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def start(self, targets: Sequence[Target], scrape_interval_s: float = 5.0, timeout_s: float = 60.0) -> str:
        """Write the config and rules, start the server (or reload a running one); its URL."""
        binaries = fetch(self.settings, self.progress)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / RULES).write_text(packaged(RULES), encoding="utf-8")
        config = self.dir / "prometheus.yml"
        config.write_text(config_text(targets, scrape_interval_s, RULES), encoding="utf-8")
        running = self.pid()
        if running is not None:
            os.kill(running, signal.SIGHUP)  # re-reads config and rules
            return self.url
        port = self.port or free_port()
        self._port_file.write_text(str(port))
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                [str(binaries / "prometheus"), f"--config.file={config}",
                 f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                 "--storage.tsdb.retention.time=2d"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self._pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ObserveSetupError(f"prometheus exited ({proc.returncode}); see {self.log_file}:\n"
                                        f"{self.log_file.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return self.url
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        raise ObserveSetupError(f"prometheus did not answer on {self.url} within {timeout_s:.0f} s")

    def stop(self, timeout_s: float = 15.0) -> None:
        pid = self.pid()
        if pid is not None:
            stop_group(pid, timeout_s)
        self._pid_file.unlink(missing_ok=True)

    def api(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """``data`` of an HTTP API answer, e.g. ``api("alerts")``, ``api("query", {"query": "up"})``."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as answer:
                body = json.load(answer)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ObserveSetupError(f"prometheus at {self.url}: /api/v1/{path}: {exc}") from exc
        if body.get("status") != "success":
            raise ObserveSetupError(f"prometheus at {self.url}: /api/v1/{path}: {body}")
        return body["data"]

    def firing(self) -> list[dict[str, Any]]:
        """Alerts in state ``firing`` (not ``pending``)."""
        return [a for a in self.api("alerts")["alerts"] if a.get("state") == "firing"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        return list(self.api("query", {"query": promql})["result"])
