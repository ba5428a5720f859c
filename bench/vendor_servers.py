"""What one executor sustains against the vendors' own servers, not runonce's sandbox:
N approved charges to Stripe's ``stripe-mock`` (form-encoded, a secret key, an
Idempotency-Key each), and N approved emails to Mailpit requiring STARTTLS and AUTH, twice:
on kept sessions (``SmtpSessions``, the connector's default) and, the reference, with a new
session (a connect, a TLS handshake and a login) per message (``messages_per_session = 1``).
Timed from the first approved record until every action has its final result on
actions.results; the emails are also counted through Mailpit's own API (each recipient
exactly once). Beside each, the connector alone with as many calls in flight, no Kafka.

    .venv/bin/python bench/vendor_servers.py [--actions 2000] [--max-in-flight 16]

Real broker; the executor is its own process; stripe-mock and Mailpit as scripts/setup.sh
installs them.
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


from bench.local_broker import OUT, approve_many, assigned_executor, local_broker  # noqa: E402
from runonce.connectors.executor import registry  # noqa: E402
from runonce.connectors.toolkit.base import ActionCall  # noqa: E402
from runonce.ops.watch import ResultWatcher  # noqa: E402
from runonce.settings import Settings  # noqa: E402
from runonce.testkit.vendor_servers import Mailpit, StripeMock  # noqa: E402

SECRETS = {"RUNONCE_BENCH_STRIPE_KEY": f"sk_test_{uuid.uuid4().hex}"}


def say(msg: str) -> None:
    print(f"vendor-servers: {msg}", file=sys.stderr, flush=True)


def params_for(tool: str, run: str, i: int) -> dict[str, Any]:
    if tool == "charge_payment":
        return {"card": "tok_visa", "amount_cents": 100 + i}
    return {"to": f"lead-{run}-{i}@prospect.example", "subject": "Quick intro", "body": f"message {i}"}


def alone(path: Path, vendor: str, tool: str, n: int, in_flight: int) -> float:
    """Calls per second the connector alone makes, ``in_flight`` at once."""
    connector = registry.load(path, {**os.environ, **SECRETS})[vendor].connector
    run = uuid.uuid4().hex[:6]

    def one(i: int) -> None:
        key = f"alone-{run}-{i}"
        connector.perform(ActionCall(key, tool, params_for(tool, f"alone-{run}", i), key))

    started = time.monotonic()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(one, range(n)))
    return n / (time.monotonic() - started)


def through_executor(settings: Settings, path: Path, vendor: str, tool: str, n: int,
                     in_flight: int) -> tuple[float, dict[str, int], str]:
    env = {**settings.with_(connectors_file=path).child_env(os.environ), **SECRETS,
           "RUNONCE_EXECUTOR_MAX_IN_FLIGHT": str(in_flight)}
    log_path = OUT / f"vendor-servers-{vendor}.log"
    proc = assigned_executor(env, vendor, f"bench-{vendor}-{uuid.uuid4().hex[:6]}", log_path)
    results = ResultWatcher(settings.bootstrap_servers())
    run = uuid.uuid4().hex[:8]
    try:
        started = time.monotonic()
        ids = approve_many(settings.bootstrap_servers(), settings.partitions,
                           ((tool, params_for(tool, run, i), f"{run}-{i}") for i in range(n)))
        deadline = time.monotonic() + 600
        statuses: dict[str, int] = {}
        for action_id in ids:
            status = results.wait(action_id, deadline)["status"]
            statuses[status] = statuses.get(status, 0) + 1
        return n / (time.monotonic() - started), statuses, run
    finally:
        results.close()
        proc.terminate()
        proc.wait(60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=2000)
    ap.add_argument("--max-in-flight", type=int, default=16)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="runonce-bench-vendors-"))
    stripe = StripeMock(folder / "stripe-mock").start()
    mailpit = Mailpit(folder / "mailpit", "starttls", "bench", uuid.uuid4().hex).start()
    path, fresh = folder / "connectors.toml", folder / "connectors-fresh-sessions.toml"
    path.write_text(f'[vendors.payments]\nkind = "stripe"\nbase_url = "{stripe.url}"\n'
                    f'api_key = {{ env = "RUNONCE_BENCH_STRIPE_KEY" }}\n\n' + mailpit.connectors_toml())
    fresh.write_text(mailpit.connectors_toml() + "messages_per_session = 1\n")
    SECRETS.update(mailpit.secrets_env())
    rows = []
    try:
        with local_broker("vendor-servers", say) as settings:
            for vendor, tool, server, path in (
                    ("payments", "charge_payment", "stripe-mock", path),
                    ("email", "send_email", "Mailpit, STARTTLS + AUTH, a new session per message", fresh),
                    ("email", "send_email", "Mailpit, STARTTLS + AUTH, kept sessions", path)):
                plain = alone(path, vendor, tool, min(args.actions, 1000), args.max_in_flight)
                say(f"{server}: the connector alone, {args.max_in_flight} in flight: {plain:.0f}/s")
                rate, statuses, run = through_executor(settings, path, vendor, tool, args.actions,
                                                       args.max_in_flight)
                row: dict[str, Any] = {"vendor": vendor, "server": server, "actions": args.actions,
                                       "max_in_flight": args.max_in_flight, "actions_per_s": round(rate),
                                       "connector_alone_per_s": round(plain), "results": statuses}
                if vendor == "email":
                    received = {w: k for w, k in mailpit.received_by().items() if run in w}
                    row.update(messages_received=sum(received.values()),
                               recipients_with_two=sum(1 for k in received.values() if k > 1))
                    assert row["messages_received"] == args.actions and not row["recipients_with_two"], row
                say(json.dumps(row))
                rows.append(row)
    finally:
        mailpit.stop()
        stripe.stop()
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
