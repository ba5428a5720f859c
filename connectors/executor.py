"""An executor: one vendor's consumer group on actions.approved (read_committed) and a
transactional producer. Per approved action of its tools:

1. intent   a transaction commits ``attempting`` to actions.results (with the offsets of
            the records before this one) — durable before anything reaches outside;
2. effect   the connector is called (retries with the same vendor key, see runner.py);
3. result   a transaction commits the result *and* this record's offset together
            (``send_offsets_to_transaction`` with the group metadata: KIP-447 fencing).

A crash between 1 and 3 redelivers the action with its intent and no result: the runner
reconciles (same vendor key, state check, or in_doubt) instead of calling blindly again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from typing import Any, Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from runonce.codec import Codec
from runonce.connectors.base import ActionCall, Connector
from runonce.connectors.results import ResultIndex, to_record
from runonce.connectors.runner import ActionRunner, Outcome, Status
from runonce.errors import FatalError, InvalidInput
from runonce.kafka import clients, topics
from runonce.settings import Settings
from runonce.streams.records import dead_letter_headers

log = logging.getLogger("runonce.executor")

TXN_TIMEOUT_S = 30.0
#: how long a starting executor waits for the transaction coordinator (a restarting broker)
INIT_TIMEOUT_S = 180.0
#: exit status when a transactional call outlives its timeout (the supervisor restarts the executor)
EXIT_STUCK = 75
#: another instance owns our transactional.id: exit, never fight it
_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


class Executor:
    def __init__(self, settings: Settings, connector: Connector, *, slot: str = "0", group: str | None = None,
                 source_topic: str = topics.APPROVED, runner: ActionRunner | None = None,
                 metrics: Any = None) -> None:
        self.settings = settings
        self.connector = connector
        self.runner = runner or ActionRunner(connector)
        self.codec = Codec()
        self.index = ResultIndex()
        self.metrics = metrics
        self.bootstrap = settings.kafka_access()
        self.group = group or f"runonce-exec-{connector.name}"
        #: actions.approved; another topic of ActionDecisions only for tests and replays
        self.source_topic = source_topic
        self.transactional_id = f"{self.group}-{slot}"
        self.consumer = Consumer({
            **clients.base_config(self.bootstrap), "group.id": self.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
        })
        self.watchdog = _Watchdog(self.transactional_id)
        self.producer = self._new_producer()
        #: offsets (next to read) of records skipped since the last commit: other vendors' tools
        self.pending: dict[tuple[str, int], int] = {}
        self._pending_since = 0.0
        self.running = True

    def _new_producer(self) -> Producer:
        producer = Producer(clients.producer_config(self.bootstrap, **{
            "transactional.id": self.transactional_id,
            "transaction.timeout.ms": self.settings.executor_txn_timeout_ms, "linger.ms": 0}))
        deadline = time.monotonic() + INIT_TIMEOUT_S
        while True:
            try:
                producer.init_transactions(TXN_TIMEOUT_S)
                return producer
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                # librdkafka: a timed-out init is resumed by calling it again (e.g. the broker restarting)
                if not err.retriable() or time.monotonic() > deadline:
                    raise clients.translate(exc, f"{self.transactional_id}: cannot initialise transactions") from exc
                log.warning("%s: init_transactions: %s; retrying", self.transactional_id, err)

    # -- assignment ------------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = [tp.partition for tp in partitions]
        applied = self.index.restore(self.bootstrap, numbers, self.connector.tools, self.codec)
        log.info("%s assigned %s; restored %d results", self.transactional_id, numbers, applied)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.pending.clear()

    # -- loop ------------------------------------------------------------------------
    def run(self) -> None:
        self.consumer.subscribe([self.source_topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "running", False))
        try:
            while self.running:
                msg = self.consumer.poll(0.5)
                if msg is None:
                    self._flush_pending(force=False)
                    continue
                if msg.error():
                    if msg.error().fatal():
                        raise FatalError(f"consumer: {msg.error()}")
                    log.warning("consumer: %s", msg.error())
                    continue
                self._handle(msg)
        except FatalError:
            self.pending.clear()  # a fenced or broken producer cannot commit them; the next owner re-reads them
            raise
        finally:
            try:
                self._flush_pending(force=True)
                self.producer.flush(10)
            except KafkaException as exc:  # leaving anyway: uncommitted offsets are simply read again
                log.warning("%s: on exit: %s", self.transactional_id, exc)
            self.consumer.close()

    def _handle(self, msg: Any) -> None:
        tp = (msg.topic(), msg.partition())
        try:
            _, decision = self.codec.decode(msg.value(), expect="ActionDecision")
        except InvalidInput as exc:  # only a foreign writer could put this here: dead-letter it, never skip
            log.error("undecodable record on %s[%d]@%d: %s", *tp, msg.offset(), exc)
            headers = dead_letter_headers(exc, msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1])
            if self._transact(None, None, None, {**self.pending, tp: msg.offset() + 1}, None,
                              dead_letter=(msg.key(), msg.value() or b"", headers)):
                self.pending.clear()
                self._count("dead_lettered", "?")
            return
        request = decision["request"]
        if request["tool"] not in self.connector.tools:
            self._skip(tp, msg.offset())
            return
        call = ActionCall(request["action_id"], request["tool"], json.loads(request["params_json"]),
                          request["idempotency_key"] or request["action_id"])
        prior = self.index.by_action.get(call.action_id)
        first_user = self.index.by_key.get(call.vendor_key)
        if prior is None and first_user is not None and first_user != call.action_id:
            # Second line of defence: approved carried another action with the same key.
            original = self.index.by_action[first_user]
            status = original.status if original.status.final else Status.IN_DOUBT  # never race the original
            outcome: Outcome | None = Outcome(status, original.vendor_ref,
                                              f"not executed: duplicate of action {first_user}", 0)
            self._count("blocked_duplicate", call.tool)
        else:
            def write_intent() -> None:
                intent = Outcome(Status.ATTEMPTING, attempts=0)
                offsets = {**self.pending, tp: msg.offset()}
                if not self._transact(call, request, intent, offsets, msg.partition()):
                    raise _Rewound()
                self.pending.clear()
                self._failpoint("before_call")

            try:
                outcome = self.runner.run(call, prior, write_intent)
            except _Rewound:
                return
            self._failpoint("after_call")
        if outcome is None:  # a final result exists already: this is a redelivery
            self._count("already_done", call.tool)
            self._skip(tp, msg.offset())
            return
        if self._transact(call, request, outcome, {**self.pending, tp: msg.offset() + 1}, msg.partition()):
            self.pending.clear()
            self._count(outcome.status.value, call.tool)
            self._failpoint("after_commit")

    def _skip(self, tp: tuple[str, int], offset: int) -> None:
        if not self.pending:
            self._pending_since = time.monotonic()
        self.pending[tp] = offset + 1
        self._flush_pending(force=False)

    def _flush_pending(self, force: bool) -> None:
        if self.pending and (force or time.monotonic() - self._pending_since > 1.0):
            if self._transact(None, None, None, dict(self.pending), None):
                self.pending.clear()

    # -- transactions ----------------------------------------------------------------
    def _transact(self, call: ActionCall | None, request: dict[str, Any] | None, outcome: Outcome | None,
                  offsets: dict[tuple[str, int], int], partition: int | None,
                  dead_letter: tuple[bytes | None, bytes, list[tuple[str, bytes]]] | None = None) -> bool:
        """Commit (result or dead letter, offsets) atomically. False means aborted and rewound:
        the record comes again, after the main loop has polled (which a rebalance waits for)."""
        try:
            self.producer.begin_transaction()
            if dead_letter is not None:
                key, value, headers = dead_letter
                self.producer.produce(topics.DLQ, key=key, value=value, headers=headers)
            if call is not None and outcome is not None and request is not None:
                record = to_record(call.action_id, request["idempotency_key"], call.tool, outcome)
                self.producer.produce(topics.RESULTS, key=call.action_id.encode(), partition=partition,
                                      value=self.codec.encode("ActionResult", record))
            if offsets:
                with self.watchdog.guard("send_offsets_to_transaction"):
                    self.producer.send_offsets_to_transaction(
                        [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                        self.consumer.consumer_group_metadata(), TXN_TIMEOUT_S)
        except KafkaException as exc:
            # Never retry here in place: a rebalance (REBALANCE_IN_PROGRESS, a member that timed out
            # while the broker was away) completes only once this consumer polls again.
            return self._abandon(exc)
        for attempt in range(1, 4):
            try:
                with self.watchdog.guard("commit_transaction"):
                    self.producer.commit_transaction(TXN_TIMEOUT_S)
                break
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                # librdkafka: a retriable commit error is resumed by calling commit again
                if err.retriable() and not err.fatal() and not err.txn_requires_abort() and attempt < 3:
                    log.warning("%s: commit_transaction: %s; retrying", self.transactional_id, err)
                    continue
                return self._abandon(exc)
        if call is not None and outcome is not None:
            self.index.put(call.action_id, call.vendor_key, outcome)
        return True

    def _abandon(self, exc: KafkaException) -> bool:
        """The transaction cannot commit: abort it (or replace a dead producer) and rewind. Returns False."""
        err: KafkaError = exc.args[0]
        if err.code() in clients.AUTH_ERRORS:
            raise clients.translate(exc, f"{self.transactional_id}: transaction refused") from exc
        if err.fatal():
            if err.code() in _FENCED:  # another instance owns our transactional.id: never fight it
                raise FatalError(f"{self.transactional_id}: fenced or fatal producer error: {err}") from exc
            # e.g. a transaction that outlived transaction.timeout.ms: start over with a new producer
            log.warning("%s: fatal producer error, recreating the producer: %s", self.transactional_id, err)
            self.producer = self._new_producer()
        else:
            log.warning("%s: aborting transaction: %s", self.transactional_id, err)
            try:
                with self.watchdog.guard("abort_transaction"):
                    self.producer.abort_transaction(TXN_TIMEOUT_S)
            except KafkaException as abort_exc:
                if abort_exc.args[0].code() in _FENCED:
                    raise FatalError(f"{self.transactional_id}: fenced while aborting: {abort_exc}") from abort_exc
                log.warning("%s: abort failed (%s); recreating the producer", self.transactional_id, abort_exc)
                self.producer = self._new_producer()
        self._rewind()
        return False

    def _rewind(self) -> None:
        """After an abort, go back to the committed offsets: uncommitted records are redelivered."""
        self.pending.clear()
        assignment = self.consumer.assignment()
        if not assignment:
            return  # revoked meanwhile: the next owner starts from the committed offsets anyway
        try:
            committed = self.consumer.committed(assignment, timeout=10)
        except KafkaException as exc:
            committed = []
            failure = str(exc)
        else:
            unknown = [tp for tp in committed if tp.error is not None or tp.offset < 0]
            failure = f"no committed offset for {unknown}" if unknown else ""
        if failure:
            # Never guess a position: "offset 0" once re-read all of actions.approved and performed
            # actions approved before this group began (the fault test caught it). Without a seek the
            # consumer would go on past the aborted record, so leave; a restarted executor resumes
            # from what the group coordinator holds.
            raise FatalError(f"{self.transactional_id}: cannot rewind after an abort: {failure}")
        for tp in committed:
            self.consumer.seek(tp)

    # -- hooks -----------------------------------------------------------------------
    def _failpoint(self, where: str) -> None:
        if self.settings.executor_failpoint == where:
            log.warning("failpoint %s: SIGKILL", where)
            os.kill(os.getpid(), signal.SIGKILL)

    def _count(self, status: str, tool: str) -> None:
        if self.metrics is not None:
            self.metrics.outcomes.labels(self.connector.name, tool, status).inc()


class _Watchdog:
    """librdkafka can block in a transactional call past its timeout when the group coordinator
    goes away (confluentinc/librdkafka#5456). A stuck executor holds its partitions and does
    nothing, so leave instead: the open transaction is aborted by the broker, and the restarted
    executor redoes the record from the committed offsets (its intent makes that safe).

    One thread per executor watches a deadline that each guarded call sets and clears."""

    def __init__(self, who: str, limit_s: float = TXN_TIMEOUT_S + 15.0) -> None:
        self.who = who
        self.limit_s = limit_s
        self._call = ""
        self._deadline: float | None = None
        threading.Thread(target=self._watch, name="txn-watchdog", daemon=True).start()

    @contextlib.contextmanager
    def guard(self, call: str) -> Iterator[None]:
        self._call, self._deadline = call, time.monotonic() + self.limit_s
        try:
            yield
        finally:
            self._deadline = None

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            deadline = self._deadline
            if deadline is not None and time.monotonic() > deadline:
                log.critical("%s: %s still blocked after %.0f s; exiting for a restart",
                             self.who, self._call, self.limit_s)
                logging.shutdown()
                os._exit(EXIT_STUCK)


class _Rewound(Exception):
    """The intent transaction aborted; the record will be redelivered."""
