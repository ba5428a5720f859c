"""A transactional producer: its config and its initialisation, the same for stream workers
and executors. What it commits, and how a failure is handled, is ``checkpoint.py``."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

from confluent_kafka import KafkaError, KafkaException, Producer

from runonce.kafka import clients
from runonce.kafka.access import KafkaTarget

log = logging.getLogger("runonce.kafka")

#: how long one transactional call may take (librdkafka's timeout argument)
CALL_TIMEOUT_S = 30.0
#: how long a starting producer waits for the transaction coordinator (a restarting broker)
INIT_TIMEOUT_S = 180.0
#: one init_transactions call's bound: between calls the producer serves its error events, so a
#: handshake that can never succeed (TLS against a plaintext listener) stops it in seconds
#: (clients.ConnectionWatch) instead of after INIT_TIMEOUT_S; init resumes where it was
INIT_SLICE_S = 3.0


def transactional_config(bootstrap: KafkaTarget, transactional_id: str, **extra: Any) -> dict[str, Any]:
    """The config of every transactional producer runonce makes (stream workers, executors).

    A transaction that begins right after the last one committed meets CONCURRENT_TRANSACTIONS
    on its AddPartitionsToTxn while the broker still writes the last one's markers; librdkafka
    retries after ``retry.backoff.ms``, 100 ms by default. Measured on one broker: a worker
    transaction's flush p95 36 ms at the default, 14 ms at 5 ms; an agent's tool call p99 168 ms
    with the executor at the default, 91 ms at 5 ms (bench/agent_call.py)."""
    return clients.producer_config(bootstrap, **{"transactional.id": transactional_id,
                                                 "retry.backoff.ms": 5, "retry.backoff.max.ms": 100, **extra})


def init_producer(config: Mapping[str, Any], transactional_id: str,
                  clock: Callable[[], float] = time.monotonic) -> Producer:
    """A transactional producer, initialised (which fences and aborts a previous instance's
    open transaction). A timed-out init is resumed by calling it again (a restarting broker)."""
    producer = Producer(dict(config))
    deadline = clock() + INIT_TIMEOUT_S
    quiet_until = clock() + CALL_TIMEOUT_S  # a slice that timed out is said once per CALL_TIMEOUT_S
    while True:
        try:
            producer.init_transactions(INIT_SLICE_S)
            return producer
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if not err.retriable() or clock() > deadline:
                raise clients.translate(exc, f"{transactional_id}: cannot initialise transactions") from exc
            producer.poll(0)  # serves error events: raises HandshakeFailed on settings that cannot connect
            if err.code() != KafkaError._TIMED_OUT or clock() >= quiet_until:
                quiet_until = clock() + CALL_TIMEOUT_S
                log.warning("%s: init_transactions: %s; retrying", transactional_id, err)
