"""How fast one payments executor performs approved charges: N approved decisions produced
straight to actions.approved once the executor is assigned, timed from the first until the
sandbox has received a charge for every one of them (and none twice). Beside it, what the
sandbox itself serves to a plain concurrent HTTP client in the same run, with as many
requests in flight as the executor may have.

    .venv/bin/python bench/executor_throughput.py [--actions 5000] [--delay-ms 0]
        [--max-in-flight 16] [--max-batch 500] [--vendor-limit 0] [--receipts KEY.pem --rounds 2]

``--delay-ms`` makes the sandbox answer each charge that late (a real vendor's 10-300 ms).
``--max-batch 1 --max-in-flight 1`` is the executor as it was: one action at a time, an
intent and a result transaction each. ``--vendor-limit N`` makes the sandbox refuse charges
beyond N/s (429 with Retry-After) and gives the executor that rate (RUNONCE_VENDOR_LIMITS;
``--our-rate 0``: none, only the vendor's 429s):
the row then says how many calls were refused and the longest run of refusals one charge met.
``--receipts KEY.pem`` measures what signing outcomes costs: the executor without receipts
and with them (RUNONCE_RECEIPTS_KEY), ``--rounds`` times each in turns, medians compared.
Real broker; the executor is its own process.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from bench.local_broker import OUT, approve_many, assigned_executor, local_broker  # noqa: E402
from bench.vendor_servers import params_for  # noqa: E402
from runonce.connectors.executor import registry  # noqa: E402
from runonce.connectors.toolkit.base import ActionCall  # noqa: E402
from runonce.connectors.vendors.sandbox.faults import VendorFault  # noqa: E402
from runonce.connectors.vendors.sandbox.local import LocalVendors  # noqa: E402
from runonce.settings import Settings  # noqa: E402

CHARGES = "/v1/charges"


def say(msg: str) -> None:
    print(f"executor-throughput: {msg}", file=sys.stderr, flush=True)


def sandbox_alone(sandbox: LocalVendors, n: int, in_flight: int) -> float:
    """Charges per second the sandbox serves to the Stripe connector alone, ``in_flight`` threads."""
    stripe = registry.load(sandbox.write_connectors(), {})["payments"].connector

    def charge(i: int) -> None:
        key = f"plain-{i}-{uuid.uuid4().hex}"
        stripe.perform(ActionCall(key, "charge_payment", {"card": "tok", "amount_cents": 1}, key))

    started = time.monotonic()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(charge, range(n)))
    return n / (time.monotonic() - started)


def approve(bootstrap: str, partitions: int, n: int, run: str) -> None:
    """N approved charges straight to actions.approved, as the stream job writes them."""
    approve_many(bootstrap, partitions,
                 (("charge_payment", params_for("charge_payment", run, i), f"{run}-{i}") for i in range(n)))


def run_executor(settings: Settings, sandbox: LocalVendors, n: int, max_batch: int, max_in_flight: int,
                 our_rate: int, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    vendors = sandbox.vendors
    env = settings.with_(connectors_file=sandbox.write_connectors()).child_env(os.environ)
    env.update(RUNONCE_EXECUTOR_MAX_BATCH=str(max_batch), RUNONCE_EXECUTOR_MAX_IN_FLIGHT=str(max_in_flight))
    env.update(extra_env or {})
    if our_rate:
        env["RUNONCE_VENDOR_LIMITS"] = f"payments:per_s={our_rate}"
    log_path = OUT / f"executor-throughput-{max_batch}-{max_in_flight}.log"
    group = f"runonce-exec-bench-{uuid.uuid4().hex[:6]}"
    proc = assigned_executor(env, "payments", group, log_path)
    run = uuid.uuid4().hex[:8]
    try:
        started = time.monotonic()
        producer = threading.Thread(target=approve, args=(settings.bootstrap_servers(), settings.partitions, n, run))
        producer.start()
        seen = 0
        last_progress = time.monotonic()
        while seen < n:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.05)
            now_seen = len(vendors.ledger.requests(CHARGES, run, refused=False))
            if now_seen != seen:
                seen, last_progress = now_seen, time.monotonic()
            assert time.monotonic() - last_progress < 120, f"stuck at {seen} of {n}\n{log_path.read_text()[-3000:]}"
        elapsed = time.monotonic() - started
        producer.join()
    finally:
        proc.terminate()
        proc.wait(60)
    keys = [r.key for r in vendors.ledger.requests(CHARGES, run, refused=False)]
    assert len(keys) == len(set(keys)) == n, f"{len(keys)} charge requests for {len(set(keys))} keys of {n}"
    assert len({e.key for e in vendors.ledger.effects("payments") if run in e.key}) == n
    by_key: dict[str, list[int]] = {}
    for r in vendors.ledger.requests(CHARGES, run):
        by_key.setdefault(r.key, []).append(r.refused)
    return {"max_batch": max_batch, "max_in_flight": max_in_flight, "actions": n,
            "seconds": round(elapsed, 2), "actions_per_s": round(n / elapsed),
            "refused_429": sum(1 for answers in by_key.values() for a in answers if a),
            "longest_refusal_run": max((len(list(g)) for answers in by_key.values()
                                        for refused, g in itertools.groupby(answers) if refused), default=0)}


def receipts_cost(settings: Settings, sandbox: LocalVendors, args: argparse.Namespace) -> dict[str, Any]:
    """The executor without receipts and with them, in turns: medians and their ratio."""
    rates: dict[str, list[int]] = {"off": [], "on": []}
    for i in range(args.rounds):
        for variant, env in (("off", {}), ("on", {"RUNONCE_RECEIPTS_KEY": str(args.receipts)})):
            row = run_executor(settings, sandbox, args.actions, args.max_batch, args.max_in_flight, 0, env)
            rates[variant].append(row["actions_per_s"])
            say(f"round {i + 1}, receipts {variant}: {row['actions_per_s']} actions/s")
    off, on = (sorted(r)[len(r) // 2] for r in (rates["off"], rates["on"]))
    return {"actions": args.actions, "rounds": args.rounds, "off_per_s": rates["off"], "on_per_s": rates["on"],
            "median_off_per_s": off, "median_on_per_s": on, "on_of_off": round(on / off, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=5000)
    ap.add_argument("--delay-ms", type=int, default=0, help="the sandbox answers each charge this late")
    ap.add_argument("--max-in-flight", type=int, default=16)
    ap.add_argument("--max-batch", type=int, default=500)
    ap.add_argument("--vendor-limit", type=int, default=0,
                    help="the sandbox refuses charges beyond this many a second (429)")
    ap.add_argument("--our-rate", type=int, default=None,
                    help="the executor's rate for the vendor (default: --vendor-limit; 0: none, only its 429s)")
    ap.add_argument("--receipts", type=Path, default=None,
                    help="an Ed25519 key file: compare the executor without receipts and with them")
    ap.add_argument("--rounds", type=int, default=2, help="with --receipts: runs of each, in turns")
    args = ap.parse_args()
    with local_broker("executor-throughput", say) as settings:
        sandbox = LocalVendors(Path(tempfile.mkdtemp(prefix='runonce-bench-'))).start()
        vendors = sandbox.vendors
        try:
            if args.delay_ms:
                vendors.state.faults.add(VendorFault(CHARGES, delay_s=args.delay_ms / 1000))
            plain = sandbox_alone(sandbox, min(args.actions, 2000), args.max_in_flight)
            say(f"the sandbox alone, {args.max_in_flight} requests in flight: {plain:.0f} charges/s")
            if args.vendor_limit:
                vendors.state.faults.add(VendorFault(CHARGES, rate_limit_per_s=args.vendor_limit))
            if args.receipts is not None:
                print(json.dumps(receipts_cost(settings, sandbox, args), indent=2))
                return 0
            row = run_executor(settings, sandbox, args.actions, args.max_batch, args.max_in_flight,
                               args.vendor_limit if args.our_rate is None else args.our_rate)
            row.update(delay_ms=args.delay_ms, sandbox_alone_per_s=round(plain),
                       of_sandbox=round(row["actions_per_s"] / plain, 2))
            if args.vendor_limit:
                row.update(vendor_limit_per_s=args.vendor_limit, our_rate_per_s=args.vendor_limit if args.our_rate is None else args.our_rate,
                           of_limit=round(row["actions_per_s"] / args.vendor_limit, 3))
            print(json.dumps(row, indent=2))
        finally:
            sandbox.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
