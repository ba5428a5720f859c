"""What one decision costs the stream job in Python, as the transactional worker decides it,
without Kafka: pre-encoded requests in batches (``Pipeline.process_batch``), state in RocksDB
(the worker's ``TableState``: reads through the open transaction's changes, each batch's
changes written in one write batch at its "commit"), the changelog records built. What is
left of a worker's batch is librdkafka's (fetch, produce, the transaction's round trips).

Two workloads, each pre-encoded once:

* **keyed**: ``update_salesforce_field``, an idempotency key each, no scope rules (stage 1
  only), every tenth a repeat of the one before;
* **scoped**: ``send_email`` with a derived key, its recipient's scope and a content window
  (stage 1, then stage 2 in place), every tenth a repeat of the one before.

``--against REV`` measures the tree at git revision ``REV`` too (a worktree under /tmp), in
turns with this one, each run in a fresh process: the reference in the same run.
``--profile WORKLOAD`` prints where one run's time goes (cProfile, by own time).

    .venv/bin/python bench/decision_cost.py [--actions 50000] [--rounds 3] [--batch 500]
        [--against REV] [--profile keyed|scoped]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("keyed", "scoped")
PARTITIONS = 6
T0_MS = 1_800_000_000_000


def _measure(workload: str, actions: int, batch_size: int, profile: bool) -> float:
    """One run in this process, over the runonce its sys.path finds: µs a decision."""
    from runonce.core.policy import PolicyBook
    from runonce.kafka import topics
    from runonce.kafka.partitioner import partition_for
    from runonce.kafka.record import Out
    from runonce.sdk.submit import build_request
    from runonce.streams.metrics import StreamMetrics
    from runonce.streams.ports import Inbound
    from runonce.streams.processor import Pipeline
    from runonce.streams.transactional.state import TableState
    from runonce.wire.codec import Codec
    from runonce.wire.keys import routing_key

    codec, policies = Codec(), PolicyBook.load()
    inbounds = []
    for i in range(actions):
        n = i - 1 if i % 10 == 9 else i  # every tenth repeats the one before
        if workload == "keyed":
            key: str | None = f"k-{n}"
            tool, params = "update_salesforce_field", {"id": n % 1000, "field": "stage"}
        else:
            key, tool = None, "send_email"
            params = {"to": f"lead-{n % 5000}@prospect.example", "subject": "Your trial", "body": f"Hello #{n}"}
        record = build_request(tool, params, agent_id="bench", idempotency_key=key, requested_at_ms=T0_MS + i)
        routed = routing_key(record, policies).encode()  # as the SDK keys it: no re-key hop
        inbounds.append(Inbound(topics.REQUESTED, partition_for(routed, PARTITIONS), i, T0_MS + i, routed,
                                codec.encode("ActionRequested", record)))
    with tempfile.TemporaryDirectory(prefix="runonce-decision-cost-") as root:
        tables = [TableState(name, changelog, Path(root)) for name, changelog in (
            ("keys", topics.CHANGELOG_KEYS), ("scopes", topics.CHANGELOG_SCOPES), ("holds", topics.CHANGELOG_HOLDS))]
        for table in tables:
            for p in range(PARTITIONS):
                table.open(p)
        keys, scopes, holds = tables
        pipeline = Pipeline(codec=codec, policies=policies, partitions=PARTITIONS, keys=keys, scopes=scopes,
                            holds=holds, metrics=StreamMetrics(), decides_scope_here=scopes.parts.__contains__)
        # The worker reads its partitions' records in offset order; the generator's keys are
        # routed as a producer would, so keep each partition's own order.
        inbounds.sort(key=lambda inbound: inbound.partition)
        changelog_offset = 0

        def run() -> None:
            nonlocal changelog_offset
            for start in range(0, len(inbounds), batch_size):
                outs = pipeline.process_batch(inbounds[start:start + batch_size])
                for table in tables:
                    outs += [Out(table.changelog, k, v, p) for p, k, v in table.changes()]
                changelog_offset += len(outs)
                for table in tables:
                    table.commit({p: changelog_offset for p in table.parts})

        if profile:
            import cProfile
            import pstats
            profiler = cProfile.Profile()
            profiler.runcall(run)
            pstats.Stats(profiler).sort_stats(os.environ.get("SORT", "tottime")).print_stats(int(os.environ.get("TOP", "25")))
            return 0.0
        started = time.perf_counter()
        run()
        elapsed = time.perf_counter() - started
        for table in tables:
            table.close_all()
    return elapsed / actions * 1e6


def _worktree(rev: str) -> Path:
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    path = Path(tempfile.gettempdir()) / f"runonce-bench-{sha[:12]}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), sha], check=True,
                       capture_output=True)
    return path


def _child(tree: Path, workload: str, args: argparse.Namespace) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", workload, "--actions",
                          str(args.actions), "--batch", str(args.batch)], env=env, cwd=tree, check=True,
                         capture_output=True, text=True).stdout
    return float(json.loads(out.splitlines()[-1])["us_per_decision"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=500, help="records a batch (the worker's transaction)")
    ap.add_argument("--against", metavar="REV", help="a git revision measured in turns with this tree")
    ap.add_argument("--profile", choices=WORKLOADS, help="where one run of this workload spends its time, then stop")
    ap.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, os.environ.get("PYTHONPATH", str(ROOT)))
        print(json.dumps({"us_per_decision": _measure(args.child, args.actions, args.batch, False)}))
        return
    if args.profile:
        sys.path.insert(0, str(ROOT))
        _measure(args.profile, args.actions, args.batch, True)
        return
    trees = {"this tree": ROOT}
    if args.against:
        trees[args.against] = _worktree(args.against)
    times: dict[tuple[str, str], list[float]] = {(t, w): [] for t in trees for w in WORKLOADS}
    names = list(trees)
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]  # neither tree always runs first
        for workload in WORKLOADS:
            for name in order:
                times[(name, workload)].append(_child(trees[name], workload, args))
        print(f"round {r + 1}/{args.rounds}: " + "; ".join(
            f"{name} {w} {times[(name, w)][-1]:.1f}" for w in WORKLOADS for name in names) + " µs/decision",
            flush=True)
    print(f"{args.rounds} rounds of {args.actions} actions in batches of {args.batch}, µs a decision (medians; "
          "range):")
    for workload in WORKLOADS:
        for name in names:
            series = times[(name, workload)]
            line = f"  {workload:7s} {name:12s} {statistics.median(series):6.1f} ({min(series):.1f}-{max(series):.1f})"
            if name != names[0]:
                ratio = statistics.median(times[(names[0], workload)]) / statistics.median(series)
                line += f"  (this tree takes {ratio:.2f}x its time)"
            print(line)


if __name__ == "__main__":
    main()
