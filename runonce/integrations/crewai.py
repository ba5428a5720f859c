"""runonce tools for CrewAI (``pip install 'runonce[crewai]'``).

    from runonce.integrations.crewai import crewai_tools
    agent = Agent(role="billing", ..., tools=crewai_tools(ActionClient(bootstrap)))

CrewAI runs a task again when its guardrail refuses the output (``guardrail_max_retries``),
and every tool call of the task runs again with it (crewAI #5802: duplicate payments and
emails). The model rewrites its prompt on a retry, so a key made from its arguments changes.
What a retry keeps is the kickoff (its started event's id), the task (``Task.id``) and the
order of the tool's calls in the task: the first charge of the retried task is the first
charge of the first attempt. Each call's key is derived from those (``keys.derive``), found by
a before-tool-call hook that CrewAI runs, in the same thread, right before the tool. The
retry's calls are repeats, answered with the first attempt's results.

A crew resumed from a checkpoint (``Crew.from_checkpoint``, ``kickoff(from_checkpoint=...)``)
emits no kickoff-started event: its kickoff id is the one restored with the checkpoint
(``Crew.checkpoint_kickoff_event_id``), so the task it runs again derives the same keys, and a
charge the crashed process made is a repeat. Call ``crewai_tools`` in the resuming process
too: a tool restored from a checkpoint holds nothing but its name, and the hook hands each call
its client.

CrewAI 1.15 pins ``mcp<2``: install this extra in the agent's environment, not beside
``runonce[gateway]`` (the gateway is a process of its own anyway). A crew kicked off again
from the start is a new run, with new actions."""

from __future__ import annotations

import contextvars
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from crewai.events import CrewKickoffCompletedEvent, CrewKickoffFailedEvent, CrewKickoffStartedEvent, crewai_event_bus
from crewai.hooks import register_before_tool_call_hook
from crewai.hooks.tool_hooks import ToolCallHookContext
from crewai.tools import BaseTool
from pydantic import BaseModel, Field

from runonce.errors import ConfigError
from runonce.integrations.calling import Served, served
from runonce.integrations.keys import Derived, derive
from runonce.sdk.client import ActionClient
from runonce.tools.specs import KEY_ARGUMENT


@dataclass(frozen=True, slots=True)
class _Place:
    """What the hook found for the tool call about to run: its key, and what serves the tool."""

    derived: Derived
    served: Served
    timeout_s: float


#: the place the hook found for the tool call about to run (read once by the tool)
_PLACE: contextvars.ContextVar[_Place | None] = contextvars.ContextVar("runonce_crewai_place", default=None)


class _Places:
    """Where each runonce tool call is: its kickoff, its task, and its rank among this tool's
    calls in the task's current attempt (a retry counts from one again)."""

    def __init__(self, served: dict[str, Served], keeps_natural_ids: set[str], timeout_s: float) -> None:
        self.served = served
        #: the tools whose policy keeps natural ids: a model's key is a hint for them
        self.keeps_natural_ids = keeps_natural_ids
        self.timeout_s = timeout_s
        #: crew id -> its running kickoff; kickoff -> its calls counted per (task, attempt, tool).
        #: Both are dropped when the kickoff ends, so a long-lived process keeps only running ones.
        self._kickoffs: dict[str, str] = {}
        self._calls: dict[str, Counter[tuple[str, int, str]]] = {}
        self._lock = threading.Lock()

    def kickoff(self, source: Any, event: CrewKickoffStartedEvent) -> None:
        with self._lock:
            self._kickoffs[str(source.id)] = event.event_id

    def ended(self, source: Any, event: CrewKickoffCompletedEvent | CrewKickoffFailedEvent) -> None:
        crew, fallback = str(source.id), f"crew-{source.id}"
        kickoff = event.started_event_id or fallback
        with self._lock:  # the bus may serve a next kickoff's start before this one's end
            if self._kickoffs.get(crew) == kickoff:
                del self._kickoffs[crew]
            self._calls.pop(kickoff, None)
            self._calls.pop(fallback, None)

    def before(self, ctx: ToolCallHookContext) -> None:
        served = self.served.get(ctx.tool_name)
        if served is None:
            return None
        if ctx.task is None or ctx.crew is None:
            _PLACE.set(None)
            return None
        with self._lock:
            # a kickoff started here, else one resumed from a checkpoint (no started event: the
            # kickoff's id comes back with the checkpoint)
            kickoff = (self._kickoffs.get(str(ctx.crew.id)) or ctx.crew.checkpoint_kickoff_event_id
                       or f"crew-{ctx.crew.id}")
            calls = self._calls.setdefault(kickoff, Counter())
            attempt = (str(ctx.task.id), int(ctx.task.retry_count), ctx.tool_name)
            calls[attempt] += 1
            rank = calls[attempt]
        hint = ctx.tool_input.get(KEY_ARGUMENT)
        derived = derive("crewai", (kickoff,), (str(ctx.task.id), ctx.tool_name, str(rank)),
                         str(hint) if hint is not None else None,
                         keeps_natural_ids=ctx.tool_name in self.keeps_natural_ids)
        _PLACE.set(_Place(derived, served, self.timeout_s))
        return None


class RunonceTool(BaseTool):  # type: ignore[misc]  # CrewAI is not installed where mypy runs
    """One runonce tool as CrewAI shows it to an agent: a name and a schema, and nothing CrewAI
    cannot copy or restore from a checkpoint; its client comes with the hook's place."""

    @classmethod
    def of(cls, served: Served) -> RunonceTool:
        return cls(name=served.name, description=served.spec.description, args_schema=ToolArguments)

    def _run(self, **arguments: Any) -> str:
        place = _PLACE.get()
        _PLACE.set(None)  # one place, one call
        if place is None or place.served.name != self.name:
            raise ConfigError(f"{self.name}: a runonce tool runs inside a crew's task, after the hook "
                              "crewai_tools() registers: without them no key survives a retry")
        params = dict(arguments.get("params") or {})
        handle = place.served.client.submit(self.name, params, idempotency_key=place.derived.key,
                                            natural_id=place.derived.natural_id)
        return place.served.answer(handle, place.timeout_s).text


def crewai_tools(client: ActionClient, *, timeout_s: float = 30.0, only: set[str] | None = None) -> list[BaseTool]:
    """The policies' tools, and the hook and kickoff listener that give each call its place."""
    tools = served(client, only)
    places = _Places({s.name: s for s in tools},
                     {s.name for s in tools if client.policies.for_tool(s.name).natural_id is not None}, timeout_s)
    crewai_event_bus.on(CrewKickoffStartedEvent)(places.kickoff)
    crewai_event_bus.on(CrewKickoffCompletedEvent)(places.ended)
    crewai_event_bus.on(CrewKickoffFailedEvent)(places.ended)
    register_before_tool_call_hook(places.before)
    return [RunonceTool.of(s) for s in tools]


class ToolArguments(BaseModel):
    """CrewAI passes a tool only the arguments its schema declares, and a policy declares no
    params but the key: a CrewAI tool takes its params as one object."""

    params: dict[str, Any] = Field(default_factory=dict, description="The action's params, as one JSON object")
    idempotency_key: str | None = Field(default=None, description=(
        "Optional: the same key on a later call marks it as the same action. A retry of this task is "
        "recognised without it."))

