"""The one commit path: a Kafka transaction that writes records and commits the consumer's
offsets together (KIP-447), or not at all. The stream worker commits each batch here, the
executor each batch of intents and of results; processing happens before, never inside.

``Checkpoint.commit`` takes these steps, in this order:

1. begin the transaction;
2. produce the records; a full local queue (``BufferError``) is waited out, never dropped;
3. flush, when the caller needs its records acknowledged before the offsets go (the worker:
   its changelog offsets come from the delivery reports, and a worker that sent offsets with
   records still in flight when the broker paused met librdkafka#5456 and stalled 45 s);
4. send the offsets with the group's metadata, bounded by the transaction's own timeout
   (past it the broker has aborted the transaction: the offsets are useless);
5. commit;
6. after the commit, the caller's step (the worker writes its RocksDB batch), given each
   partition's end as acknowledged in step 3.

A committed transaction's steps 2-5 are timed (``Step``) for the caller's ``on_step``: the
worker's ``runonce_transaction_step_seconds``, which shows which step a slow commit spent in.

Anything that fails aborts the transaction (nothing of it is visible to read_committed
readers) and ``commit`` answers how it failed; the caller rewinds to the committed offsets.
``FAILURES`` says, row by row, what each failure does and why."""

from __future__ import annotations

import enum
import logging
import time
from typing import Any, Callable, Iterable, Mapping, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from runonce.errors import FatalError
from runonce.kafka import clients
from runonce.kafka.record import Out
from runonce.kafka.transactions import CALL_TIMEOUT_S
from runonce.kafka.watchdog import Watchdog

log = logging.getLogger("runonce.kafka")

#: how often a commit that failed retriably is asked again
COMMIT_ATTEMPTS = 3
#: another instance owns our transactional.id (or the broker fenced us)
FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
#: the broker did not take the transaction (or its records) in time
TIMED_OUT_CODES = frozenset({KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT, KafkaError.REQUEST_TIMED_OUT})


class Step(enum.Enum):
    """A timed step of a committed transaction (the module's docstring, steps 2-5; step 1's
    begin counts in PRODUCE)."""

    PRODUCE = "produce"
    FLUSH = "flush"
    OFFSETS = "offsets"
    COMMIT = "commit"


class Failure(enum.Enum):
    """How a transaction failed: what ``commit`` answers (or raises), by ``FAILURES``."""

    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    TIMED_OUT = "timed_out"
    FATAL = "fatal"
    FENCED = "fenced"
    REFUSED = "refused"


#: every failure, what the checkpoint does, and why (QUEUE_FULL is step 2's BufferError, waited
#: out in place: it is not a failure of the transaction)
FAILURES: Mapping[Failure, str] = {
    Failure.RETRIABLE: "aborted like ABORTABLE; but a commit that failed so (``resumable``, a timeout too) is "
                       "first committed again, up to COMMIT_ATTEMPTS: librdkafka resumes it, where an abort could "
                       "meet a transaction the broker is committing",
    Failure.ABORTABLE: "aborted; the caller rewinds to the committed offsets and processes the records again: "
                       "never retried in place, as a rebalance completes only once the consumer polls",
    Failure.TIMED_OUT: "aborted like ABORTABLE; the caller also makes its transactions smaller (the broker "
                       "was behind: a produce quota, a slow disk), until one commits",
    Failure.FATAL: "the producer cannot go on (a transaction that outlived transaction.timeout.ms, an abort "
                   "that failed): a new producer (its init aborts what was open), then as ABORTABLE",
    Failure.FENCED: "raised as FatalError: another instance owns this transactional.id; going on could double "
                    "an action, so the process exits and never fights it",
    Failure.REFUSED: "raised as AccessDenied: the broker's ACLs refuse this principal; retrying cannot help",
}


def resumable(err: KafkaError) -> bool:
    """A commit that failed so is resumed by committing again (librdkafka's rule: a timed-out
    commit too; aborting it instead could abort a transaction the broker is committing)."""
    return bool(err.retriable()) and not err.fatal() and not err.txn_requires_abort()


def classify(err: KafkaError) -> Failure:
    if err.code() in clients.AUTH_ERRORS:
        return Failure.REFUSED
    if err.code() in FENCED_CODES:
        return Failure.FENCED
    if err.fatal():
        return Failure.FATAL
    if err.code() in TIMED_OUT_CODES:
        return Failure.TIMED_OUT
    if err.retriable() and not err.txn_requires_abort():
        return Failure.RETRIABLE
    return Failure.ABORTABLE


class CommitPath(Protocol):
    """What a committing process holds of its ``Checkpoint`` (tests give fakes that record)."""

    transactional_id: str

    def commit(self, records: Iterable[Out], offsets: Mapping[tuple[str, int], int], *, flush: bool = False,
               after_commit: Callable[[dict[tuple[str, int], int]], None] | None = None,
               abort: bool = False) -> Failure | None: ...

    def close(self) -> None: ...


class Checkpoint:
    def __init__(self, transactional_id: str, new_producer: Callable[[], Producer],
                 group_metadata: Callable[[], Any], watchdog: Watchdog, *, transaction_timeout_s: float,
                 on_step: Callable[[Step, float], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        """``new_producer``: an initialised transactional producer (called now, and again after
        a FATAL failure). ``transaction_timeout_s``: the producer's transaction.timeout.ms, in seconds.
        ``on_step``: told each step's seconds (by ``clock``) once a transaction has committed."""
        self.transactional_id = transactional_id
        self.on_step = on_step
        self.clock = clock
        self._new_producer = new_producer
        self._group_metadata = group_metadata
        self.watchdog = watchdog
        self.transaction_timeout_s = transaction_timeout_s
        self.producer = new_producer()

    def commit(self, records: Iterable[Out], offsets: Mapping[tuple[str, int], int], *, flush: bool = False,
               after_commit: Callable[[dict[tuple[str, int], int]], None] | None = None,
               abort: bool = False) -> Failure | None:
        """Steps 1-6 (the module's docstring). None: committed, and ``after_commit`` ran with
        each (topic, partition)'s end as acknowledged (with ``flush``). Else how it failed: the
        transaction is aborted. ``abort`` (a failpoint's): write all of it, then abort, as a
        broker fault at the commit would. Raises FatalError for FENCED, AccessDenied for REFUSED."""
        ends: dict[tuple[str, int], int] = {}

        def delivered(err: KafkaError | None, msg: Any) -> None:
            # offset None: delivered where librdkafka does not know (a retry the broker had
            # already written, after a leader's loss); an end is what is known, never more
            if err is None and msg.offset() is not None:
                key = (msg.topic(), msg.partition())
                ends[key] = max(ends.get(key, 0), msg.offset() + 1)

        took: list[tuple[Step, float]] = []
        started = self.clock()

        def done(step: Step) -> None:
            nonlocal started
            now = self.clock()
            took.append((step, now - started))
            started = now

        try:
            self.producer.begin_transaction()                                         # 1
            for record in records:                                                     # 2
                self._produce(record, delivered if flush else None)
            done(Step.PRODUCE)
            if flush or abort:                                                         # 3
                with self.watchdog.guard("flush"):
                    undelivered = self.producer.flush(CALL_TIMEOUT_S)
                if undelivered:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{undelivered} records not delivered"))
                done(Step.FLUSH)
            if offsets:                                                                # 4
                limit_s = min(self.transaction_timeout_s, CALL_TIMEOUT_S)
                with self.watchdog.guard("send_offsets_to_transaction", limit_s + 5):
                    self.producer.send_offsets_to_transaction(
                        [TopicPartition(t, p, o) for (t, p), o in offsets.items()], self._group_metadata(), limit_s)
                done(Step.OFFSETS)
            if abort:
                raise KafkaException(KafkaError(KafkaError._STATE, "failpoint: aborted on purpose"))
            self._commit()                                                             # 5
            done(Step.COMMIT)
        except KafkaException as exc:
            return self._abandon(exc)
        if self.on_step is not None:
            for step, seconds in took:
                self.on_step(step, seconds)
        if after_commit is not None:                                                   # 6
            after_commit(ends)
        return None

    def _produce(self, record: Out, on_delivery: Any) -> None:
        kwargs: dict[str, Any] = {"key": record.key, "value": record.value}
        if record.partition is not None:
            kwargs["partition"] = record.partition
        if record.headers:
            kwargs["headers"] = list(record.headers)
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        while True:
            try:
                self.producer.produce(record.topic, **kwargs)
                return
            except BufferError:  # the local queue is full: let it drain (QUEUE_FULL)
                self.producer.poll(0.05)

    def _commit(self) -> None:
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                with self.watchdog.guard("commit_transaction"):
                    self.producer.commit_transaction(CALL_TIMEOUT_S)
                return
            except KafkaException as exc:
                if not resumable(exc.args[0]) or attempt == COMMIT_ATTEMPTS:
                    raise
                log.warning("%s: commit_transaction: %s; committing again", self.transactional_id, exc.args[0])

    def _abandon(self, exc: KafkaException) -> Failure:
        """Abort by FAILURES; returns the failure (or raises, for FENCED and REFUSED)."""
        err: KafkaError = exc.args[0]
        failure = classify(err)
        if failure is Failure.REFUSED:
            raise clients.translate(exc, f"{self.transactional_id}: transaction refused") from exc
        if failure is Failure.FENCED:
            raise FatalError(f"{self.transactional_id}: fenced: {err}") from exc
        if failure is Failure.FATAL:
            log.warning("%s: fatal producer error, a new producer: %s", self.transactional_id, err)
            self.producer = self._new_producer()
            return failure
        log.warning("%s: aborting transaction (%s): %s", self.transactional_id, failure.value, err)
        try:
            with self.watchdog.guard("abort_transaction"):
                self.producer.abort_transaction(CALL_TIMEOUT_S)
        except KafkaException as abort_exc:
            if classify(abort_exc.args[0]) is Failure.FENCED:
                raise FatalError(f"{self.transactional_id}: fenced while aborting: {abort_exc}") from abort_exc
            log.warning("%s: abort failed (%s); a new producer", self.transactional_id, abort_exc)
            self.producer = self._new_producer()
            return Failure.FATAL
        return failure

    def close(self) -> None:
        try:
            self.producer.flush(10)
        except KafkaException as exc:  # leaving anyway: uncommitted offsets are simply read again
            log.warning("%s: on exit: %s", self.transactional_id, exc)
