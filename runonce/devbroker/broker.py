"""A single-node KRaft Apache Kafka broker on 127.0.0.1 (or ``RUNONCE_BROKER_HOST``), built from Maven Central jars.

No Docker and no tarball: ``fetch`` resolves ``org.apache.kafka:kafka_2.13`` with
Maven (``pom.xml`` beside this file) into a cache shared by every checkout, ``start``
formats KRaft storage once and runs ``kafka.Kafka`` as broker+controller on free
ports, and writes the bootstrap address to ``<home>/broker/bootstrap`` where every
client and test finds it. After a crash, ``start`` first runs the controller alone until it
has fenced the dead broker (``retire.py``; why in ``_retire_dead_incarnation``).

This module is the seam where subprocess/OS errors become ``BrokerSetupError``.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable

from runonce.devbroker.retire import (
    CONTROLLER_ONLY_HEAP_MB,
    RETIRE_TIMEOUT_S,
    controller_only,
    wait_until_fenced,
)
from runonce.devbroker.tls import Pki, ensure_pki
from runonce.devbroker.users import (
    SUPER_USER,
    admin_access,
    client_config,
    format_users,
    oidc_properties,
    read_users,
    scram_arguments,
    secured_properties,
    upsert_scram,
    write_private,
)
from runonce.errors import BrokerSetupError
from runonce.kafka.access import KafkaAccess
from runonce.settings import Settings

#: the transaction and offsets settings a one-node cluster needs for transactions to work
SERVER_DEFAULTS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
    # KIP-848 groups (RUNONCE_GROUP_PROTOCOL=consumer): the broker keeps a member's session and
    # heartbeat. Kafka's defaults are 45 s and 5 s; these are the classic workers' own (a killed
    # worker's partitions move after 10 s, 6 s the least a group may ask) and its 1 s heartbeat,
    # by which a member learns of a partition to give up or take
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "log.retention.hours": "168",
    "log.segment.bytes": "67108864",
    # Fast rebalances on one machine; keep the defaults that matter for fencing.
    "transaction.max.timeout.ms": "900000",
    # Longer than a pause of the whole node (test_faults SIGSTOPs it for 20 s): on resuming, the
    # controller would fence its own live broker before that broker's heartbeat lands, leaving
    # every partition leaderless for a moment, and Kafka skips the transaction markers of a
    # leaderless partition (a transaction left open for good). A one-node cluster has no other
    # broker to move leaders to, so a short lease buys nothing. After a crash, ``start`` lets the
    # controller alone fence the dead broker on a short lease (_retire_dead_incarnation).
    "broker.session.timeout.ms": "30000",
}


class BrokerState(enum.Enum):
    RUNNING = "running"
    STOPPED = "stopped"  # never started, or stopped cleanly
    CRASHED = "crashed"  # a pid file names a process that is gone
    UNRESPONSIVE = "unresponsive"  # the process lives but does not answer (starting, or paused)


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    state: BrokerState
    pid: int | None
    bootstrap: str | None
    log_file: Path

    def describe(self) -> str:
        where = f" at {self.bootstrap}" if self.bootstrap else ""
        pid = f" (pid {self.pid})" if self.pid else ""
        extra = f"; see {self.log_file}" if self.state is BrokerState.CRASHED else ""
        return f"broker {self.state.value}{where}{pid}{extra}"


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports. Every socket stays bound until all are chosen: ports chosen one
    at a time, each socket closed before the next, may repeat (the kernel hands a freed one out again)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def free_port() -> int:
    return free_ports(1)[0]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child (killed, not yet reaped) still answers kill(0): look at its state.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_group(pid: int, timeout_s: float = 20.0) -> None:
    """SIGTERM a process group we started (``start_new_session``), SIGKILL it if it lingers."""
    try:
        os.killpg(pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _answers(bootstrap: KafkaAccess, timeout_s: float = 2.0) -> bool:
    """True when the broker answers a metadata request (not just a TCP accept)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from runonce.kafka.clients import base_config

    try:
        AdminClient({**base_config(bootstrap), "socket.timeout.ms": int(timeout_s * 1000)}).list_topics(
            timeout=timeout_s
        )
    except KafkaException:
        return False
    return True


class Broker:
    """Lifecycle of the local broker living under ``settings.broker_dir``."""

    def __init__(self, settings: Settings, progress: Callable[[str], None] = lambda _msg: None) -> None:
        self.settings = settings
        self.dir = settings.broker_dir
        self.progress = progress

    # -- files -----------------------------------------------------------------------
    @property
    def jar_dir(self) -> Path:
        return self.settings.cache_dir / f"kafka-{self.settings.kafka_version}" / "libs"

    @property
    def log_file(self) -> Path:
        return self.dir / "broker.log"

    @property
    def _pid_file(self) -> Path:
        return self.dir / "broker.pid"

    @property
    def _ports_file(self) -> Path:
        return self.dir / "ports.json"

    def read_pid(self) -> int | None:
        try:
            return int(self._pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    # -- fetch -----------------------------------------------------------------------
    def fetch(self) -> Path:
        """Resolve the broker's jars with Maven into the cache (once); return the folder."""
        marker = self.jar_dir / ".complete"
        pom = resources.files("runonce.devbroker") / "pom.xml"
        # the version and the POM it was resolved with: a POM that gains a jar resolves again
        resolved = f"{self.settings.kafka_version} {hashlib.sha256(pom.read_bytes()).hexdigest()[:16]}"
        if marker.exists() and marker.read_text().strip() == resolved:
            return self.jar_dir
        missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
        if missing:
            raise BrokerSetupError(
                f"{' and '.join(missing)} not found on PATH; the broker needs Java 17+ and Maven "
                f"(Debian: apt-get install -y openjdk-17-jre-headless maven, which scripts/setup.sh does)"
            )
        shutil.rmtree(self.jar_dir, ignore_errors=True)  # no jar of an earlier resolution stays on the classpath
        self.jar_dir.mkdir(parents=True, exist_ok=True)
        self.progress(f"resolving org.apache.kafka:kafka_2.13:{self.settings.kafka_version} from Maven Central ...")
        with resources.as_file(pom) as pom_path:
            cmd = [
                "mvn", "-q", "-B", "-f", str(pom_path), "dependency:copy-dependencies",
                f"-Dkafka.version={self.settings.kafka_version}",
                f"-DoutputDirectory={self.jar_dir}", "-DincludeScope=runtime",
            ]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise BrokerSetupError(f"maven failed to run: {exc}") from exc
        if proc.returncode != 0:
            raise BrokerSetupError(
                f"maven could not resolve Kafka {self.settings.kafka_version} (exit {proc.returncode}):\n"
                f"{(proc.stdout + proc.stderr)[-3000:]}"
            )
        if not any(self.jar_dir.glob("kafka_2.13-*.jar")):
            raise BrokerSetupError(f"maven finished but no kafka_2.13 jar is in {self.jar_dir}")
        marker.write_text(resolved)
        return self.jar_dir

    # -- status ----------------------------------------------------------------------
    def status(self) -> BrokerStatus:
        pid = self.read_pid()
        bootstrap = self._bootstrap_if_any()
        if pid is None:
            return BrokerStatus(BrokerState.STOPPED, None, None, self.log_file)
        if not pid_alive(pid):
            return BrokerStatus(BrokerState.CRASHED, pid, bootstrap, self.log_file)
        if bootstrap and _answers(self.health_access(bootstrap)):
            return BrokerStatus(BrokerState.RUNNING, pid, bootstrap, self.log_file)
        return BrokerStatus(BrokerState.UNRESPONSIVE, pid, bootstrap, self.log_file)

    def _bootstrap_if_any(self) -> str | None:
        try:
            return self.settings.bootstrap_file.read_text().strip() or None
        except FileNotFoundError:
            return None

    # -- start -----------------------------------------------------------------------
    def _ports(self) -> tuple[int, int, int]:
        """Reuse the ports of the last start when free (clients keep their address), else pick new
        ones: the client listener's, the controller's, and the mTLS listener's (secured only)."""
        try:
            saved = json.loads(self._ports_file.read_text())
            ports = (int(saved["broker"]), int(saved["controller"]), int(saved["mtls"]))
            # Only the ports the node binds: an open broker has no mTLS listener, and its unused
            # port may meanwhile be any client's ephemeral port, which must not move the broker.
            host = self.settings.broker_host
            binds = [(host, ports[0]), ("127.0.0.1", ports[1])] + ([(host, ports[2])] if self.secured else [])
            for address in binds:  # the controller stays on loopback
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    # As the JVM binds: connections of a killed broker linger in TIME_WAIT for a
                    # minute, and without this the probe would call the port taken and move the
                    # broker to new ports that no running client knows.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind(address)
            return ports
        except (FileNotFoundError, ValueError, KeyError, OSError):
            broker_port, controller_port, mtls_port = free_ports(3)
            ports = (broker_port, controller_port, mtls_port)
            self._ports_file.write_text(json.dumps({"broker": ports[0], "controller": ports[1], "mtls": ports[2]}))
            return ports

    @property
    def pki(self) -> Pki:
        """The secured broker's private CA and certificates (runonce/devbroker/tls.py)."""
        return Pki(self.dir / "tls")

    @property
    def client_properties(self) -> Path:
        """What a client of the secured broker sets (``RUNONCE_KAFKA_CONFIG``): SASL_SSL, SCRAM, the CA."""
        return self.dir / "client.properties"

    def mtls_bootstrap(self) -> str:
        """The address of the secured broker's mTLS listener (a client certificate is the principal)."""
        return f"{self.settings.broker_host}:{json.loads(self._ports_file.read_text())['mtls']}"

    @property
    def users_file(self) -> Path:
        """The broker's own copy of its users: once secured, a data dir stays secured."""
        return self.dir / "users.properties"

    def users(self) -> dict[str, str] | None:
        """The SASL users when this broker runs secured, else None: ``settings.broker_users_file``,
        else the copy a secured start left in the broker's folder, so restarting a secured broker
        without RUNONCE_BROKER_USERS never starts it open (its ACLs would then protect nothing)."""
        if self.settings.broker_users_file is not None:
            return read_users(self.settings.broker_users_file)
        return read_users(self.users_file) if self.users_file.exists() else None

    @property
    def secured(self) -> bool:
        return self.settings.broker_users_file is not None or self.users_file.exists()

    def health_access(self, bootstrap: str) -> KafkaAccess:
        users = self.users()
        return admin_access(bootstrap, users, self.pki) if users else KafkaAccess(bootstrap)

    def write_properties(self, broker_port: int, controller_port: int, mtls_port: int = 0) -> Path:
        path = self.dir / "server.properties"
        write_private(path, _properties_text(self.properties(broker_port, controller_port, mtls_port)))  # it may hold passwords
        return path

    def properties(self, broker_port: int, controller_port: int, mtls_port: int = 0) -> dict[str, str]:
        """The node's server.properties (broker and controller in one process); writes the secured
        broker's users, certificates and client.properties beside it."""
        props = dict(SERVER_DEFAULTS)
        host = self.settings.broker_host
        props.update({
            "listeners": f"PLAINTEXT://{host}:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{broker_port}",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "log.dirs": str((self.dir / "data").resolve()),
        })
        users = self.users()
        if users:
            pki = ensure_pki(self.dir / "tls", list(users), host)
            props.update(secured_properties(users, host, broker_port, controller_port, mtls_port, pki))
            if self.settings.broker_oidc_jwks_url:
                props.update(oidc_properties(self.settings.broker_oidc_jwks_url, self.settings.broker_oidc_issuer or "",
                                             self.settings.broker_oidc_audience))
            write_private(self.users_file, format_users(users))
            self.client_properties.write_text("# a client of this broker: RUNONCE_KAFKA_CONFIG=<this file>\n" + "".join(
                f"{k}={v}\n" for k, v in client_config(pki).items()))
        return props

    def _java(self, main: str, *args: str, heap_mb: int) -> list[str]:
        log4j = resources.files("runonce.devbroker") / "log4j.properties"
        log4j2 = resources.files("runonce.devbroker") / "log4j2.properties"
        return [
            "java", f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 256)}m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            # Kafka 3.9.1+ reaches only the OAuth URLs listed here (CVE-2025-27817)
            *([f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.settings.broker_oidc_jwks_url}"]
              if self.settings.broker_oidc_jwks_url else []),
            f"-Dlog4j.configuration=file:{log4j}", f"-Dlog4j2.configurationFile={log4j2}", "-cp", f"{self.jar_dir}/*", main, *args,
        ]

    def start(self, timeout_s: float = 90.0) -> BrokerStatus:
        """Start the broker unless it already runs; wait until it answers a metadata request."""
        current = self.status()
        if current.state is BrokerState.RUNNING:
            return current
        if current.state is BrokerState.UNRESPONSIVE and current.pid:
            # A broker still starting (or stuck): don't start a second one on the same data dir.
            return self._wait_ready(current.pid, timeout_s)
        self.fetch()
        self.dir.mkdir(parents=True, exist_ok=True)
        broker_port, controller_port, mtls_port = self._ports()
        props = self.write_properties(broker_port, controller_port, mtls_port)
        users = self.users()
        if not (self.dir / "data" / "meta.properties").exists():
            self.progress("formatting KRaft storage ...")
            # admin's SCRAM credential before the first start: the broker authenticates to itself with it
            self._format(props, _cluster_id(), scram_arguments({SUPER_USER: users[SUPER_USER]}) if users else [])
        elif current.state is BrokerState.CRASHED:
            self._retire_dead_incarnation(self.properties(broker_port, controller_port, mtls_port), controller_port)
        host = self.settings.broker_host
        self.progress(f"starting Kafka {self.settings.kafka_version} on {host}:{broker_port} ...")
        self.settings.bootstrap_file.write_text(f"{host}:{broker_port}\n")
        pid = self._spawn(props, self.settings.broker_heap_mb)
        status = self._wait_ready(pid, timeout_s)
        if users:
            upsert_scram(self.health_access(status.bootstrap or ""), users)
        return status

    def _retire_dead_incarnation(self, props: dict[str, str], controller_port: int) -> None:
        """After a crash, run the node as its controller alone until the controller has fenced the
        dead broker, then stop it; the caller then starts broker and controller as usual.

        Started at once, the one node would restart its controller, which gives the dead broker's
        registration a fresh session (``broker.session.timeout.ms``). Meanwhile the new broker,
        not yet registered, leads every partition by that stale registration and its transaction
        coordinator resumes the commits the crash interrupted. When the session lapses the dead
        broker is fenced, every partition is leaderless for a moment, and Kafka's coordinator
        skips the markers of partitions without a leader as if they were deleted: a transaction
        left open on them for good (read_committed readers stop there, a group's offsets never
        become stable). Fenced first, the broker leads nothing until it has registered, and its
        coordinator finds every partition's leader."""
        path = self.dir / "controller-only.properties"
        write_private(path, _properties_text(controller_only(props, controller_port)))
        self.progress("the broker did not shut down cleanly: its controller retires the dead broker first "
                      "(a few seconds) ...")
        log_from = self.log_file.stat().st_size if self.log_file.exists() else 0
        pid = self._spawn(path, CONTROLLER_ONLY_HEAP_MB)
        try:
            if not wait_until_fenced(self.log_file, log_from, props["node.id"], lambda: pid_alive(pid),
                                     timeout_s=RETIRE_TIMEOUT_S):
                self.progress(f"the controller fenced no broker within {RETIRE_TIMEOUT_S:.0f} s "
                              f"(it may never have registered); starting the node")
        finally:
            stop_group(pid)
            self._pid_file.unlink(missing_ok=True)

    def _format(self, props: Path, cluster_id: str, extra: list[str]) -> None:
        """KRaft's storage format, once per data folder."""
        # "--cluster-id=ID" as one word: a base64 id may start with "-".
        cmd = self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                         f"--config={props}", "--ignore-formatted", *extra, heap_mb=256)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BrokerSetupError(f"cannot format KRaft storage in {self.dir}: {exc}") from exc
        if proc.returncode != 0:
            raise BrokerSetupError(f"StorageTool format failed in {self.dir}:\n{(proc.stdout + proc.stderr)[-3000:]}")

    def _spawn(self, props: Path, heap_mb: int) -> int:
        """Start the JVM, its output appended to the log; its pid, kept in the pid file."""
        with open(self.log_file, "ab") as log:
            try:
                proc = subprocess.Popen(
                    self._java("kafka.Kafka", str(props), heap_mb=heap_mb),
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True,  # survives the CLI that started it; never gets our Ctrl-C
                )
            except OSError as exc:
                raise BrokerSetupError(f"cannot start java: {exc}") from exc
        self._pid_file.write_text(str(proc.pid))
        return proc.pid

    def _wait_ready(self, pid: int, timeout_s: float) -> BrokerStatus:
        deadline = time.monotonic() + timeout_s
        bootstrap = self._bootstrap_if_any()
        access = self.health_access(bootstrap) if bootstrap else None
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                raise BrokerSetupError(f"the broker exited while starting; last log lines:\n{self.log_tail()}")
            if access is not None and _answers(access, timeout_s=1.0):
                return BrokerStatus(BrokerState.RUNNING, pid, bootstrap, self.log_file)
            time.sleep(0.3)
        raise BrokerSetupError(f"the broker did not answer within {timeout_s:.0f} s; last log lines:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    # -- stop ------------------------------------------------------------------------
    def stop(self, timeout_s: float = 30.0) -> BrokerStatus:
        """Stop cleanly (SIGTERM), escalating to SIGKILL; leaves no process behind."""
        pid = self.read_pid()
        if pid is not None and pid_alive(pid):
            self.signal_group(pid, signal.SIGCONT)  # a paused broker cannot act on SIGTERM
            self.signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if pid_alive(pid):
                self.signal_group(pid, signal.SIGKILL)
                while pid_alive(pid):
                    time.sleep(0.1)
        self._pid_file.unlink(missing_ok=True)
        return self.status()

    @staticmethod
    def signal_group(pid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pid, sig)  # the broker leads its own session/group
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def _properties_text(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 chars)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
