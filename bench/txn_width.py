"""What a transaction's width costs, with no work added: the exactly-once passthrough of
``txn_floor.py`` copying each record into 1, 2 or 3 six-partition topics a transaction, in turns
on one broker, each width warmed first.

A steady runonce transaction writes three topics (its decisions and the keys and scopes
changelogs); a single changelog for every table would make it two; ``txn_floor.py`` and
``decision_latency.py``'s floor write one. Each width has its own input and output topics and
its own passthrough process, which runs only for its own turn (an idle consumer's fetches cost
the broker CPU the others would feel); the widths take turns in a rotating order, so none is
always first. Latency as in ``decision_latency.py``: from the record's broker timestamp to a
read_committed reader receiving its copy, the first 5 s of each turn left out.

    .venv/bin/python bench/txn_width.py [--rate 2000] [--seconds 20] [--rounds 3] [--pattern steady]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka.admin import NewTopic  # noqa: E402

from bench.decision_latency import PATTERNS, WARM_S, pct, turn_run  # noqa: E402
from bench.local_broker import local_broker  # noqa: E402
from bench.txn_floor import PARTITIONS, SIDE_TOPICS  # noqa: E402
from runonce.kafka.topics import admin_client  # noqa: E402

WIDTHS = (1, 2, 3)


def say(msg: str) -> None:
    print(f"txn-width: {msg}", file=sys.stderr, flush=True)


def hop(width: int) -> tuple[str, str]:
    return f"width{width}.in", f"width{width}.out"


def width_run(ctx: Any, bootstrap: str, width: int, n: int, rate: float, pattern: str) -> list[float]:
    """The latencies (ms) of ``n`` records through the passthrough writing ``width`` topics."""
    return turn_run(ctx, bootstrap, hop(width), SIDE_TOPICS[:width - 1], f"width{width}", n, rate, pattern)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3, help="turns of every width (default 3)")
    ap.add_argument("--pattern", choices=PATTERNS, default="steady", help="offered load (decision_latency.py's)")
    ap.add_argument("--warm-seconds", type=float, default=10.0,
                    help="untimed load through each width before the first round (default 10)")
    args = ap.parse_args()
    n = int(args.rate * args.seconds)
    timed = range(int(args.rate * WARM_S), n)
    rows = []
    with local_broker("txn-width", say) as settings:
        bootstrap = settings.bootstrap_servers()
        specs = [NewTopic(t, PARTITIONS, 1, config={"message.timestamp.type": "LogAppendTime"})
                 for t in (*(t for w in WIDTHS for t in hop(w)), *SIDE_TOPICS)]
        admin = admin_client(bootstrap)  # kept: a collected client fails its futures
        for fut in admin.create_topics(specs).values():
            fut.result()
        ctx = mp.get_context("spawn")
        if args.warm_seconds > 0:
            say(f"warming the broker: {args.rate:.0f}/s for {args.warm_seconds:.0f} s through each width")
            for width in WIDTHS:
                width_run(ctx, bootstrap, width, int(args.rate * args.warm_seconds), args.rate, "steady")
        for round_no in range(1, args.rounds + 1):
            order = WIDTHS[(round_no - 1) % len(WIDTHS):] + WIDTHS[:(round_no - 1) % len(WIDTHS)]
            row: dict[str, Any] = {"round": round_no, "pattern": args.pattern, "order": list(order)}
            for width in order:
                say(f"round {round_no}: {width} topic(s) a transaction, {args.rate:.0f}/s for {args.seconds:.0f} s")
                lat = width_run(ctx, bootstrap, width, n, args.rate, args.pattern)
                chosen = [lat[i] for i in timed if lat[i] == lat[i]]
                lost = len(timed) - len(chosen)
                assert not lost, f"{lost} records of width {width} not seen"
                row[f"width{width}"] = {"p50": pct(chosen, 0.5), "p99": pct(chosen, 0.99)}
            for width in WIDTHS[1:]:
                row[f"p99_ratio_{width}_to_1"] = round(row[f"width{width}"]["p99"] / row["width1"]["p99"], 2)
            rows.append(row)
            say(json.dumps(row))
    summary = {f"width{w}_p99_median": statistics.median(r[f"width{w}"]["p99"] for r in rows) for w in WIDTHS}
    summary.update({f"p99_ratio_{w}_to_1": {"median": statistics.median(r[f"p99_ratio_{w}_to_1"] for r in rows),
                                             "min": min(r[f"p99_ratio_{w}_to_1"] for r in rows),
                                             "max": max(r[f"p99_ratio_{w}_to_1"] for r in rows)}
                    for w in WIDTHS[1:]})
    print(json.dumps({"rounds": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
