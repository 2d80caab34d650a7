"""An MCP server that does not stop working on a call it was told to abandon (tests/integration/test_mcp_stubborn.py).

``block`` blocks the server's event loop (a synchronous sleep in the handler): the client's notifications/cancelled
and its pings go unread, as with a server stuck in a C extension or a busy loop. ``where`` answers at once, with
this process's pid (so a test can tell a restarted server from the first)."""

from __future__ import annotations

import os
import time

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

TOOLS = [types.Tool(name="block", description="Blocks its loop", input_schema={"type": "object", "properties": {}}),
         types.Tool(name="where", description="Its pid", input_schema={"type": "object", "properties": {}})]


async def list_tools(ctx, params) -> types.ListToolsResult:  # type: ignore[no-untyped-def]
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params) -> types.CallToolResult:  # type: ignore[no-untyped-def]
    if params.name == "block":
        time.sleep(3600)
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(os.getpid()))])


async def main() -> None:
    server = Server("stubborn", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
