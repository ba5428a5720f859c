"""The transactional stream worker: batches of input decided by the shared ``Pipeline``, and
every consequence of a batch committed in one Kafka transaction with its input offsets.

Guarantee: exactly-once. A record's decision, re-key or stage-2 hand-off, dead letter and
state change (changelog) become visible together with the offset that consumed it, or not
at all; read_committed readers never see a decision twice, even across SIGKILLs.

- Positions are explicit (runonce/kafka/positions.py): the client never picks one
  (``auto.offset.reset=error``); an unknown position is an exit for a restart.
- Rebalances: a batch is committed before the next poll, so a revocation never finds a
  transaction open; an assigned partition is restored (restore.py) before its first batch.
  The range assignor gives partition p of every input topic to the same worker, so stage 1's
  state partition p has one writer (actions.requested p and the re-key topic p).
- A transaction that cannot commit is aborted: the state changes are dropped and the
  consumer goes back to the committed offsets. A fenced producer (another instance took
  over) or a fatal error stops the worker; its supervisor restarts it.
"""

from __future__ import annotations

import logging
import signal
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from runonce.core.policy import PolicyBook
from runonce.errors import FatalError, InvariantViolation
from runonce.kafka import clients, topics
from runonce.kafka.fetch_stall import STATS_INTERVAL_MS
from runonce.kafka.lag import LagGauge
from runonce.kafka.positions import StartPolicy, UnknownPosition, explicit_starts, rewind
from runonce.kafka.record import Record
from runonce.kafka.transactions import FENCED, TXN_TIMEOUT_S, init_producer, transactional_config
from runonce.kafka.watchdog import Watchdog
from runonce.settings import Settings
from runonce.streams.metrics import StreamMetrics
from runonce.streams.processor import Pipeline
from runonce.streams.transactional.batch_cap import BatchCap
from runonce.streams.transactional.restore import restore
from runonce.streams.transactional.state import TableState
from runonce.wire.codec import Codec

log = logging.getLogger("runonce.streams")

GROUP = "runonce"
INPUTS = (topics.REQUESTED, topics.REKEY, topics.SCOPED, topics.APPROVALS)
TXN_TIMEOUT_MS = 10_000
#: a transaction the broker did not take in time: its records, or the transaction itself, timed out
TIMED_OUT = frozenset({KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT, KafkaError.REQUEST_TIMED_OUT})


class TransactionalWorker:
    def __init__(self, settings: Settings, policies: PolicyBook, metrics: StreamMetrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or StreamMetrics()
        self.access = settings.kafka_access()
        self.partitions = settings.partitions
        root = settings.state_dir / settings.worker_name / "transactional"
        self.keys = TableState("keys", topics.CHANGELOG_KEYS, root)
        self.scopes = TableState("scopes", topics.CHANGELOG_SCOPES, root)
        #: held actions (streams/holds.py), on the partition that held them: partition p of
        #: every input topic is this worker's, so actions.approvals p finds its holds here
        self.holds = TableState("holds", topics.CHANGELOG_HOLDS, root)
        self.tables = (self.keys, self.scopes, self.holds)
        # A pass whose scope partition this worker owns (its state is open here) is decided by
        # stage 2 in the same transaction: one commit, not two, for a scoped action.
        self.pipeline = Pipeline(codec=Codec(), policies=policies, partitions=self.partitions, keys=self.keys,
                                 scopes=self.scopes, holds=self.holds, metrics=self.metrics,
                                 decides_scope_here=self.scopes.parts.__contains__)
        self.cap = BatchCap(settings.txn_max_records)
        self.max_wait_s = settings.txn_max_wait_ms / 1000
        #: where each assigned partition started (a partition without a committed offset rewinds here)
        self.starts: dict[tuple[str, int], int] = {}
        self.running = True
        self.transactional_id = f"runonce-stream-{settings.worker_name}"
        self.consumer = Consumer({
            **clients.base_config(self.access), "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "error", "isolation.level": "read_committed",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": topics.MAX_RECORD_BYTES + 1024 * 1024,
            "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": LagGauge(self.metrics.lag, GROUP).on_stats,
        })
        self.reader = clients.reader(self.access, group=f"{GROUP}-restore", to_end=True)
        # A transactional call that blocks past its timeout (librdkafka#5456, a coordinator that
        # went away) is an exit for a restart, never a worker that holds partitions and decides nothing.
        self.watchdog = Watchdog(self.transactional_id, TXN_TIMEOUT_S + 15.0)
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        # A batch commits in milliseconds. A short transaction timeout bounds how long a worker
        # that died mid-transaction (and does not come back) holds up the partitions' next owner:
        # its restore and its stable offset fetch wait for that transaction to be resolved.
        return init_producer(transactional_config(self.access, self.transactional_id, **{
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "linger.ms": 5, "batch.size": 1024 * 1024, "queue.buffering.max.messages": 1_000_000,
            "message.max.bytes": topics.MAX_RECORD_BYTES + 1024 * 1024,
        }), self.transactional_id)

    # -- assignment ------------------------------------------------------------------
    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        # A new group starts at the earliest request: nothing an agent published is skipped.
        starts = [TopicPartition(topic, s.partition, s.offset)
                  for topic, s in explicit_starts(consumer, partitions, StartPolicy.EARLIEST, self.transactional_id,
                                                  timeout_s=30)]
        # Committed offsets were read stably (KIP-447), so the previous owner's transactions are
        # resolved; now bring each owned state partition to its changelog's end.
        owned: dict[str, set[int]] = {topics.REQUESTED: set(), topics.SCOPED: set()}
        for tp in starts:  # stage 1's state partition p serves actions.requested p and the re-key topic p
            owned[topics.SCOPED if tp.topic == topics.SCOPED else topics.REQUESTED].add(tp.partition)
        every = {tp.partition for tp in starts}  # a hold lives on the partition that decided it
        for table, parts in ((self.keys, owned[topics.REQUESTED]), (self.scopes, owned[topics.SCOPED]),
                             (self.holds, every)):
            for p in list(table.parts):
                if p not in parts:
                    table.close(p)
            for p in sorted(parts):
                done = restore(self.reader, table, p)
                self.metrics.restored.labels(table.name).inc(done.records)
                log.info("%s: %s[%d] restored %d records (%d..%d) in %.1f s%s", self.transactional_id, table.name,
                         p, done.records, done.from_offset, done.to_offset, done.seconds,
                         " (rebuilt)" if done.rebuilt else "")
        self.starts = {(tp.topic, tp.partition): tp.offset for tp in starts}
        self.pipeline.rolled_back()  # state partitions came and went: nothing cached about them holds
        consumer.assign(starts)
        log.info("%s assigned %s", self.transactional_id,
                 ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}" for tp in starts))

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        for table in self.tables:
            table.abort()
        self.pipeline.rolled_back()

    # -- loop ------------------------------------------------------------------------
    def run(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "running", False))
        self.consumer.subscribe(list(INPUTS), on_assign=self._on_assign, on_revoke=self._on_revoke)
        try:
            while self.running:
                self.step()
        finally:
            self.consumer.close()
            self.reader.close()
            for table in self.tables:
                table.close_all()

    def step(self) -> int:
        """Consume one batch and commit everything it caused; returns records decided."""
        # What arrived while the last transaction committed, without waiting for more: a batch
        # that waits to fill adds its wait to every record's latency, and under load the
        # batches grow by themselves. Idle, block until a first record comes.
        cap = self.cap.records
        msgs = self.consumer.consume(cap, 0)
        if not msgs:
            msgs = self.consumer.consume(1, self.max_wait_s)
            if msgs and cap > 1:
                msgs += self.consumer.consume(cap - 1, 0)
        batch: list[Record] = []
        for msg in msgs:
            err = msg.error()
            if err is None:
                batch.append(Record.of(msg))
            elif err.code() == KafkaError._AUTO_OFFSET_RESET:
                raise UnknownPosition(f"{self.transactional_id}: {msg.topic()}[{msg.partition()}]: {err.str()}")
            elif err.fatal():
                raise FatalError(f"consumer: {err}")
            elif err.code() != KafkaError._PARTITION_EOF:
                log.warning("consumer: %s", err)
        if not batch:
            return 0
        started = time.perf_counter()
        if self._commit(batch):
            self.metrics.transactions.labels("committed").inc()
            self.metrics.batch_records.observe(len(batch))
            self.metrics.commit_seconds.observe(time.perf_counter() - started)
            self.metrics.batch_cap.set(self.cap.committed(len(batch)))
            return len(batch)
        return 0

    def _commit(self, batch: list[Record]) -> bool:
        changelog_ends: dict[tuple[str, int], int] = {}

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                key = (msg.topic(), msg.partition())
                changelog_ends[key] = max(changelog_ends.get(key, 0), msg.offset() + 1)

        try:
            self.producer.begin_transaction()
            for out in self.pipeline.process_batch(batch):
                self._produce(out.topic, out.key, out.value, out.partition, list(out.headers) or None)
            for table in self.tables:
                for partition, key, value in table.changes():
                    self._produce(table.changelog, key, value, partition, None, delivered)
            # Flush before the offsets, though the offsets could go while the records are on
            # their way (transactions of 40-49 ms instead of 84 under bench/decision_latency.py's
            # steady load): a worker that sends its offsets with records in flight when the broker
            # pauses meets librdkafka#5456 (send_offsets_to_transaction blocked past its timeout)
            # and stalls its partitions until the watchdog restarts it, 45 s (seen in the fault test).
            with self.watchdog.guard("flush"):
                undelivered = self.producer.flush(TXN_TIMEOUT_S)  # delivery reports (changelog offsets)
            if undelivered:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{undelivered} records not delivered"))
            offsets: dict[tuple[str, int], int] = {}
            for r in batch:
                offsets[(r.topic, r.partition)] = r.offset + 1
            # Offsets that arrive after the broker has timed the transaction out are useless, and
            # this is the call librdkafka#5456 can block past its timeout (seen after a broker
            # pause): bounded by the transaction's own timeout, left 5 s after it.
            with self.watchdog.guard("send_offsets_to_transaction", TXN_TIMEOUT_MS / 1000 + 5):
                self.producer.send_offsets_to_transaction(
                    [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                    self.consumer.consumer_group_metadata(), TXN_TIMEOUT_MS / 1000)
            with self.watchdog.guard("commit_transaction"):
                self.producer.commit_transaction(TXN_TIMEOUT_S)
        except KafkaException as exc:
            self._abandon(exc)
            return False
        for table in self.tables:
            ends = {p: end for (topic, p), end in changelog_ends.items() if topic == table.changelog}
            missing = [p for p, part in table.parts.items() if part.pending and p not in ends]
            if missing:
                raise InvariantViolation(f"{table.name}: committed changes without changelog offsets for {missing}")
            table.commit(ends)
        return True

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                 headers: list[tuple[str, bytes]] | None, on_delivery: Any = None) -> None:
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        while True:
            try:
                self.producer.produce(topic, **kwargs)
                return
            except BufferError:  # the local queue is full: let it drain
                self.producer.poll(0.05)

    def _abandon(self, exc: KafkaException) -> None:
        err: KafkaError = exc.args[0]
        for table in self.tables:
            table.abort()
        self.pipeline.rolled_back()
        self.metrics.transactions.labels("aborted").inc()
        if err.code() in clients.AUTH_ERRORS:
            raise clients.translate(exc, f"{self.transactional_id}: transaction refused") from exc
        if err.code() in FENCED or (err.fatal() and not err.txn_requires_abort()):
            raise FatalError(f"{self.transactional_id}: fenced or fatal producer error: {err}") from exc
        log.warning("%s: aborting transaction: %s", self.transactional_id, err)
        if err.code() in TIMED_OUT:
            log.warning("%s: the broker did not take the transaction in time: transactions of up to %d records "
                        "until they commit again", self.transactional_id, self.cap.timed_out())
            self.metrics.batch_cap.set(self.cap.records)
        try:
            with self.watchdog.guard("abort_transaction"):
                self.producer.abort_transaction(TXN_TIMEOUT_S)
        except KafkaException as abort_exc:
            raise FatalError(f"{self.transactional_id}: abort failed: {abort_exc}") from abort_exc
        rewind(self.consumer, self.starts, self.transactional_id, timeout_s=30)
