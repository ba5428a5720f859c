"""The stream job's spans, made off its decision path: the worker writes each decision's W3C
context onto its records as before (its span id its own, its parent the request's), and hands
the span's few facts to an exporter process of its own (telemetry/exporter.py), which builds
the OpenTelemetry spans and sends them over OTLP. Building and encoding the spans in the worker
cost it 36% of its throughput at 100% sampling (the SDK's span objects, +34 µs a decision, and
OTLP encoding, +161 µs, in the worker's own process under one GIL: bench/trace_where.py);
handing off costs a tuple a decision and a pipe write a batch.

What it keeps of OpenTelemetry's: the sampler the environment configures
(``OTEL_TRACES_SAMPLER``, read by the SDK), applied as the SDK applies it (a parent-based
sampler follows the request's sampled flag; a root, or any other sampler, asks the sampler);
the span names, kinds, attributes, links and times ``otel.py`` gives the same spans. The
exporter runs only when the CPU is otherwise idle (Linux's SCHED_IDLE): under a backlog it
waits, and its spans are sent when the worker has room (at most ``MAX_BUFFERED`` wait in the
worker; beyond that spans are dropped and counted, as the SDK's batch processor drops beyond
its queue)."""

from __future__ import annotations

import logging
import os
import pickle
import random
import struct
import subprocess
import sys
import threading
import time
from typing import IO, Protocol

from runonce.wire.trace import TRACEPARENT, TRACESTATE, Decided, TraceHeaders, Waited, carried

log = logging.getLogger("runonce.telemetry")

#: spans waiting in the worker for the exporter at most; beyond, dropped and counted
MAX_BUFFERED = 50_000
#: spans a batch to the exporter at most, and how often the batch goes at least
BATCH_SPANS = 512
FLUSH_INTERVAL_S = 0.2
#: a frame on the pipe: its length, then a pickled list of span facts
FRAME = struct.Struct(">I")

#: one span's facts, as few as the decision path can hand over, in plain values (a frozen
#: dataclass pickles field by field, several times slower): what the span is of (``Decided``'s
#: or ``Waited``'s fields, after "decide" or "wait"), its trace id, its span id and its
#: parent's span id ("" for a root) in lowercase hex, the tracestate, and when (ns; a wait's
#: times are its own). The exporter builds the span's name, attributes and link from them, as
#: otel.py names the same spans.
SpanFacts = tuple[tuple[object, ...], str, str, str, str, int]


class RootSampler(Protocol):
    def sampled(self, trace_id: int, name: str) -> bool:
        """Whether a span with no parent, or with a parent this sampler does not follow, is sampled."""
        ...


class Sink(Protocol):
    def put(self, facts: SpanFacts) -> None:
        """Take a sampled span's facts; never blocks the caller."""
        ...


class HandedOffSpans:
    """``DecisionSpans`` for the stream job (runonce/telemetry/spans.py)."""

    recording = True

    def __init__(self, sampler: RootSampler, sink: Sink, *, follows_parent: bool) -> None:
        """``follows_parent``: the sampler is parent-based (the SDK's default): a request's
        sampled flag decides, and only a root asks ``sampler``."""
        self.sampler, self.sink, self.follows_parent = sampler, sink, follows_parent
        self._ids = random.Random()  # the SDK's ids are random.getrandbits too

    def decide(self, request: TraceHeaders, decided: Decided) -> TraceHeaders:
        return self._span(request, "decide " + decided.tool, (
            "decide", decided.tool, decided.action_id, decided.outcome, decided.reason, decided.repeat_of,
            decided.first_traceparent))

    def wait(self, held: TraceHeaders, waited: Waited) -> TraceHeaders:
        return self._span(held, "wait_for_approval " + waited.tool, (
            "wait", waited.tool, waited.action_id, waited.held_at_ms, waited.ended_at_ms, waited.change,
            waited.decided_by))

    def _span(self, parent: TraceHeaders, name: str, of: tuple[object, ...]) -> TraceHeaders:
        found = carried(parent)
        span_hex = f"{self._ids.getrandbits(64):016x}"
        if found:
            traceparent = found[0][1]  # b"00-<trace id>-<span id>-<flags>", its form checked
            trace_hex, parent_hex = traceparent[3:35].decode("ascii"), traceparent[36:52].decode("ascii")
            sampled = traceparent[53:55] in _SAMPLED_FLAGS if self.follows_parent else \
                self.sampler.sampled(int(trace_hex, 16), name)
            state = found[1][1].decode("ascii") if len(found) > 1 else ""
        else:
            trace_id = self._ids.getrandbits(128)
            trace_hex, parent_hex, state = f"{trace_id:032x}", "", ""
            sampled = self.sampler.sampled(trace_id, name)
        if sampled:
            self.sink.put((of, trace_hex, span_hex, parent_hex, state, time.time_ns()))
        headers: TraceHeaders = ((TRACEPARENT, f"00-{trace_hex}-{span_hex}-{'01' if sampled else '00'}".encode("ascii")),)
        return (*headers, (TRACESTATE, state.encode("ascii"))) if state else headers


#: the W3C flags whose sampled bit is set (the low bit of the last two hex digits)
_SAMPLED_FLAGS = frozenset(f"{flags:02x}".encode("ascii") for flags in range(256) if flags & 1)


class ExporterPipe:
    """A ``Sink``: the exporter process (``python -m runonce.telemetry.exporter``), fed batches
    of span facts over its stdin by a thread of this process, so a decision never waits for
    it. The exporter inherits the ``OTEL_*`` environment (its endpoint, headers, timeouts);
    one that exits is started again at the next batch."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.dropped = 0
        self._spans: list[SpanFacts] = []
        self._lock = threading.Lock()
        self._due = threading.Event()
        self._stopping = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdin()  # started with the worker: its start-up is not paid in the middle of work
        self._thread = threading.Thread(target=self._run, name="runonce-span-handoff", daemon=True)
        self._thread.start()

    def put(self, facts: SpanFacts) -> None:
        with self._lock:
            if len(self._spans) >= MAX_BUFFERED:
                self.dropped += 1
                return
            self._spans.append(facts)
            if len(self._spans) >= BATCH_SPANS:
                self._due.set()

    @property
    def pid(self) -> int | None:
        """The exporter process's, while one runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def close(self, timeout_s: float = 10.0) -> None:
        """Send what waits, and let the exporter send it before it ends."""
        self._stopping.set()
        self._due.set()
        self._thread.join(timeout_s)
        if self._proc is not None and self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout_s)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()

    def _run(self) -> None:
        warned_drops = 0
        while True:
            self._due.wait(FLUSH_INTERVAL_S)
            self._due.clear()
            with self._lock:
                spans, self._spans = self._spans, []
            for start in range(0, len(spans), BATCH_SPANS):
                self._send(spans[start:start + BATCH_SPANS])
            if self.dropped > warned_drops:
                log.warning("traces: %d spans dropped so far: more than %d waited for the exporter", self.dropped,
                            MAX_BUFFERED)
                warned_drops = self.dropped
            if self._stopping.is_set():
                return

    def _send(self, batch: list[SpanFacts]) -> None:
        payload = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        for _ in range(2):  # an exporter that exited is started again, once a batch
            stdin = self._stdin()
            try:
                stdin.write(FRAME.pack(len(payload)) + payload)
                stdin.flush()
                return
            except OSError as exc:  # BrokenPipeError: it exited since the check
                log.warning("traces: the span exporter is gone (%s); starting it again", exc)
                self._gone()
        self.dropped += len(batch)

    def _gone(self) -> None:
        """Forget an exporter that can take nothing more, reaped, never left a zombie."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def _stdin(self) -> IO[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-m", "runonce.telemetry.exporter", "--service", self.service],
                                          stdin=subprocess.PIPE, env=os.environ.copy())
        assert self._proc.stdin is not None
        return self._proc.stdin
