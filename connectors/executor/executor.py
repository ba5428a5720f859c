"""An executor: one vendor's consumer group on actions.approved (read_committed) and a
transactional producer. It works in batches (up to ``executor_max_batch`` records, what the
consumer has fetched); per batch:

1. intent   one transaction commits ``attempting`` to actions.results for every new action
            of its tools (with the offsets of the batch's first records) — durable before
            anything reaches outside;
2. effect   the connector is called for each, up to ``executor_max_in_flight`` at once (or
            the vendor's ``in_flight``), at the vendor's pace (limits.py; retries with the
            same vendor key, see runner.py);
3. result   one transaction commits every outcome (and dead letter) *and* the offsets past
            the batch together (``send_offsets_to_transaction`` with the group metadata:
            KIP-447 fencing).

What each record needs is planned before anything is performed (batch.py); a batch ends
before a record whose action id or vendor key is already in it, so two actions with one
vendor key are never in flight together and the second meets the first's committed result.

A crash between 1 and 3 redelivers the batch, each action with its intent and no result: the
runner reconciles (same vendor key, state check, or in_doubt) instead of calling blindly again.

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

``create_executor`` builds one from settings; ``Executor`` itself takes its consumer, commit
path and lease, so its protocol is tested without a broker.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from confluent_kafka import Message, TopicPartition

from runonce.connectors.executor.batch import Memory, Plan, Work, collides, dead_letter, plan_work, skip
from runonce.connectors.executor.failpoints import Failpoints
from runonce.connectors.executor.lease import NO_LEASE, Lease
from runonce.connectors.executor.metrics import ExecutorMetrics, OutcomeCounts
from runonce.connectors.executor.offsets import Offsets
from runonce.connectors.executor.receipts import Certifies, ReadHeads, Signing
from runonce.connectors.executor.result_store import ResultStore
from runonce.connectors.executor.results import CLOCK_MARGIN_MS, READER_GROUP, ResultIndex, Results
from runonce.connectors.executor.runner import ActionRunner, Lapsed
from runonce.connectors.executor.throttle import Throttle
from runonce.connectors.executor.upkeep import Upkeep
from runonce.connectors.toolkit.base import ActionCall, Connector
from runonce.core.action import parse_params
from runonce.core.policy import PolicyBook
from runonce.errors import FatalError, InvalidInput
from runonce.executor_failpoint import Point
from runonce.kafka import clients, groups, topics
from runonce.kafka.checkpoint import CommitPath
from runonce.kafka.fetch_stall import FetchStall
from runonce.kafka.group_stall import GroupStall
from runonce.kafka.health import Health
from runonce.kafka.lag import LagGauge
from runonce.kafka.loop import ConsumerLoop, GroupConsumer, Processed, RunsItsLoop
from runonce.kafka.positions import StartPolicy, explicit_starts, rewind
from runonce.kafka.process import Membership, transactional_clients
from runonce.kafka.receipts import Receipts
from runonce.kafka.record import Out, Record
from runonce.rate import Rate
from runonce.receipts.signing import Signer
from runonce.settings import Settings
from runonce.telemetry.configured import configured_spans
from runonce.telemetry.spans import Spans
from runonce.wire.codec import Codec
from runonce.wire.headers import dead_letter_headers
from runonce.wire.keys import request_key
from runonce.wire.results import Result, Status, result_partition, result_record, withdrawn

log = logging.getLogger("runonce.executor")

#: how long a lookup of committed offsets or log bounds may take before the position is unknown
LOOKUP_TIMEOUT_S = 10.0
#: while a batch's calls run, how often the executor looks at its lease and for a stop
WATCH_SLICE_S = 0.2


def results_folder(settings: Settings, transactional_id: str) -> Path:
    """Where an executor slot keeps its results index."""
    return settings.state_dir / "executors" / transactional_id


def vendor_pace(settings: Settings, vendor: str, rate: Rate | None) -> Rate:
    """The connectors file's ``rate``, unless ``RUNONCE_VENDOR_LIMITS`` names the vendor (an
    operator's override at start, kept from before the file existed)."""
    return settings.vendor_rate(vendor) or rate or Rate()


def restore_patience_s(settings: Settings) -> float:
    """How long the results restore waits without progress. Another vendor's executor that died
    mid-transaction holds the partition's stable offset until the broker aborts that
    transaction (its transaction.timeout.ms, then the broker's 10 s abort sweep); the restore
    waits that out rather than read short (results.py)."""
    return max(60.0, settings.executor_txn_timeout_ms / 1000 + 30.0)


def paced_batch(max_batch: int, pace: Rate, lease: Lease) -> int:
    """A batch a paced vendor gets through in half a lease: its calls start while the lease
    holds, so a batch never ends early only because our own pace is slow (lease.py)."""
    if pace.per_s is None:
        return max_batch
    return max(1, min(max_batch, int(pace.per_s * lease.length_s / 2)))


@dataclass(frozen=True, slots=True)
class Limits:
    #: records a batch at most
    max_batch: int = 500
    #: vendor calls in flight at once at most
    max_in_flight: int = 16


def create_executor(settings: Settings, connector: Connector, *, slot: str = "0", group: str | None = None,
                    source_topic: str = topics.APPROVED, start: StartPolicy = StartPolicy.EARLIEST,
                    runner: ActionRunner | None = None, metrics: ExecutorMetrics | None = None,
                    rate: Rate | None = None, health: Health | None = None) -> Executor:
    """``rate``: the connectors file's pace toward the vendor; ``RUNONCE_VENDOR_LIMITS`` overrides it.
    ``health``: what the process's probes answer (made before this, so they answer while the
    transactional producer initialises)."""
    group = group or f"{groups.EXECUTOR_PREFIX}{connector.name}"
    transactional_id = f"{group}-{slot}"
    access = settings.kafka_access()
    stall = FetchStall(source_topic)
    limit = vendor_pace(settings, connector.name, rate)
    lease = Lease.of_session(settings.executor_session_timeout_ms)
    throttle = Throttle(connector.name, limit.per_s, limit.burst,
                        on_refusal=metrics.vendor_refusals.labels(connector.name).inc if metrics is not None else None)
    if metrics is not None:
        metrics.vendor_waiting.labels(connector.name).set_function(lambda: throttle.waiting)
    lag = [LagGauge(metrics.lag, group)] if metrics is not None else []
    window_ms = PolicyBook.load(settings.policy_file).longest_key_ttl_ms()
    failpoints = Failpoints.parse(settings.executor_failpoint)
    # a key file that holds no key is refused before any client exists
    signer = Signer.from_file(settings.receipts_key_file) if settings.receipts_key_file is not None else None
    connector = failpoints.around(connector)
    # Always a static member, a slot being its transactional id: an executor's group holds only
    # its own vendor's slots, so no other protocol ever joins it (as faust's would join the
    # worker's: why the worker's is a setting, off by default). A dead process's late JoinGroup
    # that fences its restarted slot is an exit and a restart (loop.py's _FATAL).
    made = transactional_clients(access, transactional_id,
                                 Membership(group, settings.executor_session_timeout_ms, static=True),
                                 transaction_timeout_ms=settings.executor_txn_timeout_ms,
                                 producer_config={"linger.ms": 0}, stats_readers=[stall, *lag])
    consumer, checkpoint = made.consumer, made.checkpoint
    with clients.closed_if_raised(consumer):
        try:
            store = ResultStore(results_folder(settings, transactional_id), key_window_ms=window_ms + CLOCK_MARGIN_MS)
        except BaseException:
            checkpoint.close()
            raise
    index = ResultIndex(access, connector.tools, store, timeout_s=restore_patience_s(settings),
                        source_topic=source_topic, window_ms=window_ms)
    signing = None
    if signer is not None:
        signing = Signing(Receipts(signer), ReadHeads(clients.reader(access, group=READER_GROUP, to_end=True), group,
                                                      restore_patience_s(settings)))
    return Executor(connector, consumer=consumer, checkpoint=checkpoint, index=index,
                    source_topic=source_topic, start=start,
                    runner=runner or ActionRunner(connector, throttle=throttle), lease=lease,
                    upkeep=Upkeep(transactional_id, consumer, source_topic, index, connector, stall=stall,
                                  prune_window_ms=window_ms),
                    counts=OutcomeCounts.of(metrics, connector.name, connector.tools),
                    failpoints=failpoints, group_stall=made.group_stall,
                    limits=Limits(paced_batch(settings.executor_max_batch, limit, lease),
                                  limit.in_flight or settings.executor_max_in_flight), health=health,
                    signing=signing)


class Executor(RunsItsLoop):
    def __init__(self, connector: Connector, *, consumer: GroupConsumer, checkpoint: CommitPath, index: Results,
                 runner: ActionRunner | None = None, lease: Lease = NO_LEASE,
                 source_topic: str = topics.APPROVED, start: StartPolicy = StartPolicy.EARLIEST,
                 upkeep: Upkeep | None = None, counts: OutcomeCounts | None = None,
                 failpoints: Failpoints | None = None, spans: Spans | None = None,
                 limits: Limits = Limits(),
                 group_stall: GroupStall | None = None, health: Health | None = None,
                 signing: Signing | None = None) -> None:
        self.connector = connector
        self.consumer = consumer
        self.checkpoint = checkpoint
        self.index = index
        self.who: str = checkpoint.transactional_id
        self.runner = runner or ActionRunner(connector)
        #: vendor calls start only while it holds: renewed by each commit, ended by a revocation
        #: (lease.py); NO_LEASE: always
        self.lease = lease
        #: actions.approved; another topic of ActionDecisions only for tests and replays
        self.source_topic = source_topic
        self.start = start
        #: idle turns: a stalled fetch, pruning (none: neither watched nor pruned)
        self.upkeep = upkeep or Upkeep(self.who, consumer, source_topic, index, connector)
        #: told of each committed batch (runonce_executor_outcomes_total; none: counted nowhere)
        self.counts = counts or OutcomeCounts()
        #: crash tests: told where the executor is (failpoints.py); none: every call a no-op
        self.failpoints = failpoints or Failpoints()
        #: each vendor call an ``execute_tool`` span in its action's trace (runonce/telemetry), or none
        self.spans = spans or configured_spans()
        #: actions whose intent committed but whose call never started (the lease ended first):
        #: their redelivery to this process performs them; a next owner learns it from the
        #: withdrawn intent committed with the batch's results (or, if that commit failed, reconciles)
        self.unstarted: set[str] = set()
        self.codec = Codec()
        #: offsets not yet committed (skipped records, decided starts) and where reading started
        self.offsets = Offsets(source_topic, time.monotonic)
        #: outcomes the vendor gave whose result commit aborted, by action id: the redelivery
        #: commits them instead of asking the vendor again
        self.uncommitted: dict[str, Result] = {}
        self.limits = limits
        #: each final result's receipt on its partition's chain, in the result's transaction
        #: (receipts.py); none: no receipts
        self.signing = signing
        self._pool: ThreadPoolExecutor | None = None
        self.loop = ConsumerLoop(self.who, consumer, self, [source_topic], wait_s=0.5, group_stall=group_stall,
                                 health=health)

    # -- assignment ------------------------------------------------------------------
    def on_assign(self, consumer: GroupConsumer, partitions: list[TopicPartition]) -> None:
        """Start each partition at an explicit position (positions.py), never the client's."""
        given_at = self.lease.clock()  # before the restore, however long
        starts = [s for _, s in explicit_starts(consumer, partitions, self.start, self.who, LOOKUP_TIMEOUT_S)]
        numbers = [s.partition for s in starts]
        restore_started = time.monotonic()
        applied = self.index.restore({s.partition: s.offset for s in starts})
        restore_s = time.monotonic() - restore_started
        if self.signing is not None:
            self.signing.given(numbers)
        consumer.assign([TopicPartition(self.source_topic, s.partition, s.offset) for s in starts])
        self.lease.proven(given_at)  # the group gave them to this member then
        self.offsets.assigned(starts)  # a decided start is durable at the next commit: no later owner decides again
        log.info("%s assigned %s; restored %d results in %.2f s; starts: %s", self.who, numbers, applied, restore_s,
                 "; ".join(f"[{s.partition}] {s.why}" for s in starts))

    def on_revoke(self, consumer: GroupConsumer, partitions: list[TopicPartition]) -> None:
        self.offsets.revoked()
        # Another owner may reconcile these meanwhile: from now on only actions.results counts.
        self.uncommitted.clear()
        self.unstarted.clear()
        self.lease.ended()

    # -- the loop's task (runonce/kafka/loop.py) ------------------------------------------
    def batch_limit(self) -> int:
        return self.limits.max_batch

    def stopping(self) -> None:
        """SIGTERM: no further vendor call starts. Calls in flight finish; the batch's results
        commit with the intents whose call never started withdrawn, so the next owner performs
        them at once instead of answering in doubt; then the loop ends."""
        self.lease.stop()

    def close(self, failure: BaseException | None) -> None:
        if isinstance(failure, FatalError):
            self.offsets.dropped()  # a fenced or broken producer cannot commit them; the next owner re-reads them
        try:
            self._flush_pending(force=True)
        except FatalError as exc:
            log.warning("%s: on exit: %s", self.who, exc)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.checkpoint.close()
        self.index.close()
        if self.signing is not None:
            self.signing.close()

    def idle(self) -> None:
        """Commit what is pending (skipped records, decided starts), then the upkeep (upkeep.py)."""
        self._flush_pending(force=False)
        self.upkeep.idle(self.offsets.starts)

    def process(self, records: list[Message]) -> Processed:
        """One batch of what was fetched, planned record by record (batch.py); a batch ends
        before a record whose action id or vendor key is already in it: that record and the
        rest wait for the next batch, planned against this one's committed results."""
        batch: list[Work] = []
        action_ids: set[str] = set()
        vendor_keys: set[str] = set()
        deferred: list[Message] = []
        for i, msg in enumerate(records):
            work = self._plan(Record.of(msg))
            if collides(work, action_ids, vendor_keys):
                deferred = records[i:]
                break
            if work.call is not None:
                action_ids.add(work.call.action_id)
                vendor_keys.add(work.call.vendor_key)
            batch.append(work)
        if not self._run(batch):
            return Processed(0)  # rewound: the deferred records come again from the committed offsets
        return Processed(len(batch), deferred)

    def _plan(self, record: Record) -> Work:
        try:
            _, decision = self.codec.decode(record.value, expect="ActionDecision")
            request = decision["request"]
            if request["tool"] not in self.connector.tools:
                return skip(record)
            call = ActionCall(request["action_id"], request["tool"], parse_params(request["params_json"],
                                                                                  request["action_id"]),
                              request_key(request), decision.get("natural_id"))
        except InvalidInput as exc:  # only a foreign writer could put this here: dead-letter it, never skip
            log.error("undecodable record on %s[%d]@%d: %s", record.topic, record.partition, record.offset, exc)
            return dead_letter(record, exc)
        return plan_work(record, call, request, Memory(self.index, self.uncommitted, self.unstarted))

    def _run(self, batch: list[Work]) -> bool:
        """1. intents, with the offsets of the batch's first records; 2. the vendor calls, at most
        ``max_in_flight`` at once; 3. every outcome and dead letter, with the offsets past the
        batch. Only offsets move for a batch with nothing to record. False: a transaction
        aborted, or the lease ended before a call, and the consumer went back to the committed
        offsets.

        Step 1 proves this executor still owns the partitions (lease.py), so it is taken for a
        batch of reconciles too when the lease no longer holds."""
        first: dict[tuple[str, int], int] = {}
        after: dict[tuple[str, int], int] = {}
        for work in batch:
            first.setdefault(work.tp, work.record.offset)
            after[work.tp] = work.record.offset + 1
        new = [w for w in batch if w.plan is Plan.PERFORM]
        calls = [w for w in batch if w.plan in (Plan.PERFORM, Plan.RECONCILE)]
        if new or (calls and not self.lease.holds()):
            if not self.lease.proving(lambda: self._commit_intents(new, self.offsets.with_pending(first))):
                return False
            if new:
                self.failpoints.passing(Point.BEFORE_CALL)
        outcomes, lapsed = self._perform(calls, self.offsets.with_pending(first))
        if new:
            self.failpoints.passing(Point.AFTER_CALL)
        for work in calls:  # the records whose call never started come again, and those after them
            if work.call is not None and work.call.action_id in lapsed:
                after[work.tp] = min(after[work.tp], work.record.offset)
        # our own intents whose call never started: withdrawn with the results, so any next owner
        # performs them instead of reconciling (for SMTP: answering in doubt)
        not_started = [w for w in calls if w.plan is Plan.PERFORM and w.call is not None
                       and w.call.action_id in lapsed and not lapsed[w.call.action_id].attempted]
        if lapsed:
            self.unstarted.update(w.call.action_id for w in not_started if w.call is not None)
            log.warning("%s: the lease ended before %d vendor calls could start (%s): %d withdrawn as never "
                        "started; they come again", self.who, len(lapsed), self.lease.lapsed_why(), len(not_started))
        for work in batch:
            if work.plan in (Plan.RECOMMIT, Plan.BLOCKED) and work.prior is not None and work.call is not None:
                outcomes[work.call.action_id] = work.prior
        dead = [w for w in batch if w.plan is Plan.DEAD_LETTER]
        if not outcomes and not dead and not not_started:  # skips and redeliveries of final results
            self.counts.committed(batch, outcomes)
            if lapsed:
                self.rewind_to_committed()
                return False
            self._advance(after)
            return True
        if not self.lease.proving(lambda: self._commit_results(batch, outcomes, self.offsets.with_pending(after),
                                                                not_started)):
            return False
        self.failpoints.passing(Point.AFTER_COMMIT)
        if lapsed:
            self.rewind_to_committed()
            return False
        return True

    def _perform(self, work: list[Work], proving_offsets: dict[tuple[str, int], int]
                 ) -> tuple[dict[str, Result], dict[str, Lapsed]]:
        """Each action's outcome (the runner's protocol), concurrently up to ``max_in_flight``;
        apart, the actions whose call never started (the lease ended first). While calls run,
        the lease is renewed by proving commits of ``proving_offsets`` (the batch's first
        offsets, already committed), and a stop (SIGTERM) ends it: what has not started by then
        never starts."""
        def one(w: Work) -> tuple[str, Result | Lapsed]:
            assert w.call is not None
            with self.spans.execute(w.record.headers, w.call.tool, w.call.action_id,
                                    self.connector.capability.value) as finish:
                outcome = self.runner.carry_out(w.plan, w.call, w.prior, self.lease)
                if isinstance(outcome, Lapsed):
                    finish("lease_ended", 0)
                else:
                    finish(outcome.status.value, outcome.attempts)
            return w.call.action_id, outcome
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.limits.max_in_flight, thread_name_prefix=f"{self.connector.name}-call")
        running = [self._pool.submit(one, w) for w in work]
        pending = set(running)
        while pending:
            _, pending = futures_wait(pending, timeout=WATCH_SLICE_S)
            if pending and self.lease.due():
                self._renew_lease(proving_offsets)
        done = [f.result() for f in running]
        return ({a: o for a, o in done if isinstance(o, Result)}, {a: o for a, o in done if isinstance(o, Lapsed)})

    def _renew_lease(self, proving_offsets: dict[tuple[str, int], int]) -> None:
        """Between a batch's calls, half a lease spent: a proving commit renews it (a failure
        leaves it to run out: the calls not started by then lapse)."""
        def commit() -> bool:
            failure = self.checkpoint.commit([], proving_offsets)
            if failure is not None:
                self.lease.unproven(str(failure))
                return False
            self.offsets.committed()
            return True
        try:
            self.lease.proving(commit)
        except FatalError:
            self.lease.ended("fenced: another process has these partitions")
            raise

    def _advance(self, after: dict[tuple[str, int], int]) -> None:
        self.offsets.advance(after)
        self._flush_pending(force=False)

    def _flush_pending(self, force: bool) -> None:
        due = self.offsets.due(force)
        if due is not None:
            self._commit_offsets(due)

    # -- the three commits -----------------------------------------------------------
    def _commit_intents(self, new: list[Work], offsets: dict[tuple[str, int], int]) -> bool:
        """``attempting`` for each new action, with the offsets of the records before the batch.
        Memory to the index from its commit on, so no later redelivery to this process takes it
        for new."""
        intent = Result(Status.ATTEMPTING)
        entries = [(w.call.action_id, w.call.vendor_key, intent) for w in new if w.call is not None]
        return self._commit([self._result_record(w, intent) for w in new], offsets, entries=entries)

    def _commit_results(self, batch: list[Work], outcomes: dict[str, Result],
                        offsets: dict[tuple[str, int], int], not_started: Sequence[Work] = ()) -> bool:
        """Every outcome, dead letter, withdrawn intent (``not_started``) and offset of the batch,
        together. An abort keeps the outcomes for the redelivery (``uncommitted``): the effects
        happened, only their records did not."""
        records: list[Out] = []
        certified: list[Certifies] = []
        for work in batch:
            if work.plan is Plan.DEAD_LETTER and work.error is not None:
                r = work.record
                headers = dead_letter_headers(work.error, r.topic, r.partition, r.offset, r.timestamp_ms)
                records.append(Out(topics.DLQ, r.key, r.value or b"", headers=tuple(headers)))
            elif work.call is not None and work.call.action_id in outcomes and work.request is not None:
                outcome = outcomes[work.call.action_id]
                at_ms = int(time.time() * 1000)
                certified.append(Certifies(self._result_record(work, outcome, at_ms), work.request, outcome, at_ms,
                                           work.record.headers, work.plan.value if work.plan is Plan.BLOCKED else ""))
        never = withdrawn(self.lease.lapsed_why())
        records += [self._result_record(w, never) for w in not_started]
        if self.signing is None:
            records = [c.out for c in certified] + records
        else:  # each final result with its receipt's proof, the chains' segments in the same transaction
            records = self.signing.with_receipts(certified, records, int(time.time() * 1000))
        self.uncommitted.update(outcomes)
        entries = [(w.call.action_id, w.call.vendor_key, outcomes[w.call.action_id]) for w in batch
                   if w.call is not None and w.call.action_id in outcomes]
        entries += [(w.call.action_id, w.call.vendor_key, never) for w in not_started if w.call is not None]
        if not self._commit(records, offsets, abort=bool(records) and self.failpoints.aborts(records[0].key),
                            entries=entries):
            return False
        for action_id in outcomes:
            self.uncommitted.pop(action_id, None)
        self.counts.committed(batch, outcomes)
        return True

    def _commit_offsets(self, offsets: dict[tuple[str, int], int]) -> bool:
        """Only offsets: skipped records, decided start positions."""
        return self._commit([], offsets)

    def _commit(self, records: list[Out], offsets: dict[tuple[str, int], int], abort: bool = False,
                entries: list[tuple[str, str, Result]] | None = None) -> bool:
        """``entries``: results the index learns once the transaction commits, with its end on
        each results partition (the delivery reports: hence the flush), in one write batch.
        ``abort``: the ``abort_result`` failpoint: write the transaction, then abort it (a
        coordinator move or timeout at the worst moment, on a real broker)."""
        if abort:
            self.checkpoint.commit(records, offsets, abort=True)
            if self.signing is not None:
                self.signing.aborted()
            self.rewind_to_committed()
            return False

        def learn(ends: dict[tuple[str, int], int]) -> None:
            self.failpoints.passing(Point.BEFORE_INDEX_WRITE)
            self.index.learn(entries or [], {p: end for (t, p), end in ends.items() if t == topics.RESULTS})

        if self.checkpoint.commit(records, offsets, flush=bool(entries), after_commit=learn if entries else None) is None:
            self.offsets.committed()  # every commit carries the pending offsets and decided starts
            if self.signing is not None:
                self.signing.committed()
            return True
        if self.signing is not None:
            self.signing.aborted()
        self.rewind_to_committed()
        return False

    def _result_record(self, work: Work, outcome: Result, at_ms: int | None = None) -> Out:
        assert work.call is not None and work.request is not None
        # the vendor key when the caller gave a key (its tenant's own), as the results index reads it back
        keyed = work.call.vendor_key if work.request["idempotency_key"] else None
        record = result_record(work.call.action_id, keyed, work.call.tool, outcome,
                               int(time.time() * 1000) if at_ms is None else at_ms)
        return Out(topics.RESULTS, work.call.action_id.encode(), self.codec.encode("ActionResult", record),
                   result_partition(work.record.partition)).traced_as(work.record.headers)

    def rewind_to_committed(self) -> None:
        """After an abort, go back to the committed offsets: uncommitted records are redelivered.
        An unknown position is an exit; the restarted executor resumes from what the group
        coordinator holds."""
        decided = self.offsets.decided_positions()
        self.offsets.dropped()  # before the seeks: a position that cannot be known exits with none pending
        self.offsets.rewound(rewind(self.consumer, decided, self.who, LOOKUP_TIMEOUT_S))


__all__ = ["Executor", "Limits", "create_executor", "StartPolicy"]
