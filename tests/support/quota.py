"""A broker kept behind on purpose: Kafka's own client quota on produce bytes.

A quota throttles only produce requests, so a stream worker under it still consumes,
decides and commits offsets at full speed while its writes (decisions and changelog)
queue up behind the broker: the state a crash must not catch a runtime in."""

from __future__ import annotations

import subprocess
from contextlib import contextmanager
from typing import Iterator

from runonce.devbroker.broker import Broker
from runonce.settings import Settings


def _config_command(settings: Settings, *args: str) -> None:
    jars = Broker(settings).jar_dir
    # kafka-configs.sh's class: in core up to 3.x; since 4.0 in kafka-tools, which the broker's
    # POM does not resolve (scripts/compat.sh runs no quota test)
    main = ("org.apache.kafka.tools.ConfigCommand" if int(settings.kafka_version.split(".")[0]) >= 4
            else "kafka.admin.ConfigCommand")
    cmd = ["java", "-Xmx128m", "-cp", f"{jars}/*", main,
           "--bootstrap-server", settings.bootstrap_servers(), "--entity-type", "clients", "--entity-default", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"kafka ConfigCommand {args} failed: {done.stdout}{done.stderr}")


@contextmanager
def produce_quota(settings: Settings, bytes_per_s: int) -> Iterator[None]:
    """Every client's produce bytes per second held to ``bytes_per_s`` while the block runs."""
    _config_command(settings, "--alter", "--add-config", f"producer_byte_rate={bytes_per_s}")
    try:
        yield
    finally:
        _config_command(settings, "--alter", "--delete-config", "producer_byte_rate")
