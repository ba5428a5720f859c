"""One transactional producer (an executor slot's): records and consumer offsets commit together
(``send_offsets_to_transaction`` with the group's metadata: KIP-447 fencing), or not at all.

``commit`` answers True (committed) or False (aborted: the caller rewinds to the committed
offsets). It raises FatalError when going on could double an action: fenced by another
instance of the same transactional.id, or refused by the broker's ACLs."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from runonce.errors import FatalError
from runonce.kafka import clients
from runonce.kafka.access import KafkaTarget
from runonce.kafka.record import Out
from runonce.kafka.watchdog import Watchdog

log = logging.getLogger("runonce.kafka")

TXN_TIMEOUT_S = 30.0
#: how long a starting producer waits for the transaction coordinator (a restarting broker)
INIT_TIMEOUT_S = 180.0
#: another instance owns our transactional.id (or the broker fenced us): exit, never fight it
FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


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
    while True:
        try:
            producer.init_transactions(TXN_TIMEOUT_S)
            return producer
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if not err.retriable() or clock() > deadline:
                raise clients.translate(exc, f"{transactional_id}: cannot initialise transactions") from exc
            log.warning("%s: init_transactions: %s; retrying", transactional_id, err)


class Transactions:
    def __init__(self, transactional_id: str, new_producer: Callable[[], Producer],
                 group_metadata: Callable[[], Any], watchdog: Watchdog) -> None:
        self.transactional_id = transactional_id
        self._new_producer = new_producer
        self._group_metadata = group_metadata
        self.watchdog = watchdog
        self.producer = new_producer()

    def commit(self, records: Sequence[Out], offsets: Mapping[tuple[str, int], int], abort: bool = False) -> bool:
        """Write ``records`` and commit ``offsets`` (next offset to read, per topic partition)
        in one transaction. False: aborted, nothing of it is visible. ``abort`` (a failpoint's):
        write all of it, then abort, as a broker fault at the commit would."""
        try:
            self.producer.begin_transaction()
            for r in records:
                kwargs: dict[str, Any] = {"key": r.key, "value": r.value}
                if r.partition is not None:
                    kwargs["partition"] = r.partition
                if r.headers:
                    kwargs["headers"] = list(r.headers)
                self.producer.produce(r.topic, **kwargs)
            if offsets:
                with self.watchdog.guard("send_offsets_to_transaction"):
                    self.producer.send_offsets_to_transaction(
                        [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                        self._group_metadata(), TXN_TIMEOUT_S)
        except KafkaException as exc:
            # Never retry here in place: a rebalance (REBALANCE_IN_PROGRESS, a member that timed out
            # while the broker was away) completes only once the consumer polls again.
            return self._abandon(exc)
        if abort:
            self.producer.flush(TXN_TIMEOUT_S)
            return self._abandon(KafkaException(KafkaError(KafkaError._STATE, "failpoint: aborted on purpose")))
        for attempt in range(1, 4):
            try:
                with self.watchdog.guard("commit_transaction"):
                    self.producer.commit_transaction(TXN_TIMEOUT_S)
                return True
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                # librdkafka: a retriable commit error is resumed by calling commit again
                if err.retriable() and not err.fatal() and not err.txn_requires_abort() and attempt < 3:
                    log.warning("%s: commit_transaction: %s; retrying", self.transactional_id, err)
                    continue
                return self._abandon(exc)
        return False  # unreachable: the last attempt returns or abandons

    def _abandon(self, exc: KafkaException) -> bool:
        """The transaction cannot commit: abort it (or replace a dead producer). Returns False."""
        err: KafkaError = exc.args[0]
        if err.code() in clients.AUTH_ERRORS:
            raise clients.translate(exc, f"{self.transactional_id}: transaction refused") from exc
        if err.fatal():
            if err.code() in FENCED:
                raise FatalError(f"{self.transactional_id}: fenced or fatal producer error: {err}") from exc
            # e.g. a transaction that outlived transaction.timeout.ms: start over with a new producer
            log.warning("%s: fatal producer error, recreating the producer: %s", self.transactional_id, err)
            self.producer = self._new_producer()
            return False
        log.warning("%s: aborting transaction: %s", self.transactional_id, err)
        try:
            with self.watchdog.guard("abort_transaction"):
                self.producer.abort_transaction(TXN_TIMEOUT_S)
        except KafkaException as abort_exc:
            if abort_exc.args[0].code() in FENCED:
                raise FatalError(f"{self.transactional_id}: fenced while aborting: {abort_exc}") from abort_exc
            log.warning("%s: abort failed (%s); recreating the producer", self.transactional_id, abort_exc)
            self.producer = self._new_producer()
        return False

    def close(self) -> None:
        try:
            self.producer.flush(10)
        except KafkaException as exc:  # leaving anyway: uncommitted offsets are simply read again
            log.warning("%s: on exit: %s", self.transactional_id, exc)
