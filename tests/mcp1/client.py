"""An agent on the legacy MCP Python SDK (1.x), run by tests/integration/test_ways_in.py in a
venv of its own (scripts/setup.sh makes it: mcp>=1.30,<2). It speaks the initialize handshake
and the 1.x names (``streamablehttp_client``, camelCase fields), as the many agents that have
not moved to 2.x do.

    python client.py http URL TOKEN TOOL ARGS_JSON CALLS
    python client.py stdio PYTHON TOOL ARGS_JSON CALLS    (the gateway: PYTHON -m runonce mcp)

Prints the protocol version the gateway agreed and the one the client asked for, then one JSON line per call:
{"text", "facts", "is_error"}."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.types import LATEST_PROTOCOL_VERSION


async def calls(session: ClientSession, tool: str, args: dict[str, Any], n: int) -> None:
    agreed = await session.initialize()
    print(json.dumps({"protocol": agreed.protocolVersion, "asked": LATEST_PROTOCOL_VERSION}), flush=True)
    for _ in range(n):
        result = await session.call_tool(tool, args, read_timeout_seconds=timedelta(seconds=120))
        text = " ".join(c.text for c in result.content if c.type == "text")
        print(json.dumps({"text": text, "facts": result.structuredContent or {}, "is_error": result.isError}),
              flush=True)


async def main(argv: list[str]) -> None:
    if argv[0] == "http":
        url, token, tool, args, n = argv[1:]
        async with streamablehttp_client(f"{url}/mcp", headers={"Authorization": f"Bearer {token}"}) as (read, write, _):
            async with ClientSession(read, write) as session:
                await calls(session, tool, json.loads(args), int(n))
    else:
        python, tool, args, n = argv[1:]
        params = StdioServerParameters(command=python, args=["-m", "runonce", "mcp"], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await calls(session, tool, json.loads(args), int(n))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
