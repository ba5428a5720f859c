"""What scaling the stream job out and back costs: a steady load (half keyed charges, half
emails keyed by their content, as the SDK keys them) at ``--rate`` for ``--seconds``; one
worker from the start, a second and a third joining, then leaving (SIGTERM, as a scale-down
or a rolling restart stops a pod), each on the real broker as its own process.

For each change of the group (and a quiet window before the first, the reference), over the
``--window-s`` after it: the longest time no decision was seen by a read_committed reader of
the decisions, and the p99 and the worst decision latency (a request's CreateTime to its
decision seen) of the requests produced in that window. Every request is decided once
(checked: none missing).

    .venv/bin/python bench/scale_out.py [--rate 2000] [--seconds 40] [--static] [--protocol consumer]

``--static``: the workers join as static members (KIP-345, ``RUNONCE_STATIC_MEMBERSHIP``).
``--protocol``: the group protocol (``RUNONCE_GROUP_PROTOCOL``): ``classic`` (a rebalance
revokes every worker's every partition) or ``consumer`` (KIP-848: only the partitions that
change owner move; the dev broker keeps a member's session at 10 s and its heartbeat at 1 s,
as the classic workers' own).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.decision_latency import decisions_reader, offer, pct, runonce_load  # noqa: E402
from bench.local_broker import local_broker  # noqa: E402
from runonce.core.policy import PolicyBook  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.partitioner import partition_for  # noqa: E402
from runonce.kafka.reader import read_messages  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402
from runonce.wire.keys import routing_key  # noqa: E402
from tests.support.worker import WorkerProcess  # noqa: E402

POLICIES = PolicyBook.load()


def say(msg: str) -> None:
    print(f"scale-out: {msg}", file=sys.stderr, flush=True)


def longest_gap_ms(seen_ms: list[float], start_ms: float, span_ms: float) -> int:
    inside = [t for t in seen_ms if start_ms <= t < start_ms + span_ms]
    return round(max(b - a for a, b in zip([start_ms, *inside], [*inside, start_ms + span_ms])))


def window(seen_ms: list[float], by_partition: dict[int, list[float]], latencies: list[tuple[float, float]],
           start_ms: float, span_ms: float) -> dict[str, object]:
    """Within [start, start + span): the longest gap between decisions seen (and the same of
    each request partition's decisions alone: one that stayed with its worker should not
    stall), and the latency (p99, worst) of the requests produced then."""
    produced = [lat for at, lat in latencies if start_ms <= at < start_ms + span_ms]
    return {"longest_gap_ms": longest_gap_ms(seen_ms, start_ms, span_ms),
            "longest_gap_by_partition_ms": {p: longest_gap_ms(ts, start_ms, span_ms)
                                            for p, ts in sorted(by_partition.items())},
            "p99_ms": round(pct(produced, 0.99)) if produced else -1,
            "worst_ms": round(max(produced)) if produced else -1, "requests": len(produced)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--window-s", type=float, default=6)
    ap.add_argument("--static", action="store_true", help="workers join as static members (KIP-345)")
    ap.add_argument("--protocol", choices=("classic", "consumer"), default="classic",
                    help="the workers' group protocol (consumer: KIP-848)")
    ap.add_argument("--loglevel", default="warn", help="the workers' (their logs: bench/out/scale-out-*/)")
    args = ap.parse_args()
    #: when each change happens, seconds into the load
    plan = [(0.20, "worker 2 joins"), (0.35, "worker 3 joins"), (0.60, "worker 3 leaves"), (0.80, "worker 2 leaves")]
    with local_broker("scale-out", say) as settings:
        env = {"RUNONCE_STATIC_MEMBERSHIP": "true" if args.static else "false", "RUNONCE_GROUP_PROTOCOL": args.protocol}
        workers = [WorkerProcess(settings, f"scale-{i}", settings.home, env, loglevel=args.loglevel) for i in range(3)]
        codec = Codec()
        workers[0].start()
        warm = runonce_load("steady", 50, f"warm-{uuid.uuid4().hex[:6]}")
        reader = decisions_reader(settings.bootstrap_servers())
        offer(settings.bootstrap_servers(), topics.REQUESTED,
              [(routing_key(r, POLICIES).encode(), codec.encode("ActionRequested", r)) for r in warm], 100, "steady",
              stamp_header=False)
        deadline = time.monotonic() + 120
        while any(r["action_id"] not in reader.seen for r in warm):
            assert time.monotonic() < deadline and workers[0].alive(), workers[0].describe()
            time.sleep(0.1)
        say("worker 1 decides; the load starts")

        n = int(args.rate * args.seconds)
        requests = runonce_load("steady", n, uuid.uuid4().hex[:8])
        records = [(routing_key(r, POLICIES).encode(), codec.encode("ActionRequested", r)) for r in requests]
        load = threading.Thread(target=offer, args=(settings.bootstrap_servers(), topics.REQUESTED, records,
                                                    args.rate, "steady"), kwargs={"stamp_header": False})
        started_ms = time.time() * 1000
        load.start()
        changes: list[tuple[str, float]] = []
        for at, what in plan:
            time.sleep(max(0.0, started_ms / 1000 + at * args.seconds - time.time()))
            changes.append((what, time.time() * 1000))
            say(what)
            {"worker 2 joins": workers[1].start, "worker 3 joins": workers[2].start,
             "worker 3 leaves": workers[2].stop, "worker 2 leaves": workers[1].stop}[what]()
        load.join()
        reader.wait_for(len(warm) + n, 180)
        for w in workers:
            w.stop()
        missing = [r["action_id"] for r in requests if r["action_id"] not in reader.seen]
        produced_ms = {str(codec.decode(m.value())[1]["action_id"]): float(m.timestamp()[1])
                       for m in read_messages(settings.bootstrap_servers(), topics.REQUESTED, 120)}
        latencies = [(produced_ms[r["action_id"]], reader.seen[r["action_id"]][1] - produced_ms[r["action_id"]])
                     for r in requests if r["action_id"] in reader.seen]
        seen_ms = sorted(reader.seen[r["action_id"]][1] for r in requests if r["action_id"] in reader.seen)
        by_partition: dict[int, list[float]] = {}
        for (key, _), r in zip(records, requests):
            if r["action_id"] in reader.seen:
                by_partition.setdefault(partition_for(key, settings.partitions), []).append(
                    reader.seen[r["action_id"]][1])
        for ts in by_partition.values():
            ts.sort()
        span_ms = args.window_s * 1000
        quiet = window(seen_ms, by_partition, latencies, changes[0][1] - span_ms, span_ms)
        print(json.dumps({
            "rate": args.rate, "seconds": args.seconds, "static_membership": args.static, "protocol": args.protocol,
            "window_s": args.window_s,
            "decided": len(seen_ms), "missing": len(missing),
            "before any change (the reference)": quiet,
            **{what: window(seen_ms, by_partition, latencies, at_ms, span_ms) for what, at_ms in changes},
        }, indent=2))
        return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
