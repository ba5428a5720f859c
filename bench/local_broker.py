"""The benchmarks' broker: a fresh local Kafka with runonce's topics, in a home of its own
under bench/out, stopped however the run ends."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Mapping

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
