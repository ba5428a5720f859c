"""runonce tools as a pydantic-ai toolset (``pip install 'runonce[pydantic-ai]'``).

    from runonce.integrations.pydantic_ai import runonce_toolset
    agent = Agent(model, toolsets=[runonce_toolset(ActionClient(bootstrap), requires_approval=True)])

A tool's key is derived from the run's conversation and the tool call's id
(``keys.derive``), never from what the model writes. pydantic-ai resolves
``RunContext.conversation_id`` from the message history a run continues, so it is the same
when an application resumes a run after a person approved a deferred call (a new run, with a
new ``run_id``) and when a durable engine re-executes it; the tool call's id is the model's
own, kept in that history. So an approved call that runs again (pydantic-ai #5536: Temporal
re-runs it; an application that resumes the same approval twice) is a repeat, answered with
the first run's result."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.toolsets import FunctionToolset

from runonce.errors import ConfigError
from runonce.integrations.calling import Served, served
from runonce.integrations.keys import Derived, derive
from runonce.sdk.client import ActionClient
from runonce.tools.specs import KEY_ARGUMENT


def place_of(ctx: RunContext[Any], *, hint: str | None = None, keeps_natural_ids: bool = False) -> Derived:
    conversation = ctx.conversation_id or ctx.run_id
    if conversation is None or ctx.tool_call_id is None:
        raise ConfigError("a runonce tool needs pydantic-ai's conversation_id and tool_call_id: call it "
                          "from an agent run, not directly")
    return derive("pydantic-ai", (conversation,), (ctx.tool_call_id,), hint, keeps_natural_ids=keeps_natural_ids)


def runonce_toolset(client: ActionClient, *, timeout_s: float = 30.0, only: set[str] | None = None,
                    requires_approval: bool = False) -> FunctionToolset[Any]:
    """The policies' tools; ``requires_approval``: each call waits for the application's
    approval (pydantic-ai's deferred tools) before runonce sees it."""
    return FunctionToolset([_tool(s, timeout_s) for s in served(client, only)], requires_approval=requires_approval)


def _tool(s: Served, timeout_s: float) -> Tool[Any]:
    keeps = s.client.policies.for_tool(s.name).natural_id is not None

    async def call(ctx: RunContext[Any], **arguments: Any) -> str:
        hint = arguments.pop(KEY_ARGUMENT, None)
        derived = place_of(ctx, hint=str(hint) if hint is not None else None, keeps_natural_ids=keeps)
        handle = await asyncio.to_thread(s.client.submit, s.name, arguments, idempotency_key=derived.key,
                                         natural_id=derived.natural_id)
        return (await asyncio.to_thread(s.answer, handle, timeout_s)).text

    return Tool.from_schema(call, name=s.name, description=s.spec.description, json_schema=s.spec.input_schema,
                            takes_ctx=True)
