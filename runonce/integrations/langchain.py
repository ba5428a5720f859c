"""runonce tools as langchain-core tools (``pip install 'runonce[langchain]'``).

    from runonce.integrations.langchain import langchain_tools
    tools = langchain_tools(ActionClient(bootstrap, agent_id="sales-agent"), timeout_s=10)

Each tool's content is the answer a model reads; its artifact the facts (action_id,
status, vendor_ref, result_of). With no outcome within ``timeout_s`` the tool raises
``ResultTimeout`` (a ``TimeoutError``), so ``tool.with_retry(retry_if_exception_type=
(TimeoutError,))`` retries it, and every retry is answered with the first call's result."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool

from runonce.integrations.calling import Served, served
from runonce.sdk.client import ActionClient


def langchain_tools(client: ActionClient, *, timeout_s: float = 30.0, only: set[str] | None = None) -> list[StructuredTool]:
    return [_tool(s, timeout_s) for s in served(client, only)]


def _tool(s: Served, timeout_s: float) -> StructuredTool:
    def call(**arguments: Any) -> tuple[str, dict[str, Any]]:
        a = s.answer(s.submit(arguments), timeout_s)
        return a.text, a.facts

    return StructuredTool.from_function(func=call, name=s.name, description=s.spec.description,
                                        args_schema=s.spec.input_schema, response_format="content_and_artifact")
