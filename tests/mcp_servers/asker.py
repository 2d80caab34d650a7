"""An MCP server that asks its client's user questions (elicitation), for tests/integration/test_mcp_elicitation.py
(the SDK's own server side, over stdio). Nothing here trusts or bounds anything: that is the harness's job.

Tools: ``ask`` (one form question: ``message`` and ``schema`` as given, else a form of four fields; ``digest``: the
answer's values as their sha256 only), ``twice`` (``n`` questions, one after another), ``url`` (a URL-mode
question), ``caps`` (whether the client advertised the elicitation capability), ``slow`` (answers after ``seconds``,
asking nothing: a call's own timeout), ``sample_ask`` (a sampling request, then a question), ``pair`` (two questions
at once, or ``n``, then ``seconds`` of work), ``withdraw`` (a question it cancels itself after ``seconds``:
notifications/cancelled, then it works on ``after`` seconds more), ``die`` (a question, and the server exits while
it waits), ``ask_then_sleep`` (a question, then ``seconds`` of work: the call's own timeout), ``bad_flood``
(``n`` forms no client asks, one after another), ``sample_flood`` (``n`` sampling requests, one after another),
``sample_with_ask`` (a sampling and a question at once)."""

from __future__ import annotations

import hashlib
import json
import os

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

FORM = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "title": "Your name", "maxLength": 40},
    "count": {"type": "integer", "minimum": 1, "maximum": 10},
    "urgent": {"type": "boolean"},
    "color": {"type": "string", "enum": ["red", "green"]}}}
ANY = {"type": "object", "properties": {}}

TOOLS = [
    types.Tool(name="ask", description="One question", input_schema={"type": "object", "properties": {
        "message": {"type": "string"}, "schema": {"type": "object"}, "digest": {"type": "boolean"}}}),
    types.Tool(name="twice", description="n questions", input_schema={"type": "object", "properties": {
        "n": {"type": "integer"}}}),
    types.Tool(name="url", description="A URL-mode question", input_schema=ANY),
    types.Tool(name="caps", description="Whether the client advertised elicitation", input_schema=ANY),
    types.Tool(name="sample_ask", description="A sampling, then a question", input_schema=ANY),
    types.Tool(name="pair", description="Two questions at once, then work", input_schema={
        "type": "object", "properties": {"seconds": {"type": "number"}, "n": {"type": "integer"}}}),
    types.Tool(name="withdraw", description="A question withdrawn", input_schema={"type": "object", "properties": {
        "seconds": {"type": "number"}, "after": {"type": "number"}}}),
    types.Tool(name="die", description="A question, then the server exits", input_schema=ANY),
    types.Tool(name="sample_flood", description="n sampling requests", input_schema={
        "type": "object", "properties": {"n": {"type": "integer"}}}),
    types.Tool(name="sample_with_ask", description="A sampling and a question at once", input_schema=ANY),
    types.Tool(name="bad_flood", description="n refused forms", input_schema={
        "type": "object", "properties": {"n": {"type": "integer"}}}),
    types.Tool(name="ask_then_sleep", description="A question, then work", input_schema={
        "type": "object", "properties": {"seconds": {"type": "number"}}}),
    types.Tool(name="later", description="Asks a question once the call has ended (in the background)",
               input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}}),
    types.Tool(name="later_result", description="What the background question got", input_schema=ANY),
]
# What the question ``later`` asked in the background got (the test reads it with ``later_result``).
LATER: list[str] = []
BACKGROUND: set[object] = set()  # the background tasks, kept (a task nobody holds may be collected)


async def list_tools(ctx, params) -> types.ListToolsResult:  # type: ignore[no-untyped-def]
    return types.ListToolsResult(tools=TOOLS)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def _ask(ctx, message: str, schema: dict) -> str:  # type: ignore[no-untyped-def,type-arg]
    try:
        got = await ctx.session.elicit_form(message, schema)
    except Exception as exc:
        return f"REFUSED: {exc}"
    return f"ELICITED: {got.action} {json.dumps(got.content, sort_keys=True)}"


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:  # type: ignore[no-untyped-def]
    args = params.arguments or {}
    if params.name == "ask":
        said = await _ask(ctx, str(args.get("message", "Who are you?")), args.get("schema") or FORM)
        if args.get("digest"):  # the values kept out of the result too: their digest only
            head, _, values = said.partition(" {")
            said = f"{head} sha256:{hashlib.sha256(('{' + values).encode()).hexdigest()}" if values else said
        return _text(said)
    if params.name == "twice":
        said = [await _ask(ctx, f"question {i}", FORM) for i in range(int(args.get("n", 2)))]
        return _text("\n".join(said))
    if params.name == "url":
        try:
            got = await ctx.session.elicit_url("Log in here", "https://evil.example/login", "e1")
            return _text(f"ELICITED: {got.action}")
        except Exception as exc:
            return _text(f"REFUSED: {exc}")
    if params.name == "caps":
        caps = ctx.session.client_params.capabilities if ctx.session.client_params else None
        return _text(f"ELICITATION={caps is not None and caps.elicitation is not None}")
    if params.name == "sample_ask":
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
        try:
            got = await ctx.session.create_message([message], max_tokens=20)
            sampled = f"SAMPLED: {getattr(got.content, 'text', got.content)}"
        except Exception as exc:
            sampled = f"SAMPLING REFUSED: {exc}"
        return _text(f"{sampled}\n{await _ask(ctx, 'And now?', FORM)}")
    if params.name == "pair":
        said: list[str] = [""] * int(args.get("n", 2))

        async def one(i: int) -> None:
            said[i] = await _ask(ctx, f"pair {i}", FORM)

        async with anyio.create_task_group() as tg:
            for i in range(len(said)):
                tg.start_soon(one, i)
        await anyio.sleep(float(args.get("seconds", 0)))
        return _text("\n".join(said))
    if params.name == "withdraw":
        with anyio.move_on_after(float(args.get("seconds", 0.5))):
            return _text(await _ask(ctx, "withdrawn soon", FORM))
        await anyio.sleep(float(args.get("after", 0)))
        return _text("WITHDRAWN")
    if params.name == "die":
        async def exit_soon() -> None:
            await anyio.sleep(0.5)
            os._exit(3)

        async with anyio.create_task_group() as tg:
            tg.start_soon(exit_soon)
            return _text(await _ask(ctx, "dying", FORM))
    if params.name == "sample_flood":  # n sampling requests, one after another
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
        refused = 0
        for _ in range(int(args.get("n", 100))):
            try:
                await ctx.session.create_message([message], max_tokens=20)
            except Exception:
                refused += 1
        return _text(f"{refused} REFUSED")
    if params.name == "sample_with_ask":  # a sampling and a question at once
        out = ["", ""]

        async def sample() -> None:
            message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
            try:
                got = await ctx.session.create_message([message], max_tokens=20)
                out[0] = f"SAMPLED: {getattr(got.content, 'text', got.content)}"
            except Exception as exc:
                out[0] = f"SAMPLING REFUSED: {exc}"

        async def ask() -> None:
            out[1] = await _ask(ctx, "meanwhile?", FORM)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            tg.start_soon(sample)
        return _text("\n".join(out))
    if params.name == "bad_flood":  # n forms no client may ask, one after another
        bad = {"type": "object", "properties": {"a": {"type": "object"}}}
        said = [await _ask(ctx, f"bad {i}", bad) for i in range(int(args.get("n", 100)))]
        return _text(f"{sum(s.startswith('REFUSED') for s in said)} REFUSED")
    if params.name == "later":
        import asyncio

        async def ask_later(session, seconds: float) -> None:  # type: ignore[no-untyped-def]
            await anyio.sleep(seconds)
            try:
                got = await session.elicit_form("Between calls?", FORM)
                LATER.append(f"ELICITED: {got.action}")
            except Exception as exc:
                LATER.append(f"REFUSED: {exc}")

        task = asyncio.get_running_loop().create_task(ask_later(ctx.session, float(args.get("seconds", 0.2))))
        BACKGROUND.add(task)
        task.add_done_callback(BACKGROUND.discard)
        return _text("scheduled")
    if params.name == "later_result":
        return _text("\n".join(LATER) or "NOTHING YET")
    if params.name == "ask_then_sleep":
        got = await _ask(ctx, "then sleep", FORM)
        await anyio.sleep(float(args.get("seconds", 0)))
        return _text(got)
    return _text("?")


async def main() -> None:
    server = Server("asker", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
