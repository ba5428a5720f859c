"""Live keys at scale: a worker restoring N live dedup keys from its changelog after its
local RocksDB folder is gone, then the same worker restarted with its folder intact.
Reports both times, the worker's peak RSS and its RocksDB size on disk.

    .venv/bin/python bench/state_restore.py --keys 10000000 [--runtime transactional|faust]

The N keys are written straight into the keys table's changelog topic (as a worker would
have, one entry per idempotency key, partitioned like the worker writes them), so the run
does not depend on the stream job's throughput. Then a worker with an empty state folder
starts; restore time is from its start until it is ready (``/readyz``: every partition's
state restored), minus the same measurement with an empty changelog. The transactional worker
decides a partition as soon as that partition's state is restored: ``probe_decided_s`` is
when a probe action on one of them was decided.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402

from bench.local_broker import OUT, local_broker  # noqa: E402
from runonce.core.decision import Claim, KeyState  # noqa: E402
from runonce.devbroker.broker import free_ports  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.partitioner import partition_for  # noqa: E402
from runonce.ops import child
from runonce.ops.watch import DecisionWatcher  # noqa: E402
from runonce.sdk.submit import Submitter  # noqa: E402
from runonce.settings import Settings  # noqa: E402


def say(msg: str) -> None:
    print(f"state: {msg}", file=sys.stderr, flush=True)


def fill(bootstrap: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000})
    far = 4_000_000_000_000  # expires long after the run
    started = time.monotonic()
    for i in range(n):
        key = f"idem-{i:09d}".encode()
        value = KeyState(Claim(str(uuid.UUID(int=i)), i % partitions, i, 1, far), f"{i:064x}").to_bytes()
        while True:
            try:
                p.produce(topics.CHANGELOG_KEYS, key=key, value=value, partition=partition_for(key, partitions))
                break
            except BufferError:
                p.poll(0.05)
        if i % 1_000_000 == 0 and i:
            say(f"  {i} keys written ({i / (time.monotonic() - started):.0f}/s)")
    p.flush(300)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def restore_seconds(settings: Settings, name: str, out_dir: Path, runtime: str) -> tuple[float, float, int]:
    """(seconds to the probe's decision, seconds to ready: every partition's state restored,
    peak RSS in KB). The transactional worker decides a partition once its own state is
    restored, so the probe may be decided before the others are."""
    port = free_ports(1)[0]
    env = {"RUNONCE_HOME": str(settings.home), "RUNONCE_BOOTSTRAP": settings.bootstrap_servers(),
           "RUNONCE_METRICS_PORT": str(port)}
    import os

    (out_dir / f"{name}.log").unlink(missing_ok=True)
    started = time.monotonic()
    proc = child.start(["worker", "--name", name, "--runtime", runtime], {**os.environ, **env}, out_dir / f"{name}.log",
                       own_session=False)
    peak_kb = 0
    decided_s = ready_s = None
    try:
        with DecisionWatcher(settings.bootstrap_servers()) as watcher, \
                Submitter(settings.bootstrap_servers(), agent_id="probe") as sub:
            probe = sub.submit("update_salesforce_field", {"probe": name, "n": uuid.uuid4().hex},
                               idempotency_key=f"probe-{uuid.uuid4().hex}")
            sub.flush()
            while decided_s is None or ready_s is None:
                if ready_s is None and _ready(port):
                    ready_s = time.monotonic() - started
                try:
                    if decided_s is None:
                        watcher.wait([probe], timeout_s=0.2)
                        decided_s = time.monotonic() - started
                    else:
                        time.sleep(0.1)
                except TimeoutError:
                    out = subprocess.run(["ps", "-o", "rss=", "-p", str(proc.pid)], capture_output=True, text=True)
                    peak_kb = max(peak_kb, int(out.stdout.strip() or 0))
                    if proc.poll() is not None:
                        raise SystemExit(f"worker exited: see {out_dir / (name + '.log')}")
        return decided_s, ready_s, peak_kb
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--runtime", default="transactional", choices=["transactional", "faust"])
    args = ap.parse_args()
    out_dir = OUT
    with local_broker("state", say) as settings:
        _, baseline, _ = restore_seconds(settings, "empty", out_dir, args.runtime)
        say(f"worker ready with an empty changelog in {baseline:.1f} s; writing {args.keys} keys")
        fill(settings.bootstrap_servers(), args.keys, settings.partitions)
        say("restoring into an empty folder")
        first, total, peak_kb = restore_seconds(settings, "restore", out_dir, args.runtime)
        state = settings.home / "state" / "restore"
        disk_mb = sum(p.stat().st_size for p in state.rglob("*") if p.is_file()) / 1e6
        say("restarting with the folder intact")
        intact, _, intact_kb = restore_seconds(settings, "restore", out_dir, args.runtime)
        result = {"runtime": args.runtime, "live_keys": args.keys, "restore_s": round(total - baseline, 1),
                  "worker_ready_s": round(total, 1), "probe_decided_s": round(first, 1),
                  "worker_peak_rss_mb": round(max(peak_kb, intact_kb) / 1024),
                  "restart_intact_first_decision_s": round(intact, 1), "rocksdb_mb": round(disk_mb)}
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
