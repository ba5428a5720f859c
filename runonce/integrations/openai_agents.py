"""runonce tools as OpenAI Agents SDK function tools (``pip install 'runonce[openai-agents]'``).

    from runonce.integrations.openai_agents import openai_agents_tools
    agent = Agent(name="sales", tools=openai_agents_tools(ActionClient(bootstrap), timeout_s=10))

``timeout_s`` becomes the tool's ``timeout_seconds``: the SDK cancels a slow call and tells
the model it timed out, and a model that calls again gets the first call's result (the
retry is a repeat). The tool polls its outcome in short waits, so a cancelled call leaves
no thread waiting behind it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import FunctionTool, RunContextWrapper

from runonce.errors import ResultTimeout
from runonce.integrations.calling import Served, served
from runonce.sdk.client import ActionClient
from runonce.tools.answers import Answer

_POLL_S = 0.5


def openai_agents_tools(client: ActionClient, *, timeout_s: float | None = 30.0,
                        only: set[str] | None = None) -> list[FunctionTool]:
    return [_tool(s, timeout_s) for s in served(client, only)]


def _tool(s: Served, timeout_s: float | None) -> FunctionTool:
    async def invoke(_: RunContextWrapper[Any], arguments: str) -> str:
        handle = await asyncio.to_thread(s.submit, json.loads(arguments or "{}"))
        while True:  # cancelled by the SDK's timeout between two polls
            try:
                found: Answer = await asyncio.to_thread(s.answer, handle, _POLL_S)
                return found.text
            except ResultTimeout:
                continue

    return FunctionTool(name=s.name, description=s.spec.description, params_json_schema=s.spec.input_schema,
                        on_invoke_tool=invoke, strict_json_schema=False, timeout_seconds=timeout_s)
