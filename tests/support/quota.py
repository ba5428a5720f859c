"""A broker kept behind on purpose: Kafka's own client quota on produce bytes.

A quota throttles only produce requests, so a stream worker under it still consumes,
decides and commits offsets at full speed while its writes (decisions and changelog)
queue up behind the broker: the state a crash must not catch a runtime in."""

from __future__ import annotations

import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from runonce.devbroker.broker import Broker
from runonce.settings import Settings

HELPER = Path(__file__).with_name("ClientQuota.java")


def _alter(settings: Settings, rate: str) -> None:
    """The default client quota set to ``rate`` bytes/s, or removed (``delete``), through the
    Admin API of the broker's own kafka-clients (ClientQuota.java, run as a source file)."""
    cmd = ["java", "-Xmx128m", "-cp", f"{Broker(settings).jar_dir}/*", str(HELPER), settings.bootstrap_servers(), rate]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    if done.returncode != 0:
        raise RuntimeError(f"setting the client quota to {rate} failed: {done.stdout}{done.stderr}")


@contextmanager
def produce_quota(settings: Settings, bytes_per_s: int) -> Iterator[None]:
    """Every client's produce bytes per second held to ``bytes_per_s`` while the block runs."""
    _alter(settings, str(bytes_per_s))
    try:
        yield
    finally:
        _alter(settings, "delete")
