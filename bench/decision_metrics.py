"""What the per-decision latency metric costs the stream job's hot path.

``runonce_decision_latency_seconds`` reads the wall clock and observes a histogram for every
decision (``streams/processor.py``, ``_Stage.final``). This times the runtime-neutral
pipeline (decode, validate, state, the pure core, encode; in-memory state, no Kafka) over
the same pre-encoded actions, with the observation on and replaced by a no-op, interleaved,
and reports microseconds per action for each and their difference.

    .venv/bin/python bench/decision_metrics.py [--actions 50000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runonce.core.policy import PolicyBook  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.partitioner import partition_for  # noqa: E402
from runonce.sdk.submit import build_request  # noqa: E402
from runonce.streams.metrics import StreamMetrics  # noqa: E402
from runonce.streams.ports import Inbound  # noqa: E402
from runonce.streams.processor import Pipeline  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402
from tests.support.memory import MemoryStore  # noqa: E402

PARTITIONS = 6
T0_MS = 1_800_000_000_000


class _NoObservation:
    def observe(self, _value: float) -> None:
        return None


def _inbounds(codec: Codec, n: int) -> list[Inbound]:
    """Keyed actions without scope rules: one pass through stage 1 each, every tenth a repeat."""
    out = []
    for i in range(n):
        key = f"k-{i - i % 10 if i % 10 == 9 else i}"
        record = build_request("update_salesforce_field", {"id": i % 1000, "field": "stage"}, agent_id="bench",
                               idempotency_key=key, requested_at_ms=T0_MS + i)
        out.append(Inbound(topics.REQUESTED, partition_for(key.encode(), PARTITIONS), i, T0_MS + i,
                           key.encode(), codec.encode("ActionRequested", record)))
    return out


def _run(inbounds: list[Inbound], observe: bool) -> float:
    codec = Codec()
    metrics = StreamMetrics()
    if not observe:
        metrics.age = _NoObservation()  # type: ignore[assignment]  # the stages observe nothing
    pipeline = Pipeline(codec=codec, policies=PolicyBook.load(), partitions=PARTITIONS, keys=MemoryStore(),
                        scopes=MemoryStore(), holds=MemoryStore(), metrics=metrics, decides_scope_here=lambda _p: True)
    started = time.perf_counter()
    for inbound in inbounds:
        pipeline.process(inbound)
    return (time.perf_counter() - started) / len(inbounds) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    inbounds = _inbounds(Codec(), args.actions)
    on, off = [], []
    for r in range(args.rounds):
        # each round runs both, in alternating order, so neither always runs on a warmer process
        for observe in ((True, False) if r % 2 == 0 else (False, True)):
            (on if observe else off).append(_run(inbounds, observe=observe))
        print(f"round {r + 1}/{args.rounds}: {on[-1]:.2f} µs/action with the observation, {off[-1]:.2f} without",
              flush=True)
    cost = statistics.median(a - b for a, b in zip(on, off))
    m_off = statistics.median(off)
    print(f"{args.rounds} rounds of {args.actions} actions: {statistics.median(on):.2f} µs/action with the "
          f"observation, {m_off:.2f} without (medians); the metric costs {cost:.2f} µs/action "
          f"({cost / m_off:.1%}; median of the rounds' differences)")


if __name__ == "__main__":
    main()
