"""How close runonce's decision latency is to the exactly-once floor, measured in one run on one
broker, under two offered-load patterns:

* **batched** (bench/run.py's): the mixed workload with planted repeats (testkit.workload),
  produced with ``linger.ms`` 5, paced every 20 records;
* **steady**: one record per produce call (``linger.ms`` 0), each sent at its own time and
  keyed as the SDK keys it, half ``send_email`` each to its own recipient (scope rules), half
  keyed ``charge_payment``.

The floor is bench/txn_floor.py's exactly-once passthrough (no state, no decoding, no
decision, batched as the worker batches: one transaction per batch with its input offsets),
one process, fed the same number of records in the same pattern. runonce is one transactional
stream worker (its own process); it owns every partition, so an action with scope rules is
decided by both stages in one transaction, and every action is compared with the floor's one
hop. Latency is from the moment a record was produced (its CreateTime; the floor's carries it
in a header) to a live read_committed reader receiving the decision (or the floor's copy). The
floor and runonce take turns, each pattern the floor first. The first 5 s of each load are
left out (JIT, coordinators), and before the first round each system takes ``--warm-seconds``
of untimed load: the broker's JIT takes longer than 5 s, and the system that went first paid
for it.

The **wide floor** (``wide_floor`` in each row, with ``p50_wide_ratio`` and ``p99_wide_ratio``)
is the same passthrough copying each record to two more topics of six partitions: its
transactions span three topics, as runonce's do under the steady load (decisions and the keys
and scopes changelogs). The floor-to-wide-floor step is what the broker charges for a
transaction's width; the wide-floor-to-runonce step is runonce's own work.

On a 2-core machine one 20-second window's p99 moves with whatever else the machine does
(the same code gave 1.65x and 3.65x in two runs): ``--rounds`` repeats the floor/runonce pair
per pattern and reports each round and the median ratio with its spread.

    .venv/bin/python bench/decision_latency.py [--rate 2000] [--seconds 20] [--patterns batched steady] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from bench.local_broker import OUT, child_env, local_broker  # noqa: E402
from bench.txn_floor import HOPS, PARTITIONS, SIDE_TOPICS, passthrough  # noqa: E402
from runonce.core.policy import PolicyBook  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.access import KafkaTarget  # noqa: E402
from runonce.kafka.checkpoint import Step  # noqa: E402
from runonce.kafka.clients import base_config  # noqa: E402
from runonce.kafka.reader import read_messages  # noqa: E402
from runonce.kafka.topics import admin_client  # noqa: E402
from runonce.ops import child
from runonce.sdk.submit import build_request  # noqa: E402
from runonce.streams.transactional.worker import DECIDE  # noqa: E402
from runonce.testkit.workload import generate  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402
from runonce.wire.keys import request_key, routing_key  # noqa: E402

POLICIES = PolicyBook.load()
WARM_S = 5.0
PATTERNS = ("batched", "steady")
#: the wide floor's own input and output (its side topics are txn_floor.SIDE_TOPICS)
WIDE = ("floor.wide.in", "floor.wide.mid")
#: the machine's busy share (both cores) while each system took its load
BUSY: dict[str, float] = {}


def say(msg: str) -> None:
    print(f"decision-latency: {msg}", file=sys.stderr, flush=True)


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    return round((after[0] - before[0]) / max(1, after[1] - before[1]), 2)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else float("nan")


# -- the offered load: (key, value) records, produced in one of the two patterns ---------------
def offer(bootstrap: KafkaTarget, topic: str, records: list[tuple[bytes | None, bytes]], rate: float, pattern: str,
          stamp_header: bool) -> None:
    """Produce ``records`` at ``rate``/s. ``stamp_header``: carry the produce time in a ``t0``
    header (the floor's passthrough keeps it), as runonce's records carry it in CreateTime."""
    batched = pattern == "batched"
    p = Producer({**base_config(bootstrap), "acks": "all", "enable.idempotence": True,
                  "partitioner": "murmur2_random",  # the partition of a key as the stream job expects
                  "linger.ms": 5 if batched else 0, **({"batch.num.messages": 2000} if batched else {})})
    started = time.monotonic()
    for i, (key, value) in enumerate(records):
        headers = [("t0", str(int(time.time() * 1000)).encode())] if stamp_header else None
        while True:
            try:
                p.produce(topic, key=key, value=value, headers=headers,
                          partition=i % PARTITIONS if key is None else -1)
                break
            except BufferError:
                p.poll(0.01)
        if not batched or i % 20 == 0:
            ahead = (i + 1 if not batched else i) / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
            p.poll(0)
    p.flush(60)


def runonce_load(pattern: str, n: int, run: str) -> list[dict[str, Any]]:
    if pattern == "batched":
        return [m for f in generate(n, repeat_ratio=0.10, seed=9, run_id=run) for m, _ in f.members][:n]
    return [build_request("send_email", {"to": f"lead-{run}-{i}@example.com", "subject": "Hello", "body": "Hi"},
                          agent_id="bench") if i % 2 == 0 else
            build_request("charge_payment", {"card": "tok", "amount_cents": 100 + i}, agent_id="bench",
                          idempotency_key=f"{run}-charge-{i}")
            for i in range(n)]


def _end(consumer: Consumer, tp: TopicPartition) -> int:
    """The partition's end, asked again while a new topic's leader is being elected."""
    for _ in range(60):
        try:
            return int(consumer.get_watermark_offsets(tp, 10)[1])
        except Exception:  # noqa: BLE001 - NOT_LEADER_FOR_PARTITION right after creation
            time.sleep(0.5)
    return int(consumer.get_watermark_offsets(tp, 10)[1])


# -- live readers --------------------------------------------------------------------------------
class Reader:
    """A read_committed consumer from the current end of ``names``, noting when each record
    arrives (taking what has arrived at once: a batch wait would count as latency)."""

    def __init__(self, bootstrap: KafkaTarget, names: tuple[str, ...], ident: Callable[[Any], str | None]) -> None:
        self.seen: dict[str, tuple[str, float]] = {}
        self._ident = ident
        self._c = Consumer({**base_config(bootstrap), "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                            "isolation.level": "read_committed", "enable.auto.commit": False,
                            "fetch.wait.max.ms": 5})
        parts = []
        for name in names:
            for p in self._c.list_topics(name, timeout=10).topics[name].partitions:
                parts.append(TopicPartition(name, p, _end(self._c, TopicPartition(name, p))))
        self._c.assign(parts)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self._c.consume(1000, 0) or self._c.consume(1, 0.05):
                if m.error() or m.value() is None:
                    continue
                now_ms = time.time() * 1000
                ident = self._ident(m)
                if ident is not None and ident not in self.seen:
                    self.seen[ident] = (m.topic(), now_ms)

    def wait_for(self, n: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.seen) < n and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        self._thread.join(5)
        self._c.close()


# -- the two systems -----------------------------------------------------------------------------
def floor_run(bootstrap: KafkaTarget, n: int, rate: float, pattern: str, hop: tuple[str, str] = (HOPS[0], HOPS[1]),
              label: str = "floor") -> list[float]:
    """The latencies (ms), by record index, of the passthrough from ``hop[0]`` to ``hop[1]``."""
    src, dst = hop

    def ident(m: Any) -> str:
        return f"{m.topic()}:{m.value()[:12].decode()}"

    reader = Reader(bootstrap, (dst,), ident)
    records = [(None, f"{i:012d}".encode() + b"x" * 188) for i in range(n)]
    before = cpu_ticks()
    offer(bootstrap, src, records, rate, pattern, stamp_header=True)
    BUSY[label] = busy_share(before, cpu_ticks())
    reader.wait_for(n, 120)
    # The reader noted arrival; the produce time is in the copy's t0 header, which it did not
    # keep: read it again from the topics (the copies are committed now).
    t0 = {ident(m): int(dict(m.headers())["t0"]) for m in read_messages(bootstrap, dst, 120)}
    found = [reader.seen.get(f"{dst}:{i:012d}") for i in range(n)]
    return [seen[1] - t0[f"{dst}:{i:012d}"] if seen else float("nan") for i, seen in enumerate(found)]


def turn_run(ctx: Any, bootstrap: KafkaTarget, hop: tuple[str, str], also: tuple[str, ...], label: str, n: int,
             rate: float, pattern: str) -> list[float]:
    """The latencies of a passthrough from ``hop[0]`` to ``hop[1]`` (copying each record to
    ``also`` too) that runs only for its own turn: an idle consumer's fetches cost the broker
    CPU the others would feel."""
    stop = ctx.Event()
    proc = ctx.Process(target=passthrough, args=(bootstrap, *hop, label, also, stop), daemon=True)
    proc.start()
    try:
        time.sleep(6)  # its group formed, its producer initialised
        return floor_run(bootstrap, n, rate, pattern, hop, label)
    finally:
        stop.set()  # it leaves its group, so the next turn's passthrough is not kept waiting
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def wide_floor_run(ctx: Any, bootstrap: KafkaTarget, n: int, rate: float, pattern: str) -> list[float]:
    """The wide floor's latencies: the passthrough writing three topics a transaction."""
    return turn_run(ctx, bootstrap, WIDE, SIDE_TOPICS, "wide_floor", n, rate, pattern)


def decisions_reader(bootstrap: KafkaTarget) -> Reader:
    """A live reader of runonce's decisions (approved and dropped), by action id."""
    codec = Codec()

    def ident(m: Any) -> str | None:
        try:
            return str(codec.decode(m.value(), expect="ActionDecision")[1]["request"]["action_id"])
        except Exception:  # noqa: BLE001 - not a decision
            return None

    return Reader(bootstrap, (topics.APPROVED, topics.DROPPED), ident)


def runonce_run(bootstrap: KafkaTarget, requests: list[dict[str, Any]], rate: float, pattern: str) -> list[float]:
    """Each action's latency (ms), by index: its CreateTime to its decision seen."""
    codec = Codec()
    reader = decisions_reader(bootstrap)
    # The bench's load is keyed as bench/run.py keys it; the steady one as the SDK keys it (an
    # unkeyed action by its content key, so it needs no re-key hop).
    records = [((request_key(r) if pattern == "batched" else routing_key(r, POLICIES)).encode(),
                codec.encode("ActionRequested", r)) for r in requests]
    before = cpu_ticks()
    offer(bootstrap, topics.REQUESTED, records, rate, pattern, stamp_header=False)
    BUSY["runonce"] = busy_share(before, cpu_ticks())
    reader.wait_for(len(requests), 120)
    produced_ms = {str(codec.decode(m.value())[1]["action_id"]): m.timestamp()[1]
                   for m in read_messages(bootstrap, topics.REQUESTED, 120)}
    return [reader.seen[r["action_id"]][1] - produced_ms[r["action_id"]] if r["action_id"] in reader.seen
            else float("nan") for r in requests]


#: the worker's steps, as runonce_transaction_step_seconds labels them
STEPS = (DECIDE, *(step.value for step in Step))


def step_sum(step: str) -> str:
    return f'runonce_transaction_step_seconds_sum{{step="{step}"}}'


def scrape(port: int) -> dict[str, float]:
    """The worker's transaction figures so far: sums and counts of its commit time, batch size
    and each step's time (runonce_transaction_step_seconds)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    wanted = {"runonce_commit_seconds_sum", "runonce_commit_seconds_count", "runonce_batch_records_sum",
              *(step_sum(step) for step in STEPS)}
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.split(" ")[0] in wanted}


def transactions(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, Any]:
    n = after["runonce_commit_seconds_count"] - before["runonce_commit_seconds_count"]
    return {"per_s": round(n / seconds, 1),
            "mean_commit_ms": round(1000 * (after["runonce_commit_seconds_sum"]
                                            - before["runonce_commit_seconds_sum"]) / max(n, 1), 1),
            "mean_records": round((after["runonce_batch_records_sum"] - before["runonce_batch_records_sum"])
                                  / max(n, 1), 1),
            # where a transaction's time went, step by step (decide, then the commit path's own)
            "mean_step_ms": {step: round(1000 * (after.get(step_sum(step), 0) - before.get(step_sum(step), 0))
                                         / max(n, 1), 1) for step in STEPS}}


def start_worker(settings: Any, metrics_port: int, profile: Path | None = None) -> subprocess.Popen[bytes]:
    env = child_env(settings)
    env["RUNONCE_METRICS_PORT"] = str(metrics_port)
    prof = ["-m", "cProfile", "-o", str(profile)] if profile else []
    proc = child.start(["worker", "--name", "latency"], env, OUT / "decision-latency-worker.log", own_session=False,
                       python_flags=prof)
    # Warm-up: a few actions decided end to end before anything is timed.
    warm = runonce_load("steady", 40, f"warm{uuid.uuid4().hex[:4]}")
    runonce_run(settings.kafka_access(), warm, 20.0, "steady")
    return proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--patterns", nargs="+", choices=PATTERNS, default=list(PATTERNS),
                    help="which offered-load patterns to run (default: both)")
    ap.add_argument("--rounds", type=int, default=1, help="floor/runonce pairs per pattern (default 1)")
    ap.add_argument("--warm-seconds", type=float, default=10.0,
                    help="untimed load through the floor and runonce before the first round (default 10)")
    ap.add_argument("--profile", type=Path, default=None,
                    help="run the worker under cProfile and write its stats here (its latencies then mean nothing)")
    ap.add_argument("--secure", action="store_true",
                    help="the secured dev broker: SASL_SSL with SCRAM-SHA-512 for the floor, runonce and the "
                         "load alike (the cost of TLS: compare with a run without it)")
    args = ap.parse_args()
    n = int(args.rate * args.seconds)
    warm = int(args.rate * WARM_S)
    rows = []
    with local_broker("decision-latency", say, secure=args.secure) as settings:
        bootstrap = settings.kafka_access()
        admin = admin_client(bootstrap)
        specs = [NewTopic(t, PARTITIONS, 1, config={"message.timestamp.type": "LogAppendTime"})
                 for t in (*HOPS[:2], *WIDE, *SIDE_TOPICS)]
        for fut in admin.create_topics(specs).values():
            fut.result()
        ctx = mp.get_context("spawn")
        floor = ctx.Process(target=passthrough, args=(bootstrap, HOPS[0], HOPS[1], "hop1"), daemon=True)
        floor.start()
        say("starting the stream worker")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            metrics_port = sock.getsockname()[1]
        worker = start_worker(settings, metrics_port, args.profile)
        time.sleep(3)
        try:
            if args.warm_seconds > 0:
                # The broker's JIT takes longer than a load's first 5 s: untimed, whichever system
                # went first would pay it (the floor, which made the ratio look better than it is).
                say(f"warming the broker: {args.rate:.0f}/s for {args.warm_seconds:.0f} s through each")
                k = int(args.rate * args.warm_seconds)
                floor_run(bootstrap, k, args.rate, "steady")
                wide_floor_run(ctx, bootstrap, k, args.rate, "steady")
                runonce_run(bootstrap, runonce_load("steady", k, f"w{uuid.uuid4().hex[:6]}"), args.rate, "steady")
            for round_no, pattern in ((r, p) for r in range(1, args.rounds + 1) for p in args.patterns):
                requests = runonce_load(pattern, n, f"{pattern[0]}{uuid.uuid4().hex[:6]}")
                two_stage = [POLICIES.for_tool(r["tool"]).has_scope_rules for r in requests]
                say(f"{pattern}: the floor, {args.rate:.0f}/s for {args.seconds:.0f} s")
                base = floor_run(bootstrap, n, args.rate, pattern)
                say(f"{pattern}: the wide floor, {args.rate:.0f}/s for {args.seconds:.0f} s")
                wide = wide_floor_run(ctx, bootstrap, n, args.rate, pattern)
                say(f"{pattern}: runonce, {args.rate:.0f}/s for {args.seconds:.0f} s")
                before, started = scrape(metrics_port), time.monotonic()
                ours = runonce_run(bootstrap, requests, args.rate, pattern)
                worker_txns = transactions(before, scrape(metrics_port), time.monotonic() - started)
                idx = range(warm, n)
                lost = sum(1 for i in idx if ours[i] != ours[i])
                assert not lost, f"{lost} runonce decisions not seen"

                def figures(values: list[float], which: Callable[[int], bool]) -> dict[str, float]:
                    chosen = [values[i] for i in idx if which(i)]
                    return {"p50": pct(chosen, 0.5), "p99": pct(chosen, 0.99)}

                row = {"pattern": pattern, "round": round_no, "rate": args.rate, "actions_timed": len(idx),
                       "scoped_share": round(sum(two_stage[i] for i in idx) / len(idx), 2),
                       "floor": figures(base, lambda i: True),
                       "wide_floor": figures(wide, lambda i: True),
                       "runonce": figures(ours, lambda i: True),
                       "runonce_scoped": figures(ours, lambda i: two_stage[i])}
                row["machine_busy_share"] = dict(BUSY)
                row["worker_transactions"] = worker_txns
                row["p50_ratio"] = round(row["runonce"]["p50"] / row["floor"]["p50"], 2)
                row["p99_ratio"] = round(row["runonce"]["p99"] / row["floor"]["p99"], 2)
                row["p50_wide_ratio"] = round(row["runonce"]["p50"] / row["wide_floor"]["p50"], 2)
                row["p99_wide_ratio"] = round(row["runonce"]["p99"] / row["wide_floor"]["p99"], 2)
                rows.append(row)
                say(json.dumps(row))
        finally:
            worker.terminate()
            worker.wait(30)
            floor.kill()
    summary = []
    for pattern in args.patterns:
        mine = [r for r in rows if r["pattern"] == pattern]
        summary.append({"pattern": pattern, "rounds": len(mine), **{
            f"{q}_ratio": {"median": round(statistics.median(r[f"{q}_ratio"] for r in mine), 2),
                           "min": min(r[f"{q}_ratio"] for r in mine), "max": max(r[f"{q}_ratio"] for r in mine)}
            for q in ("p50", "p99", "p50_wide", "p99_wide")}})
    print(json.dumps({"secure": args.secure, "rounds": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
