"""An agent's burst end to end: N charges submitted at once through the SDK
(``client.submit_many``), against a stream worker (the default runtime), a payments executor
and the sandbox answering at once, timed from the first submit until every handle has its
result. Beside it, in the same run on the same processes: the same burst submitted with
``client.submit`` in a loop (a round trip to the broker each), and the reference, N approved
charges produced straight to actions.approved (as the worker writes them) and timed until the
sandbox has them all: the executor alone.

Then where the burst's time went, on the broker's clock (CreateTime of each record): the
moment the last of the N was submitted, decided, attempted (its intent), and had its result,
each from the first submit, and the moment the agent's last handle resolved.

    .venv/bin/python bench/burst.py [--actions 1500] [--rounds 3]

Real broker and processes; a few calls warm every path up first and are not counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.agent_call import timestamps  # noqa: E402
from bench.executor_throughput import CHARGES, approve  # noqa: E402
from bench.local_broker import local_broker, payments_stack  # noqa: E402
from runonce.connectors.vendors.sandbox.local import LocalVendors  # noqa: E402
from runonce.sdk.client import ActionClient, Call  # noqa: E402

WARMUP = 20
MODES = ("submit_many", "alone", "submit_loop")


def say(msg: str) -> None:
    print(f"burst: {msg}", file=sys.stderr, flush=True)


def wait_charged(sandbox: LocalVendors, run: str, n: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while len(sandbox.vendors.ledger.requests(CHARGES, run, refused=False)) < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"the sandbox has {len(sandbox.vendors.ledger.requests(CHARGES, run))} of {n} charges")
        time.sleep(0.02)


def executor_alone(settings: Any, sandbox: LocalVendors, n: int) -> float:
    run = uuid.uuid4().hex[:8]
    started = time.monotonic()
    approve(settings.bootstrap_servers(), settings.partitions, n, run)
    wait_charged(sandbox, run, n)
    return n / (time.monotonic() - started)


def burst(client: ActionClient, bootstrap: str, n: int, many: bool) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    calls = [Call("charge_payment", {"card": "tok", "amount_cents": 100 + i}, f"burst-{run}-{i}") for i in range(n)]
    first_ms = time.time() * 1000
    started = time.monotonic()
    handles = (client.submit_many(calls) if many else
               [client.submit(c.tool, c.params, idempotency_key=c.idempotency_key) for c in calls])
    submitted_ms = time.time() * 1000
    for h in handles:
        outcome = h.result(300)
        assert outcome.status == "succeeded", outcome
    elapsed = time.monotonic() - started
    resolved_ms = time.time() * 1000
    at = timestamps(bootstrap)
    mine = [at[h.action_id] for h in handles]
    return {"actions_per_s": n / elapsed,
            "last_submitted_ms": submitted_ms - first_ms,
            "last_decided_ms": max(a["decided"] for a in mine) - first_ms,
            "last_intent_ms": max(a["intent"] for a in mine) - first_ms,
            "last_result_ms": max(a["result"] for a in mine) - first_ms,
            "last_resolved_ms": resolved_ms - first_ms}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with local_broker("burst", say) as settings, payments_stack(settings, "burst") as sandbox:
        runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        with ActionClient(settings.bootstrap_servers(), agent_id="bench") as client:
            for i in range(WARMUP):
                client.submit("charge_payment", {"card": "tok", "amount_cents": i},
                              idempotency_key=f"warm-{uuid.uuid4().hex}").result(120)
            for n in range(args.rounds):
                # the order rotates, so none always runs on a warmer machine
                for mode in MODES[n % len(MODES):] + MODES[:n % len(MODES)]:
                    if mode == "alone":
                        got = {"actions_per_s": executor_alone(settings, sandbox, args.actions)}
                    else:
                        got = burst(client, settings.bootstrap_servers(), args.actions, mode == "submit_many")
                    runs[mode].append(got)
                    say(f"round {n + 1} {mode}: " + ", ".join(f"{k} {v:,.0f}" for k, v in got.items()))
        med = {mode: statistics.median(r["actions_per_s"] for r in rs) for mode, rs in runs.items()}
        print(json.dumps({
            "actions": args.actions, "rounds": args.rounds,
            **{f"{mode}_per_s": round(v) for mode, v in med.items()},
            **{f"{mode}_over_alone": round(med[mode] / med["alone"], 2) for mode in MODES if mode != "alone"},
            **{f"{mode}_timeline_ms": {k: round(statistics.median(r[k] for r in runs[mode]))
                                       for k in runs[mode][0] if k != "actions_per_s"}
               for mode in MODES if mode != "alone"},
            "spread": {mode: [round(r["actions_per_s"]) for r in rs] for mode, rs in runs.items()},
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
