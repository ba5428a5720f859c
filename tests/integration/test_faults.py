"""Faults under load: the broker SIGKILLed and restarted; the broker SIGSTOPped past the
session and transaction timeouts, then resumed; an executor paused past its transaction
timeout (mid vendor call) and resumed. Throughout, an agent produces a mixed workload with
planted repeats; stream workers and executors run under a supervisor that restarts
whatever exits. Then the oracle and the sandbox ledgers must show nothing lost and
nothing doubled.

Collected last (marker ``faults``): it kills and pauses the session's broker.
RUNONCE_FAULT_ACTIONS sets the size (default 4000, at RUNONCE_FAULT_RATE=50 actions/s)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections import Counter
from typing import Any, Callable

import pytest

from runonce.audit.oracle import verify
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.connectors.vendors.smtp import SmtpConnector
from runonce.core.decision import Reason
from runonce.devbroker.broker import Broker, BrokerState
from runonce.kafka import groups, topics
from runonce.kafka.reader import read_all
from runonce.sdk.submit import Submitter, build_request
from runonce.settings import Settings
from runonce.streams.transactional.worker import GROUP
from runonce.testkit.workload import Family, generate
from runonce.wire.codec import Codec
from tests.support.load import (
    EXECUTED,
    Load,
    account_decisions,
    account_results,
    approved_positions,
    check_effects,
    describe_group,
    explain_pending,
)
from tests.support.worker import RunonceProcess, Supervisor, WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.faults]

TXN_TIMEOUT_MS = 15_000
#: between faults: long enough for the pipeline to be moving again, so each fault meets a running one
SETTLE_S = 10.0
#: past the workers' (6 s) and executors' (10 s) sessions and the transaction timeout (15 s);
#: within the dev broker's lease (30 s), so the resumed controller does not fence its own broker
PAUSE_S = 20.0


def _broker_signal(broker: Broker, sig: signal.Signals) -> None:
    pid = broker.status().pid
    assert pid is not None
    os.killpg(pid, sig)


def _markers_skipped(broker: Broker, log_from: int) -> list[str]:
    """The broker's log lines, from byte ``log_from``, where its transaction coordinator skipped a
    partition's markers because the partition had no leader at that moment."""
    with open(broker.log_file, "rb") as fh:
        fh.seek(log_from)
        text = fh.read().decode(errors="replace")
    return [line[:400] for line in text.splitlines() if "Couldn't find leader endpoint" in line]


def _charge_arriving(vendors: VendorServer, explain: Callable[[], str], timeout_s: float = 120.0) -> int:
    """Wait for a charge to reach the (slowed) payments sandbox; the charges now in flight.
    After the broker's pause an executor can sit in send_offsets_to_transaction until its
    watchdog (45 s) restarts it (librdkafka#5456): the wait outlasts that and a restore."""
    seen = len(vendors.ledger.requests("/v1/charges"))
    deadline = time.monotonic() + timeout_s
    while len(vendors.ledger.requests("/v1/charges")) == seen:
        assert time.monotonic() < deadline, (
            f"no charge reached the payments sandbox: the pause would meet no call\n{explain()}")
        time.sleep(0.01)
    now = time.time()
    return sum(1 for r in vendors.ledger.requests("/v1/charges") if now - r.at < 1.0)


def _explain_early(bootstrap: str, before: list[dict[str, Any]], sent: set[str], starts: dict[str, list[int]],
                   executors: dict[str, RunonceProcess]) -> str:
    """Where the planted emails that were sent sit in actions.approved, against the group's start."""
    codec = Codec()
    ids = {r["action_id"]: SmtpConnector.message_id(ActionCall(r["action_id"], r["tool"], {}, r["idempotency_key"]))
           for r in before}
    lines = [f"an executor performed {len(sent)} actions approved before its group began; "
             f"smtp group started at {starts.get('smtp')}"]
    approvals: dict[str, list[tuple[int, int]]] = {}
    for r in read_all(bootstrap, topics.APPROVED):
        d = codec.decode(r.value, expect="ActionDecision")[1]
        a = d["request"]["action_id"]
        if a in ids and ids[a] in sent:
            approvals.setdefault(a, []).append((r.partition, r.offset))
    start = starts.get("smtp") or [0] * 6
    again = {a: [pos for pos in where if pos[1] >= start[pos[0]]] for a, where in approvals.items()}
    lines.append(f"  {sum(1 for a in again.values() if a)} of them were approved again after the group's start "
                 f"(a re-emitted decision); {sum(1 for a in again.values() if not a)} only before it")
    for a, where in list(approvals.items())[:10]:
        lines.append(f"  {a}: approvals at {where}")
    lines.append(f"--- smtp-0\n{executors['smtp-0'].log_tail(60)}")
    return "\n".join(lines)


def test_broker_and_executor_faults_under_load_lose_and_double_nothing(
        broker: Settings, sandboxes: LocalVendors, tmp_path) -> None:
    vendors = sandboxes.vendors
    bootstrap = broker.bootstrap_servers()
    n_actions = int(os.environ.get("RUNONCE_FAULT_ACTIONS", "4000"))
    rate = float(os.environ.get("RUNONCE_FAULT_RATE", "50"))
    run = uuid.uuid4().hex[:6]
    since_ms = int(time.time() * 1000) - 1000  # the oracle reads this test's window of the topics
    families = generate(n_actions, repeat_ratio=0.1, seed=23, run_id=f"f{run}")
    # Sent just before the executor's pause (below); accounted like the load's.
    probes = [Family("unique_charge", [(build_request("charge_payment", {"card": f"f{run}-probe{i}", "amount_cents": 700},
                                                     agent_id="fault-probe", idempotency_key=f"probe-{run}-{i}"),
                                       Reason.UNIQUE.value)]) for i in range(24)]
    records = [m for fam in families for m, _ in fam.members]  # the load's
    everything = records + [fam.members[0][0] for fam in probes]

    # Approved before the executors' groups begin: they must never be performed (an executor that
    # lost its place and re-read actions.approved from offset 0 once did exactly that).
    before = [build_request("send_email", {"to": f"before-{run}-{i}@example.com", "subject": "s"},
                            agent_id="fault-before", idempotency_key=f"before-{run}-{i}") for i in range(200)]
    with Submitter(bootstrap, agent_id="fault-before") as sub:
        for record in before:
            sub.send(record)
    early = WorkerProcess(broker, "fault-w0", tmp_path, loglevel="info")
    early.start()
    try:
        deadline = time.monotonic() + 120
        while not {r["action_id"] for r in before} <= verify(bootstrap, since_ms=since_ms).outcome_by_action.keys():
            assert time.monotonic() < deadline, f"the early actions were never decided:\n{early.log_tail()}"
            time.sleep(2)
    finally:
        early.stop()

    env = {**sandboxes.env(),
           "RUNONCE_EXECUTOR_TXN_TIMEOUT_MS": str(TXN_TIMEOUT_MS)}
    procs: list[RunonceProcess] = [WorkerProcess(broker, f"fault-w{i}", tmp_path, loglevel="info") for i in range(2)]
    executors: dict[str, RunonceProcess] = {}
    starts: dict[str, list[int]] = {}
    groups_by_vendor = {vendor: f"runonce-exec-fault-{run}-{vendor}" for vendor in EXECUTED.values()}
    for vendor, slots in (("payments", 2), ("smtp", 1), ("jira", 1)):
        group = groups_by_vendor[vendor]
        groups.start_group_at_end(bootstrap, group, topics.APPROVED)  # earlier tests' approvals are not ours
        starts[vendor] = approved_positions(bootstrap, group)[0]
        for slot in range(slots):
            executors[f"{vendor}-{slot}"] = RunonceProcess(
                broker, f"fault-exec-{vendor}-{slot}",
                ["executor", "--vendor", vendor, "--group", group, "--slot", str(slot), "--loglevel", "info"],
                tmp_path, env)
    procs += executors.values()
    b = Broker(broker)
    log_from = b.log_file.stat().st_size
    supervisor = Supervisor(procs).start()
    load = Load(bootstrap, records, rate)
    timeline: list[str] = []

    def note(what: str) -> None:
        timeline.append(f"t={time.monotonic() - t0:5.1f}s {what}")

    try:
        time.sleep(6)  # groups form before the load arrives
        t0 = time.monotonic()
        load.start()
        note(f"load: {len(records)} actions at {rate:.0f}/s")
        time.sleep(SETTLE_S)

        note("broker SIGKILL")
        _broker_signal(b, signal.SIGKILL)
        time.sleep(3)
        assert b.status().state is BrokerState.CRASHED
        assert b.start().bootstrap == bootstrap, "the broker came back on another port: no client could reach it"
        note("broker restarted")
        time.sleep(SETTLE_S)

        note(f"broker SIGSTOP for {PAUSE_S:.0f} s")
        _broker_signal(b, signal.SIGSTOP)
        time.sleep(PAUSE_S)
        _broker_signal(b, signal.SIGCONT)
        note("broker SIGCONT")
        time.sleep(SETTLE_S)

        # Slow the payments vendor so the paused executor is mid-call, with its intent committed:
        # paused right after a charge reached the vendor, whose answer takes 1 s.
        vendors.state.faults.add(VendorFault("/v1/charges", delay_s=1.0))
        zombie = executors["payments-0"]
        assert zombie.proc is not None
        # Charges of the test's own, so the pause meets a call whatever the load's timing: the
        # broker's faults can delay this moment past the load's last charge.
        with Submitter(bootstrap, agent_id="fault-probe") as sub:
            for fam in probes:
                sub.send(fam.members[0][0])
        note(f"{len(probes)} probe charges sent (load {'running' if load.is_alive() else 'done'})")
        in_flight = _charge_arriving(vendors, lambda: "\n".join(
            describe_group(bootstrap, GROUP, (topics.REQUESTED,), broker.partitions)
            + describe_group(bootstrap, groups_by_vendor["payments"], (topics.APPROVED,), broker.partitions)
            + [p.describe(15) for p in procs]))
        note(f"executor payments-0 SIGSTOP for {PAUSE_S:.0f} s (vendor answering in 1 s; "
             f"{in_flight} charge(s) in flight)")
        os.killpg(zombie.proc.pid, signal.SIGSTOP)
        time.sleep(PAUSE_S)
        os.killpg(zombie.proc.pid, signal.SIGCONT)
        note("executor payments-0 SIGCONT")
        vendors.state.faults.clear()

        load.finish(timeout_s=max(60.0, n_actions / rate * 2))
        note("load done")

        # Nothing lost: every requested record decided once, every repeat family as planted ...
        report = account_decisions(bootstrap, everything, families + probes, lambda: "\n".join(
            f"--- {p.name}\n{p.log_tail(25)}" for p in procs if p.name.startswith("fault-w")), since_ms=since_ms)
        note("oracle: decisions accounted")
        # ... and every approved action for an executed tool has a final result.
        done = account_results(bootstrap, everything, report)
        note("results: every approved action finished")
    finally:
        supervisor.stop()
        if b.status().state is not BrokerState.RUNNING:
            b.start()  # leave the session's broker running whatever happened

    assert not (skipped := _markers_skipped(b, log_from)), (
        "the broker skipped transaction markers, as if their partitions were deleted: a transaction "
        "left open for good (broker.py, _retire_dead_incarnation):\n" + "\n".join(skipped))
    assert not done.pending, explain_pending(bootstrap, done.pending, done.results, done.tool_of, groups_by_vendor,
                                             {name: p.log_tail(12) for name, p in executors.items()})
    statuses, by_vendor, asked_again = check_effects(done, vendors.ledger.effects(), vendors.ledger.requests())
    early_mail = {SmtpConnector.message_id(ActionCall(r["action_id"], r["tool"], {}, r["idempotency_key"]))
                  for r in before}
    early_sent = early_mail & {e.key for e in vendors.ledger.effects("smtp")}
    assert not early_sent, _explain_early(bootstrap, before, early_sent, starts, executors)
    print("\nfault test timeline:\n  " + "\n  ".join(timeline))
    print(f"  {len(everything)} actions, {len(done.approved)} approved for executors: {dict(statuses)}; "
          f"effects {dict(by_vendor)}; doubled 0; lost 0; payments asked again with the same key "
          f"{asked_again}; re-emitted decisions {report.re_emitted}; "
          f"process exits (restarted): {Counter(name for name, _ in supervisor.exits)}")
