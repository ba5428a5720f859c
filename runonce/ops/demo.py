"""``runonce demo``: the seed's incidents replayed, first straight against the sandbox vendors
(as the agents did), then through runonce; every side-effect count is read from the sandbox
ledgers, not from runonce's own counters."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Protocol

from runonce.approvals.client import Approvals
from runonce.connectors.executor import registry
from runonce.connectors.toolkit.base import ActionCall, Connector
from runonce.connectors.toolkit.errors import ConnectorError
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.connectors.vendors.sandbox.local_postgres import LocalPostgres
from runonce.core.approval import Verdict
from runonce.core.decision import Outcome, Reason
from runonce.devbroker.users import write_private
from runonce.errors import InvariantViolation
from runonce.kafka import groups, topics
from runonce.kafka.access import KafkaTarget
from runonce.ops import child
from runonce.ops.scenarios import Incident, approval_race, incidents, refund_race
from runonce.ops.watch import DecisionWatcher, ResultWatcher
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from runonce.wire.decisions import DecisionView

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Row:
    incident: Incident
    without: int
    with_runonce: int
    reasons: Counter[str]

    def surprise(self) -> str | None:
        """What differs from the incident's expected figures, or None: a demo that shows a wrong
        figure fails (``runonce demo`` exits 1), it does not print it and pass."""
        if self.without != len(self.incident.requests):
            return (f"{self.incident.name}: {len(self.incident.requests)} straight calls left {self.without} "
                    f"side effects")
        if self.with_runonce != self.incident.expected_approved:
            return (f"{self.incident.name}: {self.with_runonce} side effects through runonce, expected "
                    f"{self.incident.expected_approved}")
        return None


def surprises(rows: list[Row]) -> list[str]:
    """What differs from each incident's expected figures, in the table's order."""
    return [s for s in (row.surprise() for row in rows) if s is not None]


#: the demo database's table, the team's own: the refund row counts its rows, not runonce's answers
REFUNDS_TABLE = ("CREATE TABLE IF NOT EXISTS refunds (id bigserial PRIMARY KEY, order_id text NOT NULL, "
                 "amount_cents integer NOT NULL)")
REFUND_SQL = "INSERT INTO refunds (order_id, amount_cents) VALUES (%(order_id)s, %(amount_cents)s) RETURNING id"


def _orders_db(postgres: LocalPostgres, folder: Path) -> str:
    """The connectors file's table for the demo database, its DSN in a file only we can read."""
    import psycopg

    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(REFUNDS_TABLE)
    dsn_file = folder / "orders-dsn"
    write_private(dsn_file, postgres.dsn)
    ca = "" if postgres.ca_file is None else f'ca_file = "{postgres.ca_file}"\n'
    return (f'\n[vendors.orders_db]\nkind = "postgres"\ndsn = {{ file = "{dsn_file}" }}\n{ca}'
            f'[vendors.orders_db.tools.issue_refund]\nsql = "{REFUND_SQL}"\n')


@dataclass(frozen=True, slots=True)
class Stage:
    """What the incidents reach: the sandbox vendors, the team's own database, and the connectors
    file naming both (the executors' and the straight calls')."""

    sandbox: LocalVendors
    postgres: LocalPostgres
    connectors: Path

    @classmethod
    def of(cls, sandbox: LocalVendors, postgres: LocalPostgres) -> Stage:
        """Both started: the connectors file written beside the sandbox's."""
        path = sandbox.write_connectors()
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(_orders_db(postgres, sandbox.folder))
        return cls(sandbox, postgres, path)


def _refund_rows(postgres: LocalPostgres) -> Callable[[], int]:
    def count() -> int:
        import psycopg

        with psycopg.connect(postgres.dsn) as conn:
            row = conn.execute("SELECT count(*) FROM refunds").fetchone()
        return int(row[0]) if row else 0
    return count


@dataclass(frozen=True, slots=True)
class DemoAccess:
    """Whom each part of the demo connects as. On a secured stack (``runonce up --secure``) these
    are the least-privilege principals of runonce/kafka/acls.toml: the agents submit as ``agent``,
    the executors run as ``executor``, the two workers approve as ``approver``, and the demo counts
    decisions and results as the admin, as an operator's oracle does."""

    agent: KafkaTarget
    approver: KafkaTarget
    observer: KafkaTarget
    executor: KafkaTarget
    #: an executor process's environment (its principal and the broker's client settings)
    executor_env: Mapping[str, str]

    @classmethod
    def unsecured(cls, settings: Settings) -> DemoAccess:
        access = settings.kafka_access()
        return cls(access, access, access, access, settings.child_env(os.environ))


class Fleet(Protocol):
    """The executors the demo's approvals reach: one per vendor of its connectors file. By default
    processes on this machine (``ProcessFleet``); ``scripts/pods.py --incidents`` plays the Helm
    chart's executor pods instead, so the same table is counted through the containers."""

    def start(self, connectors: Path, vendors: list[str], run_id: str) -> None:
        """Start them, and return once each consumes ``actions.approved`` from its current end."""

    def stop(self) -> None:
        """Stop every one started, waiting for each to end."""


class Agents(Protocol):
    """How the incidents' agents reach runonce: by default the SDK, straight to Kafka
    (``SdkAgents``); ``scripts/cluster.py --incidents`` calls the gateway's HTTP API from a pod,
    by its Service's cluster DNS name."""

    def submit(self, incident: Incident) -> list[str]:
        """Every request of the incident, each with its key; the action ids once all are published."""


class SdkAgents:
    """One Submitter (agent ``demo``) for every incident's requests."""

    def __init__(self, submitter: Submitter) -> None:
        self._submitter = submitter

    def submit(self, incident: Incident) -> list[str]:
        ids = [self._submitter.submit(r.tool, r.params, idempotency_key=r.idempotency_key)
               for r in incident.requests]
        self._submitter.flush()
        return ids


def run_demo(settings: Settings, progress: Progress, access: DemoAccess | None = None,
             fleet: Fleet | None = None, agents: Agents | None = None, stage: Stage | None = None,
             run_id: str | None = None) -> list[Row]:
    """The table's rows. Without ``stage`` the sandbox and PostgreSQL are started (on loopback)
    and stopped here; without ``agents`` the SDK submits as agent ``demo``."""
    access = access or DemoAccess.unsecured(settings)
    fleet = fleet or ProcessFleet(settings, access, progress)
    with contextlib.ExitStack() as owned:
        if stage is None:
            sandbox = LocalVendors(settings.home / "demo-sandbox").start()
            owned.callback(sandbox.stop)
            postgres = LocalPostgres(settings.home / "demo-postgres")
            owned.callback(postgres.stop)
            postgres.start()
            progress(f"started PostgreSQL on 127.0.0.1:{postgres.port} (the refund row's database)")
            stage = Stage.of(sandbox, postgres)
        if agents is None:
            agents = SdkAgents(owned.enter_context(Submitter(access.agent, agent_id="demo")))
        return _replay(settings.with_(connectors_file=stage.connectors), progress, access, fleet, agents, stage,
                       run_id or uuid.uuid4().hex[:8])


def _replay(local: Settings, progress: Progress, access: DemoAccess, fleet: Fleet, agents: Agents, stage: Stage,
            run_id: str) -> list[Row]:
    built = registry.load(local.connectors_path, local.environ)
    connectors = {tool: v.connector for v in built.values() for tool in v.connector.tools}
    rows = []
    fleet.start(local.connectors_path, sorted(built), run_id)
    try:
        ledger, refunds = stage.sandbox.vendors.ledger.count, _refund_rows(stage.postgres)
        with DecisionWatcher(access.observer) as decisions:
            results = ResultWatcher(access.observer)
            try:
                for incident in [*incidents(run_id), refund_race(run_id)]:
                    count = refunds if incident.name == "refund_race" else ledger
                    without = _straight(incident, connectors, count)
                    with_runonce, reasons = _through_runonce(incident, agents, decisions, results, count)
                    progress(f"  {incident.name}: {without} side effects without runonce, {with_runonce} with")
                    rows.append(Row(incident, without, with_runonce, reasons))
                incident = approval_race(run_id)
                without = _straight(incident, connectors, ledger)
                with_runonce, reasons = _through_approvals(incident, access.approver, agents, decisions, results,
                                                           ledger)
                progress(f"  {incident.name}: {without} side effects without runonce, {with_runonce} with")
                rows.append(Row(incident, without, with_runonce, reasons))
            finally:
                results.close()
    finally:
        fleet.stop()
    return rows


class ProcessFleet:
    """One executor process per vendor, in fresh consumer groups that start at the current end:
    earlier approvals (of other runs on this broker) are not replayed here."""

    def __init__(self, settings: Settings, access: DemoAccess, progress: Progress) -> None:
        self._settings, self._access, self._progress = settings, access, progress
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(self, connectors: Path, vendors: list[str], run_id: str) -> None:
        env = {**self._access.executor_env, "RUNONCE_CONNECTORS": str(connectors)}
        log_dir = Path(self._settings.home) / "demo-logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        for vendor in vendors:
            group = f"{groups.EXECUTOR_PREFIX}demo-{run_id}-{vendor}"  # a name the executor principal may use
            groups.start_group_at_end(self._access.executor, group, topics.APPROVED)
            self._procs.append(child.start(["executor", "--vendor", vendor, "--group", group, "--slot", run_id],
                                           env, log_dir / f"executor-{vendor}.log", own_session=False))
        self._progress(f"started {len(self._procs)} executors against the sandbox vendors (logs in {log_dir})")

    def stop(self) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            proc.wait(20)
        self._procs.clear()


def _straight(incident: Incident, connectors: dict[str, Connector], count: Callable[[], int]) -> int:
    """As the agents did: every request is a fresh call to the vendor."""
    before = count()
    for r in incident.requests:
        fresh = str(uuid.uuid4())
        try:
            connectors[r.tool].perform(ActionCall(fresh, r.tool, r.params, vendor_key=fresh))
        except ConnectorError:
            pass
    return count() - before


def _through_runonce(incident: Incident, agents: Agents, decisions: DecisionWatcher, results: ResultWatcher,
                     count: Callable[[], int]) -> tuple[int, Counter[str]]:
    before = count()
    ids = agents.submit(incident)
    decided = decisions.wait(ids, timeout_s=180)
    deadline = time.monotonic() + 180
    views = [DecisionView.of(d) for d in decided.values()]
    for v in views:
        if v.approved:
            results.wait(v.action_id, deadline)
    reasons = Counter(v.reason.value if v.dropped else f"flagged {v.reason.value}"
                      for v in views if v.dropped or v.reason is not Reason.UNIQUE)
    return count() - before, reasons


def _through_approvals(incident: Incident, bootstrap: KafkaTarget, agents: Agents, decisions: DecisionWatcher,
                       results: ResultWatcher, count: Callable[[], int]) -> tuple[int, Counter[str]]:
    """Both workers submit the held action, then both approve it at the same moment."""
    before = count()
    ids = agents.submit(incident)
    views = [DecisionView.of(d) for d in decisions.wait(ids, timeout_s=180).values()]
    held = [v.action_id for v in views if v.outcome is Outcome.HOLD]
    if len(held) != 1:
        raise InvariantViolation(f"{incident.name}: expected one held action, got {[v.outcome for v in views]}")
    barrier = threading.Barrier(len(incident.requests))
    changes: list[str] = []

    def approve(worker: str) -> None:
        with Approvals(bootstrap, worker) as approvals:
            barrier.wait(30)
            changes.append(approvals.verdict(held[0], Verdict.APPROVE, wait_s=60).change)

    threads = [threading.Thread(target=approve, args=(r.agent_id,)) for r in incident.requests]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    results.wait(held[0], time.monotonic() + 180)
    reasons = Counter(v.reason.value for v in views if v.dropped)
    reasons.update(f"approval {c}" for c in changes)
    return count() - before, reasons


def format_table(rows: list[Row]) -> str:
    out = [f"{'incident':<54}{'without':>9}{'with':>6}  what runonce did with the rest",
           f"{'':<54}{'runonce':>9}{'':>6}", "-" * 110]
    notes = []
    for row in rows:
        rest = ", ".join(f"{n} {r}" for r, n in row.reasons.most_common()) or "-"
        if "footnote" in row.incident.tags:
            notes.append(f"* {row.incident.story}: {row.without} without runonce, {row.with_runonce} with "
                         f"({rest}): {row.incident.notes}")
            continue
        out.append(f"{row.incident.story:<54}{row.without:>9}{row.with_runonce:>6}  {rest}")
    out.append("(side effects counted from the sandbox vendors' ledgers; refunds with SELECT count(*) on the table)")
    out.extend(notes)
    return "\n".join(out)
