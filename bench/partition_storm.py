"""The partition storm: runonce under network faults, not process faults (issue 62). Every
fault is a cut or a lossy, slow link on this machine's loopback (runonce/testkit/faults.py,
runonce/testkit/proxy.py ``Delayed``); the processes stay alive through them.

    .venv/bin/python bench/partition_storm.py                  # every phase (~12 min)
    .venv/bin/python bench/partition_storm.py --phases zombies --actions 100

Phases:

- ``zombies``: two executors per vendor kind (payments VENDOR_KEY, jira STATE_CHECK, smtp
  NONE, a PostgreSQL table ATOMIC) under a paced load; every few seconds one executor is cut
  from the broker (not from its vendor) for 8-20 s, then healed. It goes on calling until its
  lease ends, while its heir reconciles. Counted on the vendors' side: effects per action.
- ``worker``: three stream workers under load; one at a time cut from the broker mid-transaction
  for 10-15 s. The oracle: lost, decided two ways, keys approved twice, decisions re-emitted.
- ``gateway``: agents charging through the HTTP gateway while it is cut from the broker for
  40 s: what they were answered, and charges per key after their retries.
- ``delay``: a burst (throughput: a backlog decided) and a steady load below it (decision
  latency) through a broker whose every link crosses a latency proxy, once at 0 ms (the
  reference) and once at 200 ms ± 100 with 5% of the worker's and agent's packets lost; the oracle.
- ``quorum``: a 3-node KRaft cluster (RF 3, min ISR 2); node 3 is cut off from the other two
  (both ways; clients still reach it) for 20 s during a burst. The oracle.

Receipts are on in the zombies and worker phases (a key made for the run): each phase ends by
holding its receipts against what it wrote (every final result, every decision, with exactly
one receipt; every receipt with its record) and verifying their chains with the public key.

Prints a Markdown table (docs/measured.md keeps it) and writes the figures as JSON (``--out``).
Needs root (iptables, cgroup v2), as the suite's fault tests do."""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from bench.receipts_check import receipts_held, receipts_key  # noqa: E402
from runonce import tokens as token_store  # noqa: E402
from runonce.audit.oracle import Report, verify  # noqa: E402
from runonce.audit.receipts import decision_hashes, final_result_hashes  # noqa: E402
from runonce.connectors.toolkit.base import ActionCall  # noqa: E402
from runonce.connectors.vendors.jira import label as jira_label  # noqa: E402
from runonce.connectors.vendors.sandbox.local import LocalVendors  # noqa: E402
from runonce.connectors.vendors.sandbox.local_postgres import LocalPostgres  # noqa: E402
from runonce.connectors.vendors.smtp import SmtpConnector  # noqa: E402
from runonce.devbroker.broker import Broker, free_ports  # noqa: E402
from runonce.devbroker.cluster import Cluster  # noqa: E402
from runonce.kafka import clients, groups, topics  # noqa: E402
from runonce.kafka.partitioner import partition_for  # noqa: E402
from runonce.kafka.reader import read_all  # noqa: E402
from runonce.ops import child
from runonce.receipts.receipt import Kind as ReceiptKind  # noqa: E402
from runonce.sdk.submit import Submitter, build_request  # noqa: E402
from runonce.settings import Settings  # noqa: E402
from runonce.streams.records import output_key  # noqa: E402
from runonce.testkit.agents import Agent, charge_until_final  # noqa: E402
from runonce.testkit.decisions import approved_decision  # noqa: E402
from runonce.testkit.faults import Faults, leftovers  # noqa: E402
from runonce.testkit.proxy import Delayed  # noqa: E402
from runonce.testkit.workload import generate, in_order, send_paced  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402

PHASES = ("zombies", "worker", "gateway", "delay", "quorum")
#: the broker's minimum session: a cut process's partitions move after 6 s
SESSION_MS = "6000"
REFUND_SQL = "INSERT INTO refunds (order_id, amount_cents) VALUES (%(order_id)s, %(amount_cents)s) RETURNING id"


def say(msg: str) -> None:
    print(f"partition storm: {msg}", file=sys.stderr, flush=True)


# -- processes -------------------------------------------------------------------------------

class Proc:
    """``python -m runonce <argv>``, its output in ``<logs>/<name>.log``; placed under its name in
    the faults' cgroups at every start, so a cut reaches the live process whatever restarted it."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], logs: Path, faults: Faults) -> None:
        self.name, self.argv, self.env, self.logs, self.faults = name, argv, env, logs, faults
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> Proc:
        self.proc = child.start(self.argv, self.env, self.logs / f"{self.name}.log")
        self.faults.place(self.name, self.proc.pid)
        self.starts += 1
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self, n: int = 15) -> str:
        path = self.logs / f"{self.name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""


def restart_exited(procs: list[Proc]) -> list[str]:
    """What a supervisor does: start again each process that exited (a fenced zombie exits)."""
    restarted = []
    for p in procs:
        if p.proc is not None and not p.alive():
            restarted.append(f"{p.name} ({p.proc.returncode})")
            p.start()
    return restarted


@dataclass
class Cuts:
    """Random cuts of one process at a time from ``ports``, each healed after its time."""

    faults: Faults
    ports: list[int]
    rnd: random.Random
    made: list[float] = field(default_factory=list)
    healed_at: float = 0.0

    def cut_for(self, proc: Proc, seconds: float) -> None:
        fault = self.faults.cut(proc.name, self.ports)
        say(f"cut {proc.name} from the broker for {seconds:.0f} s")
        time.sleep(seconds)
        self.faults.heal(fault)
        self.made.append(seconds)
        self.healed_at = time.monotonic()


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


# -- phase 1: zombie executors ----------------------------------------------------------------

@dataclass(frozen=True)
class Kind:
    vendor: str
    capability: str
    tool: str
    params: Callable[[str, int], dict[str, Any]]


KINDS = (
    Kind("payments", "vendor_key", "charge_payment", lambda run, i: {"card": "tok", "amount_cents": 100 + i,
                                                                     "n": f"{run}-{i}"}),
    Kind("jira", "state_check", "create_jira_ticket", lambda run, i: {"project": "SUP", "customer_id": "c",
                                                                      "description": f"storm {run} {i}"}),
    Kind("smtp", "none", "send_email", lambda run, i: {"to": f"lead{i}@prospect.example", "subject": f"{run} {i}",
                                                       "body": "hello"}),
    Kind("orders_db", "atomic", "issue_refund", lambda run, i: {"order_id": f"{run}-{i}", "amount_cents": 100 + i}),
)


def zombies(args: argparse.Namespace, settings: Settings, bootstrap: str, home: Path, faults: Faults) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    since_ms = int(time.time() * 1000) - 1000
    key = receipts_key(home)
    sandbox = LocalVendors(home / "sandbox").start()
    db = LocalPostgres(home / "pg").start()
    try:
        with psycopg.connect(db.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE refunds (id bigserial PRIMARY KEY, order_id text NOT NULL, amount_cents integer)")
        connectors = sandbox.write_connectors(extra={"jira": {"search_lag_s": "1", "timeout_s": "5"}})
        with open(connectors, "a", encoding="utf-8") as f:
            f.write(f'\n[vendors.orders_db]\nkind = "postgres"\ndsn = {{ env = "ORDERS_DSN" }}\n'
                    f'[vendors.orders_db.tools.issue_refund]\nsql = "{REFUND_SQL}"\n')
        source = f"storm.approved.{run}"
        admin = topics.admin_client(bootstrap)
        admin.create_topics([NewTopic(source, 6, 1)])[source].result()
        env = {**os.environ, "RUNONCE_HOME": str(settings.home), "RUNONCE_BOOTSTRAP": bootstrap,
               "RUNONCE_CONNECTORS": str(connectors), "ORDERS_DSN": db.dsn,
               "RUNONCE_EXECUTOR_SESSION_TIMEOUT_MS": SESSION_MS, "RUNONCE_RECEIPTS_KEY": str(key),
               # paced, so that a cut lands while calls are under way
               "RUNONCE_VENDOR_LIMITS": ";".join(f"{k.vendor}:per_s={args.vendor_rate}" for k in KINDS)}
        procs = [Proc(f"exec-{k.vendor}-{slot}", ["executor", "--vendor", k.vendor, "--source-topic", source,
                                                  "--group", f"g-{k.vendor}-{run}", "--slot", slot],
                      env, home / "logs", faults).start() for k in KINDS for slot in ("a", "b")]
        n = args.actions
        decisions = [(k, approved_decision(build_request(k.tool, k.params(run, i), agent_id="storm",
                                                         idempotency_key=f"{k.vendor}-{run}-{i}"),
                                           f"{k.vendor}-{run}-{i}")) for i in range(n) for k in KINDS]
        started = time.monotonic()
        producer_done = threading.Event()
        threading.Thread(target=_produce_paced, args=(bootstrap, source, [d for _, d in decisions],
                                                      args.rate, producer_done), daemon=True).start()
        cuts = Cuts(faults, [_port(bootstrap)], random.Random(args.seed))
        restarted: list[str] = []
        time.sleep(5)
        while len(cuts.made) < args.cuts:
            victim = cuts.rnd.choice([p for p in procs if p.alive()])
            cuts.cut_for(victim, cuts.rnd.uniform(8, 20))
            restarted += restart_exited(procs)
            time.sleep(cuts.rnd.uniform(1, 4))
        producer_done.wait(600)
        ids = {d["request"]["action_id"]: k for k, d in decisions}
        final = _final_results(bootstrap, set(ids), deadline_s=args.deadline, tick=lambda: restarted.extend(
            restart_exited(procs)))
        healed_s = time.monotonic() - cuts.healed_at
        rows = []
        for k in KINDS:
            mine = [d for kind, d in decisions if kind is k]
            effects = [_effects(k, d, sandbox, db) for d in mine]
            statuses = Counter(final.get(d["request"]["action_id"], {}).get("status", "none") for d in mine)
            in_doubt = [(d, e) for d, e in zip(mine, effects) if final.get(d["request"]["action_id"], {})
                        .get("status") == "in_doubt"]
            rows.append({"vendor": k.vendor, "capability": k.capability, "approved": len(mine),
                         "effects": sum(effects), "doubled": sum(1 for e in effects if e > 1),
                         "in_doubt": len(in_doubt), "in_doubt_sent": sum(1 for _, e in in_doubt if e),
                         "statuses": dict(statuses)})
        for p in procs:
            p.stop()
        results = {d: a for d, a in final_result_hashes(read_all(bootstrap, topics.RESULTS, since_ms=since_ms),
                                                          Codec()).items() if a in ids}
        held = receipts_held(bootstrap, since_ms, ReceiptKind.OUTCOME, results, set(ids), key)
        return {"phase": "zombies", "receipts": held, "actions": n * len(KINDS), "cuts": len(cuts.made),
                "cut_s": round(sum(cuts.made), 1), "restarted": restarted, "took_s": round(time.monotonic() - started, 1),
                "settled_after_last_heal_s": round(healed_s, 1), "vendors": rows,
                "logs": {p.name: p.tail(5) for p in procs}}
    finally:
        sandbox.stop()
        db.stop()


def _produce_paced(bootstrap: str, topic: str, decisions: list[dict[str, Any]], rate: float,
                   done: threading.Event) -> None:
    codec = Codec()
    producer = clients.producer(bootstrap)
    gap = 1 / rate
    t0 = time.monotonic()
    for i, d in enumerate(decisions):
        key = output_key(d)
        producer.produce(topic, key=key, value=codec.encode("ActionDecision", d), partition=partition_for(key, 6))
        producer.poll(0)
        wait = t0 + (i + 1) * gap - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    producer.flush(60)
    done.set()


def _final_results(bootstrap: str, ids: set[str], deadline_s: float, tick: Callable[[], None]) -> dict[str, dict[str, Any]]:
    codec = Codec()
    final: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for rec in read_all(bootstrap, topics.RESULTS):
            try:
                _, r = codec.decode(rec.value, expect="ActionResult")
            except Exception:  # noqa: BLE001 - a foreign record
                continue
            if r["action_id"] in ids and r["status"] != "attempting":
                final[r["action_id"]] = r
        if len(final) >= len(ids):
            break
        say(f"{len(ids) - len(final)} of {len(ids)} actions without a final result yet")
        tick()
        time.sleep(3)
    return final


def _effects(kind: Kind, decision: dict[str, Any], sandbox: LocalVendors, db: LocalPostgres) -> int:
    request = decision["request"]
    key = str(request["idempotency_key"])
    call = ActionCall(request["action_id"], request["tool"], {}, key)
    ledger = sandbox.vendors.ledger
    if kind.vendor == "payments":
        return sum(1 for e in ledger.effects("payments") if e.key == key or e.key.endswith(f"/{key}"))
    if kind.vendor == "jira":
        return ledger.count("jira", jira_label(call))
    if kind.vendor == "smtp":
        return ledger.count("smtp", SmtpConnector.message_id(call))
    order = json.loads(request["params_json"])["order_id"]
    with psycopg.connect(db.dsn) as conn:
        row = conn.execute("SELECT count(*) FROM refunds WHERE order_id = %s", (order,)).fetchone()
    return int(row[0]) if row else 0


# -- phase 2: stream workers cut mid-transaction ---------------------------------------------

def _agent(bootstrap: str, items: list[tuple[dict[str, Any], float]], rate_per_s: float) -> None:
    with Submitter(bootstrap, agent_id="storm-agent") as sub:
        send_paced(sub.send, items, rate_per_s)


def _accounted(bootstrap: str, since_ms: int, wanted: set[str], deadline_s: float) -> tuple[Report, float]:
    """The oracle, read again until every wanted action is accounted for (or the deadline)."""
    started = time.monotonic()
    while True:
        report = verify(bootstrap, since_ms=since_ms)
        if wanted <= report.outcome_by_action.keys() or time.monotonic() - started > deadline_s:
            return report, time.monotonic() - started
        time.sleep(2)


def _oracle(report: Report, wanted: set[str]) -> dict[str, Any]:
    return {"requested": len(wanted), "undecided": len(wanted - report.outcome_by_action.keys()),
            "lost": len(report.lost), "two_way": len(report.conflicts), "keys_approved_twice": len(report.doubled_keys),
            "re_emitted": sum(n for a, n in report.re_emitted_by_action.items() if a in wanted)}


def worker(args: argparse.Namespace, settings: Settings, bootstrap: str, home: Path, faults: Faults) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    since_ms = int(time.time() * 1000) - 1000
    key = receipts_key(home)
    env = {**os.environ, "RUNONCE_HOME": str(settings.home), "RUNONCE_BOOTSTRAP": bootstrap,
           "RUNONCE_WORKER_SESSION_TIMEOUT_MS": SESSION_MS, "RUNONCE_RECEIPTS_KEY": str(key)}
    procs = [Proc(f"worker-{run}-{i}", ["worker", "--name", f"storm-worker-{i}"], env, home / "logs", faults).start()
             for i in range(3)]
    time.sleep(8)  # the group forms
    families = generate(args.worker_actions, repeat_ratio=0.15, seed=args.seed, run_id=run)
    random.Random(args.seed).shuffle(families)
    wanted = {m["action_id"] for f in families for m, _ in f.members}
    ctx = mp.get_context("spawn")
    agents = [ctx.Process(target=_agent, args=(bootstrap, in_order(families[i::2]), args.worker_rate / 2))
              for i in range(2)]
    started = time.monotonic()
    for a in agents:
        a.start()
    cuts = Cuts(faults, [_port(bootstrap)], random.Random(args.seed + 1))
    restarted: list[str] = []
    while len(cuts.made) < args.cuts:
        time.sleep(cuts.rnd.uniform(2, 5))
        cuts.cut_for(cuts.rnd.choice([p for p in procs if p.alive()]), cuts.rnd.uniform(10, 15))
        restarted += restart_exited(procs)
    for a in agents:
        a.join(600)
    report, _ = _accounted(bootstrap, since_ms, wanted, args.deadline)
    settled_s = time.monotonic() - cuts.healed_at
    took = time.monotonic() - started
    restarted += restart_exited(procs)
    for p in procs:
        p.stop()
    decided: dict[str, str] = {}
    for topic in (topics.APPROVED, topics.DROPPED, topics.HELD):
        decided.update({d: a for d, a in decision_hashes(read_all(bootstrap, topic, since_ms=since_ms), Codec()).items()
                        if a in wanted})
    held = receipts_held(bootstrap, since_ms, ReceiptKind.DECISION, decided, wanted, key)
    return {"phase": "worker", "receipts": held, "actions": len(wanted), "cuts": len(cuts.made), "cut_s": round(sum(cuts.made), 1),
            "restarted": restarted, "took_s": round(took, 1), "settled_after_last_heal_s": round(settled_s, 1),
            "oracle": _oracle(report, wanted), "logs": {p.name: p.tail(5) for p in procs}}


# -- phase 3: the gateway cut from the broker ------------------------------------------------

def gateway(args: argparse.Namespace, settings: Settings, bootstrap: str, home: Path, faults: Faults) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    sandbox = LocalVendors(home / "gw-sandbox").start()
    try:
        env = {**os.environ, "RUNONCE_HOME": str(settings.home), "RUNONCE_BOOTSTRAP": bootstrap,
               "RUNONCE_CONNECTORS": str(sandbox.write_connectors())}
        group = f"runonce-exec-payments-{run}"
        groups.start_group_at_end(bootstrap, group, topics.APPROVED)
        tokens_file = home / f"gateway-{run}.tokens"
        token = token_store.add(tokens_file, "billing-agent", frozenset({"charge_payment"}))
        port = free_ports(1)[0]
        procs = [Proc(f"gw-worker-{run}", ["worker", "--name", "storm-gw-worker"], env, home / "logs", faults),
                 Proc(f"gw-exec-{run}", ["executor", "--vendor", "payments", "--group", group, "--slot", run], env,
                      home / "logs", faults),
                 Proc(f"gateway-{run}", ["gateway", "serve", "--port", str(port), "--tokens", str(tokens_file)], env,
                      home / "logs", faults)]
        for p in procs:
            p.start()
        url = f"http://127.0.0.1:{port}"
        _wait_listening(port, procs[2])
        warm = Agent(f"warm-{run}", 999)
        charge_until_final(url, token, warm, threading.Event(), time.monotonic() + 120)
        if warm.final is None:
            raise SystemExit(f"the gateway never answered a first charge: {warm.answers}\n{procs[2].tail()}")
        cut = threading.Event()
        fault = faults.cut(procs[2].name, [_port(bootstrap)])
        cut.set()
        agents = [Agent(f"storm-{run}-{i}", 2000 + i) for i in range(args.gateway_agents)]
        threads = [threading.Thread(target=charge_until_final, args=(url, token, a, cut, time.monotonic() + 240))
                   for a in agents]
        for t in threads:
            t.start()
        time.sleep(args.gateway_cut_s)
        cut.clear()
        faults.heal(fault)
        healed = time.monotonic()
        for t in threads:
            t.join(250)
        settled_s = time.monotonic() - healed
        seen = Counter(status for a in agents for status, _, _ in a.answers)
        in_cut = Counter(f"{status}{' with Retry-After' if retry else ''}" for a in agents
                         for status, retry, during in a.answers if during)
        ledger = sandbox.vendors.ledger
        made = Counter(sum(1 for e in ledger.effects("payments") if e.key == a.key or e.key.endswith(f"/{a.key}"))
                       for a in agents)
        for p in procs:
            p.stop()
        return {"phase": "gateway", "actions": len(agents), "cuts": 1, "cut_s": args.gateway_cut_s,
                "answers": dict(seen), "answers_in_cut": dict(in_cut), "charges_per_key": dict(made),
                "final": dict(Counter(a.final["status"] if a.final else "none" for a in agents)),
                "settled_after_last_heal_s": round(settled_s, 1)}
    finally:
        sandbox.stop()


def _wait_listening(port: int, proc: Proc, timeout_s: float = 90.0) -> None:
    """The gateway reads its outcome topics before it listens."""
    import socket

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline or not proc.alive():
                raise SystemExit(f"the gateway never listened:\n{proc.tail()}") from None
            time.sleep(0.3)


# -- phase 4: delay and loss on every link to the broker --------------------------------------

class ProxiedBroker(Broker):
    """A broker that advertises the latency proxy's port: every client's connection (and the
    broker's own to itself) crosses it, as every packet crosses a slow link."""

    def __init__(self, settings: Settings, proxy: Delayed) -> None:
        super().__init__(settings, progress=say)
        self.proxy = proxy

    def properties(self, broker_port: int, controller_port: int, mtls_port: int = 0) -> dict[str, str]:
        props = super().properties(broker_port, controller_port, mtls_port)
        self.proxy.target = ("127.0.0.1", broker_port)
        props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.proxy.port}"
        return props


def _mode(bootstrap: str, home: Path, faults: Faults, env: dict[str, str], args: argparse.Namespace, seed: int,
          loss: float, proxy_port: int) -> dict[str, Any]:
    """One worker, ready (it has decided a first action), ``loss`` of its and the agents'
    packets to the proxy dropped: a burst (what is decided per second, a backlog's worth), then,
    once that is decided, a steady load below it (each decision's latency, no queue in it)."""
    run = uuid.uuid4().hex[:6]
    worker = Proc(f"delay-worker-{run}", ["worker", "--name", "storm-delay-worker"], env, home / "logs", faults).start()
    on = [faults.lose(worker.name, [proxy_port], loss)] if loss else []
    try:
        ready = _load(bootstrap, faults, generate(1, repeat_ratio=0.0, seed=seed, run_id=f"{run}r"), 1.0, loss,
                      proxy_port, f"{run}r", on)
        burst = _load(bootstrap, faults, generate(args.delay_actions, repeat_ratio=0.15, seed=seed, run_id=f"{run}b"),
                      args.delay_rate, loss, proxy_port, f"{run}b", on)
        steady = _load(bootstrap, faults, generate(args.delay_steady_actions, repeat_ratio=0.15, seed=seed + 1,
                                                   run_id=f"{run}s"), args.delay_steady_rate, loss, proxy_port,
                       f"{run}s", on)
    finally:
        for fault in on:
            faults.heal(fault)
        worker.stop()
    return {"actions": burst["actions"] + steady["actions"], "ready_after_s": ready["took_s"],
            "decided_per_s": burst["decided_per_s"], "latency_p50_ms": steady["latency_p50_ms"],
            "latency_p99_ms": steady["latency_p99_ms"],
            "oracle": {k: burst["oracle"][k] + steady["oracle"][k] for k in burst["oracle"]}}


def _load(bootstrap: str, faults: Faults, families: list[Any], rate: float, loss: float, proxy_port: int, tag: str,
          on: list[Any]) -> dict[str, Any]:
    """``families`` sent by an agent process at ``rate``, until the oracle accounts for each."""
    since_ms = int(time.time() * 1000) - 1000
    wanted = {m["action_id"] for f in families for m, _ in f.members}
    started = time.monotonic()
    agent = mp.get_context("spawn").Process(target=_agent, args=(bootstrap, in_order(families), rate))
    agent.start()
    if loss and agent.pid is not None:
        faults.place(f"delay-agent-{tag}", agent.pid)
        on.append(faults.lose(f"delay-agent-{tag}", [proxy_port], loss))
    agent.join(900)
    report, _ = _accounted(bootstrap, since_ms, wanted, 600)
    took = time.monotonic() - started
    latencies, span_s = _latencies_ms(bootstrap, since_ms, wanted)
    return {"actions": len(wanted), "took_s": round(took, 1), "decided_per_s": round(len(latencies) / span_s, 1),
            "latency_p50_ms": _pct(latencies, 50), "latency_p99_ms": _pct(latencies, 99),
            "oracle": _oracle(report, wanted)}


def _latencies_ms(bootstrap: str, since_ms: int, wanted: set[str]) -> tuple[list[float], float]:
    """Each decision's latency (ms), and the seconds from the first request to the last decision."""
    codec = Codec()
    requested = {}
    for rec in read_all(bootstrap, topics.REQUESTED, since_ms=since_ms):
        try:
            action_id = codec.decode(rec.value)[1]["action_id"]
        except Exception:  # noqa: BLE001 - a foreign record
            continue
        if action_id in wanted:
            requested[action_id] = rec.timestamp_ms
    out: list[float] = []
    last_ms = 0
    for topic in (topics.APPROVED, topics.DROPPED):
        for rec in read_all(bootstrap, topic, since_ms=since_ms):
            try:
                action_id = codec.decode(rec.value, expect="ActionDecision")[1]["request"]["action_id"]
            except Exception:  # noqa: BLE001
                continue
            if action_id in requested:
                out.append(float(rec.timestamp_ms - requested[action_id]))
                last_ms = max(last_ms, rec.timestamp_ms)
    return out, max(0.001, (last_ms - min(requested.values(), default=last_ms)) / 1000)


def _pct(values: list[float], p: int) -> float | None:
    if not values:
        return None
    return round(statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0], 1)


def delay(args: argparse.Namespace, settings: Settings, _bootstrap: str, home: Path, faults: Faults) -> dict[str, Any]:
    """Its own broker, behind the proxy: the reference burst at 0 ms, then the slow, lossy one."""
    proxy = Delayed(("127.0.0.1", 1), port=free_ports(1)[0]).start()
    delayed_home = home / "delayed"
    delayed = Settings.from_env({"RUNONCE_HOME": str(delayed_home), "RUNONCE_BROKER_HEAP_MB": "512"})
    broker = ProxiedBroker(delayed, proxy)
    try:
        bootstrap = broker.start().bootstrap or ""
        topics.create_topics(bootstrap, delayed.partitions)
        env = {**os.environ, "RUNONCE_HOME": str(delayed_home), "RUNONCE_BOOTSTRAP": bootstrap,
               "RUNONCE_WORKER_SESSION_TIMEOUT_MS": SESSION_MS}
        say("delay: the reference (0 ms)")
        reference = _mode(bootstrap, home, faults, env, args, args.seed, 0.0, proxy.port)
        proxy.delay_ms, proxy.jitter_ms = args.delay_ms, args.jitter_ms
        say(f"delay: {args.delay_ms:.0f} ms ± {args.jitter_ms:.0f} and {args.loss:.0%} loss")
        slow = _mode(bootstrap, home, faults, env, args, args.seed + 7, args.loss, proxy.port)
        return {"phase": "delay", "link": f"{args.delay_ms:.0f} ms ± {args.jitter_ms:.0f}, {args.loss:.0%} loss",
                "steady_rate": args.delay_steady_rate, "reference": reference, "faulty": slow}
    finally:
        proxy.delay_ms = proxy.jitter_ms = 0.0
        broker.stop()
        proxy.stop()


# -- phase 5: a broker cut off from the controller quorum --------------------------------------

def quorum(args: argparse.Namespace, settings: Settings, _bootstrap: str, home: Path, faults: Faults) -> dict[str, Any]:
    cluster = Cluster(Settings.from_env({"RUNONCE_HOME": str(home / "cluster")}), size=3, progress=say)
    try:
        bootstrap = cluster.start()
        topics.create_topics(bootstrap, settings.partitions)
        nodes = cluster.nodes
        for node_id, node in nodes.items():
            pid = node.read_pid()
            assert pid is not None
            faults.place("isolated" if node_id == 3 else "majority", pid)
        isolated_ports = list(nodes[3].ports)
        majority_ports = [p for node_id, node in nodes.items() if node_id != 3 for p in node.ports]
        env = {**os.environ, "RUNONCE_HOME": str(home / "cluster"), "RUNONCE_BOOTSTRAP": bootstrap,
               "RUNONCE_WORKER_SESSION_TIMEOUT_MS": SESSION_MS}
        run = uuid.uuid4().hex[:6]
        since_ms = int(time.time() * 1000) - 1000
        procs = [Proc(f"quorum-worker-{run}", ["worker", "--name", "storm-quorum-worker"], env, home / "logs",
                      faults).start()]
        time.sleep(10)
        families = generate(args.quorum_actions, repeat_ratio=0.15, seed=args.seed, run_id=run)
        wanted = {m["action_id"] for f in families for m, _ in f.members}
        agent = mp.get_context("spawn").Process(target=_agent, args=(bootstrap, in_order(families), args.quorum_rate))
        started = time.monotonic()
        agent.start()
        time.sleep(5)
        say(f"quorum: node 3 cut off from nodes 1 and 2 (both ways) for {args.quorum_cut_s:.0f} s")
        cut = [faults.cut("isolated", majority_ports), faults.cut("majority", isolated_ports)]
        time.sleep(args.quorum_cut_s)
        for fault in cut:
            faults.heal(fault)
        healed = time.monotonic()
        agent.join(900)
        restarted = restart_exited(procs)
        report, _ = _accounted(bootstrap, since_ms, wanted, args.deadline)
        settled_s = time.monotonic() - healed
        took = time.monotonic() - started
        restarted += restart_exited(procs)
        for p in procs:
            p.stop()
        return {"phase": "quorum", "actions": len(wanted), "cuts": 1, "cut_s": args.quorum_cut_s,
                "restarted": restarted, "took_s": round(took, 1), "settled_after_last_heal_s": round(settled_s, 1),
                "oracle": _oracle(report, wanted), "logs": {p.name: p.tail(5) for p in procs}}
    finally:
        cluster.stop()


# -- the table ---------------------------------------------------------------------------------

def _receipts_cell(r: dict[str, Any]) -> str:
    x = r.get("receipts")
    if x is None:
        return "–"
    return (f"{x['receipts']} receipts for {x['records']} records: {x['without_receipt']} without, "
            f"{x['doubled']} doubled, {x['of_no_record']} of no record; {x['chains']} chains, "
            f"{len(x['chains_not_verified'])} not verified")


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| phase | actions | faults | lost | two-way | effects vs approved | in_doubt | settled after heal | receipts |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        phase = r["phase"]
        if phase == "zombies":
            effects = "; ".join(f"{v['vendor']} ({v['capability']}) {v['effects']}/{v['approved']}"
                                f"{', ' + str(v['doubled']) + ' doubled' if v['doubled'] else ''}" for v in r["vendors"])
            doubt = "; ".join(f"{v['vendor']} {v['in_doubt']} ({v['in_doubt_sent']} sent)" for v in r["vendors"]
                              if v["in_doubt"]) or "0"
            lines.append(f"| executors cut (zombies) | {r['actions']} | {r['cuts']} cuts, {r['cut_s']} s | – | – | "
                         f"{effects} | {doubt} | {r['settled_after_last_heal_s']} s | {_receipts_cell(r)} |")
        elif phase in ("worker", "quorum"):
            o = r["oracle"]
            what = "workers cut mid-transaction" if phase == "worker" else "node 3 cut from the quorum (RF 3, min ISR 2)"
            lines.append(f"| {what} | {r['actions']} | {r['cuts']} cuts, {r['cut_s']} s | {o['lost'] + o['undecided']} | "
                         f"{o['two_way']} (keys approved twice {o['keys_approved_twice']}, re-emitted "
                         f"{o['re_emitted']}) | – | – | {r['settled_after_last_heal_s']} s | {_receipts_cell(r)} |")
        elif phase == "gateway":
            lines.append(f"| gateway cut from the broker | {r['actions']} agents | 1 cut, {r['cut_s']} s | – | – | "
                         f"charges per key {r['charges_per_key']}; answers in the cut {r['answers_in_cut']}, "
                         f"all answers {r['answers']} | – | {r['settled_after_last_heal_s']} s | – |")
        elif phase == "delay":
            ref, bad = r["reference"], r["faulty"]
            o = bad["oracle"]
            lines.append(f"| {r['link']} (reference: 0 ms) | {bad['actions']} | the whole burst | "
                         f"{o['lost'] + o['undecided']} | {o['two_way']} | a backlog decided at {bad['decided_per_s']}/s "
                         f"vs {ref['decided_per_s']}/s; at {r['steady_rate']:g}/s, latency p50 {bad['latency_p50_ms']} "
                         f"vs {ref['latency_p50_ms']} ms, p99 {bad['latency_p99_ms']} vs {ref['latency_p99_ms']} ms "
                         f"| – | – | – |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, of {', '.join(PHASES)}")
    p.add_argument("--actions", type=int, default=300, help="zombies: approved actions per vendor kind")
    p.add_argument("--rate", type=float, default=12.0, help="zombies: approved records per second (all kinds)")
    p.add_argument("--vendor-rate", type=float, default=2.0,
                   help="zombies: each executor's pace toward its vendor (calls/s): below the load, so that "
                        "every executor is mid-batch, its intents committed and its calls under way, when it is cut")
    p.add_argument("--cuts", type=int, default=6, help="zombies and worker: how many cuts")
    p.add_argument("--worker-actions", type=int, default=6000)
    p.add_argument("--worker-rate", type=float, default=60.0, help="worker: requests per second (the load outlasts the cuts)")
    p.add_argument("--gateway-agents", type=int, default=20)
    p.add_argument("--gateway-cut-s", type=float, default=40.0)
    p.add_argument("--delay-actions", type=int, default=1500)
    p.add_argument("--delay-rate", type=float, default=200.0)
    p.add_argument("--delay-steady-actions", type=int, default=100, help="delay: the steady load, for latency")
    p.add_argument("--delay-steady-rate", type=float, default=5.0, help="delay: below what the slow link decides per second")
    p.add_argument("--delay-ms", type=float, default=200.0)
    p.add_argument("--jitter-ms", type=float, default=100.0)
    p.add_argument("--loss", type=float, default=0.05)
    p.add_argument("--quorum-actions", type=int, default=3000)
    p.add_argument("--quorum-rate", type=float, default=150.0)
    p.add_argument("--quorum-cut-s", type=float, default=20.0)
    p.add_argument("--deadline", type=float, default=300.0, help="seconds to wait for everything to settle")
    p.add_argument("--seed", type=int, default=62)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "partition_storm.json")
    args = p.parse_args(argv)
    phases = [x for x in args.phases.split(",") if x]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        p.error(f"unknown phase {unknown[0]!r}; the phases are {', '.join(PHASES)}")
    home = Path(tempfile.mkdtemp(prefix="runonce-partition-storm-"))
    (home / "logs").mkdir()
    say(f"logs in {home / 'logs'}")
    settings = Settings.from_env({"RUNONCE_HOME": str(home / "main"), "RUNONCE_BROKER_HEAP_MB": "768"})
    broker = Broker(settings, progress=say)
    results: list[dict[str, Any]] = []
    runs = {"zombies": zombies, "worker": worker, "gateway": gateway, "delay": delay, "quorum": quorum}
    try:
        bootstrap = ""
        if set(phases) & {"zombies", "worker", "gateway"}:
            bootstrap = broker.start().bootstrap or ""
            topics.create_topics(bootstrap, settings.partitions)
        for phase in phases:
            say(f"phase {phase}")
            with Faults() as faults:
                results.append(runs[phase](args, settings, bootstrap, home, faults))
            say(json.dumps({k: v for k, v in results[-1].items() if k != "logs"}))
    finally:
        broker.stop()
        left = leftovers()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(table(results))
    if left:
        print(f"faults left on the machine: {left}", file=sys.stderr)
        return 1
    return 0 if _held(results) else 1


def _held(results: list[dict[str, Any]]) -> bool:
    """Whether the promise held in every phase (the table says where it did not)."""
    for r in results:
        if "oracle" in r:
            o = r["oracle"]
            if o["lost"] or o["undecided"] or o["two_way"] or o["keys_approved_twice"] or o["re_emitted"]:
                return False
        if r["phase"] == "zombies":
            for v in r["vendors"]:
                if v["doubled"] or (v["capability"] != "none" and (v["effects"] != v["approved"] or v["in_doubt"])):
                    return False
        if r["phase"] == "delay" and any(x["oracle"]["lost"] or x["oracle"]["two_way"] or x["oracle"]["undecided"]
                                         for x in (r["reference"], r["faulty"])):
            return False
        x = r.get("receipts")
        if x is not None and (x["without_receipt"] or x["doubled"] or x["of_no_record"] or x["chains_not_verified"]
                              or not x["receipts"]):
            return False
        if r["phase"] == "gateway" and (set(r["charges_per_key"]) != {1} or r["answers"].get(500)):
            return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
