"""The agent SDK: submit an intended action, get its outcome.

    client = ActionClient(bootstrap)
    handle = client.submit("send_email", {"to": ..., "body": ...}, idempotency_key="followup-42")
    result = handle.result(timeout=30)      # or: await handle

A duplicate's handle resolves to the *original* action's outcome: the second call returns
the first call's result, not an error (the idempotency contract). A drop that repeats no
action (a denied tool, a missing key, an exhausted budget) resolves to that decision.

``client.tool("send_email")`` turns a function's keyword arguments into an action, for
LangChain- or OpenAI-style tool definitions (no import of either).
"""

from __future__ import annotations

import asyncio
import functools
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Generator, Mapping, Sequence

from confluent_kafka import KafkaException

from runonce.core.action import Action
from runonce.core.approval import cancelled_by_agent
from runonce.core.decision import Reason
from runonce.core.policy import PolicyBook
from runonce.core.tenant import DEFAULT_TENANT, check_tenant
from runonce.errors import InvalidAction, InvariantViolation, ResultTimeout, RunonceError
from runonce.kafka import clients
from runonce.kafka.access import KafkaTarget
from runonce.sdk.outcomes import RECEIPT, Outcomes
from runonce.sdk.submit import Submitter, build_request
from runonce.sdk.trace_context import current_carrier
from runonce.telemetry.configured import configured_spans
from runonce.telemetry.spans import Spans
from runonce.wire.approvals import cancel_record, verdict_partition
from runonce.wire.decisions import DecisionView
from runonce.wire.results import CallStatus, Status
from runonce.wire.trace import trace_headers


@dataclass(frozen=True, slots=True)
class Call:
    """One action of ``ActionClient.submit_many``: what ``submit`` takes."""

    tool: str
    params: Mapping[str, Any]
    idempotency_key: str | None = None
    natural_id: str | None = None


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    action_id: str
    #: the executor's final status (succeeded, failed, in_doubt), or dropped when runonce dropped it
    status: CallStatus
    #: the action whose result this is (the original, for a duplicate)
    result_of: str
    vendor_ref: str | None = None
    error: str | None = None
    #: why runonce dropped it, when it has no result of its own (denied, budget, key misuse)
    drop_reason: str | None = None
    #: for a repeat that resolved to its original's result: why it was a repeat
    repeat_reason: str | None = None
    #: for an action held for a person: who ended its hold (an approver, ``expiry``, or
    #: ``agent:<id>`` when its own agent cancelled it)
    verdict_by: str | None = None
    #: the result's receipt, when its executor signs (RUNONCE_RECEIPTS_KEY): one JSON line, the
    #: receipt with its signed checkpoint and audit path, that ``runonce audit verify`` proves with
    #: the public key alone. An agent's own evidence: keep it (docs/receipts.md)
    receipt: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", CallStatus(self.status))  # a str given is checked, and kept as the Enum

    @property
    def cancelled(self) -> bool:
        """Not performed: its own agent cancelled it while it waited for a person."""
        return (self.status is CallStatus.DROPPED and self.drop_reason == Reason.APPROVAL_DENIED.value
                and cancelled_by_agent(self.verdict_by))

    @property
    def repeated(self) -> bool:
        """This call was not performed: it repeats ``result_of``, whose result this is."""
        return self.result_of != self.action_id and self.drop_reason is None


@dataclass(frozen=True, slots=True)
class HeldFor:
    """An action held for a person's approval: why its policy holds it, and until when."""

    why: str
    expires_at_ms: int


@dataclass(frozen=True, slots=True)
class Found:
    """An action found again from its place in actions.requested, by any process (an MCP
    task polled on another gateway replica, or after a restart)."""

    tool: str
    tenant: str
    #: the agent that asked for it (the only one that may cancel it while it is held)
    agent_id: str
    requested_at_ms: int
    #: None: no final outcome yet (held for a person, or still being performed)
    outcome: ActionOutcome | None


class Handle:
    def __init__(self, client: ActionClient, action_id: str, requested_at: tuple[int, int] | None = None) -> None:
        self.client = client
        self.action_id = action_id
        #: where the request landed in actions.requested (partition, offset), when delivered
        self.requested_at = requested_at
        self._outcome: ActionOutcome | None = None

    def result(self, timeout: float = 60.0) -> ActionOutcome:
        """The outcome (waiting at most ``timeout`` seconds; ResultTimeout after that, and
        calling again keeps waiting). Once known, it is kept. An action held for a person's
        approval has no outcome until someone decides: its ResultTimeout says so."""
        if self._outcome is None:
            try:
                self._outcome = self.client.resolve(self.action_id, time.monotonic() + timeout)
            except ResultTimeout as exc:
                held = self.held
                if held is None:
                    raise
                raise ResultTimeout(f"action {self.action_id} is waiting for approval ({held.why}) until "
                                    f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(held.expires_at_ms / 1000))}"
                                    "; waiting again, or calling again, will not perform it twice") from exc
        return self._outcome

    @property
    def held(self) -> HeldFor | None:
        """Why and until when this action waits for a person's approval (None: it does not,
        or not any more)."""
        return self.client.held_for(self.action_id) if self._outcome is None else None

    def __await__(self) -> Generator[Any, None, ActionOutcome]:
        return asyncio.get_running_loop().run_in_executor(None, self.result).__await__()


class ActionClient:
    def __init__(self, bootstrap: KafkaTarget, *, agent_id: str = "agent", policies: PolicyBook | None = None,
                 outcomes: KafkaTarget | None = None, connect_timeout_s: float = 10.0,
                 tenant: str = DEFAULT_TENANT, spans: Spans | None = None) -> None:
        """``bootstrap``: where (and as whom) to publish actions. ``outcomes``: where and as whom
        to read their outcomes, when that is another principal (``agent-reader`` on a secured
        broker: the ``agent`` principal may write requests and read nothing).
        ``connect_timeout_s``: how long to wait for the broker before BrokerUnavailable.
        ``tenant``: whose keys and results this client's actions are (agents that are one
        logical caller share one; core/tenant.py)."""
        self.tenant = check_tenant(tenant)
        self.policies = policies or PolicyBook.load()
        #: each submit a producer span in the caller's trace, when the application traces (runonce/telemetry)
        self._spans = spans or configured_spans()
        try:
            self._submitter = Submitter(bootstrap, agent_id=agent_id, policies=self.policies)
            self._outcomes = Outcomes(outcomes if outcomes is not None else bootstrap, self.policies,
                                      connect_timeout_s=connect_timeout_s)
        except RunonceError:
            raise
        except KafkaException as exc:
            raise clients.translate(exc, f"cannot reach Kafka at {bootstrap}") from exc
        self._warned: set[str] = set()

    def submit(self, tool: str, params: Mapping[str, Any], *, idempotency_key: str | None = None,
               natural_id: str | None = None, agent_id: str | None = None, tenant: str | None = None,
               trace: Mapping[str, str] | None = None) -> Handle:
        """Publish the action and return a handle on its outcome. ``agent_id`` and ``tenant``
        override the client's own (a gateway serving several agents). ``trace``: the caller's
        W3C trace context (``traceparent``, ``tracestate``), by default the current
        OpenTelemetry context; every record written for the action carries it."""
        record = self._checked(Call(tool, params, idempotency_key, natural_id), agent_id, tenant)
        action_id = str(record["action_id"])
        self._outcomes.watch(action_id)  # before it exists: its decision cannot be missed
        caller = trace_headers(trace if trace is not None else current_carrier())
        with self._spans.submit(tool, action_id, caller) as headers:
            self._submitter.delivered(record, headers)
        return Handle(self, action_id, self._submitter.position(action_id))

    def submit_many(self, calls: Sequence[Call], *, agent_id: str | None = None, tenant: str | None = None,
                    trace: Mapping[str, str] | None = None) -> list[Handle]:
        """Publish several actions with one wait for their delivery, and return their handles
        in order: a burst (a plan's steps, a fan-out to many recipients) goes out at the
        broker's pace, not a round trip per action as ``submit`` in a loop. Every call is
        checked before any is published: an InvalidAction names the call (its index) and
        nothing is sent. A delivery failure raises as ``submit``'s does, naming how many; some
        may have been published, and submitting the same calls again (the same keys) performs
        none twice: those resolve to their originals."""
        records = []
        for index, call in enumerate(calls):
            try:
                records.append(self._checked(call, agent_id, tenant))
            except InvalidAction as exc:
                raise InvalidAction(f"call {index} ({call.tool}): {exc}") from exc
        caller = trace_headers(trace if trace is not None else current_carrier())
        sent = []
        for call, record in zip(calls, records):
            self._outcomes.watch(record["action_id"])
            # each span is the send of one request; the delivery is awaited for all at once below
            with self._spans.submit(call.tool, str(record["action_id"]), caller) as headers:
                sent.append((record, headers))
        self._submitter.delivered_all(sent)
        return [Handle(self, action_id, self._submitter.position(action_id))
                for action_id in (str(record["action_id"]) for record in records)]

    def _checked(self, call: Call, agent_id: str | None, tenant: str | None) -> dict[str, Any]:
        """The door: the call's request record, once it passes the stream job's own checks
        (core/limits.py, the policy's fields), before anything is published; InvalidAction
        names the field and the bound. The stream job keeps them for producers that bypass
        this client."""
        if not self.policies.for_tool(call.tool).named and call.tool not in self._warned:
            self._warned.add(call.tool)
            warnings.warn(f"no runonce policy names tool {call.tool!r}: it gets the [default] policy", stacklevel=3)
        record = build_request(call.tool, call.params, agent_id=agent_id or self._submitter.agent_id,
                               idempotency_key=call.idempotency_key, natural_id=call.natural_id,
                               tenant=self.tenant if tenant is None else tenant)
        action = Action.from_record(record, self.policies)
        # a natural id for a tool without a write-once rule: refused here, not dead-lettered there
        self.policies.for_tool(call.tool).scope_of(action.params, action.natural_id, action.action_id)
        return record

    @property
    def waiting(self) -> int:
        """Actions this client keeps entries for (handles not resolved yet, and their originals)."""
        return self._outcomes.watched

    def held_for(self, action_id: str) -> HeldFor | None:
        """Why and until when this action waits for a person's approval, as far as this
        client has seen (None: it does not, or not any more)."""
        record = self._outcomes.held(action_id)
        return HeldFor(record["hold_why"], record["hold_expires_at_ms"]) if record is not None else None

    def cached(self, action_id: str) -> bool:
        """Whether this client holds an outcome for the action from its recent window."""
        return self._outcomes.recent.get(action_id) is not None

    def resolve(self, action_id: str, deadline: float) -> ActionOutcome:
        """This action's outcome: its own result, or for a repeat its original's (followed from
        the drop's ``first_action_id``, looked up where the original was written). A timeout
        keeps this action watched, so waiting again still finds it."""
        outcome = self._follow(action_id, DecisionView.of(self._outcomes.decision(action_id, deadline)), deadline)
        self._outcomes.forget(action_id)
        return outcome

    def look_up(self, action_id: str, requested_at: tuple[int, int], deadline: float) -> Found | None:
        """The action requested at this place, and its outcome if final, read from Kafka (no
        memory of this process's is needed); None if another action is there. An outcome not
        found by ``deadline`` is not final yet."""
        request = self._outcomes.requested(requested_at, deadline)
        if request.record["action_id"] != action_id:
            return None
        found = Found(str(request.record["tool"]), str(request.record.get("tenant") or DEFAULT_TENANT),
                      str(request.record["agent_id"]), int(request.record["requested_at_ms"]), None)
        self._outcomes.watch(action_id)  # what the tail brings meanwhile is kept
        try:
            looked = self._outcomes.look_back(action_id, request, deadline)
            if looked.result is not None:
                return replace(found, outcome=_outcome(action_id, looked.result, None))
            if looked.decision is None or DecisionView.of(looked.decision).approved:
                return found  # held, in flight, or approved and not performed yet
            return replace(found, outcome=self._follow(action_id, DecisionView.of(looked.decision), deadline))
        except ResultTimeout:
            return found  # a repeat whose original is still being performed
        finally:
            self._outcomes.forget(action_id)

    def _follow(self, action_id: str, decision: DecisionView, deadline: float) -> ActionOutcome:
        if decision.approved:
            return _outcome(action_id, self._outcomes.result(action_id, deadline), None)
        repeat_reason = decision.reason.value
        seen = {action_id}
        while True:
            current, position = str(decision.first_action_id), decision.first_requested_at
            if not decision.resolves_to_original or position is None or current in seen:
                return ActionOutcome(action_id, CallStatus.DROPPED, decision.action_id,
                                     drop_reason=decision.reason.value, verdict_by=decision.verdict_by)
            seen.add(current)
            self._outcomes.watch(current)
            try:
                looked = self._outcomes.look_back(current, position, deadline)
                if looked.result is None and looked.decision is None:
                    looked = self._outcomes.next_of(current, deadline)  # the original is still in flight
                if looked.result is not None:
                    return _outcome(action_id, looked.result, repeat_reason)
                if looked.decision is None:
                    raise InvariantViolation(f"looking back for {current} found neither decision nor result")
                decision = DecisionView.of(looked.decision)
                if decision.approved:
                    return _outcome(action_id, self._outcomes.result(current, deadline), repeat_reason)
            finally:
                self._outcomes.forget(current)

    def cancel(self, action_id: str, requested_at: tuple[int, int], deadline: float, *,
               agent_id: str | None = None, reason: str = "") -> bool:
        """Cancel a held action as its agent (``agent_id``, else this client's): the stream job
        denies it with the agent as the decider, as it decides a person's verdict, so a release
        that came first stands (the outcome says which). Only the agent the request names may
        cancel it. False, and nothing written, when the action was not held (not decided yet,
        or approved without a person); ``requested_at``: where its request is."""
        held = self._outcomes.held(action_id)
        if held is None:
            request = self._outcomes.requested(requested_at, deadline)
            if request.record["action_id"] != action_id:
                return False
            held = self._outcomes.held_back(action_id, request, deadline)
        if held is None:
            return False
        self._submitter.cancel(cancel_record(action_id, agent_id or self._submitter.agent_id, reason),
                               verdict_partition(held))
        return True

    def tool(self, name: str, *, key_from: str | None = "idempotency_key") -> Callable[[Callable[..., Any]], Callable[..., ActionOutcome]]:
        """Decorate a tool function: calling it submits the action and waits for its outcome.
        The function body is the tool's description (its docstring) and is not run."""

        def wrap(fn: Callable[..., Any]) -> Callable[..., ActionOutcome]:
            @functools.wraps(fn)
            def call(*args: Any, timeout: float = 60.0, **kwargs: Any) -> ActionOutcome:
                if args:
                    raise RunonceError(f"tool {name}: pass arguments by name")
                key = kwargs.pop(key_from, None) if key_from else None
                return self.submit(name, kwargs, idempotency_key=key).result(timeout)

            return call

        return wrap

    def unreachable(self, timeout_s: float = 2.0) -> str | None:
        """Why an action could not be published now, or None (it can): what a gateway's
        ``/readyz`` answers."""
        return self._submitter.reachable(timeout_s)

    def close(self) -> None:
        self._submitter.flush()
        self._outcomes.close()

    def __enter__(self) -> ActionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _outcome(action_id: str, result: Mapping[str, Any], repeat_reason: str | None) -> ActionOutcome:
    return ActionOutcome(action_id, CallStatus.of(Status(result["status"])), result["action_id"], result["vendor_ref"],
                         result["error"], repeat_reason=repeat_reason, receipt=result.get(RECEIPT))
