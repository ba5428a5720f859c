"""What TLS costs one stream worker, and where: plain and SASL_SSL (SCRAM-SHA-512) in turns,
each turn on a fresh broker of its kind, the same backlog drained by one exactly-once worker.

Reports per turn the decisions/s (first to last decision, the broker's clock) and the CPU
each side spent on it: the broker's JVM and the worker's process, in CPU-ms per 1,000
decisions (from /proc, between the worker's start and its last decision; the worker's
start-up is in both modes alike). Medians over ``--rounds``, the order rotating per round.
``--variant NAME=VALUE`` adds both modes again with that variable in the worker's environment
(``RUNONCE_KAFKA_CONFIG_COMPRESSION_TYPE=none``: the worker's output uncompressed, as before
2026-12-07), so a change is measured against its reference in the same run.

    .venv/bin/python bench/tls_cost.py --rounds 3 [--actions 50000] [--variant NAME=VALUE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fetch_cost import broker_ticks  # noqa: E402
from bench.local_broker import local_broker, principal_env  # noqa: E402
from bench.stream_throughput import _decision_span_ms  # noqa: E402
from runonce.ops.watch import DecisionWatcher  # noqa: E402
from runonce.sdk.submit import Submitter  # noqa: E402
from runonce.testkit.workload import generate  # noqa: E402
from tests.support.worker import WorkerProcess  # noqa: E402

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def say(msg: str) -> None:
    print(f"tls-cost: {msg}", file=sys.stderr, flush=True)


def process_ticks(pid: int) -> int:
    """A process's CPU time so far (user + system, its threads), in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def turn(actions: int, secure: bool, seed: int, extra_env: dict[str, str]) -> dict[str, float]:
    with local_broker("tls-cost", lambda m: None, secure=secure) as settings:
        home, access = settings.home, settings.kafka_access()
        records = [m for f in generate(actions, seed=seed, run_id=home.name) for m, _ in f.members]
        with Submitter(access, agent_id="bench") as sub:
            for r in records:
                sub.send(r)
        worker = WorkerProcess(settings, "bench-0", home,
                               {**principal_env(settings), "RUNONCE_GUARANTEE": "exactly_once", **extra_env})
        watcher = DecisionWatcher(access)
        time.sleep(1)  # the producer's last requests and the broker's log flushes out of the window
        broker_from = broker_ticks()
        worker.start()
        assert worker.proc is not None
        worker_pid = worker.proc.pid
        worker_from = process_ticks(worker_pid)
        watcher.wait([r["action_id"] for r in records], timeout_s=600)
        worker_ticks = process_ticks(worker_pid) - worker_from
        broker_used = broker_ticks() - broker_from
        worker.stop()
        watcher.close()
        rate = len(records) / (_decision_span_ms(access) / 1000)
        per_k = 1000 / len(records) * TICK_MS
        return {"decisions_per_s": rate, "worker_cpu_ms_per_1k": worker_ticks * per_k,
                "broker_cpu_ms_per_1k": broker_used * per_k}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actions", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variant", metavar="NAME=VALUE",
                        help="both modes again with this in the worker's environment")
    args = parser.parse_args()
    variant = dict([args.variant.split("=", 1)]) if args.variant else {}
    modes = [("plain", False, {}), ("tls", True, {})]
    if variant:
        modes += [("plain " + args.variant, False, variant), ("tls " + args.variant, True, variant)]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in modes}
    for n in range(args.rounds):
        for name, secure, env in modes[n % len(modes):] + modes[:n % len(modes)]:
            got = turn(args.actions, secure, seed=100 + n, extra_env=env)
            runs[name].append(got)
            say(f"round {n + 1} {name}: " + ", ".join(f"{k} {v:,.0f}" for k, v in got.items()))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    result: dict[str, object] = {
        "actions": args.actions, "rounds": args.rounds,
        **{name: {k: round(v) for k, v in m.items()} for name, m in med.items()},
        "tls_over_plain": round(med["tls"]["decisions_per_s"] / med["plain"]["decisions_per_s"], 3),
        "spread": {name: [round(r["decisions_per_s"]) for r in rs] for name, rs in runs.items()},
    }
    if variant:
        result["tls_over_plain " + args.variant] = round(
            med["tls " + args.variant]["decisions_per_s"] / med["plain " + args.variant]["decisions_per_s"], 3)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
