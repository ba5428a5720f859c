"""What one executor sustains writing to a real PostgreSQL through the ``postgres`` kind: N
approved refunds, each one transaction (look for the marker, the INSERT, the marker, COMMIT),
timed from the first approved record until every action has its final result on
actions.results, then counted on the refunds table itself (one row per action). Beside it, the
connector alone with as many calls in flight, no Kafka.

    .venv/bin/python bench/database_write.py [--actions 2000] [--max-in-flight 16]

Real broker; the executor is its own process; PostgreSQL is Debian's (scripts/setup.sh), a
cluster of the bench's own in a temporary folder, with fsync on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench.local_broker import OUT, approve_many, assigned_executor, local_broker  # noqa: E402
from runonce.connectors.executor import registry  # noqa: E402
from runonce.connectors.toolkit.base import ActionCall  # noqa: E402
from runonce.connectors.vendors.sandbox.local_postgres import LocalPostgres  # noqa: E402
from runonce.ops.demo import REFUND_SQL, REFUNDS_TABLE  # noqa: E402
from runonce.ops.watch import ResultWatcher  # noqa: E402


def say(msg: str) -> None:
    print(f"database-write: {msg}", file=sys.stderr, flush=True)


def alone(path: Path, env: dict[str, str], n: int, in_flight: int) -> float:
    connector = registry.load(path, env)["orders_db"].connector
    run = uuid.uuid4().hex[:6]

    def one(i: int) -> None:
        connector.perform(ActionCall(f"alone-{run}-{i}", "issue_refund",
                                     {"order_id": f"alone-{run}-{i}", "amount_cents": 100}, f"alone-{run}-{i}"))

    started = time.monotonic()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(one, range(n)))
    return n / (time.monotonic() - started)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=2000)
    ap.add_argument("--max-in-flight", type=int, default=16)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="runonce-bench-db-"))
    postgres = LocalPostgres(folder / "postgres").start()
    try:
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            conn.execute(REFUNDS_TABLE)
        path = folder / "connectors.toml"
        path.write_text(f'[vendors.orders_db]\nkind = "postgres"\ndsn = {{ env = "RUNONCE_BENCH_ORDERS_DSN" }}\n'
                        f'[vendors.orders_db.tools.issue_refund]\nsql = "{REFUND_SQL}"\n')
        secrets = {"RUNONCE_BENCH_ORDERS_DSN": postgres.dsn}
        plain = alone(path, secrets, min(args.actions, 1000), args.max_in_flight)
        say(f"the connector alone, {args.max_in_flight} in flight: {plain:.0f}/s")
        with local_broker("database-write", say) as settings:
            env = {**settings.with_(connectors_file=path).child_env(os.environ), **secrets,
                   "RUNONCE_EXECUTOR_MAX_IN_FLIGHT": str(args.max_in_flight)}
            proc = assigned_executor(env, "orders_db", f"bench-db-{uuid.uuid4().hex[:6]}",
                                     OUT / "database-write.log")
            results = ResultWatcher(settings.bootstrap_servers())
            run = uuid.uuid4().hex[:8]
            try:
                started = time.monotonic()
                ids = approve_many(settings.bootstrap_servers(), settings.partitions,
                                   (("issue_refund", {"order_id": f"{run}-{i}", "amount_cents": 100 + i},
                                     f"refund-{run}-{i}") for i in range(args.actions)))
                deadline = time.monotonic() + 600
                statuses: dict[str, int] = {}
                for action_id in ids:
                    status = results.wait(action_id, deadline)["status"]
                    statuses[status] = statuses.get(status, 0) + 1
                rate = args.actions / (time.monotonic() - started)
            finally:
                results.close()
                proc.terminate()
                proc.wait(60)
        with psycopg.connect(postgres.dsn) as conn:
            found = conn.execute("SELECT count(*), count(DISTINCT order_id) FROM refunds WHERE order_id LIKE %s",
                                 (f"{run}-%",)).fetchone()
        assert found is not None
        row: dict[str, Any] = {"server": "PostgreSQL 15 (Debian), fsync on", "actions": args.actions,
                               "max_in_flight": args.max_in_flight, "actions_per_s": round(rate),
                               "connector_alone_per_s": round(plain), "results": statuses,
                               "rows": found[0], "orders": found[1]}
        assert row["rows"] == row["orders"] == args.actions, row
        say(json.dumps(row))
    finally:
        postgres.stop()
    print(json.dumps([row], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
