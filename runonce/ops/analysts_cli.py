"""What analysts run: ``runonce tail``, ``export``, ``report``, ``verify`` (the oracle) and
``stats``."""

from __future__ import annotations

import argparse
import time

from runonce.errors import ConfigError
from runonce.ops.commands import Adder, broker_time_ms, say
from runonce.settings import Settings


def cmd_tail(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.tail import Filter, tail

    now_ms = int(time.time() * 1000)
    since_ms = broker_time_ms(args.since, now_ms) if args.since else None
    until_ms = broker_time_ms(args.until, now_ms) if args.until else None
    tail(settings.kafka_access(), args.topic, follow=args.follow, limit=args.limit, as_json=args.json,
         keep=Filter(tool=args.tool, reason=args.reason, agent=args.agent, tenant=args.tenant), since_ms=since_ms, until_ms=until_ms)
    return 0


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from runonce.ops.export import export
    from runonce.ops.tail import Filter

    now_ms = int(time.time() * 1000)
    export(settings.kafka_access(), args.topic, Path(args.out), fmt=args.format,
           keep=Filter(tool=args.tool, reason=args.reason, agent=args.agent, tenant=args.tenant),
           since_ms=broker_time_ms(args.since, now_ms) if args.since else None,
           until_ms=broker_time_ms(args.until, now_ms) if args.until else None, progress=say)
    return 0


def cmd_report(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from runonce.ops.report.build import write_report

    now_ms = int(time.time() * 1000)
    since_ms = broker_time_ms(args.since, now_ms)
    until_ms = broker_time_ms(args.until, now_ms) if args.until else now_ms
    if until_ms <= since_ms:
        raise ConfigError(f"--until ({args.until}) must come after --since ({args.since})")
    write_report(settings.kafka_access(), Path(args.html), since_ms, until_ms,
                 source=f"Kafka at {settings.bootstrap_servers()}", progress=say)
    return 0


def cmd_verify(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.audit.oracle import verify

    deadline = time.monotonic() + args.wait
    while True:
        report = verify(settings.kafka_access())
        if report.ok or time.monotonic() >= deadline:
            break
        say(f"{len(report.lost)} records not yet decided; waiting ...")
        time.sleep(2)
    print(report.summary())
    return 0 if report.ok else 1


def cmd_stats(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.stats import stats_table

    print(stats_table(settings.kafka_access()))
    return 0


def add_commands(add: Adder) -> None:
    p = add("tail", cmd_tail, "Print a topic's records as readable lines or JSON: what analysts tap. "
                              "Example: runonce tail dropped --json --reason duplicate_key --since 1h | jq .")
    p.add_argument("topic", choices=["dropped", "approved", "dlq", "results", "requested", "held", "verdicts"])
    p.add_argument("-f", "--follow", action="store_true", help="keep reading new records")
    p.add_argument("-n", "--limit", type=int, default=0, help="stop after N records shown (0: no limit)")
    p.add_argument("--json", action="store_true", help="one JSON object per line (for jq, DuckDB, pandas)")
    p.add_argument("--tool", help="only this tool's records")
    p.add_argument("--reason", help="only decisions with this reason (e.g. duplicate_key, budget_exhausted)")
    p.add_argument("--agent", help="only this agent's decisions and requests")
    p.add_argument("--tenant", help="only this tenant's decisions and requests (docs/security.md)")
    p.add_argument("--since", help="from this broker time: ISO 8601 (2026-11-30T14:00:00Z) or a duration ago "
                                   "(15m, 2h, 7d); looked up in the broker's time index, not scanned")
    p.add_argument("--until", help="up to this broker time (same forms as --since)")
    p = add("export", cmd_export, "Write a topic's records for a time range to Parquet or JSON lines, one flat "
                                  "row each (for DuckDB, pandas), with tail's filters; progress on stderr. "
                                  "Example: runonce export dropped --since 24h --out drops.parquet")
    p.add_argument("topic", choices=["dropped", "approved", "dlq", "results", "requested", "held", "verdicts"])
    p.add_argument("--out", required=True, help="file to write (.parquet: Parquet; anything else: JSON lines)")
    p.add_argument("--format", choices=["parquet", "jsonl"], help="override the format the suffix implies")
    p.add_argument("--tool", help="only this tool's records")
    p.add_argument("--reason", help="only decisions with this reason")
    p.add_argument("--agent", help="only this agent's records")
    p.add_argument("--tenant", help="only this tenant's records")
    p.add_argument("--since", help="from this broker time: ISO 8601 or a duration ago (24h); via the time index")
    p.add_argument("--until", help="up to this broker time (same forms)")
    p = add("report", cmd_report, "Write one self-contained HTML page for a time range: drops by reason and tool "
                                  "over time, the most repeated keys and scopes, budgets exhausted, results in "
                                  "doubt, dead letters. Example: runonce report --html report.html --since 24h")
    p.add_argument("--html", required=True, help="the page to write")
    p.add_argument("--since", default="24h", help="from this broker time: ISO 8601 or a duration ago (default 24h)")
    p.add_argument("--until", help="up to this broker time (same forms; default now)")
    p = add("verify", cmd_verify, "The oracle: account for every requested record exactly once.")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for undecided records")
    add("stats", cmd_stats, "Requested, approved, dropped by reason and tool, unkeyed, dead-lettered.")
