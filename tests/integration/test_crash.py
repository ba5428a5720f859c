"""The crash test, for each runtime: 3 stream worker processes on 6 partitions, a mixed
workload with planted repeats produced by 4 concurrent agent processes faster than one
worker decides, and a worker SIGKILLed and restarted every 5 s (8 kills, three of them with
its RocksDB folder deleted; a worker that exits on its own is restarted, as its supervisor
would, and named in the output). Among the repeats, unkeyed retries of an action without scope
rules arrive 2-30 s after their original, across the kills: only stage 1's claim on the
content key stops them, so a claim lost after a crash (issue "a decision changed after a
crash") approves one, and the family shows two approvals. Then the oracle must find every
requested record accounted for exactly once, none decided two ways, no key approved twice,
and each family of repeats decided as planted. The transactional runtime must also
re-emit no decision, and is run a second time in a KIP-848 group (``RUNONCE_GROUP_PROTOCOL=
consumer``), where each restart is given and each kill relieved of a few partitions at a time.

RUNONCE_CRASH_ACTIONS sets the size (default 20000), RUNONCE_CRASH_DEADLINE_S how long the
oracle waits for every action to be accounted for (default 420)."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from runonce.audit.oracle import verify
from runonce.audit.receipts import certify, decision_hashes, read_receipts
from runonce.kafka import topics
from runonce.kafka.reader import read_all
from runonce.receipts.signing import Signer
from runonce.receipts.verify import Verdict
from runonce.receipts.verify import verify as verify_receipts
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from runonce.streams.transactional.worker import GROUP
from runonce.testkit.workload import check_families, generate, in_order, late_unkeyed_retries, send_paced
from runonce.wire.codec import Codec
from tests.support.load import describe_group
from tests.support.worker import RUNTIMES, WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _agent(bootstrap: str, items: list[tuple[dict[str, Any], float]], rate_per_s: float) -> None:
    with Submitter(bootstrap, agent_id="crash-agent") as sub:
        send_paced(sub.send, items, rate_per_s)


def _spans(positions: list[tuple[int, int]]) -> str:
    """Lost positions of actions.requested as partition: count (first..last offset)."""
    by_partition: dict[int, list[int]] = {}
    for partition, offset in positions:
        by_partition.setdefault(partition, []).append(offset)
    return ", ".join(f"[{p}]: {len(o)} ({min(o)}..{max(o)})" for p, o in sorted(by_partition.items())) or "none"


def _group(broker: Settings) -> str:
    """The stream job's group: a partition committed short of its end names a stuck owner."""
    inputs = (topics.REQUESTED, topics.REKEY, topics.SCOPED)  # both runtimes' group is GROUP
    return "\n".join(describe_group(broker.bootstrap_servers(), GROUP, inputs, broker.partitions))


def _logs(workers: list[WorkerProcess]) -> str:
    return "\n".join(w.describe() for w in workers)


def _assert_each_decision_has_one_receipt(broker: Settings, since_ms: int, wanted: set[str], key: Path) -> None:
    """Receipts through the kills: every chain verifies offline, and each decision written has
    exactly one receipt (one written outside its decision's transaction is lost or doubled by
    a SIGKILL between the two)."""
    log = read_receipts(broker.bootstrap_servers())
    signer = Signer.from_file(key)
    reports = verify_receipts(log.receipts, log.checkpoints, {signer.key_id: signer.public})
    assert reports and all(r.verdict is Verdict.VERIFIED for r in reports), [r for r in reports if r.problem]
    codec, decided = Codec(), {}
    for topic in (topics.APPROVED, topics.DROPPED, topics.HELD):
        decided.update(decision_hashes(read_all(broker.bootstrap_servers(), topic, since_ms=since_ms), codec))
    ours = {digest: action for digest, action in decided.items() if action in wanted}
    found = certify([r for r in log.receipts if r.action_id in wanted], ours)
    assert found.ok, found.summary()


@pytest.mark.parametrize("runtime, protocol", [*((r, "classic") for r in RUNTIMES), ("transactional", "consumer")],
                         ids=[*RUNTIMES, "transactional-kip848"])
def test_sigkilled_workers_neither_double_nor_lose(broker: Settings, tmp_path, runtime: str, protocol: str,
                                                   receipts_key: Path) -> None:
    n_actions = int(os.environ.get("RUNONCE_CRASH_ACTIONS", "20000"))
    since_ms = int(time.time() * 1000) - 1000  # the oracle reads this test's window of the topics
    run_id = uuid.uuid4().hex[:6]
    families = generate(n_actions, repeat_ratio=0.15, seed=11, run_id=run_id)
    n_late = n_actions // 40
    families += late_unkeyed_retries(n_late, run_id=run_id)
    records = [m for fam in families for m, _ in fam.members]
    # info: assignments and restores in the log tails a failure prints
    # the default runtime writes receipts (docs/receipts.md): each decision's, in its transaction
    keyed = {"RUNONCE_RECEIPTS_KEY": str(receipts_key)} if runtime == "transactional" else {}
    # kip848: each restart joins a KIP-848 group that hands partitions over a few at a time
    env = {**keyed, "RUNONCE_GROUP_PROTOCOL": protocol}
    workers = [WorkerProcess(broker, f"crash-{runtime}-{protocol}-{i}", tmp_path, runtime=runtime, loglevel="info",
                             extra_env=env) for i in range(3)]
    for w in workers:
        w.start()
    time.sleep(8)  # let the group form before load arrives

    # Families go whole to one agent, in order, so same-key repeats follow their original.
    # Late retries are mixed in among the others (a fixed shuffle).
    random.Random(5).shuffle(families)
    shards = [in_order(families[i::4]) for i in range(4)]
    ctx = mp.get_context("spawn")
    agents = [ctx.Process(target=_agent, args=(broker.bootstrap_servers(), shard, 600.0)) for shard in shards]
    for a in agents:
        a.start()

    rnd = random.Random(3)
    kills, deleted_state = 0, False
    #: workers that left on their own (an exit for a restart: a stuck transactional call, an
    #: unreadable position, a record faust could not finish), restarted as systemd would
    exits: list[tuple[str, int | None]] = []
    wanted = {r["action_id"] for r in records}
    # A normal run is accounted for within 2 min of its start; 7 min is a stuck partition.
    deadline = time.monotonic() + float(os.environ.get("RUNONCE_CRASH_DEADLINE_S", "420"))
    report = None
    try:
        while time.monotonic() < deadline:
            time.sleep(5)
            for w in workers:
                if w.proc is not None and not w.alive():
                    exits.append((w.name, w.proc.returncode))
                    w.start()
            if kills < 8:
                victim = rnd.choice(workers)
                victim.kill()
                kills += 1
                if kills in (2, 4, 7):  # lose the local RocksDB state entirely: restore from the changelog
                    shutil.rmtree(broker.state_dir / victim.name, ignore_errors=True)
                    deleted_state = True
                time.sleep(1)
                victim.start()
                continue
            if any(a.is_alive() for a in agents):
                continue
            report = verify(broker.bootstrap_servers(), since_ms=since_ms)
            if wanted <= report.outcome_by_action.keys() and not report.lost:
                break
        for a in agents:
            a.join(10)
            assert a.exitcode == 0, "an agent process failed to produce"
        assert report is not None, "the run ended before the oracle could account for every action"
        missing = wanted - report.outcome_by_action.keys()
        # Said compactly (never the sets themselves: 21,000 ids bury the message), and where:
        # one partition's range points at a stuck owner, scattered positions at skipped records.
        undecided = len(missing)  # pytest would print a set operand whole
        assert undecided == 0, (f"{undecided} of {len(wanted)} actions never decided ({runtime}, {protocol}), "
                                f"e.g. {sorted(missing)[:3]}; lost by partition: {_spans(report.lost)}\n"
                                f"{report.summary()}\nexits on their own: {exits}\n{_group(broker)}\n{_logs(workers)}")
        assert report.ok, f"{report.summary()}\n{_logs(workers)}"
        problems = check_families(families, report.outcome_by_action)
        late = [p for p in problems if p.startswith("late_unkeyed_retry")]
        assert not problems, (f"{len(problems)} families decided against plan ({len(late)} late unkeyed retries): "
                              f"{(late or problems)[:5]}")
        assert kills == 8 and deleted_state
        ours = sum(n for a, n in report.re_emitted_by_action.items() if a in wanted)
        if runtime == "transactional":  # exactly-once: no decision written twice (earlier tests' don't count)
            assert ours == 0, f"{ours} decisions re-emitted\n{report.summary()}"
            _assert_each_decision_has_one_receipt(broker, since_ms, wanted, receipts_key)
        print(f"\ncrash test ({runtime}, {protocol} group): {len(records)} actions, {sum(len(f.members) - 1 for f in families)} planted "
              f"repeats, {kills} SIGKILLs (three with RocksDB deleted), {n_late} late unkeyed retry families, re-emitted decisions {ours}, "
              f"lost {len(report.lost)}, doubled {len(report.doubled_keys)}, conflicts {len(report.conflicts)}, "
              f"exits on their own (restarted) {exits}")
    finally:
        for a in agents:
            if a.is_alive():
                a.kill()
        for w in workers:
            w.stop()
