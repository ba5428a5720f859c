"""A local three-node cluster (runonce/devbroker/cluster.py): runonce's topics get three copies
with two in sync; a write acknowledged by all in-sync replicas survives the loss of the node
that led its partition; and the whole pipeline (two stream workers, the executors) under load
loses and doubles nothing when the node leading most of actions.requested is SIGKILLed, and
later the node coordinating the executors' transactions. (Started beside the session's
broker, in a home of its own, and stopped whatever happens.)

RUNONCE_FAILOVER_ACTIONS sets the failover test's size (default 5000, at
RUNONCE_FAILOVER_RATE=100 actions/s)."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic

from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.devbroker.broker import BrokerState
from runonce.devbroker.cluster import Cluster
from runonce.kafka import topics
from runonce.kafka.reader import read_all
from runonce.settings import Settings
from runonce.testkit.workload import generate
from tests.support.coordinators import busiest, coordinators
from tests.support.load import EXECUTED, Load, account_decisions, account_results, check_effects, explain_pending
from tests.support.worker import RunonceProcess, Supervisor, WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow]

#: a topic of the acknowledged-write test's own: the failover test's oracle reads runonce's topics
PROBE = "cluster-probe"


@pytest.fixture(scope="module")
def cluster(base_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(base_settings.with_(home=tmp_path_factory.mktemp("cluster-home")), size=3)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _config(admin: Any, topic: str, name: str) -> str:
    """A topic's config as a broker sees it; a new topic reaches each broker's view a moment later."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + 30
    while True:
        try:
            return str(admin.describe_configs([resource])[resource].result()[name].value)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _topics(admin: Any, names: list[str]) -> Any:
    """Metadata that lists every name with a leader: a new topic reaches each node's view a moment
    after the node that created it, and a client may ask any of them."""
    deadline = time.monotonic() + 30
    while True:
        meta = admin.list_topics(timeout=10)
        if all(n in meta.topics and meta.topics[n].partitions and
               all(p.leader >= 0 for p in meta.topics[n].partitions.values()) for n in names):
            return meta
        assert time.monotonic() < deadline, f"topics never showed up everywhere: {names}"
        time.sleep(0.3)


def _create_probe(admin: Any) -> None:
    try:
        topics.asked_again(lambda: admin.create_topics(
            [NewTopic(PROBE, 1, 3, config={"min.insync.replicas": "2"})])[PROBE].result())
    except KafkaException as exc:
        # our own first attempt may have created it before the client dropped its connection
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def test_topics_create_on_three_brokers_makes_three_copies_two_in_sync(cluster: Cluster) -> None:
    heard: list[str] = []
    outcome = topics.create_topics(cluster.bootstrap, 6, say=heard.append)
    assert set(outcome.values()) == {"created"} and not heard, (outcome, heard)
    admin = topics.admin_client(cluster.bootstrap)
    meta = _topics(admin, [spec.name for spec in topics.TOPICS])
    assert len(meta.brokers) == 3
    for spec in topics.TOPICS:
        assert {len(p.replicas) for p in meta.topics[spec.name].partitions.values()} == {3}, spec.name
        assert _config(admin, spec.name, "min.insync.replicas") == "2", spec.name
    assert topics.create_topics(cluster.bootstrap, 6)[topics.REQUESTED] == "exists"


def test_an_acknowledged_write_survives_its_leaders_loss(cluster: Cluster) -> None:
    admin = topics.admin_client(cluster.bootstrap)
    _create_probe(admin)
    leader = _topics(admin, [PROBE]).topics[PROBE].partitions[0].leader
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    acked: list[int] = []
    for i in range(100):
        producer.produce(PROBE, value=f"r{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: acked.append(msg.offset()) if err is None else None)
    assert producer.flush(30) == 0 and len(acked) == 100
    cluster.nodes[leader].kill()
    assert cluster.status()[leader].state is BrokerState.CRASHED
    # Two of three in sync remain: the partition gets a new leader and still takes writes.
    deadline = time.monotonic() + 60
    while _topics(admin, [PROBE]).topics[PROBE].partitions[0].leader == leader:
        assert time.monotonic() < deadline, "no new leader was elected"
        time.sleep(0.5)
    producer.produce(PROBE, value=b"after", partition=0)
    assert producer.flush(30) == 0
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "cluster-test",
                       "enable.auto.commit": False})
    reader.assign([TopicPartition(PROBE, 0, min(acked))])
    seen: list[bytes] = []
    while len(seen) < 101 and time.monotonic() < deadline:
        seen += [m.value() for m in reader.consume(200, 1.0) if not m.error()]
    reader.close()
    assert seen[:100] == [f"r{i}".encode() for i in range(100)] and seen[100] == b"after"
    cluster.restart(leader)
    assert all(s.state is BrokerState.RUNNING for s in cluster.status().values())


#: how long a killed node stays down: past broker.session.timeout.ms (3 s), so it is fenced
OUTAGE_S = 5.0


def produced_at(bootstrap: str, topic_names: tuple[str, ...]) -> list[float]:
    """When each committed record of these topics was produced (CreateTime, seconds): read once
    the test is done, so no reader of the test's own has to ride out the failovers."""
    return [r.timestamp_ms / 1000 for t in topic_names for r in read_all(bootstrap, t, timeout_s=120)]


def stall_s(times: list[float], from_s: float, to_s: float) -> float:
    """The longest time without a record between ``from_s`` (the kill) and ``to_s``, or the
    last record if that comes first (the load is over: quiet is not a stall)."""
    inside = sorted(t for t in times if from_s <= t <= to_s)
    marks = [from_s] + inside
    return max(b - a for a, b in zip(marks, marks[1:])) if inside else to_s - from_s


def _wait_in_sync(admin: Any, timeout_s: float = 120.0) -> float:
    """Seconds until every partition of every topic has all its replicas back in sync."""
    started = time.monotonic()
    while True:
        meta = admin.list_topics(timeout=10)
        behind = [(t.topic, p.id) for t in meta.topics.values() for p in t.partitions.values()
                  if len(p.isrs) < len(p.replicas)]
        if not behind:
            return time.monotonic() - started
        assert time.monotonic() - started < timeout_s, f"{len(behind)} partitions still out of sync: {behind[:5]}"
        time.sleep(0.5)


def test_failover_under_load_loses_and_doubles_nothing(
        cluster: Cluster, sandboxes: LocalVendors, tmp_path: Path) -> None:
    vendors = sandboxes.vendors
    bootstrap = cluster.bootstrap
    settings = cluster.settings.with_(bootstrap=bootstrap)
    topics.create_topics(bootstrap, settings.partitions)
    admin = topics.admin_client(bootstrap)
    _topics(admin, [spec.name for spec in topics.TOPICS])
    n_actions = int(os.environ.get("RUNONCE_FAILOVER_ACTIONS", "5000"))
    rate = float(os.environ.get("RUNONCE_FAILOVER_RATE", "100"))
    run = uuid.uuid4().hex[:6]
    # Mostly CRM updates, which no executor performs: an executor commits twice per action
    # (intent, result), about 2.5 actions/s each on three replicas, and the suite has 20 minutes.
    families = generate(n_actions, repeat_ratio=0.1, seed=29, run_id=f"fo{run}",
                        unique_kinds=("unique_update",) * 20 + ("unique_email", "unique_charge"))
    records = [m for fam in families for m, _ in fam.members]

    env = sandboxes.env()
    procs: list[RunonceProcess] = [WorkerProcess(settings, f"fo-w{i}", tmp_path, loglevel="info") for i in range(2)]
    executors: dict[str, RunonceProcess] = {}
    groups_by_vendor = {vendor: f"runonce-exec-fo-{run}-{vendor}" for vendor in EXECUTED.values()}
    for vendor, slots in (("payments", 2), ("smtp", 2), ("jira", 1)):
        for slot in range(slots):
            executors[f"runonce-exec-fo-{run}-{vendor}-{slot}"] = RunonceProcess(
                settings, f"fo-exec-{vendor}-{slot}",
                ["executor", "--vendor", vendor, "--group", f"runonce-exec-fo-{run}-{vendor}", "--slot", str(slot),
                 "--loglevel", "info"], tmp_path, env)
    procs += executors.values()
    supervisor = Supervisor(procs).start()
    load = Load(bootstrap, records, rate, agent_id="failover-agent")
    timeline: list[str] = []
    failovers: list[dict[str, Any]] = []

    def note(what: str) -> None:
        timeline.append(f"t={time.monotonic() - t0:5.1f}s {what}")

    def fail_over(node_id: int, why: str) -> None:
        killed_at = time.time()
        cluster.nodes[node_id].kill()
        note(f"SIGKILL node {node_id} ({why})")
        time.sleep(OUTAGE_S)
        cluster.restart(node_id)
        note(f"node {node_id} restarted")
        synced = _wait_in_sync(admin)
        note(f"every replica back in sync {synced:.1f} s later")
        failovers.append({"node": node_id, "why": why, "killed_at": killed_at})

    t0 = time.monotonic()
    try:
        time.sleep(4)  # workers and executors start joining their groups before the load arrives
        load.start()
        note(f"load: {len(records)} actions at {rate:.0f}/s")
        time.sleep(10)

        leaders = _topics(admin, [topics.REQUESTED]).topics[topics.REQUESTED].partitions
        requested_leader = busiest(p.leader for p in leaders.values())
        led = sum(p.leader == requested_leader for p in leaders.values())
        fail_over(requested_leader, f"leads {led} of {len(leaders)} actions.requested partitions")

        coordinating = coordinators(admin, executors)
        coordinator = busiest(coordinating.values())
        mine = sorted(tid for tid, node in coordinating.items() if node == coordinator)
        fail_over(coordinator, f"transaction coordinator of {', '.join(mine)}")

        load.finish(timeout_s=max(120.0, n_actions / rate * 2))
        note("load done")

        # Nothing lost: every requested record decided once, every repeat family as planted ...
        report = account_decisions(bootstrap, records, families, lambda: "\n".join(
            f"--- {p.name}\n{p.log_tail(25)}" for p in procs if p.name.startswith("fo-w")))
        note("oracle: decisions accounted")
        # ... and every approved action for an executed tool has a final result.
        done = account_results(bootstrap, records, report)
        note("results: every approved action finished")
    finally:
        print("\nfailover test timeline:\n  " + "\n  ".join(timeline))
        supervisor.stop()
        for node_id, status in cluster.status().items():
            if status.state is not BrokerState.RUNNING:
                cluster.restart(node_id)  # leave the module's cluster whole whatever happened

    assert not done.pending, explain_pending(bootstrap, done.pending, done.results, done.tool_of, groups_by_vendor,
                                             {p.name: p.log_tail(15) for p in executors.values()})
    statuses, by_vendor, asked_again = check_effects(done, vendors.ledger.effects(), vendors.ledger.requests())

    decided = produced_at(bootstrap, (topics.APPROVED, topics.DROPPED))
    performed = produced_at(bootstrap, (topics.RESULTS,))
    for f in failovers:
        window = (f["killed_at"], f["killed_at"] + OUTAGE_S + 30)
        print(f"  node {f['node']} ({f['why']}): no decision for {stall_s(decided, *window):.1f} s, "
              f"no executor result for {stall_s(performed, *window):.1f} s")
    print(f"  {len(records)} actions, {len(done.approved)} approved for executors: {dict(statuses)}; "
          f"effects {dict(by_vendor)}; doubled 0; lost 0; payments asked again with the same key "
          f"{asked_again}; re-emitted decisions {report.re_emitted}; "
          f"process exits (restarted): {Counter(name for name, _ in supervisor.exits)}")
    for proc in procs:
        for line in proc.log_tail(400).splitlines():
            if "CRITICAL" in line or "fenced" in line:
                print(f"  {proc.name}: {line[:300]}")
