"""confluent-kafka client configs shared by the SDK, executors, CLI and tests."""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import Consumer, Producer

#: librdkafka logs every refused connection; route its log through Python logging, quiet
#: by default (failures surface as exceptions and timeouts; -v shows them).
LIBRDKAFKA_LOG = logging.getLogger("runonce.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())  # no stderr fallback; root handlers still get it under -v


def base_config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOG}


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        **base_config(bootstrap),
        "enable.idempotence": True,
        "acks": "all",
        # Same partition for a key as Java, aiokafka and faust: the stream job relies on it.
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        **extra,
    }


def producer(bootstrap: str, **extra: Any) -> Producer:
    return Producer(producer_config(bootstrap, **extra))


def reader(bootstrap: str, group: str | None = None, **extra: Any) -> Consumer:
    """A read_committed consumer; without a group it is for assign()-style reads that commit nothing."""
    return Consumer({
        **base_config(bootstrap),
        "group.id": group or "runonce-reader",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        **extra,
    })
