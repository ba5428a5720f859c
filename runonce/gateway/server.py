"""The gateway: runonce's tools over MCP (stdio, or streamable HTTP at ``/mcp``) and the HTTP
API (``/v1/actions``), every call an action through one agent SDK client (``calls.py``).

Over HTTP, every request carries a bearer token (``auth.py``): the token's holder is the
agent id of the actions it publishes and names the tools it may call. On stdio the gateway
is local to one agent and the operator names it (``runonce mcp --agent``)."""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS
from starlette.requests import HTTPConnection

from runonce.core.policy import PolicyBook
from runonce.errors import RunonceError
from runonce.gateway import tasks
from runonce.gateway.auth import caller_of
from runonce.gateway.calls import Caller, Calls
from runonce.gateway.mcp_answers import call_tool_result
from runonce.tools.answers import Answer, answer, refused, timed_out, waiting_for_approval
from runonce.tools.specs import KEY_ARGUMENT, served_tools
from runonce.wire.trace import TRACEPARENT, TRACESTATE

log = logging.getLogger("runonce.gateway")


def create_gateway(calls: Calls, policies: PolicyBook, *, timeout_s: float = 30.0,
                   local: Caller | None = None) -> Server[Any]:
    """The MCP server. ``local``: the one caller of a stdio gateway; without it, each call's
    caller is its HTTP request's token holder."""
    specs = {spec.name: spec for spec in served_tools(policies)}

    def caller(ctx: ServerRequestContext[Any]) -> Caller | None:
        return local or caller_of(ctx.request if isinstance(ctx.request, HTTPConnection) else None)

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        who = caller(ctx)
        return types.ListToolsResult(tools=[types.Tool(name=s.name, description=s.description,
                                                       input_schema=s.input_schema)
                                            for s in specs.values() if who is not None and who.may_call(s.name)])

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult | dict[str, Any]:
        name, who = params.name, caller(ctx)
        if who is None:  # RequireAuthMiddleware stands in front of /mcp: a broken invariant
            return call_tool_result(Answer("Refused: no valid bearer token.", {"tool": name}, True))
        why = calls.refusal(who, name)
        if why is not None:
            return call_tool_result(refused(name, who.agent_id, why, sorted(specs)))
        arguments = dict(params.arguments or {})
        key = arguments.pop(KEY_ARGUMENT, None)
        as_task = tasks.declared(ctx.protocol_version, ctx.meta)
        try:
            taken = await calls.take(who, name, arguments, key, timeout_s, trace=_trace_of(ctx.meta))
        except RunonceError as exc:
            log.warning("tool call %s not taken: %s", name, exc)
            return call_tool_result(Answer(f"runonce could not take the call: {exc}", {"tool": name}, True))
        if taken.outcome is not None:
            return call_tool_result(answer(name, taken.outcome))
        if as_task and taken.requested_at is not None:
            return tasks.created(tasks.TaskId(taken.action_id, *taken.requested_at), taken.held,
                                 int(time.time() * 1000))
        if taken.held is not None:
            return call_tool_result(waiting_for_approval(name, taken.action_id, taken.held))
        return call_tool_result(timed_out(name, taken.action_id, timeout_s))

    async def get_task(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        """A task's state, read from Kafka: any replica answers, and one restarted since too."""
        who, task = caller(ctx), tasks.TaskId.parse(params.task_id)
        found = (await calls.find(who, task.action_id, task.requested_at, TASK_LOOKUP_S)
                 if who is not None and task is not None else None)
        if who is None or task is None or found is None:
            raise MCPError(INVALID_PARAMS, f"no task {params.task_id!r} of this caller's")
        return tasks.polled(task, found.tool, found.outcome, calls.held(task.action_id, who), found.requested_at_ms,
                            int(time.time() * 1000))

    async def cancel_task(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
        """A task waiting for a person, cancelled by its agent (core/approval.py: an agent's
        cancel); any replica takes it. A finished task, or one not waiting, is refused."""
        who, task = caller(ctx), tasks.TaskId.parse(params.task_id)
        found = (await calls.find(who, task.action_id, task.requested_at, TASK_LOOKUP_S)
                 if who is not None and task is not None else None)
        if who is None or task is None or found is None:
            raise MCPError(INVALID_PARAMS, f"no task {params.task_id!r} of this caller's")
        if found.agent_id != who.agent_id:
            raise MCPError(INVALID_PARAMS, f"task {task} was asked for by another agent: only that agent may cancel it")
        if found.outcome is not None or not await calls.cancel(who, task.action_id, task.requested_at,
                                                                TASK_LOOKUP_S):
            raise MCPError(INVALID_PARAMS, tasks.not_cancellable(task, found.outcome))
        log.info("task %s cancelled by agent %s", task, who.agent_id)
        return tasks.cancelled()

    server: Server[Any] = Server("runonce", instructions=(
        "Tools served through runonce: each call is performed at most once. A retry of a call "
        "returns the first call's result; an answer marked in_doubt will not change by calling again."),
        on_list_tools=list_tools)
    # registered as a request handler, not ``on_call_tool``: its answer may be a task (a dict
    # the runner passes through on the 2026-07-28 wire), which that hook's type does not admit
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    server.add_request_handler("tasks/get", TaskParams, get_task)
    server.add_request_handler("tasks/cancel", TaskParams, cancel_task)
    server.extensions[tasks.EXTENSION] = {}
    return server


class TaskParams(types.RequestParams):
    """``tasks/get``'s and ``tasks/cancel``'s params (the tasks extension's ``GetTaskRequest``
    and ``CancelTaskRequest``)."""

    task_id: str


#: how long a poll may read Kafka for a task's action before it answers ``working``
TASK_LOOKUP_S = 5.0


def _trace_of(meta: Mapping[str, Any] | None) -> dict[str, str]:
    """The caller's W3C trace context from a call's ``_meta`` (MCP 2026-07-28, SEP-414)."""
    return {name: value for name in (TRACEPARENT, TRACESTATE)
            if meta is not None and isinstance(value := meta.get(name), str)}


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
