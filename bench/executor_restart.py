"""An executor restarting over a long history of results: N results already on
actions.results, one new approved charge waiting. Timed from the executor process's start
(joining its group included) to the vendor's first request, with the executor's peak RSS
(VmHWM) and how many results it restored.

    .venv/bin/python bench/executor_restart.py [--results 10000000] [--span-hours 720] [--full] [--kill]

Two starts of one executor slot: the first over an empty results-index folder (it restores
every result within the key window into RocksDB), the second over the folder the first left
(it reads only what was written since). ``--span-hours`` spreads the history's timestamps
evenly over that many hours before now: 720 (a month; two thirds of it outside the 24 h
window) or 1 (every result inside the window: the worst case for an empty folder).

``--kill`` stops each start with SIGKILL: the second start then replaces a member that never
left the group (static membership gives its partitions back at once).

``--full`` also runs the executor reading every result from the beginning of the topic, as
before the bounded restore. Real broker; the payments executor against the sandbox; the
history is produced straight to the topic (results of the payments tool, so the executor
decodes and keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402

from bench.local_broker import OUT, local_broker  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.partitioner import partition_for  # noqa: E402
from runonce.sdk.submit import build_request  # noqa: E402
from runonce.settings import Settings  # noqa: E402
from runonce.testkit.decisions import approved_decision  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402
from runonce.wire.results import Result, Status, result_record  # noqa: E402

DAY_MS = 24 * 3600 * 1000


def say(msg: str) -> None:
    print(f"executor-restart: {msg}", file=sys.stderr, flush=True)


def history(bootstrap: str, n: int, partitions: int, span_ms: int) -> None:
    """n final results of charge_payment over the last ``span_ms``, oldest first."""
    codec = Codec()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                  "compression.type": "lz4", "queue.buffering.max.messages": 2_000_000})
    now = int(time.time() * 1000)
    started = time.monotonic()
    for i in range(n):
        at = now - span_ms + (span_ms * i) // n
        action_id = str(uuid.UUID(int=i + 1))
        value = codec.encode("ActionResult", result_record(action_id, f"h{i}", "charge_payment",
                                                           Result(Status.SUCCEEDED, f"ch_{i}", attempts=1), at))
        while True:
            try:
                p.produce(topics.RESULTS, key=action_id.encode(), value=value, partition=i % partitions, timestamp=at)
                break
            except BufferError:
                p.poll(0.05)
        if i and i % 1_000_000 == 0:
            say(f"{i:,} results produced ({time.monotonic() - started:.0f} s)")
    p.flush(900)


def approve_one(bootstrap: str, partitions: int) -> str:
    key = f"new-{uuid.uuid4().hex}"
    request = build_request("charge_payment", {"card": "tok", "amount_cents": 4200}, agent_id="bench",
                            idempotency_key=key)
    decision = approved_decision(request, key)
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topics.APPROVED, key=key.encode(), value=Codec().encode("ActionDecision", decision),
              partition=partition_for(key.encode(), partitions))
    p.flush(30)
    return key


def vm_hwm_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    return -1


def restart(settings: Settings, sandbox: Any, full: bool, group: str, folder: str, kill: bool = False) -> dict[str, Any]:
    vendors = sandbox.vendors
    env = settings.with_(connectors_file=sandbox.write_connectors()).child_env(os.environ)
    if full:
        env["RUNONCE_BENCH_FULL_RESTORE"] = "1"
    log_path = OUT / f"executor-restart-{'full' if full else folder}.log"
    log_path.unlink(missing_ok=True)
    code = ("import os, sys, runonce.connectors.executor.results as r\n"
            "if os.environ.get('RUNONCE_BENCH_FULL_RESTORE'):\n"
            "    r.ResultIndex._first_unread_ms = lambda self, starts: 0\n"
            "from runonce.ops.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", code, "executor", "--vendor", "payments", "--group", group,
                             "--from-end", "--loglevel", "info"],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(log_path, "wb"))
    peak = 0
    try:
        # --from-end starts after everything approved so far: approve the charge once the group is in
        while "assigned" not in log_path.read_text(errors="replace"):
            assert proc.poll() is None, log_path.read_text()[-3000:]
            peak = max(peak, vm_hwm_mb(proc.pid))
            time.sleep(0.05)
        assigned = time.monotonic()
        key = approve_one(settings.bootstrap_servers(), settings.partitions)
        while not vendors.ledger.requests("/v1/charges", key):
            assert proc.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.01)
        first = time.monotonic()
        peak = max(peak, vm_hwm_mb(proc.pid))
    finally:
        proc.kill() if kill else proc.terminate()
        proc.wait(60)
    restored = re.findall(r"restored (\d+) results in ([\d.]+) s", log_path.read_text(errors="replace"))
    return {"restore": "whole topic" if full else "bounded", "index_folder": folder,
            "assigned_after_s": round(assigned - started, 2),
            "first_action_performed_after_s": round(first - started, 2), "executor_peak_rss_mb": peak,
            "results_restored": int(restored[-1][0]) if restored else None,
            "restore_s": float(restored[-1][1]) if restored else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=int, default=10_000_000)
    ap.add_argument("--span-hours", type=float, default=720.0,
                    help="the history's timestamps spread over this many hours before now (1: all in the window)")
    ap.add_argument("--full", action="store_true", help="also time the unbounded restore (as before)")
    ap.add_argument("--kill", action="store_true",
                    help="stop each start with SIGKILL, not SIGTERM: the next start replaces a member that never left "
                         "its group (a static member takes its partitions back at once; a dynamic one waits out the "
                         "dead one's session timeout)")
    args = ap.parse_args()
    from runonce.connectors.vendors.sandbox.local import LocalVendors

    with local_broker("executor-restart", say) as settings:
        sandbox = LocalVendors(Path(tempfile.mkdtemp(prefix='runonce-bench-'))).start()
        try:
            say(f"history: {args.results:,} results over {args.span_hours:g} h")
            history(settings.bootstrap_servers(), args.results, settings.partitions,
                    int(args.span_hours * 3600 * 1000))
            group = f"runonce-exec-bench-{uuid.uuid4().hex[:6]}"
            rows = []
            for folder in ("empty", "intact"):  # one slot, twice: the second start finds the first's folder
                rows.append(restart(settings, sandbox, False, group, folder, args.kill))
                rows[-1]["this_start_stopped_by"] = "SIGKILL" if args.kill else "SIGTERM"
                say(json.dumps(rows[-1]))
            if args.full:
                rows.append(restart(settings, sandbox, True, f"runonce-exec-bench-{uuid.uuid4().hex[:6]}", "empty"))
                say(json.dumps(rows[-1]))
            print(json.dumps({"results_on_topic": args.results, "span_hours": args.span_hours, "runs": rows},
                             indent=2))
        finally:
            sandbox.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
