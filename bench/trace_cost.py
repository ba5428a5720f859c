"""What tracing costs the stream worker, measured in one run on one broker, against the
reference of the same worker with tracing off.

Three modes of one transactional worker (its own process, started afresh for each turn):

* **off**: no ``OTEL_*`` variable (the reference);
* **100%**: ``OTEL_EXPORTER_OTLP_ENDPOINT`` to a real Jaeger (runonce/testkit/jaeger.py) and
  every decision a sampled span;
* **1%**: the same, ``OTEL_TRACES_SAMPLER=traceidratio`` with ``OTEL_TRACES_SAMPLER_ARG=0.01``.

Each turn measures, with bench/decision_latency.py's reader and load:

* **latency**: the steady load (one record per produce call, half ``send_email`` with scope
  rules, half keyed ``charge_payment``) at ``--rate`` (1,000/s) for ``--seconds``; p50 and
  p99 from a record's CreateTime to a read_committed reader seeing its decision, the first 5 s
  left out;
* **throughput**: a backlog of ``--backlog`` actions produced before the worker starts, then
  decided: actions over the time from the first decision seen to the last; and the CPU the
  worker, its span exporter, Jaeger and the broker spent over that time, per 1,000 decisions.

The load carries no caller context (as an agent without tracing), so each decision is the
root of its trace and the sampler decides it. Modes take turns, the order rotating per round.

    .venv/bin/python bench/trace_cost.py [--rate 1000] [--seconds 20] [--backlog 20000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.decision_latency import decisions_reader, offer, pct, runonce_load, runonce_run  # noqa: E402
from bench.local_broker import OUT, child_env, local_broker  # noqa: E402
from runonce.core.policy import PolicyBook  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.ops import child
from runonce.testkit.jaeger import Jaeger  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402
from runonce.wire.keys import routing_key  # noqa: E402

POLICIES = PolicyBook.load()
WARM_S = 5.0
MODES = ("off", "100%", "1%")


def say(msg: str) -> None:
    print(f"trace-cost: {msg}", file=sys.stderr, flush=True)


def mode_env(mode: str, jaeger: Jaeger) -> dict[str, str]:
    if mode == "off":
        return {}
    env = jaeger.otel_env("runonce-worker")
    env["OTEL_BSP_SCHEDULE_DELAY"] = "1000"  # the SDK's batching, not the tests' tenth of a second
    if mode == "1%":
        env.update(OTEL_TRACES_SAMPLER="traceidratio", OTEL_TRACES_SAMPLER_ARG="0.01")
    else:
        env["OTEL_TRACES_SAMPLER"] = "always_on"
    return env


def start_worker(settings: Any, mode: str, jaeger: Jaeger) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in child_env(settings).items() if not k.startswith("OTEL_")}
    env.update(mode_env(mode, jaeger))
    log = OUT / f"trace-cost-worker-{mode.rstrip('%')}.log"
    return child.start(["worker", "--name", "trace-cost"], env, log, own_session=False)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


#: the processes whose CPU a backlog's turn accounts, by what their command line holds
CPU_OF = {"worker": b"trace-cost\x00", "span exporter": b"runonce.telemetry.exporter", "jaeger": b"jaeger",
          "broker": b"kafka.Kafka"}
#: each mode's CPU per 1,000 decisions of its backlogs, by process, in ms
CPU_MS: dict[str, dict[str, list[float]]] = {}


def cpu_ticks_of() -> dict[str, int]:
    """CPU time so far (clock ticks) of the processes CPU_OF names."""
    found = dict.fromkeys(CPU_OF, 0)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            for name, mark in CPU_OF.items():
                if mark in cmdline:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    found[name] += int(fields[11]) + int(fields[12])
                    break
        except OSError:
            continue
    return found


def throughput(settings: Any, mode: str, jaeger: Jaeger, n: int) -> float:
    """Actions per second deciding a backlog of ``n`` produced while no worker ran; the CPU each
    process spent from the first decision seen to the last goes to CPU_MS."""
    codec = Codec()
    bootstrap = settings.kafka_access()
    requests = runonce_load("steady", n, f"t{uuid.uuid4().hex[:6]}")
    reader = decisions_reader(bootstrap)
    records = [(routing_key(r, POLICIES).encode(), codec.encode("ActionRequested", r)) for r in requests]
    offer(bootstrap, topics.REQUESTED, records, 50_000.0, "batched", stamp_header=False)
    worker = start_worker(settings, mode, jaeger)
    try:
        while not reader.seen:  # from the first decision: the processes' start-up is not a decision's
            assert worker.poll() is None, "the worker exited"
            time.sleep(0.005)
        before, decided_before = cpu_ticks_of(), len(reader.seen)
        reader.wait_for(n, 300)
        after = cpu_ticks_of()
    finally:
        stop(worker)
    per_k_ms = 1000 / (n - decided_before) * 1000 / os.sysconf("SC_CLK_TCK")
    for name in CPU_OF:
        CPU_MS.setdefault(mode, {}).setdefault(name, []).append((after[name] - before[name]) * per_k_ms)
    seen = [reader.seen[r["action_id"]][1] for r in requests if r["action_id"] in reader.seen]
    assert len(seen) == n, f"{n - len(seen)} decisions not seen"
    return round(n / ((max(seen) - min(seen)) / 1000), 1)


def latency(settings: Any, mode: str, jaeger: Jaeger, rate: float, seconds: float) -> dict[str, float]:
    worker = start_worker(settings, mode, jaeger)
    try:
        bootstrap = settings.kafka_access()
        runonce_run(bootstrap, runonce_load("steady", 40, f"w{uuid.uuid4().hex[:4]}"), 20.0, "steady")  # warm
        n = int(rate * seconds)
        ours = runonce_run(bootstrap, runonce_load("steady", n, f"s{uuid.uuid4().hex[:6]}"), rate, "steady")
    finally:
        stop(worker)
    timed = [ours[i] for i in range(int(rate * WARM_S), n)]
    assert all(v == v for v in timed), "decisions not seen"
    return {"p50": pct(timed, 0.5), "p99": pct(timed, 0.99)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=1000.0, help="the steady load's actions/s (default 1000)")
    ap.add_argument("--seconds", type=float, default=20.0, help="the steady load's length (default 20)")
    ap.add_argument("--backlog", type=int, default=20_000, help="actions in the throughput backlog (default 20000)")
    ap.add_argument("--rounds", type=int, default=2, help="turns of the three modes, order rotating (default 2)")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with local_broker("trace-cost", say) as settings:
        jaeger = Jaeger(OUT / f"trace-cost-jaeger-{uuid.uuid4().hex[:6]}").start()
        try:
            say("warming the broker: one untimed turn with tracing off")
            throughput(settings, "off", jaeger, args.backlog // 4)
            for round_no in range(1, args.rounds + 1):
                order = MODES[round_no - 1:] + MODES[:round_no - 1]
                for mode in order:
                    say(f"round {round_no}, {mode}: throughput over a backlog of {args.backlog}")
                    per_s = throughput(settings, mode, jaeger, args.backlog)
                    say(f"round {round_no}, {mode}: latency at {args.rate:.0f}/s for {args.seconds:.0f} s")
                    row = {"round": round_no, "mode": mode, "throughput_per_s": per_s,
                           **latency(settings, mode, jaeger, args.rate, args.seconds)}
                    rows.append(row)
                    say(json.dumps(row))
        finally:
            jaeger.stop()
    summary = {}
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        summary[mode] = {k: statistics.median(r[k] for r in mine) for k in ("throughput_per_s", "p50", "p99")}
    for mode in MODES[1:]:
        summary[mode]["throughput_ratio"] = round(summary[mode]["throughput_per_s"] / summary["off"]["throughput_per_s"], 3)
        summary[mode]["p99_ratio"] = round(summary[mode]["p99"] / summary["off"]["p99"], 3)
        summary[mode]["p50_ratio"] = round(summary[mode]["p50"] / summary["off"]["p50"], 3)
    for mode in MODES:  # the untimed warm-up's figures are left out
        summary[mode]["cpu_ms_per_1k_decisions"] = {
            name: round(statistics.median(values[-args.rounds:])) for name, values in CPU_MS[mode].items()}
    print(json.dumps({"rate": args.rate, "backlog": args.backlog, "rounds": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
