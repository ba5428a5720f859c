"""The gateway: runonce's tools over MCP (stdio, or streamable HTTP at ``/mcp``) and the HTTP
API (``/v1/actions``), every call an action through one agent SDK client (``calls.py``).

Over HTTP, every request carries a bearer token (``auth.py``): the token's holder is the
agent id of the actions it publishes and names the tools it may call. On stdio the gateway
is local to one agent and the operator names it (``runonce mcp --agent``)."""

from __future__ import annotations

import logging
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server

from runonce.core.policy import PolicyBook
from runonce.errors import RunonceError
from runonce.gateway.answers import Answer, answer, refused, timed_out, waiting_for_approval
from runonce.gateway.auth import caller_of
from runonce.gateway.calls import Caller, Calls
from runonce.gateway.tools import KEY_ARGUMENT, served_tools

log = logging.getLogger("runonce.gateway")


def create_gateway(calls: Calls, policies: PolicyBook, *, timeout_s: float = 30.0,
                   local: Caller | None = None) -> Server[Any, Any]:
    """The MCP server. ``local``: the one caller of a stdio gateway; without it, each call's
    caller is its HTTP request's token holder."""
    server: Server[Any, Any] = Server("runonce", instructions=(
        "Tools served through runonce: each call is performed at most once. A retry of a call "
        "returns the first call's result; an answer marked in_doubt will not change by calling again."))
    specs = {spec.name: spec for spec in served_tools(policies)}

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        caller = local or caller_of(server.request_context.request)
        return [types.Tool(name=s.name, description=s.description, inputSchema=s.input_schema)
                for s in specs.values() if caller is not None and caller.may_call(s.name)]

    @server.call_tool()  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        caller = local or caller_of(server.request_context.request)
        if caller is None:  # RequireAuthMiddleware stands in front of /mcp: a broken invariant
            return _result(Answer("Refused: no valid bearer token.", {"tool": name}, True))
        why = calls.refusal(caller, name)
        if why is not None:
            return _result(refused(name, caller.agent_id, why, sorted(specs)))
        params = dict(arguments)
        key = params.pop(KEY_ARGUMENT, None)
        try:
            taken = await calls.take(caller, name, params, key, timeout_s)
        except RunonceError as exc:
            log.warning("tool call %s not taken: %s", name, exc)
            return _result(Answer(f"runonce could not take the call: {exc}", {"tool": name}, True))
        if taken.outcome is not None:
            return _result(answer(name, taken.outcome))
        if taken.held is not None:
            return _result(waiting_for_approval(name, taken.action_id, taken.held))
        return _result(timed_out(name, taken.action_id, timeout_s))

    return server


def _result(a: Answer) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=a.text)],
                                structuredContent=a.facts, isError=a.is_error)


async def serve_stdio(server: Server[Any, Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
