"""Where tracing's cost goes on the stream job's hot path: the runtime-neutral pipeline
(decode, validate, state, the pure core, encode; in-memory state, no Kafka; as
bench/decision_metrics.py) over the same pre-encoded actions, per decision, with

* **off**: no tracer (the reference);
* **made**: each decision a sampled span, exported nowhere (the span and its context alone);
* **encoded**: the same, batched by the SDK's ``BatchSpanProcessor`` and encoded as OTLP
  protobuf by an exporter that then drops the bytes (all but the HTTP post);
* **1% made+encoded**: ``TraceIdRatioBased(0.01)``.
* **handed off**: what the worker does since 2026-12-07 (runonce/telemetry/handoff.py): each
  decision's context and span facts, pickled in batches onto a pipe as the worker's hand-off
  thread writes them, read by nobody here (the exporter process's work is not the worker's).

Interleaved rounds, order rotating; microseconds per action, medians.

    .venv/bin/python bench/trace_where.py [--actions 50000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased  # noqa: E402

from bench.decision_metrics import PARTITIONS, _inbounds  # noqa: E402
from runonce.core.policy import PolicyBook  # noqa: E402
from runonce.streams.metrics import StreamMetrics  # noqa: E402
from runonce.streams.ports import Inbound  # noqa: E402
from runonce.streams.processor import Pipeline  # noqa: E402
from runonce.telemetry.handoff import BATCH_SPANS, HandedOffSpans, SpanFacts  # noqa: E402
from runonce.telemetry.otel import OtelSpans  # noqa: E402
from runonce.telemetry.spans import NO_SPANS, DecisionSpans  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402
from tests.support.memory import MemoryStore  # noqa: E402

MODES = ("off", "made", "encoded", "1%", "handed off")


class _EncodeOnly(SpanExporter):
    """OTLP's protobuf encoding of each batch, then nothing: the exporter's work without the post."""

    def __init__(self) -> None:
        self.bytes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.bytes += len(encode_spans(spans).SerializeToString())
        return SpanExportResult.SUCCESS


class _PickledAway:
    """The hand-off thread's work (pickling a batch) in the decision's thread, then nothing."""

    def __init__(self) -> None:
        self.batch: list[SpanFacts] = []
        self.bytes = 0

    def put(self, facts: SpanFacts) -> None:
        self.batch.append(facts)
        if len(self.batch) >= BATCH_SPANS:
            self.bytes += len(pickle.dumps(self.batch, protocol=pickle.HIGHEST_PROTOCOL))
            self.batch = []


class _AlwaysOn:
    def sampled(self, trace_id: int, name: str) -> bool:
        return True


def _spans(mode: str) -> tuple[DecisionSpans, TracerProvider | None]:
    if mode == "off":
        return NO_SPANS, None
    if mode == "handed off":
        return HandedOffSpans(_AlwaysOn(), _PickledAway(), follows_parent=True), None
    provider = TracerProvider(sampler=TraceIdRatioBased(0.01)) if mode == "1%" else TracerProvider()
    if mode != "made":
        provider.add_span_processor(BatchSpanProcessor(_EncodeOnly(), max_queue_size=1 << 20))
    return OtelSpans(provider), provider


def _run(inbounds: list[Inbound], mode: str) -> float:
    spans, provider = _spans(mode)
    pipeline = Pipeline(codec=Codec(), policies=PolicyBook.load(), partitions=PARTITIONS, keys=MemoryStore(),
                        scopes=MemoryStore(), holds=MemoryStore(), metrics=StreamMetrics(),
                        decides_scope_here=lambda _p: True,
                        spans=spans)
    started = time.perf_counter()
    for inbound in inbounds:
        pipeline.process(inbound)
    if provider is not None:
        provider.force_flush(120_000)  # the export thread's work is the worker's too (one GIL)
        provider.shutdown()
    return (time.perf_counter() - started) / len(inbounds) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    inbounds = _inbounds(Codec(), args.actions)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for r in range(args.rounds):
        order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
        for mode in order:
            times[mode].append(_run(inbounds, mode))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{m} {times[m][-1]:.1f}" for m in MODES) + " µs/action",
              flush=True)
    off = statistics.median(times["off"])
    print(f"{args.rounds} rounds of {args.actions} actions, µs/action (medians): " + ", ".join(
        f"{m} {statistics.median(times[m]):.1f} ({statistics.median(times[m]) / off:.2f}x)" for m in MODES))


if __name__ == "__main__":
    main()
