"""One tool call through the gateway, whichever way it came in (MCP or the HTTP API): who
may make it, then submit and wait. The answer's wording is the caller's business
(``answers.py`` for a model, ``http_api.py`` for an HTTP client); what happened is here.

The agent id is the caller's token holder (or, on stdio, the operator's ``--agent``), never
a name the client gives itself: analysts' "top agents by repeats", budgets and the audit
trail rest on it."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping

import anyio

from runonce.core.policy import KeyMode
from runonce.core.tenant import DEFAULT_TENANT
from runonce.errors import ResultTimeout
from runonce.gateway.metrics import GatewayMetrics
from runonce.sdk.client import ActionClient, ActionOutcome, Found, Handle, HeldFor
from runonce.tools.specs import Refusal
from runonce.wire.results import CallStatus

log = logging.getLogger("runonce.gateway")

#: how often a call that waits for its outcome looks whether its action is held: a held call is
#: answered "held" at once (a person may take hours), never after the whole wait
HELD_SLICE_S = 0.25


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the agent id actions carry, the tools it may call, and its tenant (whose
    keys and results are its own: another tenant's action is not found, not forbidden)."""

    agent_id: str
    #: None: every tool (a token for ``*``, or a local stdio gateway)
    tools: frozenset[str] | None = None
    tenant: str = DEFAULT_TENANT

    def may_call(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools


@dataclass(frozen=True, slots=True)
class Taken:
    """A call published as an action: its outcome, or why there is none yet."""

    action_id: str
    outcome: ActionOutcome | None
    held: HeldFor | None = None
    #: where the request landed in actions.requested: what finds it again from any replica
    requested_at: tuple[int, int] | None = None


class Calls:
    """Submits calls for any number of callers through one ``ActionClient``, and remembers
    the handles of recent ones (``GET /v1/actions/{id}``)."""

    def __init__(self, client: ActionClient, *, metrics: GatewayMetrics | None = None,
                 max_remembered: int = 10_000) -> None:
        self.client = client
        self.metrics = metrics or GatewayMetrics()
        #: action id -> (its handle, the tenant that took it)
        self._handles: OrderedDict[str, tuple[Handle, str]] = OrderedDict()
        self._max = max_remembered

    def refusal(self, caller: Caller, tool: str, *, key_given: bool = True) -> Refusal | None:
        """Why ``caller`` may not call ``tool`` (recorded: a log line and a count), or None.
        ``key_given``: whether the call carries an idempotency key, where that is known before
        its params are read (an HTTP header); a tool whose policy requires one is refused."""
        policy = self.client.policies.tools.get(tool)
        why = (Refusal.UNKNOWN_TOOL if policy is None
               else Refusal.NOT_ALLOWED if not caller.may_call(tool)
               else Refusal.MISSING_KEY if policy.key_mode is KeyMode.REQUIRE and not key_given else None)
        if why is not None:
            self.metrics.refused.labels(caller.agent_id, tool, why.value).inc()
            log.warning("refused: agent %s called %s (%s)", caller.agent_id, tool, why.value)
        return why

    async def take(self, caller: Caller, tool: str, params: Mapping[str, Any], key: str | None,
                   wait_s: float, *, trace: Mapping[str, str] | None = None) -> Taken:
        """Publish the call as ``caller``'s action and wait up to ``wait_s`` for its outcome, or
        until it is held for a person (which may take hours: said at once). ``trace``: the
        caller's W3C trace context (its HTTP headers, its MCP ``_meta``); none starts none.
        Raises what the SDK raises for a call it cannot take (InvalidAction, BrokerUnavailable)."""
        handle = await anyio.to_thread.run_sync(
            lambda: self.client.submit(tool, params, idempotency_key=key, agent_id=caller.agent_id,
                                       tenant=caller.tenant, trace=trace or {}))
        self._remember(handle, caller.tenant)
        taken = await self.wait(handle, wait_s, caller.tenant)
        status = (taken.outcome.status if taken.outcome is not None
                  else CallStatus.HELD if taken.held is not None else CallStatus.PENDING)
        self.metrics.answered.labels(tool, status.value).inc()
        return taken

    def handle(self, action_id: str, caller: Caller) -> Handle | None:
        """The handle of an action ``caller``'s tenant took; another tenant's is not found."""
        found = self._handles.get(action_id)
        return found[0] if found is not None and found[1] == caller.tenant else None

    async def wait(self, handle: Handle, wait_s: float, tenant: str) -> Taken:
        """Up to ``wait_s`` for the outcome; a held action is answered at once, held."""
        deadline = time.monotonic() + wait_s
        while True:
            taken = await self._wait_slice(handle, max(0.0, min(deadline - time.monotonic(), HELD_SLICE_S)), tenant)
            if taken.outcome is not None or taken.held is not None or time.monotonic() >= deadline:
                return taken

    async def _wait_slice(self, handle: Handle, wait_s: float, tenant: str) -> Taken:
        try:
            outcome = await anyio.to_thread.run_sync(handle.result, wait_s)
        except ResultTimeout:
            return Taken(handle.action_id, None, handle.held, handle.requested_at)
        if outcome.result_of != handle.action_id and outcome.result_of not in self._handles:
            # the original is asked for by its id too: a repeat's original is its tenant's own
            self._handles[outcome.result_of] = (handle, tenant)
        return Taken(handle.action_id, outcome, requested_at=handle.requested_at)

    def held(self, action_id: str, caller: Caller) -> HeldFor | None:
        """Why and until when an action this replica took waits for a person (None: it does
        not, or this replica did not take it: a poll elsewhere says less, not something else)."""
        handle = self.handle(action_id, caller)
        return handle.held if handle is not None else None

    async def find(self, caller: Caller, action_id: str, requested_at: tuple[int, int],
                   wait_s: float) -> Found | None:
        """An action ``caller``'s tenant took, on this replica or any other, before or after
        this one started: read from Kafka. None when there is no such action of its tenant
        (another tenant's is not found, not forbidden)."""
        found = await anyio.to_thread.run_sync(
            lambda: self.client.look_up(action_id, requested_at, time.monotonic() + wait_s))
        return found if found is not None and found.tenant == caller.tenant else None

    async def cancel(self, caller: Caller, action_id: str, requested_at: tuple[int, int], wait_s: float) -> bool:
        """Cancel ``caller``'s held action as ``caller`` (the stream job checks it is the agent
        that asked); False when it is not held. Call ``find`` first: it checks the tenant."""
        return await anyio.to_thread.run_sync(
            lambda: self.client.cancel(action_id, requested_at, time.monotonic() + wait_s, agent_id=caller.agent_id,
                                       reason="its agent cancelled the task (MCP tasks/cancel)"))

    def _remember(self, handle: Handle, tenant: str) -> None:
        self._handles[handle.action_id] = (handle, tenant)
        while len(self._handles) > self._max:
            self._handles.popitem(last=False)
