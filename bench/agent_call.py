"""What one tool call through runonce costs an agent: ``client.submit(...).result()`` for a
charge, one call at a time, against a stream worker (the default runtime), a payments
executor and the sandbox answering at once; beside it, the same sandbox called directly.
Then every call's path, stage by stage (p50 and p99 of each, and the slowest 1%'s path):
submit → decided (the record's CreateTime on actions.approved) → intent → result (on
actions.results) → the handle resolved. A transactional record's CreateTime is when it was
produced, before its transaction committed: a commit's time shows in the stage after it.

    .venv/bin/python bench/agent_call.py [--calls 300]

Real broker and processes; the first 20 calls warm up and are not counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_broker import local_broker, payments_stack  # noqa: E402
from runonce.connectors.executor import registry  # noqa: E402
from runonce.connectors.toolkit.base import ActionCall  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.reader import read_all  # noqa: E402
from runonce.sdk.client import ActionClient  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402

WARMUP = 20


def say(msg: str) -> None:
    print(f"agent-call: {msg}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


STAGES = ("submit_to_decided_ms", "decided_to_intent_ms", "intent_to_result_ms", "result_to_handle_ms")


def timestamps(bootstrap: str) -> dict[str, dict[str, int]]:
    """Per action id, the CreateTime (ms) of its decision, intent and result."""
    codec = Codec()
    found: dict[str, dict[str, int]] = {}
    for topic in (topics.APPROVED, topics.RESULTS):
        for r in read_all(bootstrap, topic, 60):
            if r.value is None:
                continue
            _, rec = codec.decode(r.value)
            if topic == topics.RESULTS:
                stage = "intent" if rec["status"] == "attempting" else "result"
                found.setdefault(rec["action_id"], {})[stage] = r.timestamp_ms
            else:
                found.setdefault(rec["request"]["action_id"], {})["decided"] = r.timestamp_ms
    return found


def path_ms(at: dict[str, int], submitted_ms: float, resolved_ms: float) -> dict[str, float]:
    return dict(zip(STAGES, (at["decided"] - submitted_ms, at["intent"] - at["decided"],
                             at["result"] - at["intent"], resolved_ms - at["result"])))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    with local_broker("agent-call", say) as settings, payments_stack(settings, "agent-call") as sandbox:
        direct = []
        stripe = registry.load(sandbox.write_connectors(), {})["payments"].connector
        for i in range(args.calls):
            t = time.perf_counter()
            key = f"direct-{i}-{uuid.uuid4().hex}"
            stripe.perform(ActionCall(key, "charge_payment", {"card": "tok", "amount_cents": 1}, key))
            direct.append((time.perf_counter() - t) * 1000)
        through: list[tuple[float, str, float, float]] = []
        with ActionClient(settings.bootstrap_servers(), agent_id="bench") as client:
            for i in range(WARMUP + args.calls):
                t, submitted_ms = time.perf_counter(), time.time() * 1000
                handle = client.submit("charge_payment", {"card": "tok", "amount_cents": 100 + i},
                                       idempotency_key=f"call-{uuid.uuid4().hex}")
                outcome = handle.result(60)
                assert outcome.status == "succeeded", outcome
                if i >= WARMUP:
                    through.append(((time.perf_counter() - t) * 1000, handle.action_id, submitted_ms,
                                    time.time() * 1000))
        ms = [m for m, *_ in through]
        at = timestamps(settings.bootstrap_servers())
        paths = [path_ms(at[action_id], sub, done) for _, action_id, sub, done in through]
        slowest = [path_ms(at[action_id], sub, done) for m, action_id, sub, done in sorted(through)
                   if m >= pct(ms, 0.99)]
        print(json.dumps({"calls": args.calls,
                          "vendor_direct_ms": {"p50": pct(direct, 0.5), "p99": pct(direct, 0.99)},
                          "through_runonce_ms": {"p50": pct(ms, 0.5), "p99": pct(ms, 0.99),
                                                 "mean": round(statistics.fmean(ms), 1)},
                          "stages_ms": {stage: {"p50": pct([p[stage] for p in paths], 0.5),
                                                "p99": pct([p[stage] for p in paths], 0.99)}
                                        for stage in STAGES},
                          "slowest_1pct_paths_ms": [{k: round(v, 1) for k, v in p.items()} for p in slowest]},
                         indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
