"""A local multi-node KRaft cluster from the same Maven jars: for failover tests and for
trying replication on one machine.

Each node runs as broker and controller (combined mode): three processes, not four, on a
2-core machine, and a quorum of three voters survives one node's loss, which is what a
failover test takes away. Nodes live in ``<home>/broker/node-<id>`` with ports of their own;
the bootstrap file lists every node. Internal topics (consumer offsets, transaction state)
get three copies with two in sync, as runonce's own topics do (runonce/kafka/replication.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from runonce.devbroker.broker import (
    SERVER_DEFAULTS,
    Broker,
    BrokerState,
    BrokerStatus,
    _answers,
    _cluster_id,
    free_ports,
    pid_alive,
)
from runonce.devbroker.users import write_private
from runonce.errors import BrokerSetupError
from runonce.kafka.access import KafkaAccess
from runonce.settings import Settings

#: heap per node: three nodes and the session's own broker fit 2 cores and 24 GiB
NODE_HEAP_MB = 384


class Node(Broker):
    """One node of the cluster: a Broker whose folder, ports and properties are its own."""

    def __init__(self, cluster: Cluster, node_id: int) -> None:
        super().__init__(cluster.settings, cluster.progress)
        self.cluster = cluster
        self.node_id = node_id
        self.dir = cluster.dir / f"node-{node_id}"

    @property
    def ports(self) -> tuple[int, int]:
        return self.cluster.ports[self.node_id]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports[0]}"

    def _ports(self) -> tuple[int, int, int]:
        return (*self.ports, 0)  # no mTLS listener: the cluster runs plaintext

    def users(self) -> dict[str, str] | None:
        return None  # the cluster runs plaintext: it is for failover, not for ACL tests

    def write_properties(self, broker_port: int, controller_port: int, mtls_port: int = 0) -> Path:
        replicas = min(3, self.cluster.size)
        props = dict(SERVER_DEFAULTS)
        props.update({
            "node.id": str(self.node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
            "controller.quorum.voters": self.cluster.voters,
            "log.dirs": str((self.dir / "data").resolve()),
            "offsets.topic.replication.factor": str(replicas),
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(min(2, replicas)),
            "default.replication.factor": str(replicas),
            # A killed node is fenced, and its partitions led elsewhere, after 3 s, not 9.
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
        })
        path = self.dir / "server.properties"
        write_private(path, "".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def launch(self) -> int:
        """Format (once) and start this node's JVM; return its pid without waiting for it."""
        current = self.read_pid()
        if current is not None and pid_alive(current):
            return current
        self.dir.mkdir(parents=True, exist_ok=True)
        props = self.write_properties(*self.ports)
        if not (self.dir / "data" / "meta.properties").exists():
            self._format(props, self.cluster.cluster_id, [])
        return self._spawn(props, NODE_HEAP_MB)

    def status(self) -> BrokerStatus:
        pid = self.read_pid()
        if pid is None:
            return BrokerStatus(BrokerState.STOPPED, None, self.address, self.log_file)
        if not pid_alive(pid):
            return BrokerStatus(BrokerState.CRASHED, pid, self.address, self.log_file)
        state = BrokerState.RUNNING if _answers(KafkaAccess(self.address), 1.0) else BrokerState.UNRESPONSIVE
        return BrokerStatus(state, pid, self.address, self.log_file)

    def kill(self) -> None:
        """SIGKILL: the node dies as a machine would, nothing flushed."""
        import signal

        pid = self.read_pid()
        if pid is not None and pid_alive(pid):
            self.signal_group(pid, signal.SIGKILL)
            while pid_alive(pid):
                time.sleep(0.05)


class Cluster:
    """``size`` combined broker+controller nodes, ids 1..size, under ``settings.broker_dir``."""

    def __init__(self, settings: Settings, size: int = 3, progress: Callable[[str], None] = lambda _m: None) -> None:
        if not 1 <= size <= 5:
            raise BrokerSetupError(f"a local cluster has 1 to 5 nodes, not {size}")
        self.settings = settings
        self.progress = progress
        self.dir = settings.broker_dir
        self.size = size
        self.ports, self.cluster_id = self._layout()
        self.nodes = {i: Node(self, i) for i in range(1, size + 1)}

    def _layout(self) -> tuple[dict[int, tuple[int, int]], str]:
        """Ports and cluster id, chosen once and kept: a restarted node must find its peers."""
        path = self.dir / "cluster.json"
        try:
            saved = json.loads(path.read_text())
            if int(saved["size"]) == self.size:
                return {int(k): (v[0], v[1]) for k, v in saved["ports"].items()}, str(saved["cluster_id"])
        except (FileNotFoundError, ValueError, KeyError):
            pass
        chosen = iter(free_ports(2 * self.size))
        ports = {i: (next(chosen), next(chosen)) for i in range(1, self.size + 1)}
        cluster_id = _cluster_id()
        self.dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"size": self.size, "cluster_id": cluster_id,
                                    "ports": {str(k): list(v) for k, v in ports.items()}}))
        return ports, cluster_id

    @classmethod
    def existing(cls, settings: Settings, progress: Callable[[str], None] = lambda _m: None) -> Cluster | None:
        """The cluster a ``start --brokers N`` left in this home, if any."""
        try:
            size = int(json.loads((settings.broker_dir / "cluster.json").read_text())["size"])
        except (FileNotFoundError, ValueError, KeyError):
            return None
        return cls(settings, size, progress)

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{c}" for i, (_b, c) in sorted(self.ports.items()))

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes.values())

    def start(self, timeout_s: float = 120.0) -> str:
        """Start every node (a quorum forms only once most are up), wait until each answers and
        the cluster reports all of them; return the bootstrap list."""
        Broker(self.settings, self.progress).fetch()
        self.progress(f"starting a {self.size}-node Kafka {self.settings.kafka_version} cluster ...")
        pids = {i: node.launch() for i, node in self.nodes.items()}
        self.settings.bootstrap_file.parent.mkdir(parents=True, exist_ok=True)
        self.settings.bootstrap_file.write_text(self.bootstrap + "\n")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [i for i, pid in pids.items() if not pid_alive(pid)]
            if dead:
                raise BrokerSetupError(f"node {dead[0]} exited while starting; last log lines:\n"
                                       f"{self.nodes[dead[0]].log_tail()}")
            if self.brokers_seen() == self.size:
                return self.bootstrap
            time.sleep(0.5)
        raise BrokerSetupError(f"the cluster did not form within {timeout_s:.0f} s")

    def brokers_seen(self) -> int:
        """How many brokers every node's metadata lists (the fewest any node reports; 0 when one
        does not answer): a client asks whichever node it reaches first, and a node that has not
        yet seen the last registration would have it plan replication for a smaller cluster."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        seen = []
        for node in self.nodes.values():
            try:
                admin = AdminClient({"bootstrap.servers": node.address, "log_level": 0})  # refusals while starting
                seen.append(len(admin.list_topics(timeout=2).brokers))
            except KafkaException:
                return 0
        return min(seen)

    def restart(self, node_id: int, timeout_s: float = 60.0) -> None:
        """Start a stopped or killed node again and wait until it answers."""
        node = self.nodes[node_id]
        node.launch()
        deadline = time.monotonic() + timeout_s
        while node.status().state is not BrokerState.RUNNING:
            if time.monotonic() > deadline:
                raise BrokerSetupError(f"node {node_id} did not answer within {timeout_s:.0f} s")
            time.sleep(0.5)

    def status(self) -> dict[int, BrokerStatus]:
        return {i: node.status() for i, node in self.nodes.items()}

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop every node at once: one by one, the last ones would wait for a quorum already gone."""
        import signal

        pids = {i: node.read_pid() for i, node in self.nodes.items()}
        for pid in pids.values():
            if pid is not None and pid_alive(pid):
                Broker.signal_group(pid, signal.SIGCONT)
                Broker.signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(p is not None and pid_alive(p) for p in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        for node in self.nodes.values():
            node.stop(timeout_s=1.0)  # SIGKILLs what is left, removes the pid files

