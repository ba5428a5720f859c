"""What a consumer's fetches cost the broker, under the load agents make: records produced one
at a time (``linger.ms`` 0, ``acks=all``, idempotent) at ``--rate``/s. The broker's CPU (its
process's user + system time, from /proc) is measured while the load runs, with no consumer,
with a read_committed consumer on librdkafka's fetch defaults (the broker answers a fetch as
soon as one record is there: about one fetch per record), and with fetches batched as the
stream worker's are (``RUNONCE_FETCH_WAIT_MS``, runonce/kafka/clients.py ``batched_fetch``).
Then the same consumers on idle topics: what the batched wait costs while nothing comes.
Each is measured in rounds, interleaved, after a warm-up load (the broker's JIT).

    .venv/bin/python bench/fetch_cost.py [--rate 2000] [--seconds 15] [--rounds 2] [--wait-ms 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from bench.local_broker import local_broker  # noqa: E402
from bench.txn_floor import PARTITIONS, agent  # noqa: E402
from runonce.kafka.clients import batched_fetch  # noqa: E402
from runonce.kafka.topics import admin_client  # noqa: E402
from runonce.settings import Settings  # noqa: E402

#: the worker consumes four topics: the agents' one and three that are mostly idle
TOPICS = tuple(f"fetch-cost-{i}" for i in range(4))


def say(msg: str) -> None:
    print(f"fetch-cost: {msg}", file=sys.stderr, flush=True)


def broker_ticks() -> int:
    """The broker process's CPU time so far, in clock ticks."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes():
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return total


class Tail:
    """A read_committed consumer of TOPICS from their end, taking what comes in a thread."""

    def __init__(self, bootstrap: str, fetch: dict[str, Any]) -> None:
        self.records = 0
        self._c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fetch-cost-{uuid.uuid4().hex[:6]}",
                            "isolation.level": "read_committed", "auto.offset.reset": "latest",
                            "enable.auto.commit": False, **fetch})
        self._c.subscribe(list(TOPICS))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.records += len(self._c.consume(1000, 0.1))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._c.close()


def measure(bootstrap: str, fetch: dict[str, Any] | None, rate: float, seconds: float) -> dict[str, float]:
    """The broker's CPU (share of one core) while ``rate``/s come (0: idle), with a consumer
    of ``fetch`` settings (None: no consumer)."""
    tail = Tail(bootstrap, fetch) if fetch is not None else None
    if tail is not None:
        time.sleep(6)  # joined its group, at the end of every partition
    ticks, started = broker_ticks(), time.monotonic()
    if rate:
        agent(bootstrap, rate, seconds, TOPICS[0], 300, idempotent=True)
    else:
        time.sleep(seconds)
    share = (broker_ticks() - ticks) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - started)
    consumed = tail.records if tail is not None else 0
    if tail is not None:
        tail.close()
    return {"broker_cpu_share_of_a_core": round(share, 2), "consumed": consumed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--wait-ms", type=int, default=Settings().fetch_wait_ms,
                    help="the batched consumer's fetch wait (default: the worker's, RUNONCE_FETCH_WAIT_MS)")
    args = ap.parse_args()
    kinds: dict[str, dict[str, Any] | None] = {
        "no consumer": None, "fetch at once (librdkafka default)": {},
        f"fetch batched ({args.wait_ms} ms)": batched_fetch(args.wait_ms)}
    rows: list[dict[str, Any]] = []
    with local_broker("fetch-cost", say) as settings:
        bootstrap = settings.bootstrap_servers()
        admin = admin_client(bootstrap)
        for fut in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in TOPICS]).values():
            fut.result()
        say("warming the broker up")
        measure(bootstrap, None, args.rate, args.seconds)
        for round_no in range(1, args.rounds + 1):
            for load in (args.rate, 0.0):
                for name, fetch in kinds.items():
                    if load == 0 and fetch is None:
                        continue
                    row = {"round": round_no, "load_per_s": load, "consumer": name,
                           **measure(bootstrap, fetch, load, args.seconds)}
                    say(json.dumps(row))
                    rows.append(row)
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
