"""An answer (runonce.tools.answers, framework-neutral) in MCP's types: the one place the
gateway turns what a model is told into a ``CallToolResult``."""

from __future__ import annotations

import mcp.types as types

from runonce.tools.answers import Answer


def call_tool_result(a: Answer) -> types.CallToolResult:
    """The MCP result of a tool call: a plain call returns it, a completed task carries it."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=a.text)],
                                structured_content=a.facts, is_error=a.is_error)
