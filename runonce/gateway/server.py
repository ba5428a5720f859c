"""The MCP server: tools from the policies, each call an action through the agent SDK.

One ``ActionClient`` serves every session (one producer, one reader of the outcomes); a call
waits in a worker thread, so many calls wait at once. The agent id of an action is the MCP
client's name (``mcp:<clientInfo.name>``), so analysts see which agent repeated itself."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server

from runonce.core.policy import PolicyBook
from runonce.errors import ResultTimeout, RunonceError
from runonce.gateway.answers import Answer, answer, timed_out, waiting_for_approval
from runonce.gateway.tools import KEY_ARGUMENT, served_tools
from runonce.sdk.client import ActionClient, Handle

log = logging.getLogger("runonce.gateway")


def create_gateway(client: ActionClient, policies: PolicyBook, *, timeout_s: float = 30.0) -> Server[Any, Any]:
    server: Server[Any, Any] = Server("runonce", instructions=(
        "Tools served through runonce: each call is performed at most once. A retry of a call "
        "returns the first call's result; an answer marked in_doubt will not change by calling again."))
    specs = {spec.name: spec for spec in served_tools(policies)}

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name=s.name, description=s.description, inputSchema=s.input_schema)
                for s in specs.values()]

    @server.call_tool()  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name not in policies.tools:
            return _result(Answer(f"Unknown tool {name!r}: runonce serves {', '.join(sorted(specs))}.",
                                  {"tool": name}, True))
        params = dict(arguments)
        key = params.pop(KEY_ARGUMENT, None)
        agent = _agent_of(server)
        handle: Handle | None = None
        try:
            handle = await anyio.to_thread.run_sync(
                lambda: client.submit(name, params, idempotency_key=key, agent_id=agent))
            outcome = await anyio.to_thread.run_sync(handle.result, timeout_s)
        except ResultTimeout:
            held = handle.held if handle is not None else None
            if handle is not None and held is not None:
                return _result(waiting_for_approval(name, handle.action_id, held))
            return _result(timed_out(name, handle.action_id if handle else None, timeout_s))
        except RunonceError as exc:
            log.warning("tool call %s not taken: %s", name, exc)
            return _result(Answer(f"runonce could not take the call: {exc}", {"tool": name}, True))
        return _result(answer(name, outcome))

    return server


def _agent_of(server: Server[Any, Any]) -> str:
    params = server.request_context.session.client_params
    return f"mcp:{params.clientInfo.name}" if params is not None else "mcp"


def _result(a: Answer) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=a.text)],
                                structuredContent=a.facts, isError=a.is_error)


async def serve_stdio(server: Server[Any, Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(server: Server[Any, Any], host: str, port: int) -> None:
    """Streamable HTTP at ``http://host:port/mcp``."""
    import uvicorn
    from mcp.server.fastmcp.server import StreamableHTTPASGIApp
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(app=server)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan)
    uvicorn.run(app, host=host, port=port, log_level="warning")
