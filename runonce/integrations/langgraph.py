"""runonce tool calls in a LangGraph graph, safe under ``interrupt()`` replay
(``pip install 'runonce[langgraph]'``).

    from runonce.integrations.langgraph import tool_node, call_tool
    graph.add_node("tools", tool_node(ActionClient(bootstrap)))      # every call of the last AI message

    def charge_then_confirm(state, config):                           # a node of your own
        answer = call_tool(client, state["messages"][-1].tool_calls[0], config)
        interrupt("confirm?")                                         # the node is replayed on resume ...
        return {"messages": [answer]}                                 # ... and the charge is not repeated

When a graph resumes after ``interrupt()``, LangGraph runs the interrupted node again from its
start (langgraph #7780: side effects before the gate repeat). Each call's key is derived from
what the replay keeps (``keys.derive``): the thread (``configurable.thread_id``), the node's
checkpoint namespace (``configurable.checkpoint_ns``, the task's id, the same on a replay) and
the tool call's id in the checkpointed AI message. The replay's call is a repeat, answered
with the first call's result. A model's ``idempotency_key`` argument is kept as a hint."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from runonce.errors import ConfigError
from runonce.integrations.calling import Served, served
from runonce.integrations.keys import Derived, derive
from runonce.sdk.client import ActionClient
from runonce.tools.specs import KEY_ARGUMENT


def place_of(tool_call: Mapping[str, Any], config: RunnableConfig, *, keeps_natural_ids: bool = False) -> Derived:
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    if thread is None or not tool_call.get("id"):
        raise ConfigError("a runonce tool call in LangGraph needs a checkpointer's thread_id "
                          "(config={'configurable': {'thread_id': ...}}) and a tool call with an id: "
                          "without them no key survives a replay")
    hint = (tool_call.get("args") or {}).get(KEY_ARGUMENT)
    return derive("langgraph", (str(thread),), (str(configurable.get("checkpoint_ns", "")), str(tool_call["id"])),
                  str(hint) if hint is not None else None, keeps_natural_ids=keeps_natural_ids)


def call_tool(client: ActionClient, tool_call: Mapping[str, Any], config: RunnableConfig, *,
              timeout_s: float = 30.0) -> ToolMessage:
    """Perform one tool call of an AI message through runonce, at most once per place."""
    tools = {s.name: s for s in served(client)}
    s = tools.get(str(tool_call["name"]))
    if s is None:
        return ToolMessage(content=f"Unknown tool {tool_call['name']!r}: runonce serves {', '.join(sorted(tools))}.",
                           tool_call_id=str(tool_call["id"]), status="error")
    return _perform(s, tool_call, config, timeout_s)


def tool_node(client: ActionClient, *, timeout_s: float = 30.0,
              only: set[str] | None = None) -> Callable[[Mapping[str, Any], RunnableConfig], dict[str, Any]]:
    """A graph node: every tool call of the last AI message in ``state["messages"]``."""
    tools = {s.name: s for s in served(client, only)}

    def node(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        last = state["messages"][-1]
        calls = last.tool_calls if isinstance(last, AIMessage) else []
        answers = [_perform(tools[str(c["name"])], c, config, timeout_s) if c["name"] in tools
                   else ToolMessage(content=f"Unknown tool {c['name']!r}.", tool_call_id=str(c["id"]), status="error")
                   for c in calls]
        return {"messages": answers}

    return node


def _perform(s: Served, tool_call: Mapping[str, Any], config: RunnableConfig, timeout_s: float) -> ToolMessage:
    derived = place_of(tool_call, config, keeps_natural_ids=s.client.policies.for_tool(s.name).natural_id is not None)
    params = {k: v for k, v in (tool_call.get("args") or {}).items() if k != KEY_ARGUMENT}
    handle = s.client.submit(s.name, params, idempotency_key=derived.key, natural_id=derived.natural_id)
    told = s.answer(handle, timeout_s)
    return ToolMessage(content=told.text, artifact=told.facts, tool_call_id=str(tool_call["id"]),
                       status="error" if told.is_error else "success")
