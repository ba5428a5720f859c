"""How long after ``commit_transaction`` returns does a read_committed reader see the
transaction's records? Two stream hops (stage 1 -> runonce.internal.scoped -> stage 2) pay
this twice. One local broker, a 6-partition topic, 120 transactions of 50 records, with the
reader's ``fetch.wait.max.ms`` at 5, 20 and 500 (librdkafka's default).

    .venv/bin/python bench/commit_visibility.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from runonce.devbroker.broker import Broker  # noqa: E402
from runonce.kafka.topics import admin_client  # noqa: E402
from runonce.settings import Settings  # noqa: E402

TOPIC = "bench.visibility"


def measure(bootstrap: str, fetch_wait_ms: int, transactions: int = 120) -> list[float]:
    seen: dict[bytes, float] = {}
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False,
                       "isolation.level": "read_committed", "fetch.wait.max.ms": fetch_wait_ms})
    reader.assign([TopicPartition(TOPIC, p, -1) for p in range(6)])  # from the end
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            for msg in reader.consume(1000, 0.01):
                if not msg.error():
                    seen.setdefault(msg.value(), time.perf_counter())

    thread = threading.Thread(target=read)
    thread.start()
    time.sleep(3)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"visibility-{uuid.uuid4().hex}",
                         "linger.ms": 5, "retry.backoff.ms": 5})
    producer.init_transactions(10)
    latencies = []
    for i in range(transactions):
        tag = f"{fetch_wait_ms}-{i}".encode()
        producer.begin_transaction()
        for j in range(50):
            producer.produce(TOPIC, key=str(j).encode(), value=tag if j == 0 else b"x")
        producer.commit_transaction(10)
        committed = time.perf_counter()
        deadline = committed + 2
        while tag not in seen and time.perf_counter() < deadline:
            time.sleep(0.0005)
        latencies.append((seen.get(tag, deadline) - committed) * 1000)
        time.sleep(0.03)
    stop.set()
    thread.join()
    reader.close()
    return sorted(latencies)


def main() -> int:
    home = Path(tempfile.mkdtemp(prefix="runonce-visibility-"))
    broker = Broker(Settings(home=home), progress=lambda _m: None)
    bootstrap = str(broker.start().bootstrap)
    try:
        admin = admin_client(bootstrap)  # held: a collected client cancels its futures
        for fut in admin.create_topics([NewTopic(TOPIC, 6, 1)]).values():
            fut.result()
        for wait_ms in (5, 20, 500):
            lat = measure(bootstrap, wait_ms)
            print(f"fetch.wait.max.ms={wait_ms:>3}: commit -> visible p50 {lat[len(lat) // 2]:.1f} ms, "
                  f"p90 {lat[int(len(lat) * 0.9)]:.1f}, p99 {lat[int(len(lat) * 0.99)]:.1f}, max {lat[-1]:.1f}")
    finally:
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
