"""The benchmarks' broker: a fresh local Kafka with runonce's topics, in a home of its own
under bench/out, stopped however the run ends."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from confluent_kafka import Producer

from runonce.devbroker.broker import Broker
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.kafka.topics import create_topics
from runonce.sdk.submit import build_request
from runonce.settings import Settings
from runonce.testkit.decisions import approved_decision
from runonce.wire.codec import Codec

OUT = Path(__file__).resolve().parent / "out"


@contextmanager
def local_broker(name: str, say: Callable[[str], None]) -> Iterator[Settings]:
    """Settings pointing at a started broker whose topics exist."""
    settings = Settings.from_env({"RUNONCE_HOME": str(OUT / f"{name}-{uuid.uuid4().hex[:6]}")})
    broker = Broker(settings, progress=say)
    settings = settings.with_(bootstrap=broker.start().bootstrap)
    try:
        create_topics(settings.bootstrap_servers(), settings.partitions)
        yield settings
    finally:
        broker.stop()


def assigned_executor(env: Mapping[str, str], vendor: str, group: str, log_path: Path) -> subprocess.Popen[bytes]:
    """``runonce executor --vendor VENDOR`` from the end of actions.approved, once its consumer
    has its partitions (its log says ``assigned``)."""
    proc = subprocess.Popen([sys.executable, "-m", "runonce", "executor", "--vendor", vendor, "--group", group,
                             "--from-end", "--loglevel", "info"],
                            env=dict(env), stdout=subprocess.DEVNULL, stderr=open(log_path, "wb"))
    while "assigned" not in log_path.read_text(errors="replace"):
        assert proc.poll() is None, log_path.read_text()[-3000:]
        time.sleep(0.05)
    return proc


def approve_many(bootstrap: str, partitions: int, actions: Iterable[tuple[str, dict[str, Any], str]]) -> list[str]:
    """Approved decisions for ``(tool, params, key)`` straight onto actions.approved, as the
    stream job would write them (the executor is what is measured); their action ids."""
    codec, ids = Codec(), []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (tool, params, key) in enumerate(actions):
        request = build_request(tool, params, agent_id="bench", idempotency_key=key)
        p.produce(topics.APPROVED, key=key.encode(),
                  value=codec.encode("ActionDecision", approved_decision(request, key, source_offset=i)),
                  partition=partition_for(key.encode(), partitions))
        p.poll(0)
        ids.append(request["action_id"])
    p.flush(60)
    return ids
