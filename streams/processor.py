"""The stream job's logic, runtime-neutral: decode, validate, load state, call the pure
core (``runonce.core.decide``), store its new state, and return exactly one record per
decision. Synchronous and I/O-free: a stage reads and writes a ``StateStore`` and returns
the records to write; the runtime (streams/transactional/ by default, streams/faust_runtime/,
the in-memory harness of the tests) writes them. ``Pipeline`` routes a record to its stage.

Stage 1 (keys):  actions.requested and the rekey topic -> keys table ->
                 approved | dropped | dlq | scoped (stage 2) | rekey
Stage 2 (scope): the scoped topic -> scopes table -> approved | dropped | dlq
                 (or straight from stage 1, when the runtime owns the scope's partition)
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Iterable, TypeVar

from runonce.core import limits
from runonce.core.action import Action
from runonce.core.decide import decide_key, decide_scope, dedup_key, scope_of
from runonce.core.decision import KeyState, Origin, Outcome, Reason, ScopeState
from runonce.core.policy import Policy, PolicyBook
from runonce.core.tenant import scoped
from runonce.errors import (
    ConfigError,
    DecodeError,
    FatalError,
    InvalidAction,
    InvalidInput,
    InvariantViolation,
    UnknownSchema,
    Unprocessable,
)
from runonce.kafka import topics
from runonce.kafka.record import Headers, Out, find_header
from runonce.streams import records, routing
from runonce.streams.expiry import Sweeper
from runonce.streams.holds import Holds
from runonce.streams.metrics import StreamMetrics
from runonce.streams.ports import Inbound, StateStore
from runonce.telemetry.spans import NO_SPANS, DecisionSpans
from runonce.wire.codec import Codec
from runonce.wire.headers import (
    H_ALERT,
    H_ORIGIN_OFFSET,
    H_ORIGIN_PARTITION,
    H_ORIGIN_TIMESTAMP,
    H_ORIGIN_TOPIC,
    H_POLICIES,
    dead_letter_headers,
)
from runonce.wire.trace import H_FIRST_TRACEPARENT, TRACEPARENT, carried


def _int_header(inbound: Inbound, name: str) -> int | None:
    raw = inbound.header(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise DecodeError(f"header {name} is not an integer: {raw[:40]!r}") from None


_S = TypeVar("_S", KeyState, ScopeState)


def _state(cls: type[_S], raw: bytes, partition: int) -> _S:
    """Stored state, parsed; what runonce wrote and cannot read is a broken invariant, not a bad record."""
    try:
        return cls.from_bytes(raw)
    except Exception as exc:
        raise InvariantViolation(f"{cls.__name__} on partition {partition} is unreadable: {exc!r}") from exc


class StateStoreFailed(FatalError):
    """A state store raised: runonce's own state, not the record, is broken."""


class _Guarded:
    """A StateStore whose failures are FatalError, so ``Pipeline.process`` never takes them
    for a bad record."""

    __slots__ = ("_store",)

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def get(self, partition: int, key: bytes) -> bytes | None:
        try:
            return self._store.get(partition, key)
        except Exception as exc:
            raise StateStoreFailed(f"state get on partition {partition}: {exc!r}") from exc

    def put(self, partition: int, key: bytes, value: bytes) -> None:
        try:
            self._store.put(partition, key, value)
        except Exception as exc:
            raise StateStoreFailed(f"state put on partition {partition}: {exc!r}") from exc

    def delete(self, partition: int, key: bytes) -> None:
        try:
            self._store.delete(partition, key)
        except Exception as exc:
            raise StateStoreFailed(f"state delete on partition {partition}: {exc!r}") from exc

    def scan(self, partition: int, after: bytes | None, limit: int) -> Iterable[tuple[bytes, bytes]]:
        try:
            return list(self._store.scan(partition, after, limit))
        except Exception as exc:
            raise StateStoreFailed(f"state scan on partition {partition}: {exc!r}") from exc


class _Stage:
    name = "?"

    def __init__(self, *, codec: Codec, policies: PolicyBook, partitions: int, store: StateStore,
                 metrics: StreamMetrics, expires_at_ms: Any) -> None:
        self.codec = codec
        self.policies = policies
        self.partitions = partitions
        self.store = store
        self.metrics = metrics
        self.sweeper = Sweeper(store, expires_at_ms)
        # Label lookups cost more than the increments on the per-record path: keep the children.
        self._latency = metrics.latency.labels(self.name)
        self._decided: dict[tuple[str, str, str], Any] = {}
        self._age = metrics.age
        #: held actions (None: this runtime holds none; Pipeline refuses policies that ask)
        self.holds: Holds | None = None
        self._policies_digest = policies.digest.encode()

    def dead_letter(self, inbound: Inbound, error: InvalidInput, origin: Origin, *,
                    trust_origin_headers: bool = True) -> Out:
        # Origin headers are trusted only on the internal re-key topic, which only this job writes:
        # on actions.requested they are whatever an agent put there.
        topic = (inbound.header(H_ORIGIN_TOPIC)
                 if routing.trusts_origin_headers(inbound.topic) and trust_origin_headers else None)
        headers = dead_letter_headers(error, topic.decode("utf-8", "replace") if topic else inbound.topic,
                                      origin.partition, origin.offset, origin.event_time_ms)
        self.metrics.dead_letters.labels(error.kind).inc()
        return Out(topics.DLQ, inbound.key, inbound.value or b"", headers=tuple(headers))

    def failed(self, inbound: Inbound, exc: Exception, origin: Origin, **kwargs: Any) -> Out:
        """What deciding one record raised, as that record's dead letter: an InvalidInput with
        its reason, anything unforeseen as ``Unprocessable`` naming its type. One hostile record
        never stops a partition. A FatalError (runonce's own state is broken: an
        InvariantViolation, a failing state store) is raised on: the worker stops. Stages
        write state last, so a record that raised has changed none."""
        if isinstance(exc, FatalError):
            raise exc
        error = exc if isinstance(exc, InvalidInput) else Unprocessable(
            f"{type(exc).__name__} while deciding: {exc}"[:2000])
        return self.dead_letter(inbound, error, origin, **kwargs)

    def encoded(self, record: dict[str, Any], request_body: bytes | None) -> bytes:
        """An ActionDecision's bytes; its request's as they arrived (``Codec.body_of``) when given."""
        if request_body is not None:
            return self.codec.encode_after("ActionDecision", request_body, record)
        return self.codec.encode("ActionDecision", record)

    def final(self, record: dict[str, Any], outcome: Outcome, reason: Reason, tool: str,
              extra_headers: Headers = (), request_body: bytes | None = None) -> Out:
        labels = (outcome.value, reason.value, tool)
        counter = self._decided.get(labels)
        if counter is None:
            counter = self._decided[labels] = self.metrics.decisions.labels(*labels)
        counter.inc()
        # requested (the broker's append time) -> decided (now): what a dashboard's latency shows;
        # the decision itself never reads the clock
        self._age.observe(max(0.0, time.time() - record["event_time_ms"] / 1000))
        return Out(routing.next_topic(outcome), records.output_key(record), self.encoded(record, request_body),
                   headers=(*extra_headers, (H_POLICIES, self._policies_digest)), decision=record)

    def conclude(self, record: dict[str, Any], outcome: Outcome, reason: Reason, action: Action, policy: Policy,
                 partition: int, extra_headers: Headers = (), request_body: bytes | None = None) -> Out:
        """A final decision, or, for an approval its policy holds for a person's yes, a hold
        on ``partition`` (streams/holds.py)."""
        rule = policy.approval
        if outcome is Outcome.APPROVE and rule is not None and self.holds is not None:
            why = rule.why(action.params)
            if why is not None:
                return self.holds.hold(record, rule, why, partition)
        return self.final(record, outcome, reason, action.tool, extra_headers, request_body)

    def sweep(self, partition: int, event_time_ms: int) -> None:
        try:
            deleted = self.sweeper.tick(partition, event_time_ms)
        except FatalError:
            raise
        except Exception as exc:  # runonce's own entries, after this record's state was written
            raise InvariantViolation(f"{self.name}[{partition}]: expiry sweep: {exc!r}") from exc
        if deleted:
            self.metrics.expired.labels(self.name).inc(deleted)


class KeyStage(_Stage):
    """Stage 1: idempotency keys. Consumes actions.requested and the rekey topic."""

    name = "keys"

    def __init__(self, *, scope_stage: ScopeStage | None = None,
                 decides_scope_here: Callable[[int], bool] | None = None, **kwargs: Any) -> None:
        super().__init__(expires_at_ms=KeyState.expires_at_of, **kwargs)
        self.scope_stage = scope_stage
        self.decides_scope_here = decides_scope_here or (lambda _partition: False)
        #: whether a key keeps its first action's traceparent (spans are recorded): a repeat's
        #: decision span then links to the first's trace
        self.keeps_traces = False

    def _origin(self, inbound: Inbound) -> Origin:
        if routing.trusts_origin_headers(inbound.topic):  # where and when it first arrived, in headers
            return Origin(_int_header(inbound, H_ORIGIN_PARTITION) or 0,
                          _int_header(inbound, H_ORIGIN_OFFSET) or 0,
                          _int_header(inbound, H_ORIGIN_TIMESTAMP) or inbound.timestamp_ms)
        return Origin(inbound.partition, inbound.offset, inbound.timestamp_ms)

    def process(self, inbound: Inbound) -> Out:
        """The one record this input becomes: a decision, a stage-2 hand-off, a re-key or a dead letter."""
        try:
            origin = self._origin(inbound)
        except Exception as exc:  # malformed headers on the re-key topic: a foreign writer
            return self.failed(inbound, exc, Origin(inbound.partition, inbound.offset, inbound.timestamp_ms),
                               trust_origin_headers=False)
        try:
            return self._decide(inbound, origin)
        except Exception as exc:
            return self.failed(inbound, exc, origin)

    def _decide(self, inbound: Inbound, origin: Origin) -> Out:
        started = time.perf_counter()
        _, record = self.codec.decode(inbound.value, expect="ActionRequested")
        request_body = self.codec.body_of(inbound.value or b"", "ActionRequested")  # decoded, so not None
        action = Action.from_record(record, self.policies)
        policy = self.policies.for_tool(action.tool)
        scope, natural_id = scope_of(action, policy)  # before any state
        key = dedup_key(action, policy)
        if key is not None and routing.needs_rekey(key, inbound.partition, self.partitions):
            return self._rekey(inbound, key, origin)
        p = inbound.partition
        prior_raw = self.store.get(p, key.encode()) if key is not None else None
        prior = _state(KeyState, prior_raw, p) if prior_raw is not None else None
        decision = decide_key(action, prior, policy=policy, key=key, origin=origin)
        if decision.replay:
            self.metrics.replays.labels(self.name).inc()
        unkeyed = action.idempotency_key is None
        out = records.decision_record(record, decision, dedup_key=key, content_hash=action.content_hash,
                                      unkeyed=unkeyed, origin=origin)
        if decision.outcome is Outcome.PASS:
            if scope is None:  # the core passes only actions whose policy has scope rules
                raise InvariantViolation(f"{action.action_id}: passed to stage 2 without a scope")
            scope_partition = routing.owner_partition(scope, self.partitions)
            if self.scope_stage is not None and self.decides_scope_here(scope_partition):
                # This worker owns the scope's partition: stage 2 decides now, in this
                # transaction, instead of after a hop through the scoped topic.
                result = self.scope_stage.decide(out, action, policy, scope, natural_id, origin, scope_partition,
                                                 request_body=request_body)
            else:
                result = Out(routing.next_topic(decision.outcome), scope.encode(), self.encoded(out, request_body),
                             partition=scope_partition)
        else:
            if unkeyed and not decision.replay:
                self.metrics.unkeyed.labels(action.tool).inc()
            first = prior.first_traceparent if prior is not None and decision.repeat_of is not None else None
            result = self.conclude(out, decision.outcome, decision.reason, action, policy, p,
                                   ((H_FIRST_TRACEPARENT, first.encode("ascii")),) if first else (), request_body)
        new_state = decision.new_state
        if self.keeps_traces and new_state is not None and not decision.replay:
            traceparent = dict(carried(inbound.headers)).get(TRACEPARENT)
            if traceparent is not None:
                new_state = replace(new_state, first_traceparent=traceparent.decode("ascii"))
        # State last: a record whose output could not be built has changed nothing.
        if new_state is not None and key is not None:
            self.store.put(p, key.encode(), new_state.to_bytes())
        self._latency.observe(time.perf_counter() - started)
        self.sweep(inbound.partition, origin.event_time_ms)
        return replace(result, replay=True) if decision.replay else result

    def _rekey(self, inbound: Inbound, key: str, origin: Origin) -> Out:
        headers = [
            (H_ORIGIN_TOPIC, inbound.topic.encode()),
            (H_ORIGIN_PARTITION, str(origin.partition).encode()),
            (H_ORIGIN_OFFSET, str(origin.offset).encode()),
            (H_ORIGIN_TIMESTAMP, str(origin.event_time_ms).encode()),
        ]
        self.metrics.rekeyed.inc()
        return Out(topics.REKEY, key.encode(), inbound.value or b"",
                   partition=routing.owner_partition(key, self.partitions), headers=tuple(headers))


class ScopeStage(_Stage):
    """Stage 2: natural ids, content windows and budgets, per scope. Consumes the scoped topic."""

    name = "scopes"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(expires_at_ms=ScopeState.expires_at_of, **kwargs)

    def process(self, inbound: Inbound) -> Out:
        """The final decision for a stage-1 pass (or a dead letter)."""
        started = time.perf_counter()
        try:
            _, record = self.codec.decode(inbound.value, expect="ActionDecision")
            action = Action.from_record(record["request"], self.policies)
            origin = Origin(record["source_partition"], record["source_offset"], record["event_time_ms"])
        except Exception as exc:  # only a foreign writer on an internal topic could cause this
            return self.failed(inbound, exc, Origin(inbound.partition, inbound.offset, inbound.timestamp_ms))
        try:
            policy = self.policies.for_tool(action.tool)
            # InvalidAction here: the policy file changed between the stages
            scope, natural_id = scope_of(action, policy)
            if scope is None:  # the policy lost its scope rules between the stages: nothing to decide here
                record.update(outcome=Outcome.APPROVE.value)
                return self.conclude(record, Outcome.APPROVE, Reason(record["reason"]), action, policy,
                                     inbound.partition)
            return self.decide(record, action, policy, scope, natural_id, origin, inbound.partition, started)
        except Exception as exc:
            return self.failed(inbound, exc, origin)

    def decide(self, record: dict[str, Any], action: Action, policy: Policy, scope: str, natural_id: str | None,
               origin: Origin, p: int, started: float | None = None, request_body: bytes | None = None) -> Out:
        """Stage 2 for one stage-1 pass (``record``), on the scope's partition ``p``: from the
        scoped topic, or straight from stage 1 when this worker owns ``p`` (``request_body``:
        its request's bytes as they arrived)."""
        started = time.perf_counter() if started is None else started
        raw = self.store.get(p, scope.encode())
        prior = _state(ScopeState, raw, p) if raw is not None else None
        decision = decide_scope(action, prior, policy=policy, scope=scope, natural_id=natural_id, origin=origin)
        if decision.replay:
            self.metrics.replays.labels(self.name).inc()
        elif record["unkeyed"]:
            self.metrics.unkeyed.labels(action.tool).inc()
        state = decision.new_state.to_bytes() if decision.new_state is not None else None
        if state is not None and len(state) > limits.MAX_SCOPE_STATE_BYTES:
            # Its changelog record would not fit: this action is refused, the scope keeps working.
            raise InvalidAction(f"action {action.action_id}: scope {scope[:200]} is full: its state would be "
                                f"{len(state)} bytes, over the limit of {limits.MAX_SCOPE_STATE_BYTES}; "
                                "actions in it are dead-lettered until its claims expire")
        out = records.stage2_record(record, decision, scoped(action.tenant, natural_id) if natural_id else None)
        alert = [(H_ALERT, decision.reason.value.encode())] if decision.reason is Reason.BUDGET_EXHAUSTED else []
        result = self.conclude(out, decision.outcome, decision.reason, action, policy, p, alert, request_body)
        if state is not None:  # state last, as in stage 1
            self.store.put(p, scope.encode(), state)
        self._latency.observe(time.perf_counter() - started)
        self.sweep(p, origin.event_time_ms)
        return replace(result, replay=True) if decision.replay else result


class Pipeline:
    """Both stages over their two stores: the stream job as one function of a record.
    Every runtime (the transactional one, faust, the tests' in-memory one) calls this."""

    #: the topics stage 1 and stage 2 consume
    KEY_INPUTS = (topics.REQUESTED, topics.REKEY)
    SCOPE_INPUTS = (topics.SCOPED,)

    def __init__(self, *, codec: Codec, policies: PolicyBook, partitions: int, keys: StateStore,
                 scopes: StateStore, metrics: StreamMetrics, holds: StateStore | None = None,
                 decides_scope_here: Callable[[int], bool] | None = None, spans: DecisionSpans = NO_SPANS) -> None:
        """``decides_scope_here(p)``: whether this worker owns the scope partition ``p`` now
        (it consumes the scoped topic's partition ``p`` and holds its state); stage 1 then
        hands a pass to stage 2 in place. Without it, every pass takes the scoped topic.
        ``holds``: the held actions' table; a runtime without one refuses policies that ask
        for approval (they would be approved without it)."""
        #: each decision a span in its caller's trace (runonce/telemetry), or none
        self.spans = spans
        common: dict[str, Any] = dict(codec=codec, policies=policies, partitions=partitions, metrics=metrics)
        metrics.expect((tool for tool, p in policies.tools.items() if p.budget is not None),
                       (cls.kind for cls in (InvalidInput, DecodeError, UnknownSchema, InvalidAction, Unprocessable)))
        self.scopes = ScopeStage(store=_Guarded(scopes), **common)
        self.keys = KeyStage(store=_Guarded(keys), scope_stage=self.scopes, decides_scope_here=decides_scope_here,
                             **common)
        asking = sorted(tool for tool, p in policies.tools.items() if p.approval is not None)
        if asking and holds is None:
            raise ConfigError(f"the policies of {', '.join(asking)} ask for approval, which this runtime cannot hold: "
                              "run the default runtime (runonce worker, without --runtime faust)")
        self.holds = (Holds(_Guarded(holds), codec, metrics, self.keys.final, spans)
                      if holds is not None else None)
        self.keys.holds = self.scopes.holds = self.holds
        self.keys.keeps_traces = spans.recording

    def stage_for(self, topic: str) -> KeyStage | ScopeStage:
        return self.scopes if topic == topics.SCOPED else self.keys

    def process(self, inbound: Inbound) -> Out:
        """One output for one input, whatever the input (``_Stage.failed``), with the input's
        trace context: a decision, a hold, a hand-off to stage 2 and a dead letter all stay in
        the caller's trace (wire/trace.py)."""
        out = self.stage_for(inbound.topic).process(inbound)
        if out.decision is None or not self.spans.recording or out.replay:
            # a hand-off, a re-key, a dead letter, no tracer, or a replay (its span was made the
            # first time: one span per decision, however often its record is delivered)
            out = out.traced_as(inbound.headers)
        else:
            first = find_header(out.headers, H_FIRST_TRACEPARENT)
            decided = records.decided(out.decision, first.decode("ascii") if first is not None else None)
            out = out.with_trace(self.spans.decide(inbound.headers, decided))
        if out.topic == topics.HELD and self.holds is not None and out.decision is not None:
            self.holds.keep(out.decision, carried(out.headers))  # its release continues this trace
        return out

    def rolled_back(self) -> None:
        """The runtime dropped the open transaction's state changes (an abort, a rebalance)."""
        if self.holds is not None:
            self.holds.forget()

    def process_all(self, inbound: Inbound) -> list[Out]:
        """Every output of one input: its decision (or a verdict's), and the holds on its
        partition that expire at its event time."""
        if inbound.topic in (topics.APPROVALS, topics.CANCELS) and self.holds is not None:
            try:
                outs = (self.holds.verdict(inbound) if inbound.topic == topics.APPROVALS
                        else self.holds.cancel(inbound))
            except Exception as exc:
                dead = self.keys.failed(inbound, exc, Origin(inbound.partition, inbound.offset, inbound.timestamp_ms))
                outs = [dead.traced_as(inbound.headers)]  # in the approver's trace, as a request's is in its caller's
        else:
            outs = [self.process(inbound)]
        if self.holds is not None:
            try:
                outs += self.holds.sweep(inbound.partition, inbound.timestamp_ms)
            except FatalError:
                raise
            except Exception as exc:  # runonce's own entries
                raise InvariantViolation(f"holds[{inbound.partition}]: expiry sweep: {exc!r}") from exc
        return outs

    def process_batch(self, batch: list[Inbound]) -> list[Out]:
        """Every output of each input, in input order (state changes apply in that order too)."""
        return [out for inbound in batch for out in self.process_all(inbound)]

