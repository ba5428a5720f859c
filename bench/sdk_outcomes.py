"""How an agent's client scales with the history on the topics: a fresh ActionClient started
after N decisions and N results are already on actions.dropped and actions.results, timed
from its construction to its first handle resolved (a new charge), then to a retry of a
charge made before all that history (its original's result is older than anything the
client has seen), with the client process's peak RSS. Sizes grow in one run.

    .venv/bin/python bench/sdk_outcomes.py [--sizes 10000 100000 1000000]

Real broker, stream worker (transactional) and payments executor against the sandbox; the
history is synthetic decisions and results (a tool no executor serves) produced straight to
the topics, so the run does not wait for the stream job to decide a million actions.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402

from bench.local_broker import local_broker, payments_stack  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.sdk.client import ActionClient  # noqa: E402
from runonce.sdk.submit import build_request  # noqa: E402
from runonce.settings import Settings  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402
from runonce.wire.results import Result, Status, result_record  # noqa: E402

CHARGE = {"card": "tok_bench", "amount_cents": 4200}


def say(msg: str) -> None:
    print(f"sdk: {msg}", file=sys.stderr, flush=True)


def flood(bootstrap: str, start: int, stop: int) -> None:
    """Decisions (drops) and results of actions of a tool no executor serves."""
    codec = Codec()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000})
    now = int(time.time() * 1000)
    for i in range(start, stop):
        request = build_request("bench_history", {"i": i}, agent_id="history", idempotency_key=f"h{i}",
                                action_id=str(uuid.UUID(int=i)), requested_at_ms=now)
        decision = {"request": request, "outcome": "DROPPED", "reason": "duplicate_key", "dedup_key": f"h{i}",
                    "unkeyed": False, "content_hash": "0" * 64, "matched_key": f"h{i}",
                    "first_action_id": str(uuid.UUID(int=i + 1)), "first_partition": 0, "first_offset": 0,
                    "window_ms": None, "event_time_ms": now, "source_partition": 0, "source_offset": i}
        result = result_record(request["action_id"], f"h{i}", "bench_history", Result(Status.SUCCEEDED, f"r{i}"), now)
        for topic, value in ((topics.DROPPED, codec.encode("ActionDecision", decision)),
                             (topics.RESULTS, codec.encode("ActionResult", result))):
            while True:
                try:
                    p.produce(topic, key=f"h{i}".encode(), value=value)
                    break
                except BufferError:
                    p.poll(0.05)
    p.flush(600)


def probe(bootstrap: str, old_key: str) -> None:
    """In a fresh process (its RSS is the client's): the two handles, timed."""
    def rss_mb() -> int:
        # VmHWM, not getrusage's ru_maxrss: after fork + exec, ru_maxrss still counts the
        # parent's size at the fork (here, a bench process that just produced the history).
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024)
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)

    started = time.monotonic()
    with ActionClient(bootstrap, agent_id="bench") as client:
        ready, ready_rss = time.monotonic(), rss_mb()
        first = client.submit("charge_payment", CHARGE, idempotency_key=f"new-{uuid.uuid4().hex}").result(900)
        first_at, first_rss = time.monotonic(), rss_mb()
        retry = client.submit("charge_payment", CHARGE, idempotency_key=old_key).result(900)
        retry_at = time.monotonic()
        waiting = getattr(client, "waiting", None)
    assert first.status == "succeeded" and retry.repeated and retry.status == "succeeded", (first, retry)
    print(json.dumps({"client_ready_s": round(ready - started, 2), "first_handle_s": round(first_at - started, 2),
                      "old_retry_s": round(retry_at - first_at, 2), "rss_ready_mb": ready_rss,
                      "rss_first_mb": first_rss, "peak_rss_mb": rss_mb(), "entries_kept": waiting}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--probe", nargs=2, metavar=("BOOTSTRAP", "OLD_KEY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe:
        probe(*args.probe)
        return 0

    with local_broker("sdk", say) as settings, payments_stack(settings, "sdk") as sandbox:
        vendors = sandbox.vendors
        print(json.dumps(measure(settings, vendors, sorted(args.sizes)), indent=2))
    return 0


def measure(settings: Settings, vendors: Any, sizes: list[int]) -> list[dict[str, Any]]:
    old_key = f"old-{uuid.uuid4().hex}"
    with ActionClient(settings.bootstrap_servers(), agent_id="bench") as client:
        original = client.submit("charge_payment", CHARGE, idempotency_key=old_key).result(300)
    say(f"original charge {original.status} ({original.vendor_ref})")
    rows: list[dict[str, Any]] = []
    done = 0
    for size in sizes:
        say(f"history: {size} decisions and {size} results")
        flood(settings.bootstrap_servers(), done, size)
        done = size
        out = subprocess.run([sys.executable, __file__, "--probe", settings.bootstrap_servers(), old_key],
                             capture_output=True, text=True, timeout=1800)
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        rows.append({"history": size, **json.loads(out.stdout.strip().splitlines()[-1])})
        say(json.dumps(rows[-1]))
    assert vendors.ledger.count("payments", old_key) == 1
    return rows


if __name__ == "__main__":
    sys.exit(main())
