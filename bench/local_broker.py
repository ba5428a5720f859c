"""The benchmarks' broker: a fresh local Kafka with runonce's topics, in a home of its own
under bench/out, stopped however the run ends."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from runonce.devbroker.broker import Broker
from runonce.kafka.topics import create_topics
from runonce.settings import Settings

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
