"""An executor: one vendor's consumer group on actions.approved (read_committed) and a
transactional producer. Per approved action of its tools:

1. intent   a transaction commits ``attempting`` to actions.results (with the offsets of
            the records before this one) — durable before anything reaches outside;
2. effect   the connector is called (retries with the same vendor key, see runner.py);
3. result   a transaction commits the result *and* this record's offset together
            (``send_offsets_to_transaction`` with the group metadata: KIP-447 fencing).

A crash between 1 and 3 redelivers the action with its intent and no result: the runner
reconciles (same vendor key, state check, or in_doubt) instead of calling blindly again.

An abort never forgets an intent. The index learns of an intent when its transaction
commits, not only of results, so a record redelivered after an aborted result commit finds
``attempting`` and is never performed blindly again. The outcome this process already saw
(the vendor answered, only the commit failed) is kept until it commits: the redelivery
commits that outcome and calls no one, as a Stripe retry replays the first answer. Once the
partition is revoked that memory is dropped: the next owner knows only what
``actions.results`` says, and reconciles by capability as after a crash.

The executor never acts on a guess about *where* it is either: every partition starts at an
explicit position (positions.py), the client's ``auto.offset.reset`` is "error", and a
position that cannot be known is an exit for a restart.

``create_executor`` builds one from settings; ``Executor`` itself takes its consumer,
transactions and clock, so its protocol is tested without a broker.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any, Callable, Protocol

from confluent_kafka import Consumer, KafkaError, TopicPartition

from runonce.connectors.base import ActionCall, Connector
from runonce.core.action import parse_params
from runonce.core.policy import PolicyBook
from runonce.connectors.results import ResultIndex
from runonce.connectors.runner import ActionRunner
from runonce.errors import ConsumerStuck, FatalError, InvalidInput
from runonce.kafka import clients, topics
from runonce.kafka.fetch_stall import STATS_INTERVAL_MS, FetchStall, leader_ends
from runonce.kafka.lag import LagGauge, stats_callbacks
from runonce.kafka.positions import StartPolicy, UnknownPosition, explicit_starts, rewind
from runonce.kafka.record import Out
from runonce.kafka.transactions import TXN_TIMEOUT_S, Transactions, init_producer
from runonce.kafka.watchdog import Watchdog
from runonce.settings import Settings
from runonce.wire.codec import Codec
from runonce.wire.headers import dead_letter_headers
from runonce.wire.keys import request_key
from runonce.wire.results import Result, Status, result_record

log = logging.getLogger("runonce.executor")

#: how long a lookup of committed offsets or log bounds may take before the position is unknown
LOOKUP_TIMEOUT_S = 10.0


class Results(Protocol):
    by_action: dict[str, Result]
    by_key: dict[str, str]

    def put(self, action_id: str, vendor_key: str, outcome: Result) -> None: ...

    def restore(self, starts: dict[int, int]) -> int: ...


def consumer_config(settings: Settings, group: str) -> dict[str, Any]:
    return {
        **clients.base_config(settings.kafka_access()), "group.id": group, "enable.auto.commit": False,
        # The client never picks a position: a missing or out-of-range offset is an error we see.
        "auto.offset.reset": "error", "isolation.level": "read_committed",
        "session.timeout.ms": settings.executor_session_timeout_ms, "heartbeat.interval.ms": 1000,
    }


def create_executor(settings: Settings, connector: Connector, *, slot: str = "0", group: str | None = None,
                    source_topic: str = topics.APPROVED, start: StartPolicy = StartPolicy.EARLIEST,
                    runner: ActionRunner | None = None, metrics: Any = None) -> Executor:
    group = group or f"runonce-exec-{connector.name}"
    transactional_id = f"{group}-{slot}"
    access = settings.kafka_access()
    stall = FetchStall(source_topic)
    lag = [LagGauge(metrics.lag, group).on_stats] if metrics is not None else []
    consumer = Consumer({**consumer_config(settings, group), "statistics.interval.ms": STATS_INTERVAL_MS,
                         "stats_cb": stats_callbacks(stall.on_stats, *lag)})
    producer_config = clients.producer_config(access, **{
        "transactional.id": transactional_id,
        "transaction.timeout.ms": settings.executor_txn_timeout_ms, "linger.ms": 0})
    transactions = Transactions(transactional_id, lambda: init_producer(producer_config, transactional_id),
                                consumer.consumer_group_metadata, Watchdog(transactional_id, TXN_TIMEOUT_S + 15.0))
    return Executor(connector, consumer=consumer, transactions=transactions,
                    index=ResultIndex(access, connector.tools, source_topic=source_topic,
                                      window_ms=PolicyBook.load(settings.policy_file).longest_key_ttl_ms()),
                    source_topic=source_topic, start=start,
                    runner=runner, metrics=metrics, failpoint=settings.executor_failpoint, stall=stall)


class Executor:
    def __init__(self, connector: Connector, *, consumer: Any, transactions: Any, index: Results,
                 source_topic: str = topics.APPROVED, start: StartPolicy = StartPolicy.EARLIEST,
                 runner: ActionRunner | None = None, metrics: Any = None, failpoint: str | None = None,
                 clock: Callable[[], float] = time.monotonic, stall: FetchStall | None = None) -> None:
        self.connector = connector
        self.consumer = consumer
        self.transactions = transactions
        self.index = index
        #: actions.approved; another topic of ActionDecisions only for tests and replays
        self.source_topic = source_topic
        self.start = start
        self.runner = runner or ActionRunner(connector)
        self.metrics = metrics
        self.failpoint = failpoint
        self.clock = clock
        #: notices a consumer that stopped fetching after a leader moved (runonce/kafka/fetch_stall.py)
        self.stall = stall
        if metrics is not None:  # every final status from the start at 0: "none in doubt" is a series too
            for tool in sorted(connector.tools):
                for status in (Status.SUCCEEDED, Status.FAILED, Status.IN_DOUBT):
                    metrics.outcomes.labels(connector.name, tool, status.value)
        self.codec = Codec()
        self.who: str = transactions.transactional_id
        #: offsets (next to read) not yet committed: records skipped (other vendors' tools) and
        #: start positions decided for a new group
        self.pending: dict[tuple[str, int], int] = {}
        self._pending_since = 0.0
        #: start positions chosen for partitions without a committed offset, until one commits
        self.decided: dict[int, int] = {}
        #: outcomes the vendor gave whose result commit aborted, by action id: the redelivery
        #: commits them instead of asking the vendor again
        self.uncommitted: dict[str, Result] = {}
        #: result records the abort_result failpoint aborted already (once each)
        self._aborted: set[bytes | None] = set()
        self.running = True

    # -- assignment ------------------------------------------------------------------
    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """Start each partition at an explicit position (positions.py), never the client's."""
        starts = [s for _, s in explicit_starts(consumer, partitions, self.start, self.who, LOOKUP_TIMEOUT_S)]
        numbers = [s.partition for s in starts]
        restore_started = time.monotonic()
        applied = self.index.restore({s.partition: s.offset for s in starts})
        restore_s = time.monotonic() - restore_started
        consumer.assign([TopicPartition(self.source_topic, s.partition, s.offset) for s in starts])
        for s in starts:
            if s.decided:  # durable at the next commit, so no later owner decides again
                self.pending[(self.source_topic, s.partition)] = s.offset
                self.decided[s.partition] = s.offset
                self._pending_since = 0.0
        log.info("%s assigned %s; restored %d results in %.2f s; starts: %s", self.who, numbers, applied, restore_s,
                 "; ".join(f"[{s.partition}] {s.why}" for s in starts))

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.pending.clear()
        self.decided.clear()
        # Another owner may reconcile these meanwhile: from now on only actions.results counts.
        self.uncommitted.clear()

    # -- loop ------------------------------------------------------------------------
    def run(self) -> None:
        self.consumer.subscribe([self.source_topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "running", False))
        try:
            while self.running:
                self.step()
        except FatalError:
            self.pending.clear()  # a fenced or broken producer cannot commit them; the next owner re-reads them
            raise
        finally:
            try:
                self._flush_pending(force=True)
            except FatalError as exc:
                log.warning("%s: on exit: %s", self.who, exc)
            self.transactions.close()
            self.consumer.close()

    def step(self) -> None:
        """One poll: handle a record, or commit what is pending when idle."""
        msg = self.consumer.poll(0.5)
        if msg is None:
            self._flush_pending(force=False)
            self._check_stall()
            return
        if msg.error():
            err: KafkaError = msg.error()
            if err.code() == KafkaError._AUTO_OFFSET_RESET:
                # The fetch position is not in the log (out of range): never let the client move us.
                raise UnknownPosition(f"{self.who}: {msg.topic()}[{msg.partition()}]: {err.str()}")
            if err.fatal():
                raise FatalError(f"consumer: {err}")
            log.warning("consumer: %s", err)
            return
        self._handle(msg)

    def _check_stall(self) -> None:
        """Idle with records to read: a consumer that stopped fetching leaves, for a restart."""
        if self.stall is None:
            return
        stuck = self.stall.check(
            leader_ends(self.consumer, self.source_topic),
            lambda: [tp.partition for tp in self.consumer.assignment() if tp.topic == self.source_topic])
        if stuck is not None:
            log.critical("%s: consumer stopped fetching: %s; exiting for a restart", self.who, stuck)
            raise ConsumerStuck(f"{self.who}: {stuck}")

    def _handle(self, msg: Any) -> None:
        tp = (msg.topic(), msg.partition())
        try:
            _, decision = self.codec.decode(msg.value(), expect="ActionDecision")
            request = decision["request"]
            if request["tool"] not in self.connector.tools:
                self._skip(tp, msg.offset())
                return
            call = ActionCall(request["action_id"], request["tool"], parse_params(request["params_json"],
                                                                                  request["action_id"]),
                              request_key(request))
        except InvalidInput as exc:  # only a foreign writer could put this here: dead-letter it, never skip
            log.error("undecodable record on %s[%d]@%d: %s", *tp, msg.offset(), exc)
            if self._commit_dead_letter(msg, exc, {**self.pending, tp: msg.offset() + 1}):
                self._count("dead_lettered", "?")
            return
        prior = self.index.by_action.get(call.action_id)
        first_user = self.index.by_key.get(call.vendor_key)
        known = self.uncommitted.get(call.action_id)
        if known is not None and (prior is None or not prior.status.final):
            outcome: Result | None = known  # performed; only its commit aborted: never ask again
            self._count("recommitted", call.tool)
        elif prior is None and first_user is not None and first_user != call.action_id:
            # Second line of defence: approved carried another action with the same key.
            original = self.index.by_action[first_user]
            status = original.status if original.status.final else Status.IN_DOUBT  # never race the original
            outcome = Result(status, original.vendor_ref, f"not executed: duplicate of action {first_user}", 0)
            self._count("blocked_duplicate", call.tool)
        else:
            def write_intent() -> None:
                if not self._commit_intent(call, request, {**self.pending, tp: msg.offset()}, msg.partition()):
                    raise _Rewound()
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
        if self._commit_result(call, request, outcome, {**self.pending, tp: msg.offset() + 1}, msg.partition()):
            self._count(outcome.status.value, call.tool)
            self._failpoint("after_commit")

    def _skip(self, tp: tuple[str, int], offset: int) -> None:
        if not self.pending:
            self._pending_since = self.clock()
        self.pending[tp] = offset + 1
        self._flush_pending(force=False)

    def _flush_pending(self, force: bool) -> None:
        if self.pending and (force or self.clock() - self._pending_since > 1.0):
            self._commit_offsets(dict(self.pending))

    # -- the four commits ------------------------------------------------------------
    def _commit_intent(self, call: ActionCall, request: dict[str, Any], offsets: dict[tuple[str, int], int],
                       partition: int) -> bool:
        """``attempting`` for this action, with the offsets of the records before it. Known to the
        index from its commit on, so no later redelivery to this process takes it for new."""
        intent = Result(Status.ATTEMPTING)
        if not self._commit([self._result_record(call, request, intent, partition)], offsets):
            return False
        self.index.put(call.action_id, call.vendor_key, intent)
        return True

    def _commit_result(self, call: ActionCall, request: dict[str, Any], outcome: Result,
                       offsets: dict[tuple[str, int], int], partition: int) -> bool:
        """The final outcome and this record's offset, together. An abort keeps the outcome for
        the redelivery (``uncommitted``): the effect happened, only its record did not."""
        self.uncommitted[call.action_id] = outcome
        if not self._commit([self._result_record(call, request, outcome, partition)], offsets,
                            abort=self.failpoint == "abort_result"):
            return False
        del self.uncommitted[call.action_id]
        self.index.put(call.action_id, call.vendor_key, outcome)
        return True

    def _commit_offsets(self, offsets: dict[tuple[str, int], int]) -> bool:
        """Only offsets: skipped records, decided start positions."""
        return self._commit([], offsets)

    def _commit_dead_letter(self, msg: Any, exc: InvalidInput, offsets: dict[tuple[str, int], int]) -> bool:
        headers = dead_letter_headers(exc, msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1])
        return self._commit([Out(topics.DLQ, msg.key(), msg.value() or b"", headers=tuple(headers))], offsets)

    def _commit(self, records: list[Out], offsets: dict[tuple[str, int], int], abort: bool = False) -> bool:
        """``abort``: the ``abort_result`` failpoint: write the transaction, then abort it (a
        coordinator move or timeout at the worst moment, on a real broker)."""
        if abort and records and records[0].key not in self._aborted:
            self._aborted.add(records[0].key)
            log.warning("failpoint abort_result: aborting the result of %r", records[0].key)
            self.transactions.commit(records, offsets, abort=True)
            self._rewind()
            return False
        if self.transactions.commit(records, offsets):
            self.pending.clear()
            self.decided.clear()  # every commit carries the pending start positions
            return True
        self._rewind()
        return False

    def _result_record(self, call: ActionCall, request: dict[str, Any], outcome: Result, partition: int) -> Out:
        record = result_record(call.action_id, request["idempotency_key"], call.tool, outcome, int(time.time() * 1000))
        return Out(topics.RESULTS, call.action_id.encode(), self.codec.encode("ActionResult", record), partition)

    def _rewind(self) -> None:
        """After an abort, go back to the committed offsets: uncommitted records are redelivered.
        An unknown position is an exit; the restarted executor resumes from what the group
        coordinator holds."""
        self.pending.clear()
        decided = {(self.source_topic, p): offset for p, offset in self.decided.items()}
        for topic, s in rewind(self.consumer, decided, self.who, LOOKUP_TIMEOUT_S):
            if s.decided:
                self.pending[(topic, s.partition)] = s.offset  # still to be made durable

    # -- hooks -----------------------------------------------------------------------
    def _failpoint(self, where: str) -> None:
        if self.failpoint == where:
            log.warning("failpoint %s: SIGKILL", where)
            os.kill(os.getpid(), signal.SIGKILL)

    def _count(self, status: str, tool: str) -> None:
        if self.metrics is not None:
            self.metrics.outcomes.labels(self.connector.name, tool, status).inc()


class _Rewound(Exception):
    """The intent transaction aborted; the record will be redelivered."""


__all__ = ["Executor", "create_executor", "StartPolicy", "TXN_TIMEOUT_S"]
