"""The floor of exactly-once latency on this machine: what the broker's transactions cost
before runonce does any work.

A passthrough with no state, no decoding and no decision, batched the way runonce's
transactional worker batches (take what arrived while the last transaction committed;
idle, block for a first record), each batch one transaction with its input offsets
(KIP-447). Offered load from a separate agent process; latency from the input record's
broker timestamp (LogAppendTime) to a read_committed reader receiving its copy, as in
bench/run.py. One hop is stage 1 alone; two hops are stage 1 then stage 2 (what a scoped
action pays). Each passthrough and the agent are processes of their own.

``--topics 3`` copies each record to two more topics of as many partitions (same partition),
so a transaction spans three topics, as one of runonce's does under steady load (its decisions
and the keys and scopes changelogs): what the broker charges for a transaction's width, with
no work added.

    .venv/bin/python bench/txn_floor.py [--rate 2000] [--seconds 20] [--hops 1|2] [--topics 1|2|3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from bench.local_broker import local_broker  # noqa: E402
from runonce.kafka.access import KafkaTarget  # noqa: E402
from runonce.kafka.clients import base_config, batched_fetch  # noqa: E402
from runonce.kafka.topics import admin_client  # noqa: E402
from runonce.settings import Settings  # noqa: E402

PARTITIONS = 6
HOPS = ("floor.in", "floor.mid", "floor.out")
#: what ``--topics`` 2 and 3 also write: a transaction as wide as a steady-load runonce one at 3
SIDE_TOPICS = ("floor.side1", "floor.side2")


def passthrough(bootstrap: KafkaTarget, src: str, dst: str, name: str, also: tuple[str, ...] = (),
                stop: Any = None) -> None:
    """``src`` to ``dst``, one transaction per batch; each record also copied to ``also``. Until
    ``stop`` (an Event) is set, then it leaves its group (a next one joins at once); else forever."""
    # fetches batched as the worker's are (the same setting and its default)
    consumer = Consumer({**base_config(bootstrap), "group.id": f"floor-{name}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         **batched_fetch(Settings().fetch_wait_ms)})
    producer = Producer({**base_config(bootstrap), "transactional.id": f"floor-{name}-{uuid.uuid4().hex[:6]}",
                         "linger.ms": 5, "retry.backoff.ms": 5, "retry.backoff.max.ms": 100,
                         "transaction.timeout.ms": 10_000})
    producer.init_transactions(30)
    consumer.subscribe([src])
    while stop is None or not stop.is_set():
        msgs = consumer.consume(2000, 0) or consumer.consume(1, 0.5)
        if len(msgs) == 1:  # idle until now: take what came with it, as the worker does
            msgs += consumer.consume(1999, 0)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        producer.begin_transaction()
        offsets: dict[int, int] = {}
        for m in msgs:
            ts = m.headers()[0][1] if m.headers() else str(m.timestamp()[1]).encode()
            for topic in (dst, *also):
                producer.produce(topic, value=m.value(), partition=m.partition(), headers=[("t0", ts)])
            offsets[m.partition()] = m.offset() + 1
        producer.send_offsets_to_transaction([TopicPartition(src, p, o) for p, o in offsets.items()],
                                             consumer.consumer_group_metadata(), 10)
        producer.commit_transaction(10)
    consumer.close()


def agent(bootstrap: KafkaTarget, rate: float, seconds: float, topic: str = HOPS[0], value_bytes: int = 200,
          idempotent: bool = False) -> None:
    """Records produced one at a time (``linger.ms`` 0), paced at ``rate``/s, over ``PARTITIONS``."""
    producer = Producer({**base_config(bootstrap), "linger.ms": 0, "acks": "all",
                         **({"enable.idempotence": True} if idempotent else {})})
    started = time.monotonic()
    n = int(rate * seconds)
    for i in range(n):
        producer.produce(topic, value=b"x" * value_bytes, partition=i % PARTITIONS)
        producer.poll(0)
        ahead = (i + 1) / rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    producer.flush(30)


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--hops", type=int, choices=(1, 2), default=1,
                        help="1: stage 1 alone; 2: stage 1 then stage 2 (each hop a process, so the second "
                             "also takes CPU from the first)")
    parser.add_argument("--topics", type=int, choices=(1, 2, 3), default=1,
                        help=f"topics each record is copied to, the others being {', '.join(SIDE_TOPICS)} "
                             f"({PARTITIONS} partitions each); 3: a transaction as wide as runonce's under steady load")
    parser.add_argument("--secure", action="store_true",
                        help="the secured dev broker: SASL_SSL with SCRAM-SHA-512 (the cost of TLS)")
    args = parser.parse_args()
    with local_broker("txn-floor", say=lambda m: print(m, file=sys.stderr), secure=args.secure) as settings:
        bootstrap = settings.kafka_access()
        admin = admin_client(bootstrap)
        specs = [NewTopic(t, PARTITIONS, 1, config={"message.timestamp.type": "LogAppendTime"})
                 for t in HOPS + SIDE_TOPICS]
        for fut in admin.create_topics(specs).values():
            fut.result()
        ctx = mp.get_context("spawn")
        also = SIDE_TOPICS[:args.topics - 1]
        hops = [ctx.Process(target=passthrough, args=(bootstrap, HOPS[i], HOPS[i + 1], f"hop{i + 1}", also),
                            daemon=True) for i in range(args.hops)]
        for p in hops:
            p.start()
        readers = {}
        for t in HOPS[1:args.hops + 1]:
            c = Consumer({**base_config(bootstrap), "group.id": uuid.uuid4().hex, "enable.auto.commit": False,
                          "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
            c.assign([TopicPartition(t, p, 0) for p in range(PARTITIONS)])
            readers[t] = c
        time.sleep(8)  # groups formed, producers initialised
        load = ctx.Process(target=agent, args=(bootstrap, args.rate, args.seconds))
        load.start()
        latencies: dict[str, list[float]] = {t: [] for t in readers}
        expected = int(args.rate * args.seconds)
        deadline = time.monotonic() + args.seconds + 60
        while time.monotonic() < deadline and any(len(v) < expected for v in latencies.values()):
            for t, c in readers.items():
                for m in c.consume(1000, 0.001):
                    if not m.error():
                        now_ms = time.time() * 1000
                        latencies[t].append(now_ms - int(dict(m.headers())["t0"]))
        load.join()
        for p in hops:
            p.kill()
        for c in readers.values():
            c.close()
    warm = int(args.rate * 5)  # the first 5 s: the broker's JIT and the transaction coordinators warm up
    wide = f" ({args.topics} topics a transaction)" if args.topics > 1 else ""
    print(f"exactly-once passthrough floor{wide} at {args.rate:.0f}/s for {args.seconds:.0f} s "
          f"(first 5 s left out), ms from request (LogAppendTime) to read_committed receipt:")
    for label, t in (("one hop (stage 1)", HOPS[1]), ("two hops (stage 1 + 2)", HOPS[2]))[:args.hops]:
        lat = sorted(latencies[t][warm:])
        if not lat:
            print(f"  {label}: no records received")
            continue
        print(f"  {label:<24} n={len(lat)} p50 {percentile(lat, 0.5):.1f}  p90 {percentile(lat, 0.9):.1f}  "
              f"p99 {percentile(lat, 0.99):.1f}  max {lat[-1]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
