"""The transactional stream worker: batches of input decided by the shared ``Pipeline``, and
every consequence of a batch committed in one Kafka transaction with its input offsets.

Guarantee: exactly-once. A record's decision, re-key or stage-2 hand-off, dead letter and
state change (changelog) become visible together with the offset that consumed it, or not
at all; read_committed readers never see a decision twice, even across SIGKILLs.

- Positions are explicit (runonce/kafka/positions.py): the client never picks one
  (``auto.offset.reset=error``); an unknown position is an exit for a restart.
- Rebalances: a batch is committed before the next poll, so a revocation never finds a
  transaction open. An assigned partition waits, paused, until its state is restored
  (restore.py); the restore is read a slice between batches, so the partitions whose state
  is current are decided meanwhile.
  The range assignor gives partition p of every input topic to the same worker, so stage 1's
  state partition p has one writer (actions.requested p and the re-key topic p).
- Each batch commits through the one commit path (runonce/kafka/checkpoint.py, its steps
  and its failure table). A transaction that cannot commit is aborted: the state changes
  are dropped and the consumer goes back to the committed offsets. A fenced producer
  (another instance took over) stops the worker; its supervisor restarts it.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

from confluent_kafka import Message, Producer, TopicPartition

from runonce.core.policy import PolicyBook
from runonce.errors import InvariantViolation
from runonce.kafka import clients, loop, topics
from runonce.kafka.checkpoint import Failure
from runonce.kafka.health import Health
from runonce.kafka.lag import LagGauge
from runonce.kafka.loop import ConsumerLoop, Processed, RunsItsLoop
from runonce.kafka.positions import StartPolicy, explicit_starts, rewind
from runonce.kafka.process import GroupProtocol, Membership, transactional_clients
from runonce.kafka.receipts import Receipts, head_of
from runonce.kafka.record import Out, Record
from runonce.kafka.watchdog import Watchdog
from runonce.receipts.signing import Signer
from runonce.settings import Settings
from runonce.streams.metrics import StreamMetrics
from runonce.streams.processor import Pipeline
from runonce.streams.receipts import chain_of, decision_bytes
from runonce.streams.transactional.batch_cap import BatchCap
from runonce.streams.transactional.restore import RestoreJob
from runonce.streams.transactional.state import TableState
from runonce.telemetry.configured import decision_spans
from runonce.wire.codec import Codec

log = logging.getLogger("runonce.streams")

GROUP = "runonce"


def transactional_id_of(worker_name: str) -> str:
    """A worker's transactional id, and its group.instance.id as a static member."""
    return f"runonce-stream-{worker_name}"
#: the step of ``runonce_transaction_step_seconds`` before the commit path's own (checkpoint.Step)
DECIDE = "decide"
INPUTS = (topics.REQUESTED, topics.REKEY, topics.SCOPED, topics.APPROVALS, topics.CANCELS)
#: the broker aborts a worker's transaction open longer (transaction.timeout.ms). A batch
#: commits in milliseconds; a short timeout bounds how long a worker that died mid-transaction
#: (and does not come back) holds up the partitions' next owner: its restore and its stable
#: offset fetch wait for that transaction to be resolved.
TRANSACTION_TIMEOUT_MS = 10_000
#: how long a restore reads between two batches (or in an idle turn): a batch of 2,000 takes
#: about as long to decide, so a worker given partitions spends about half its time on them
RESTORE_SLICE_S = 0.1
#: how long the assignment itself restores before the partitions still behind are paused
RESTORE_AT_ONCE_S = 0.2
#: the worker's producer, beyond what every transactional producer has
PRODUCER_CONFIG = {"linger.ms": 5, "batch.size": 1024 * 1024, "queue.buffering.max.messages": 1_000_000,
                   "message.max.bytes": topics.MAX_RECORD_BYTES + 1024 * 1024}
#: the worker's batches compressed unless the deployment's client settings say otherwise
#: (``compression.type``): over TLS the broker encrypts every byte it stores and serves, and
#: lz4 halved what TLS added to its CPU a decision (bench/tls_cost.py, docs/measured.md)
OUTPUT_COMPRESSION = "lz4"


def worker_producer_config(settings: Settings) -> dict[str, Any]:
    return {**PRODUCER_CONFIG, "compression.type": settings.kafka_config.get("compression.type", OUTPUT_COMPRESSION)}


def worker_consumer_config(settings: Settings) -> dict[str, Any]:
    """What the worker's consumer adds to a transactional process's (process.py): partition p
    of every input on one worker (range: the classic client-side assignor, or KIP-848's on the
    broker, which keeps partitions of one number together too), fetches batched over
    ``fetch_wait_ms``."""
    assignor = ({"group.remote.assignor": "range"} if settings.group_protocol is GroupProtocol.CONSUMER
                else {"partition.assignment.strategy": "range"})
    return {**assignor, "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": topics.MAX_RECORD_BYTES + 1024 * 1024,
            **clients.batched_fetch(settings.fetch_wait_ms)}


class TransactionalWorker(RunsItsLoop):
    def __init__(self, settings: Settings, policies: PolicyBook, metrics: StreamMetrics | None = None, *,
                 consumer: loop.GroupConsumer | None = None, reader: Any = None, new_producer: Callable[[], Producer] | None = None,
                 watchdog: Watchdog | None = None, health: Health | None = None) -> None:
        """``consumer``, ``reader`` (restores), ``new_producer`` and ``watchdog`` are made here
        from ``settings`` unless given (tests give fakes). ``health``: what the process's probes
        answer (made before this, so they answer while the producer initialises)."""
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
        self.pipeline = Pipeline(codec=Codec(), policies=policies, partitions=self.partitions, keys=self.keys, spans=decision_spans("runonce-worker", os.environ),
                                 scopes=self.scopes, holds=self.holds, metrics=self.metrics,
                                 decides_scope_here=self._scope_is_current)
        #: each decision's receipt, chained and signed in its transaction (with a key; docs/receipts.md)
        self.receipts = Receipts(Signer.from_file(settings.receipts_key_file)) if settings.receipts_key_file else None
        self.cap = BatchCap(settings.txn_max_records)
        self.max_wait_s = settings.txn_max_wait_ms / 1000
        #: where each assigned partition started (a partition without a committed offset rewinds here)
        self.starts: dict[tuple[str, int], int] = {}
        #: restores under way, read a slice at a time; and the partition numbers whose input
        #: waits, paused, until each of their tables is restored
        self.restores: list[RestoreJob] = []
        self.restoring: set[int] = set()
        #: partitions sought back in this batch (a record of a partition still restoring)
        self._sought: set[tuple[str, int]] = set()
        self.transactional_id = transactional_id_of(settings.worker_name)
        self.reader = reader if reader is not None else clients.reader(self.access, group=f"{GROUP}-restore",
                                                                        to_end=True)
        with clients.closed_if_raised(self.reader):
            made = transactional_clients(
                self.access, self.transactional_id,
                Membership(GROUP, settings.worker_session_timeout_ms, settings.static_membership,
                           settings.group_protocol),
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS, consumer_config=worker_consumer_config(settings),
                producer_config=worker_producer_config(settings), stats_readers=[LagGauge(self.metrics.lag, GROUP)],
                consumer=consumer, new_producer=new_producer, watchdog=watchdog,
                on_step=lambda step, seconds: self._took(step.value, seconds))
        self.consumer, self.checkpoint, self.group_stall = made.consumer, made.checkpoint, made.group_stall
        self.incremental = settings.group_protocol is GroupProtocol.CONSUMER
        self.loop = ConsumerLoop(self.transactional_id, self.consumer, self, INPUTS, wait_s=self.max_wait_s,
                                 group_stall=self.group_stall, health=health, incremental=self.incremental)

    def _took(self, step: str, seconds: float) -> None:
        """One step of a committed transaction: ``DECIDE``, or a ``checkpoint.Step``'s value."""
        self.metrics.step_seconds.labels(step).observe(seconds)

    # -- assignment ------------------------------------------------------------------
    def on_assign(self, consumer: loop.GroupConsumer, partitions: list[TopicPartition]) -> None:
        """``partitions``: the whole assignment in a classic group, the ones added under KIP-848."""
        # A new group starts at the earliest request: nothing an agent published is skipped.
        starts = [TopicPartition(topic, s.partition, s.offset)
                  for topic, s in explicit_starts(consumer, partitions, StartPolicy.EARLIEST, self.transactional_id,
                                                  timeout_s=30)]
        if not self.incremental:
            self.starts = {}
        self.starts.update({(tp.topic, tp.partition): tp.offset for tp in starts})
        # Committed offsets were read stably (KIP-447), so the previous owner's transactions are
        # resolved; now bring each state partition given to its changelog's end.
        self._own(given=starts)
        # what is read in a moment (a state current but for its last commit marker, a short tail)
        # is read now: a partition paused and resumed starts fetching again only after a second
        # or so (measured: bench/scale_out.py), which a short restore would not be worth
        self._restore_some(RESTORE_AT_ONCE_S, resume=False)
        self.pipeline.rolled_back()  # state partitions came and went: nothing cached about them holds
        if self.incremental:
            consumer.incremental_assign(starts)
        else:
            consumer.assign(starts)
        # every input of a partition number whose state is being restored waits (under KIP-848
        # one of its topics may have come earlier); the rest are decided at once, resumed
        # outright: librdkafka keeps a partition's pause through its revocation, so one paused
        # while restoring and taken before it was done would come back paused for good
        waiting = [TopicPartition(topic, p) for topic, p in self.starts if p in self.restoring]
        current = [TopicPartition(tp.topic, tp.partition) for tp in starts if tp.partition not in self.restoring]
        if current:
            consumer.resume(current)
        if waiting:
            consumer.pause(waiting)
        if starts or not self.incremental:  # librdkafka hands KIP-848 members an empty one after each revocation
            log.info("%s assigned %s", self.transactional_id,
                     ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}" for tp in starts) or "nothing")

    def on_revoke(self, consumer: loop.GroupConsumer, partitions: list[TopicPartition]) -> None:
        # between batches: nothing is pending; a transaction aborted here is a batch never committed
        for table in self.tables:
            table.abort()
        self.pipeline.rolled_back()
        if self.receipts is not None:
            self.receipts.aborted()
        for tp in partitions:
            self.starts.pop((tp.topic, tp.partition), None)
        held = {p for _, p in self.starts}
        self.restores = [job for job in self.restores if job.partition in held]
        self.restoring &= held
        self.loop.health.catching_up(len(self.restoring))
        # What was taken may be decided by its next owner from now on: no chain of it stays here
        # (a member dropped from its group and given a partition back must read its chain again),
        # and under KIP-848, where the rest stays with this worker, no state of it stays open
        # (stage 2 in place asks what is open). A classic group's next assignment closes the
        # tables it does not give back, and catches up those it does.
        self._own(given=[], tables=self.incremental)
        if self.incremental:
            log.info("%s revoked %s", self.transactional_id,
                     ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions))

    def _own(self, given: list[TopicPartition], *, tables: bool = True) -> None:
        """Each receipt chain (and with ``tables`` each table) open for exactly the partitions
        held (``self.starts``); those among ``given`` restored to their changelog's end (a
        classic group gives all again)."""
        owned: dict[str, set[int]] = {topics.REQUESTED: set(), topics.SCOPED: set()}
        for topic, p in self.starts:  # stage 1's state partition p serves actions.requested p and the re-key topic p
            owned[topics.SCOPED if topic == topics.SCOPED else topics.REQUESTED].add(p)
        every = {p for _, p in self.starts}  # a hold lives on the partition that decided it
        fresh: dict[str, set[int]] = {topics.REQUESTED: set(), topics.SCOPED: set()}
        for tp in given:
            fresh[topics.SCOPED if tp.topic == topics.SCOPED else topics.REQUESTED].add(tp.partition)
        for table, parts, restored in ((self.keys, owned[topics.REQUESTED], fresh[topics.REQUESTED]),
                                       (self.scopes, owned[topics.SCOPED], fresh[topics.SCOPED]),
                                       (self.holds, every, {tp.partition for tp in given})):
            if not tables:
                break
            for p in list(table.parts):
                if p not in parts:
                    table.close(p)
            # a restore under way goes on unless the partition was taken, or given again (a new job
            # starts from where the old one got to)
            self.restores = [job for job in self.restores
                             if job.table is not table or (job.partition in parts and job.partition not in restored)]
            for p in sorted(parts & restored):
                job = RestoreJob(self.reader, table, p)
                if job.done:
                    self._restored(job)
                else:
                    self.restores.append(job)
        if tables:
            self.restores.sort(key=lambda job: job.partition)  # a partition resumes once its every table is current
            self.restoring = {job.partition for job in self.restores}
            self.loop.health.catching_up(len(self.restoring))
        if self.receipts is not None:  # where each owned chain stands (every transaction ends on a checkpoint)
            for p in list(self.receipts.committed):
                if p not in every:
                    self.receipts.disown(p)
            for p in sorted(every - set(self.receipts.committed)):
                self.receipts.own(p, head_of(self.reader, p, chain_of(p)))

    # -- the loop's task (runonce/kafka/loop.py) ------------------------------------------
    def batch_limit(self) -> int:
        # smaller after a transaction the broker did not take in time (batch_cap.py)
        return self.cap.records

    def _scope_is_current(self, partition: int) -> bool:
        """Stage 2 decides scope partition ``partition`` in place: its state is here and current
        (else the action goes through the scoped topic, decided where and when it is)."""
        return partition in self.scopes.parts and partition not in self.restoring

    def _restored(self, job: RestoreJob) -> None:
        done = job.result()
        self.metrics.restored.labels(done.table).inc(done.records)
        log.info("%s: %s[%d] restored %d records (%d..%d) in %.1f s%s", self.transactional_id, done.table,
                 done.partition, done.records, done.from_offset, done.to_offset, done.seconds,
                 " (rebuilt)" if done.rebuilt else "")

    def _restore_some(self, budget_s: float = RESTORE_SLICE_S, *, resume: bool = True) -> None:
        """A slice of the restores under way, in partition order; a partition whose every table
        is current resumes (``resume``: it was paused, it is not assigned yet)."""
        until = time.monotonic() + budget_s
        while self.restores and time.monotonic() < until:
            job = self.restores[0]
            if not job.step(until - time.monotonic()):
                return
            self.restores.pop(0)
            self._restored(job)
            if any(other.partition == job.partition for other in self.restores):
                continue
            self.restoring.discard(job.partition)
            self.loop.health.catching_up(len(self.restoring))
            if not resume:
                continue
            self.pipeline.rolled_back()
            current = [TopicPartition(topic, p) for topic, p in self.starts if p == job.partition]
            self.consumer.resume(current)
            log.info("%s: partition %d's state is current: deciding it", self.transactional_id, job.partition)

    def idle(self) -> None:
        self._restore_some()

    def close(self, failure: BaseException | None) -> None:
        self.reader.close()
        for table in self.tables:
            table.close_all()

    def process(self, records: list[Message]) -> Processed:
        """Decide a batch and commit everything it caused; then a slice of a restore."""
        self._sought.clear()
        # per record only while a partition is restored: the hot path is untouched otherwise
        current = [msg for msg in records if not self._waits(msg)] if self.restoring else records
        try:
            return self._process(current)
        finally:
            self._restore_some()

    def _waits(self, msg: Message) -> bool:
        """A record fetched before its partition was paused, its state not restored yet: not
        decided now; its partition goes back to it, to be read again once resumed."""
        partition = msg.partition()
        if partition not in self.restoring or partition is None:
            return False
        topic, offset = msg.topic(), msg.offset()
        if topic is not None and offset is not None and (topic, partition) not in self._sought:
            self._sought.add((topic, partition))
            self.consumer.seek(TopicPartition(topic, partition, offset))
        return True

    def _process(self, records: list[Message]) -> Processed:
        if not records:
            return Processed(0)
        batch = [Record.of(msg) for msg in records]
        started = time.perf_counter()
        decided = self._decide(batch)
        decided_s = time.perf_counter() - started
        if not self._commit(batch, decided):
            return Processed(0)
        self._took(DECIDE, decided_s)
        self.metrics.transactions.labels("committed").inc()
        self.metrics.batch_records.observe(len(batch))
        self.metrics.commit_seconds.observe(time.perf_counter() - started)
        self.metrics.batch_cap.set(self.cap.committed(len(batch)))
        return Processed(len(batch))

    def _decide(self, batch: list[Record]) -> list[Out]:
        """Everything the batch causes: decisions, re-keys, dead letters, and each table's
        changes for its changelog."""
        if self.receipts is None:
            records = self.pipeline.process_batch(batch)
        else:  # each decision's receipt behind it, on the chain of the partition that decided it
            records = []
            for inbound in batch:
                outs = self.pipeline.process_all(inbound)
                for out in outs:
                    self.receipts.add(inbound.partition, decision_bytes, out)
                records += outs
            records += self.receipts.segments(signed_at_ms=max(r.timestamp_ms for r in batch))
        for table in self.tables:
            records += [Out(table.changelog, key, value, partition) for partition, key, value in table.changes()]
        return records

    def _commit(self, batch: list[Record], records: list[Out]) -> bool:
        """The decided batch committed with its input offsets in one transaction
        (runonce/kafka/checkpoint.py); after the commit, the state changes go to RocksDB with
        the changelog offsets they reached. False: aborted and rewound."""
        offsets: dict[tuple[str, int], int] = {}
        for r in batch:
            offsets[(r.topic, r.partition)] = r.offset + 1
        failure = self.checkpoint.commit(records, offsets, flush=True, after_commit=self._write_state)
        if failure is None:
            if self.receipts is not None:
                self.receipts.committed_now()
            return True
        for table in self.tables:
            table.abort()
        self.pipeline.rolled_back()
        if self.receipts is not None:
            self.receipts.aborted()
        self.metrics.transactions.labels("aborted").inc()
        if failure is Failure.TIMED_OUT:
            log.warning("%s: the broker did not take the transaction in time: transactions of up to %d records "
                        "until they commit again", self.transactional_id, self.cap.timed_out())
            self.metrics.batch_cap.set(self.cap.records)
        rewind(self.consumer, self.starts, self.transactional_id, timeout_s=30)
        return False

    def _write_state(self, ends: dict[tuple[str, int], int]) -> None:
        """Step 6 of the checkpoint: each table's changes, with the changelog offset they reached."""
        for table in self.tables:
            reached = {p: end for (topic, p), end in ends.items() if topic == table.changelog}
            missing = [p for p, part in table.parts.items() if part.pending and p not in reached]
            if missing:
                raise InvariantViolation(f"{table.name}: committed changes without changelog offsets for {missing}")
            table.commit(reached)
