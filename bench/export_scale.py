"""What analysts wait for on a big topic: `runonce export` of N decisions to Parquet (seconds,
file size), and `runonce tail --since` on a topic holding N older records (seconds to the
first line: the broker's time index skips the N, nothing is scanned).

    .venv/bin/python bench/export_scale.py [--decisions 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_broker import OUT, local_broker  # noqa: E402
from bench.sdk_outcomes import flood  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.ops import child
from runonce.ops.export import export  # noqa: E402


def say(msg: str) -> None:
    print(f"export: {msg}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decisions", type=int, default=1_000_000)
    args = ap.parse_args()
    with local_broker("export", say) as settings:
        say(f"writing {args.decisions} decisions (and as many results)")
        flood(settings.bootstrap_servers(), 0, args.decisions)
        path = OUT / "export-scale.parquet"
        started = time.monotonic()
        n = export(settings.kafka_access(), "dropped", path, progress=say)
        export_s = time.monotonic() - started
        time.sleep(2)
        since = time.time()
        flood(settings.bootstrap_servers(), args.decisions, args.decisions + 10)  # 10 new ones
        started = time.monotonic()
        env = {"RUNONCE_HOME": str(settings.home), "RUNONCE_BOOTSTRAP": settings.bootstrap_servers(),
               "PATH": "/usr/bin:/bin"}
        proc = subprocess.Popen(child.argv("tail", "dropped", "-n", "1", "--since", f"{int((time.time() - since) + 1)}s"),
                                stdout=subprocess.PIPE, env=env, text=True)
        first = proc.stdout.readline() if proc.stdout else ""
        first_line_s = time.monotonic() - started
        proc.wait(60)
        print(json.dumps({"decisions": n, "export_s": round(export_s, 1),
                          "parquet_mb": round(path.stat().st_size / 1e6, 1), "records_per_s": round(n / export_s),
                          "tail_since_first_line_s": round(first_line_s, 2), "first_line": first.strip()[:100],
                          "topic": topics.DROPPED}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
