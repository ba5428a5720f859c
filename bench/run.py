"""Side-by-side benchmark on one local broker: the same workload through
(a) runonce's stream job, (b) the same dedup written with Quix Streams, (c) a bare
confluent-kafka passthrough (the ceiling of one Python process here).

    bash bench/run.sh [--actions 200000] [--rate 2000] [--latency-seconds 20]

Writes bench/RESULTS.md. Throughput: a pre-produced backlog drained by one worker process,
counted from the first to the last output record on the broker's clock (LogAppendTime).
Latency: at a fixed offered load, requested -> decided, both broker timestamps.
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

from runonce.codec import Codec  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.broker import Broker  # noqa: E402
from runonce.kafka.clients import producer_config  # noqa: E402
from runonce.kafka.topics import admin_client, create_topics  # noqa: E402
from runonce.settings import Settings  # noqa: E402
from runonce.topic_reader import read_all  # noqa: E402
from runonce.workload import generate  # noqa: E402


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


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]], codec: Codec,
            rate_per_s: float | None = None) -> None:
    p = Producer(producer_config(bootstrap, **{"linger.ms": 5, "batch.num.messages": 2000}))
    started = time.monotonic()
    for i, r in enumerate(records):
        key = (r["idempotency_key"] or r["action_id"]).encode()
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


def run_impl(bootstrap: str, impl: Impl, n_backlog: int, latency_records: list[dict[str, Any]], rate: float,
             codec: Codec, env: dict[str, str]) -> None:
    say(f"{impl.name}: draining a backlog of {n_backlog} actions")
    before = end_offsets(bootstrap, impl.outputs)
    proc = subprocess.Popen([sys.executable, *impl.argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(ROOT / "bench" / "out" / f"{impl.name}.log", "wb"))
    peak = [0]
    try:
        started = time.monotonic()
        wait_outputs(bootstrap, impl, before + n_backlog, proc, 3600, peak)
        wall = time.monotonic() - started
        stamps = sorted(r.timestamp_ms for t in impl.outputs for r in read_all(bootstrap, t, 300))[before:]
        span_s = (stamps[-1] - stamps[0]) / 1000 if len(stamps) > 1 else float("nan")
        impl.results.update(throughput=round(len(stamps) / span_s) if span_s else 0, wall_s=round(wall, 1))

        say(f"{impl.name}: offering {rate:.0f} actions/s for {len(latency_records) / rate:.0f} s")
        mark = end_offsets(bootstrap, impl.outputs)
        produce(bootstrap, impl.input, latency_records, codec, rate_per_s=rate)
        wait_outputs(bootstrap, impl, mark + len(latency_records), proc, 1800, peak)
        wanted = {r["action_id"] for r in latency_records}
        t_in = {action_id_of(codec, r.value): r.timestamp_ms for r in read_all(bootstrap, impl.input, 300)
                if r.value}
        lat = sorted(r.timestamp_ms - t_in[a] for t in impl.outputs for r in read_all(bootstrap, t, 300)
                     if (a := action_id_of(codec, r.value)) in wanted)
        impl.results.update(
            p50_ms=lat[len(lat) // 2], p99_ms=lat[int(len(lat) * 0.99)], max_ms=lat[-1],
            mean_ms=round(statistics.fmean(lat), 1),
            peak_rss_mb=round(peak[0] / 1024), state_mb=round(dir_mb(impl.state_dir), 1))
        say(f"{impl.name}: {impl.results}")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=200_000)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--latency-seconds", type=float, default=20.0)
    ap.add_argument("--only", nargs="*", default=["runonce", "quix", "bare"])
    ap.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    args = ap.parse_args()

    out_dir = ROOT / "bench" / "out"
    home = out_dir / f"home-{uuid.uuid4().hex[:6]}"
    settings = Settings.from_env({"RUNONCE_HOME": str(home)})
    broker = Broker(settings, progress=say)
    status = broker.start()
    bootstrap = str(status.bootstrap)
    codec = Codec()
    try:
        create_topics(bootstrap, settings.partitions)
        ensure_topics(bootstrap, ["bench.quix.in", "bench.quix.out", "bench.bare.in", "bench.bare.out"],
                      settings.partitions)
        backlog = [m for f in generate(args.actions, repeat_ratio=0.10, seed=5, run_id="b") for m, _ in f.members]
        n_lat = int(args.rate * args.latency_seconds)
        env = {**os.environ, "RUNONCE_HOME": str(home), "RUNONCE_BOOTSTRAP": bootstrap,
               "PYTHONPATH": str(ROOT)}
        impls = {
            "runonce": Impl("runonce", topics.REQUESTED, (topics.APPROVED, topics.DROPPED),
                            ["-m", "runonce", "worker", "--name", "bench-0"], home / "state" / "bench-0"),
            "quix": Impl("quix", "bench.quix.in", ("bench.quix.out",),
                         [str(ROOT / "bench" / "impl_quix.py"), bootstrap, "bench.quix.in", "bench.quix.out",
                          str(out_dir / "quix-state")], out_dir / "quix-state"),
            "bare": Impl("bare", "bench.bare.in", ("bench.bare.out",),
                         [str(ROOT / "bench" / "impl_bare.py"), bootstrap, "bench.bare.in", "bench.bare.out"]),
        }
        shutil.rmtree(out_dir / "quix-state", ignore_errors=True)
        for name in args.only:
            impl = impls[name]
            say(f"producing {len(backlog)} actions to {impl.input}")
            produce(bootstrap, impl.input, backlog, codec)
            fresh = [m for f in generate(n_lat, repeat_ratio=0.10, seed=9, run_id=f"l{name}") for m, _ in f.members]
            run_impl(bootstrap, impl, len(backlog), fresh[:n_lat], args.rate, codec, env)
        write_results(Path(args.out), args, impls, len(backlog))
    finally:
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


def write_results(path: Path, args: argparse.Namespace, impls: dict[str, Impl], n: int) -> None:
    r = {k: v.results for k, v in impls.items() if v.results}
    lines = [
        "# Benchmark results", "",
        f"Measured {dt.date.today()} with `bash bench/run.sh --actions {args.actions} --rate {args.rate:.0f} "
        f"--latency-seconds {args.latency_seconds:.0f}` on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, one local Kafka 3.9.1 broker (KRaft, 512 MiB heap), 6 partitions, "
        "one worker process per implementation. Workload: "
        f"{n} actions with ~10% planted repeats (key retries, key reuse, natural-id and content repeats).", "",
        "| implementation | throughput (actions/s) | p50 ms | p99 ms | max ms | peak RSS MB | state on disk MB |",
        "|---|---|---|---|---|---|---|",
    ]
    labels = {"runonce": "(a) runonce (faust, at-least-once + replay-safe state)",
              "quix": "(b) Quix Streams, same core, exactly-once", "bare": "(c) bare confluent-kafka passthrough"}
    for k, v in r.items():
        lines.append(f"| {labels[k]} | {v.get('throughput')} | {v.get('p50_ms')} | {v.get('p99_ms')} | "
                     f"{v.get('max_ms')} | {v.get('peak_rss_mb')} | {v.get('state_mb')} |")
    if "runonce" in r and "quix" in r and r["quix"].get("throughput"):
        lines.append(f"\nRatio a/b (runonce / Quix Streams): **{r['runonce']['throughput'] / r['quix']['throughput']:.2f}x**")
    if "runonce" in r and "bare" in r and r["bare"].get("throughput"):
        lines.append(f"\nRatio a/c (runonce / bare passthrough): **{r['runonce']['throughput'] / r['bare']['throughput']:.2f}x**")
    lines.append(f"\nLatency: offered {args.rate:.0f} actions/s for {args.latency_seconds:.0f} s to a caught-up worker; "
                 "requested -> decided on broker LogAppendTime (both topics).")
    path.write_text("\n".join(lines) + "\n")
    say(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
