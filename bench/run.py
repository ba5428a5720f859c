"""Side-by-side benchmark on one local broker: the same workload through
(a) runonce's stream job on its default runtime (transactional, exactly-once),
(a') runonce on ``--runtime faust``, (b) the same dedup written with Quix Streams
(exactly-once), (c) a bare confluent-kafka passthrough (the ceiling of one Python process).

    bash bench/run.sh [--actions 200000] [--rate 2000] [--rate 5000] [--latency-seconds 20] [--rounds 3]

Writes bench/RESULTS.md. Throughput: a pre-produced backlog drained by one worker process,
two ways: from the worker's start to the last output (startup and any batching delay of the
first output counted), and from the first to the last output record, both on the broker's
clock (LogAppendTime; the broker is local, so one clock). With ``--rounds`` > 1 the
implementations run interleaved, one after the other in each round, and the table shows
medians with the spread. Latency: at each fixed offered load, requested -> decided, both
broker timestamps.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

from runonce.core.policy import PolicyBook  # noqa: E402
from runonce.devbroker.broker import Broker  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.clients import producer_config  # noqa: E402
from runonce.kafka.reader import read_all  # noqa: E402
from runonce.kafka.topics import admin_client, create_topics  # noqa: E402
from runonce.ops import child
from runonce.settings import Settings  # noqa: E402
from runonce.testkit.workload import generate  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402
from runonce.wire.keys import request_key  # noqa: E402

POLICIES = PolicyBook.load()


def say(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


@dataclass
class Impl:
    name: str
    input: str
    outputs: tuple[str, ...]
    argv: list[str]
    state_dir: Path | None = None
    results: dict[str, Any] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)


def _short(v: Any) -> Any:
    return round(v) if isinstance(v, float) and abs(v) >= 10 else v


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure: the median over rounds, and (with more than one round) its min..max spread."""
    out: dict[str, Any] = {}
    for key in rounds[0] if rounds else []:
        values = [r[key] for r in rounds if key in r]
        med = statistics.median(values)
        out[key] = round(med) if isinstance(med, float) and key != "state_mb" else med
        if len(values) > 1:
            out[f"{key}_spread"] = f"{_short(min(values))}..{_short(max(values))}"
    return out


def ensure_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = admin_client(bootstrap)
    existing = admin.list_topics(timeout=10).topics
    new = [NewTopic(n, partitions, 1, config={"message.timestamp.type": "LogAppendTime"})
           for n in names if n not in existing]
    if new:
        for fut in admin.create_topics(new).values():
            fut.result()
    # runonce's own output topics: broker timestamps too, so latency is one clock.
    for name in (topics.APPROVED, topics.DROPPED):
        res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
            ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET)])
        for fut in admin.incremental_alter_configs([res]).values():
            fut.result()


def fresh_runonce_topics(bootstrap: str, partitions: int, state_dirs: list[Path]) -> None:
    """runonce's two runtimes share their topics (state changelogs and consumer group too): each
    runonce run starts on new, empty ones and an empty state folder, as Quix and the bare loop
    do on theirs. Otherwise a run restores what the other runtime wrote before it, counted in
    its throughput from start."""
    admin = admin_client(bootstrap)
    names = [spec.name for spec in topics.TOPICS]
    for fut in admin.delete_topics(names, operation_timeout=30).values():
        fut.result()
    deadline = time.monotonic() + 60
    while set(names) & set(admin.list_topics(timeout=10).topics):
        if time.monotonic() > deadline:
            raise SystemExit("runonce's topics were not deleted within 60 s")
        time.sleep(0.5)
    while True:  # the controller may still be finishing the deletion
        try:
            create_topics(bootstrap, partitions)
            break
        except Exception as exc:  # noqa: BLE001  TOPIC_ALREADY_EXISTS while a deletion completes
            if time.monotonic() > deadline:
                raise
            say(f"recreating runonce's topics: {exc}; again")
            time.sleep(1)
    ensure_topics(bootstrap, [], partitions)
    for d in state_dirs:
        shutil.rmtree(d, ignore_errors=True)


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]], codec: Codec,
            rate_per_s: float | None = None) -> None:
    p = Producer(producer_config(bootstrap, **{"linger.ms": 5, "batch.num.messages": 2000}))
    started = time.monotonic()
    for i, r in enumerate(records):
        key = request_key(r).encode()
        while True:
            try:
                p.produce(topic, key=key, value=codec.encode("ActionRequested", r))
                break
            except BufferError:
                p.poll(0.01)
        if rate_per_s is not None and i % 20 == 0:
            ahead = i / rate_per_s - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
            p.poll(0)
    p.flush(60)


def end_offsets(bootstrap: str, names: tuple[str, ...]) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}"})
    total = 0
    for name in names:
        for p in c.list_topics(name, timeout=10).topics[name].partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition(name, p), timeout=10)
            total += hi - lo
    c.close()
    return total


def rss_kb(pid: int) -> int:
    out = subprocess.run(["ps", "-o", "rss=", "--ppid", str(pid), "-p", str(pid)], capture_output=True, text=True)
    return sum(int(x) for x in out.stdout.split() if x.isdigit())


def dir_mb(path: Path | None) -> float:
    if path is None or not path.exists():
        return 0.0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def action_id_of(codec: Codec, value: bytes) -> str:
    name, rec = codec.decode(value)
    return str(rec["request"]["action_id"] if name == "ActionDecision" else rec["action_id"])


def wait_outputs(bootstrap: str, impl: Impl, want: int, proc: subprocess.Popen[bytes], timeout_s: float,
                 peak: list[int]) -> None:
    deadline = time.monotonic() + timeout_s
    last_report = 0.0
    while True:
        have = end_offsets(bootstrap, impl.outputs)
        peak[0] = max(peak[0], rss_kb(proc.pid))
        if have >= want:
            return
        if proc.poll() is not None:
            raise SystemExit(f"{impl.name} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{impl.name}: {have}/{want} outputs after {timeout_s:.0f} s")
        if time.monotonic() - last_report > 10:
            say(f"  {impl.name}: {have}/{want} decided")
            last_report = time.monotonic()
        time.sleep(0.5)


class Tail:
    """A read_committed reader of the outputs from their current end, noting when each wanted
    action's decision becomes visible to it: the latency a downstream reader (an executor) sees,
    transaction commits included. Broker and bench share one machine, hence one clock."""

    def __init__(self, bootstrap: str, names: tuple[str, ...], wanted: set[str], codec: Codec) -> None:
        import threading

        from confluent_kafka import Consumer, TopicPartition

        self.at_ms: dict[str, float] = {}
        self.appended_ms: dict[str, int] = {}
        self._stop = threading.Event()
        self._c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-tail-{uuid.uuid4().hex[:6]}",
                            "isolation.level": "read_committed", "enable.auto.commit": False,
                            "fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
        parts = []
        for name in names:
            for p in self._c.list_topics(name, timeout=10).topics[name].partitions:
                hi = self._c.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
                parts.append(TopicPartition(name, p, hi))
        self._c.assign(parts)
        self._wanted, self._codec = wanted, codec
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            # Take what has arrived at once: a batch wait here would be counted as latency.
            msgs = self._c.consume(1000, 0) or self._c.consume(1, 0.05)
            for msg in msgs:
                if msg.error() or msg.value() is None:
                    continue
                now = time.time() * 1000
                a = action_id_of(self._codec, msg.value())
                if a in self._wanted and a not in self.at_ms:
                    self.at_ms[a] = now
                    self.appended_ms[a] = msg.timestamp()[1]

    def finish(self, n: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.at_ms) < n and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        self._thread.join(5)
        self._c.close()


def run_impl(bootstrap: str, impl: Impl, n_backlog: int, latency_loads: list[tuple[float, list[dict[str, Any]]]],
             codec: Codec, env: dict[str, str]) -> dict[str, Any]:
    say(f"{impl.name}: draining a backlog of {n_backlog} actions")
    before = end_offsets(bootstrap, impl.outputs)
    proc = subprocess.Popen(impl.argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(ROOT / "bench" / "out" / f"{impl.name}.log", "wb"))
    started_ms = time.time() * 1000
    peak = [0]
    results: dict[str, Any] = {}
    try:
        started = time.monotonic()
        wait_outputs(bootstrap, impl, before + n_backlog, proc, 3600, peak)
        wall = time.monotonic() - started
        stamps = sorted(r.timestamp_ms for t in impl.outputs for r in read_all(bootstrap, t, 300))[before:]
        span_s = (stamps[-1] - stamps[0]) / 1000 if len(stamps) > 1 else float("nan")
        from_start_s = (stamps[-1] - started_ms) / 1000
        results.update(throughput=round(len(stamps) / span_s) if span_s else 0,
                       from_start=round(len(stamps) / from_start_s) if from_start_s > 0 else 0,
                       wall_s=round(wall, 1))
        for rate, records in latency_loads:
            say(f"{impl.name}: offering {rate:.0f} actions/s for {len(records) / rate:.0f} s")
            mark = end_offsets(bootstrap, impl.outputs)
            wanted = {r["action_id"] for r in records}
            seen = Tail(bootstrap, impl.outputs, wanted, codec)
            produce(bootstrap, impl.input, records, codec, rate_per_s=rate)
            wait_outputs(bootstrap, impl, mark + len(records), proc, 1800, peak)
            seen.finish(len(wanted))
            t_in = {action_id_of(codec, r.value): r.timestamp_ms for r in read_all(bootstrap, impl.input, 300)
                    if r.value}
            tool_of = {r["action_id"]: r["tool"] for r in records}
            rows = sorted((t_in[a], seen.at_ms[a] - t_in[a], seen.appended_ms[a] - t_in[a], tool_of[a])
                          for a in wanted if a in seen.at_ms)
            # Every action's figures, for finding where (in the run, in which tool) the tail comes from.
            (ROOT / "bench" / "out" / f"{impl.name}-latency-{rate:.0f}.csv").write_text(
                "requested_ms,seen_after_ms,output_appended_after_ms,tool\n"
                + "".join(f"{t:.0f},{ms:.1f},{app},{tool}\n" for t, ms, app, tool in rows))
            lat = sorted(row[1] for row in rows)
            results[f"p50_ms@{rate:.0f}"] = lat[len(lat) // 2]
            results[f"p99_ms@{rate:.0f}"] = lat[int(len(lat) * 0.99)]
            results[f"max_ms@{rate:.0f}"] = lat[-1]
            if impl.name.startswith("runonce"):
                # Tools with scope rules take two stages (and two transactions) in runonce's job.
                for stages, rs in (("1", [r for r in rows if not POLICIES.for_tool(r[3]).has_scope_rules]),
                                   ("2", [r for r in rows if POLICIES.for_tool(r[3]).has_scope_rules])):
                    if rs:
                        ms = sorted(r[1] for r in rs)
                        results[f"p99_ms@{rate:.0f}_{stages}stage"] = ms[int(len(ms) * 0.99)]
        results.update(peak_rss_mb=round(peak[0] / 1024), state_mb=round(dir_mb(impl.state_dir), 1))
        say(f"{impl.name}: {results}")
        return results
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=200_000)
    ap.add_argument("--rate", type=float, action="append", default=None,
                    help="offered load for the latency run; repeat for several (default 2000 and 5000)")
    ap.add_argument("--latency-seconds", type=float, default=20.0,
                    help="how long each offered load runs; 0: no latency run, throughput only")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds; the table shows medians")
    ap.add_argument("--only", nargs="*", default=["runonce", "runonce-faust", "quix", "bare"])
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    args = ap.parse_args()
    if args.latency_seconds < 0 or args.actions <= 0:
        ap.error("--actions must be positive and --latency-seconds 0 or more")
    # no latency run, no latency columns: a throughput-only run (CI's) reports what it measured
    args.rate = (args.rate or [2000.0, 5000.0]) if args.latency_seconds > 0 else []

    out_dir = ROOT / "bench" / "out"
    home = out_dir / f"home-{uuid.uuid4().hex[:6]}"
    settings = Settings.from_env({"RUNONCE_HOME": str(home)})
    args.kafka_version = settings.kafka_version
    broker = Broker(settings, progress=say)
    status = broker.start()
    bootstrap = str(status.bootstrap)
    codec = Codec()
    try:
        create_topics(bootstrap, settings.partitions)
        ensure_topics(bootstrap, ["bench.quix.in", "bench.quix.out", "bench.bare.in", "bench.bare.out"],
                      settings.partitions)
        env = {**os.environ, "RUNONCE_HOME": str(home), "RUNONCE_BOOTSTRAP": bootstrap,
               "PYTHONPATH": str(ROOT)}
        impls = {
            "runonce": Impl("runonce", topics.REQUESTED, (topics.APPROVED, topics.DROPPED),
                            child.argv("worker", "--name", "bench-tx", "--runtime", "transactional"),
                            home / "state" / "bench-tx"),
            "runonce-faust": Impl("runonce-faust", topics.REQUESTED, (topics.APPROVED, topics.DROPPED),
                                  child.argv("worker", "--name", "bench-faust", "--runtime", "faust"),
                                  home / "state" / "bench-faust"),
            "quix": Impl("quix", "bench.quix.in", ("bench.quix.out",),
                         [sys.executable, str(ROOT / "bench" / "impl_quix.py"), bootstrap, "bench.quix.in", "bench.quix.out",
                          str(out_dir / "quix-state")], out_dir / "quix-state"),
            "bare": Impl("bare", "bench.bare.in", ("bench.bare.out",),
                         [sys.executable, str(ROOT / "bench" / "impl_bare.py"), bootstrap, "bench.bare.in", "bench.bare.out"]),
        }
        shutil.rmtree(out_dir / "quix-state", ignore_errors=True)
        n_backlog = 0
        for rnd in range(args.rounds):
            # Interleaved, and each round in another order, so drift in the machine hits all alike.
            order = args.only[rnd % len(args.only):] + args.only[:rnd % len(args.only)]
            for name in order:
                impl = impls[name]
                if name.startswith("runonce"):
                    fresh_runonce_topics(bootstrap, settings.partitions,
                                         [i.state_dir for i in impls.values() if i.state_dir and i.name.startswith("runonce")])
                backlog = [m for f in generate(args.actions, repeat_ratio=0.10, seed=5, run_id=f"b{rnd}{name}")
                           for m, _ in f.members]
                n_backlog = len(backlog)
                say(f"round {rnd + 1}: producing {len(backlog)} actions to {impl.input}")
                produce(bootstrap, impl.input, backlog, codec)
                loads = []
                for rate in args.rate:
                    n_lat = int(rate * args.latency_seconds)
                    fresh = [m for f in generate(n_lat, repeat_ratio=0.10, seed=9, run_id=f"l{rnd}{name}{rate:.0f}")
                             for m, _ in f.members]
                    loads.append((rate, fresh[:n_lat]))
                impl.rounds.append(run_impl(bootstrap, impl, len(backlog), loads, codec, env))
        for impl in impls.values():
            impl.results = _medians(impl.rounds)
        write_results(Path(args.out), args, impls, n_backlog)
    finally:
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


def write_results(path: Path, args: argparse.Namespace, impls: dict[str, Impl], n: int) -> None:
    r = {k: v.results for k, v in impls.items() if v.results}
    rates = [f"{x:.0f}" for x in args.rate]
    rate_args = " ".join(f"--rate {x}" for x in rates)
    lines = [
        "# Benchmark results", "",
        f"Measured {dt.date.today()} with `bash bench/run.sh --actions {args.actions} {rate_args}{' ' if rate_args else ''}"
        f"--latency-seconds {args.latency_seconds:.0f} --rounds {args.rounds}` on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, one local Kafka {args.kafka_version} broker "
        "(KRaft, 512 MiB "
        "heap), 6 partitions, one worker process per implementation. Workload: "
        f"{n} actions with ~10% planted repeats (key retries, key reuse, natural-id and content repeats)"
        + (f"; medians of {args.rounds} interleaved rounds, spread in brackets." if args.rounds > 1 else "."), "",
        "| implementation | actions/s from start | actions/s first→last output | "
        + "".join(f"p50 / p99 ms at {x}/s | " for x in rates) + "peak RSS MB | state on disk MB |",
        "|---|---|---|" + "---|" * len(rates) + "---|---|",
    ]
    labels = {"runonce": "(a) runonce, transactional runtime (exactly-once)",
              "runonce-faust": "(a') runonce, `--runtime faust` (at-least-once + replay-safe state)",
              "quix": "(b) Quix Streams, same core, exactly-once", "bare": "(c) bare confluent-kafka passthrough"}

    def cell(v: dict[str, Any], key: str) -> str:
        spread = v.get(f"{key}_spread")
        return f"{v.get(key)}" + (f" [{spread}]" if spread else "")

    for k, v in r.items():
        lat = "".join(f"{cell(v, f'p50_ms@{x}')} / {cell(v, f'p99_ms@{x}')} | " for x in rates)
        lines.append(f"| {labels[k]} | {cell(v, 'from_start')} | {cell(v, 'throughput')} | {lat}"
                     f"{v.get('peak_rss_mb')} | {v.get('state_mb')} |")
    for k, v in r.items():
        split = [f"{x}/s: one stage {v[f'p99_ms@{x}_1stage']} ms, two stages {v[f'p99_ms@{x}_2stage']} ms"
                 for x in rates if f"p99_ms@{x}_1stage" in v]
        if split:
            lines.append(f"\np99 of {labels[k]} by the stages an action takes: " + "; ".join(split))
    for a, b in (("runonce", "quix"), ("runonce-faust", "quix"), ("runonce", "bare")):
        if a in r and b in r and r[b].get("from_start"):
            lines.append(f"\nRatio {a} / {b}: **{r[a]['from_start'] / r[b]['from_start']:.2f}x** from start "
                         f"({r[a]['throughput'] / r[b]['throughput']:.2f}x first→last output)")
    if rates:
        lines.append(f"\nLatency: offered load for {args.latency_seconds:.0f} s to a caught-up worker; from the "
                     "request's broker timestamp (LogAppendTime) to the moment a read_committed reader of the "
                     "outputs received the decision (a transaction's commit included; broker and bench share the "
                     "machine's clock).")
    path.write_text("\n".join(lines) + "\n")
    say(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
