"""Throughput of ONE stream worker on the local broker: a backlog of N actions from the
mixed workload (15% planted repeats), then one worker drains it.

    .venv/bin/python bench/stream_throughput.py --actions 50000

Reports actions/s from the first to the last decision (broker LogAppendTime of the
decision records), the worker's peak RSS, and its RocksDB size on disk. Uses its own
broker home (bench/out/), so it never touches a running stack.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_broker import local_broker, principal_env  # noqa: E402
from runonce.kafka.access import KafkaTarget  # noqa: E402
from runonce.ops.watch import DecisionWatcher  # noqa: E402
from runonce.sdk.submit import Submitter  # noqa: E402
from runonce.settings import Guarantee  # noqa: E402
from runonce.testkit.workload import generate  # noqa: E402
from tests.support.worker import WorkerProcess  # noqa: E402


def dir_size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actions", type=int, default=50_000)
    parser.add_argument("--guarantee", choices=["at_least_once", "exactly_once"], default="at_least_once")

    parser.add_argument("--secure", action="store_true",
                        help="the secured dev broker: SASL_SSL with SCRAM-SHA-512 (the cost of TLS)")
    args = parser.parse_args()

    with local_broker("stream-throughput", lambda m: print(m, file=sys.stderr), secure=args.secure) as settings:
        settings = settings.with_(processing_guarantee=Guarantee(args.guarantee))
        home, access = settings.home, settings.kafka_access()
        families = generate(args.actions, seed=1, run_id=home.name)
        records = [m for f in families for m, _ in f.members]
        t0 = time.monotonic()
        with Submitter(access, agent_id="bench") as sub:
            for r in records:
                sub.send(r)
        print(f"produced {len(records)} actions in {time.monotonic() - t0:.1f} s", file=sys.stderr)

        worker = WorkerProcess(settings, "bench-0", home, {**principal_env(settings), "RUNONCE_GUARANTEE": args.guarantee})
        watcher = DecisionWatcher(access)
        started = time.monotonic()
        worker.start()
        peak_rss_kb = 0
        ids = [r["action_id"] for r in records]
        while True:
            try:
                watcher.wait(ids, timeout_s=2)
                break
            except TimeoutError:
                done = sum(1 for a in ids if a in watcher.by_action)
                print(f"  {done}/{len(ids)} decided ({time.monotonic() - started:.0f} s)", file=sys.stderr)
                if not worker.alive():
                    raise SystemExit(f"worker died:\n{worker.log_tail()}")
            peak_rss_kb = max(peak_rss_kb, _rss_kb(worker))
        wall_s = time.monotonic() - started
        peak_rss_kb = max(peak_rss_kb, _rss_kb(worker))
        worker.stop()
        watcher.close()
        # Decision throughput: first to last decision record, on the broker's clock.
        decision_ts = _decision_span_ms(access)
        rate = len(ids) / (decision_ts / 1000) if decision_ts else float("nan")
        result = {
            "actions": len(ids),
            "guarantee": args.guarantee,
            "secure": args.secure,
            "decisions_per_s": round(rate),
            "wall_s_including_startup": round(wall_s, 1),
            "worker_peak_rss_mb": round(peak_rss_kb / 1024),
            "rocksdb_mb": round(dir_size_mb(home / "state" / "bench-0"), 1),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        }
        print(json.dumps(result, indent=2))
        return 0


def _rss_kb(worker: WorkerProcess) -> int:
    if worker.proc is None:
        return 0
    try:
        out = subprocess.run(["ps", "-o", "rss=", "-p", str(worker.proc.pid)], capture_output=True, text=True)
        return int(out.stdout.strip() or 0)
    except ValueError:
        return 0


def _decision_span_ms(bootstrap: KafkaTarget) -> int:
    from runonce.kafka import topics
    from runonce.kafka.reader import read_all

    stamps = [r.timestamp_ms for t in (topics.APPROVED, topics.DROPPED) for r in read_all(bootstrap, t)]
    return max(stamps) - min(stamps) if stamps else 0


if __name__ == "__main__":
    sys.exit(main())
