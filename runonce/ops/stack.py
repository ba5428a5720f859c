"""The local stack as background processes: the broker, a stream worker, the sandbox vendors
and one executor per vendor, each serving Prometheus metrics on a port of its own, and with
``--observe`` a real Prometheus scraping them with runonce's alert rules.
``runonce up`` / ``down`` / ``status``. Pid files live in ``<home>/pids``, logs in
``<home>/logs``, the metrics ports in ``<home>/metrics-ports.json``."""

from __future__ import annotations

import json
import os
import sys
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runonce.connectors.vendors.sandbox.names import SANDBOX_VENDORS
from runonce.devbroker.broker import Broker, BrokerState, BrokerStatus, free_ports, pid_alive, stop_group
from runonce.devbroker.users import SUPER_USER, client_config, read_users, write_private, write_users
from runonce.errors import ConfigError
from runonce.kafka import acls, topics
from runonce.kafka.access import KafkaAccess
from runonce.kafka.topics import create_topics
from runonce.ops import child
from runonce.ops.observe.prometheus import Prometheus, Target
from runonce.ops.supervise import exits, exits_file
from runonce.settings import Settings


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    argv: tuple[str, ...]
    #: the SASL principal it connects as on a secured broker (runonce/kafka/acls.toml); None: no Kafka
    principal: str | None = None
    #: the Prometheus job that scrapes it; None: it serves no metrics
    job: str | None = None


def vendor_names(connectors_file: Path | None) -> list[str]:
    """The vendors of the deployment's connectors file, or the sandbox's when it names none."""
    if connectors_file is None:
        return sorted(SANDBOX_VENDORS)
    try:
        doc = tomllib.loads(connectors_file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{connectors_file}: {exc}") from exc
    return sorted(doc.get("vendors") or {})


def services(connectors_file: Path | None = None) -> list[Service]:
    """The stack's processes: with no connectors file of the deployment's (RUNONCE_CONNECTORS),
    the sandbox and an executor per sandbox vendor; with one, an executor per vendor it names."""
    # the sandbox on ports the system picks (it writes them into the connectors file): two homes
    # run side by side on one machine
    out = [] if connectors_file is not None else [Service("sandbox", ("sandbox", "--http-port", "0",
                                                                      "--smtp-port", "0"))]
    out += [Service("worker", ("worker", "--name", "worker-0"), "stream", "runonce-worker")]
    out += [Service(f"executor-{v}", ("executor", "--vendor", v), "executor", "runonce-executor")
            for v in vendor_names(connectors_file)]
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

    @property
    def _ports_file(self) -> Path:
        return self.settings.home / "metrics-ports.json"

    def _kept_ports(self) -> dict[str, int]:
        """The ports chosen before (none when nothing was ever started)."""
        try:
            return {k: int(v) for k, v in json.loads(self._ports_file.read_text()).items()}
        except (FileNotFoundError, ValueError, AttributeError):
            return {}

    def metrics_ports(self) -> dict[str, int]:
        """Each metrics-serving service's port, chosen once and kept (Prometheus' targets stay put)."""
        path = self._ports_file
        ports = self._kept_ports()
        wanted = [svc.name for svc in services(self.settings.connectors_file) if svc.job]
        missing = [name for name in wanted if name not in ports]
        if missing:
            taken = set(ports.values())
            fresh = [p for p in free_ports(len(missing) + len(taken)) if p not in taken][:len(missing)]
            ports.update(zip(missing, fresh))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(ports, indent=2))
        return ports

    def targets(self) -> list[Target]:
        ports = self.metrics_ports()
        jobs: dict[str, list[str]] = {}
        for svc in services(self.settings.connectors_file):
            if svc.job:
                jobs.setdefault(svc.job, []).append(f"127.0.0.1:{ports[svc.name]}")
        return [Target(job, tuple(addresses)) for job, addresses in jobs.items()]

    @property
    def credentials(self) -> Path:
        return self.settings.home / "credentials"

    def secure(self) -> tuple[Settings, dict[str, str]]:
        """Users with random passwords (once), one password file per principal; the admin's settings."""
        users_file = self.credentials / "users.properties"
        users = (read_users(users_file) if users_file.exists()
                 else write_users(users_file, acls.principals(acls.load())))
        for name, password in users.items():
            write_private(self.credentials / name, password + "\n")
        admin = self.settings.with_(broker_users_file=users_file, sasl_username=SUPER_USER,
                                    sasl_password=users[SUPER_USER])
        return admin, users

    def access_as(self, principal: str) -> KafkaAccess:
        """How a client of this stack connects as ``principal``: on a secured broker over SASL_SSL
        with SCRAM, its password from ``<home>/credentials``; else without any principal."""
        broker = Broker(self.settings)
        if not broker.secured:
            return self.settings.kafka_access()
        try:
            password = (self.credentials / principal).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise ConfigError(f"no credentials for principal {principal!r} in {self.credentials}: "
                              f"start the stack with `runonce up --secure`") from None
        return KafkaAccess(self.settings.bootstrap_servers(), principal, password, None, client_config(broker.pki))

    def env_as(self, principal: str) -> dict[str, str]:
        """A child process's environment as ``principal`` (see ``env``)."""
        return self.env(Service(principal, (), principal), Broker(self.settings).secured)

    def env(self, svc: Service, secure: bool) -> dict[str, str]:
        """A service's environment: on a secured broker the broker's client settings (SASL_SSL,
        SCRAM, its CA) and its own principal, its password in a file."""
        env = self.settings.child_env(os.environ)  # never the caller's principal
        if secure and svc.principal:
            env = self.settings.with_principal(env, svc.principal, self.credentials / svc.principal)
            env["RUNONCE_KAFKA_CONFIG"] = str(Broker(self.settings).client_properties)
        return env

    def up(self, with_executors: bool = True, secure: bool = False, observe: bool = False,
           ready_timeout_s: float = 120.0) -> BrokerStatus:
        """Start what is not running, and return when each process it started answers ready (its
        ``/readyz``; the sandbox: its connectors file), as ``docker compose up --wait`` does; a
        process that exits or is not ready within ``ready_timeout_s`` fails the call, named, and
        what the call started is stopped. ``secure`` (or a broker secured before) runs SASL + ACLs with
        one principal per component; credentials are written to ``<home>/credentials``.
        ``observe`` starts a Prometheus scraping every component, with runonce's alert rules."""
        secure = secure or Broker(self.settings).secured
        admin, users = self.secure() if secure else (self.settings, {})
        broker = Broker(admin, progress=self.progress)
        broker_was_running = broker.status().state is BrokerState.RUNNING
        status = broker.start()
        started: list[str] = []
        try:
            self._start_services(status, admin, users, secure, with_executors, started)
            self._await_ready(started, ready_timeout_s)
        except BaseException:
            # a stack half up is worse than none: stop what this call started, then say why
            self.progress(f"runonce up failed: stopping what it started ({', '.join(started) or 'nothing'}"
                          f"{'' if broker_was_running else ', the broker'})")
            self._stop(started)
            if not broker_was_running:
                broker.stop()
            raise
        if observe:
            url = Prometheus(self.settings, self.progress).start(self.targets())
            self.progress(f"Prometheus on {url} with runonce's alert rules (firing: {url}/alerts)")
        return status

    def _start_services(self, status: BrokerStatus, admin: Settings, users: dict[str, str], secure: bool,
                        with_executors: bool, started: list[str]) -> None:
        broker = Broker(admin, progress=self.progress)
        self.progress(status.describe() + (" (SASL_SSL with SCRAM-SHA-512, mTLS, ACLs)" if secure else ""))
        if secure:
            admin = admin.with_(bootstrap=status.bootstrap, kafka_config=client_config(broker.pki))
        create_topics(admin.kafka_access(), self.settings.partitions)
        if secure:
            acls.apply(admin.kafka_access(), acls.load(), prune=True)
            executor = KafkaAccess(admin.bootstrap_servers(), "executor", users["executor"], None,
                                   admin.kafka_config)
            acls.wait_until_granted(executor, topics.APPROVED)  # before any component connects
            self.progress(f"ACLs applied; clients connect with the broker's client settings and a principal "
                          f"from {self.credentials}, e.g. RUNONCE_KAFKA_CONFIG={broker.client_properties} "
                          f"RUNONCE_SASL_USERNAME=agent RUNONCE_SASL_PASSWORD_FILE={self.credentials / 'agent'}; "
                          f"or a client certificate from {broker.pki.folder / 'clients'} on {broker.mtls_bootstrap()}")
        self.pids.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        ports = self.metrics_ports()
        for svc in services(self.settings.connectors_file):
            if not with_executors and svc.name != "worker":
                continue
            pid = self._pid(svc.name)
            if pid is not None and pid_alive(pid):
                continue
            if svc.name == "sandbox":
                self.settings.connectors_path.unlink(missing_ok=True)  # the sandbox writes it anew
            elif svc.name.startswith("executor-"):
                self._await_connectors_file()
            exits_file(self.pids, svc.name).unlink(missing_ok=True)  # this run's exits only
            metrics = ("--metrics-port", str(ports[svc.name])) if svc.job else ()
            # under a supervisor that starts it again when it exits for a restart (supervise.py)
            supervisor = (sys.executable, "-m", "runonce.ops.supervise", svc.name, str(self.pids), "--")
            proc = child.start([*svc.argv, *metrics], self.env(svc, secure), self.logs / f"{svc.name}.log",
                               prefix=supervisor)
            (self.pids / f"{svc.name}.pid").write_text(str(proc.pid))
            started.append(svc.name)
            self.progress(f"{svc.name} started (pid {proc.pid}, log {self.logs / (svc.name + '.log')})")

    def _await_ready(self, started: list[str], timeout_s: float) -> None:
        """Each started process's ``/readyz`` answers 200 (the sandbox's readiness is its
        connectors file, awaited before the executors start)."""
        ports = self._kept_ports()
        waiting = [name for name in started if name in ports]
        deadline = time.monotonic() + timeout_s
        while waiting:
            for name in list(waiting):
                pid = self._pid(name)
                if pid is None or not pid_alive(pid) or exits(self.pids, name):
                    raise ConfigError(f"{name} exited before it was ready: {self._last_line(name)} "
                                      f"(see {self.logs / (name + '.log')})")
                if _answers_ready(ports[name]):
                    waiting.remove(name)
            if not waiting:
                break
            if time.monotonic() > deadline:
                raise ConfigError(f"not ready after {timeout_s:.0f} s: {', '.join(waiting)} (their /readyz on "
                                  + ", ".join(f"127.0.0.1:{ports[n]}" for n in waiting)
                                  + f"; logs in {self.logs})")
            time.sleep(0.2)
        if started:
            self.progress(f"ready: {', '.join(started)}")
        if "sandbox" in started:
            try:  # every sandbox vendor is served on one URL (connectors/vendors/sandbox/local.py)
                url = tomllib.loads(self.settings.connectors_path.read_text())["vendors"]["payments"]["base_url"]
                self.progress(f"the sandbox vendors' side effects: {url}/_ledger (every request: {url}/_requests)")
            except (OSError, KeyError, tomllib.TOMLDecodeError):
                pass  # a sandbox of another shape: its log says where it listens

    def _last_line(self, name: str) -> str:
        try:
            text = (self.logs / f"{name}.log").read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return (text.strip().splitlines() or ["(empty log)"])[-1]

    def _await_connectors_file(self, timeout_s: float = 30.0) -> None:
        """The sandbox writes the connectors file once it listens; executors start after that. A
        sandbox that exits (a port taken) is said at once, with its log's last line."""
        deadline = time.monotonic() + timeout_s
        log = self.logs / "sandbox.log"
        while not self.settings.connectors_path.exists():
            pid = self._pid("sandbox")
            if pid is not None and not pid_alive(pid):
                raise ConfigError(f"the sandbox vendors exited before writing {self.settings.connectors_path}: "
                                  f"{self._last_line('sandbox')} (see {log})")
            if time.monotonic() > deadline:
                raise ConfigError(f"no connectors file at {self.settings.connectors_path} after {timeout_s:.0f} s: "
                                  f"see {log}")
            time.sleep(0.1)

    def _stop(self, names: list[str]) -> None:
        for name in reversed(names):
            pid = self._pid(name)
            if pid is not None and pid_alive(pid):
                stop_group(pid)
                self.progress(f"{name} stopped")
            (self.pids / f"{name}.pid").unlink(missing_ok=True)

    def down(self) -> BrokerStatus:
        prometheus = Prometheus(self.settings)
        if prometheus.pid() is not None:
            prometheus.stop()
            self.progress("prometheus stopped")
        self._stop([svc.name for svc in services(self.settings.connectors_file)])
        return Broker(self.settings).stop()

    def status(self) -> list[tuple[str, str]]:
        rows = [("broker", Broker(self.settings).status().describe())]
        ports = self._kept_ports()  # a status call chooses nothing
        for svc in services(self.settings.connectors_file):
            pid = self._pid(svc.name)
            state = "stopped" if pid is None else (f"running (pid {pid})" if pid_alive(pid)
                                                   else f"crashed (pid {pid}; see {self.logs / (svc.name + '.log')})")
            codes = exits(self.pids, svc.name)
            if codes and pid is not None and pid_alive(pid):
                state += f", restarted {len(codes)} time(s) (last exit {codes[-1]})"
            if svc.name in ports and pid is not None and pid_alive(pid):
                state += f", metrics http://127.0.0.1:{ports[svc.name]}/metrics"
            rows.append((svc.name, state))
        prometheus = Prometheus(self.settings)
        if prometheus.port is not None:  # started once with --observe
            pid = prometheus.pid()
            rows.append(("prometheus", f"running (pid {pid}), {prometheus.url}" if pid is not None else
                         f"stopped (runonce up --observe starts it; log {prometheus.log_file})"))
        return rows


def _answers_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (OSError, ValueError):  # refused while it starts, 503 (HTTPError) while not ready
        return False


__all__ = ["Stack", "services"]
