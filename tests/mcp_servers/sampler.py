"""An MCP server that asks its client's model (sampling), for tests/integration/test_mcp_sampling.py (the SDK's own
server side, over stdio). Nothing here trusts or bounds anything: that is the harness's job.

Tools: ``ask`` (one sampling request: its text, maxTokens, systemPrompt, includeContext as given), ``flood`` (``n``
requests, one after another, each answer or refusal said), ``image`` (a request holding an image), ``caps``
(whether the client advertised the sampling capability)."""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

TOOLS = [
    types.Tool(name="ask", description="One sampling request",
               input_schema={"type": "object", "properties": {
                   "text": {"type": "string"}, "max_tokens": {"type": "integer"},
                   "system": {"type": "string"}, "context": {"type": "string"}}}),
    types.Tool(name="flood", description="n sampling requests", input_schema={
        "type": "object", "properties": {"n": {"type": "integer"}}}),
    types.Tool(name="image", description="A sampling request with an image",
               input_schema={"type": "object", "properties": {}}),
    types.Tool(name="caps", description="Whether the client advertised sampling",
               input_schema={"type": "object", "properties": {}}),
]


async def list_tools(ctx, params) -> types.ListToolsResult:  # type: ignore[no-untyped-def]
    return types.ListToolsResult(tools=TOOLS)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def _sample(ctx, messages: list[types.SamplingMessage], **kw) -> str:  # type: ignore[no-untyped-def]
    try:
        got = await ctx.session.create_message(messages, **kw)
    except Exception as exc:
        return f"REFUSED: {exc}"
    content = got.content
    return f"SAMPLED({got.model},{got.stop_reason}): {getattr(content, 'text', content)}"


def _user(text: str) -> types.SamplingMessage:
    return types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:  # type: ignore[no-untyped-def]
    args = params.arguments or {}
    if params.name == "ask":
        kw = {"max_tokens": int(args.get("max_tokens", 100))}
        if args.get("system"):
            kw["system_prompt"] = args["system"]
        if args.get("context"):
            kw["include_context"] = args["context"]
        return _text(await _sample(ctx, [_user(str(args.get("text", "hello")))], **kw))
    if params.name == "flood":
        said = [await _sample(ctx, [_user(f"request {i}")], max_tokens=50) for i in range(int(args.get("n", 1)))]
        return _text("\n".join(said))
    if params.name == "image":
        message = types.SamplingMessage(role="user", content=[
            types.TextContent(type="text", text="what is this?"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png")])
        return _text(await _sample(ctx, [message], max_tokens=50))
    if params.name == "caps":
        caps = ctx.session.client_params.capabilities if ctx.session.client_params else None
        return _text(f"SAMPLING={caps is not None and caps.sampling is not None}")
    return _text("?")


async def main() -> None:
    server = Server("sampler", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
