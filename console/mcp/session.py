"""What a server's session gives whatever way it is reached (stdio: console.mcp.client, streamable HTTP:
console.mcp.http): its tool list read page by page (bounded), a call's result as the text the agent reads, and a
failure in one line."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

import mcp_types as types
from mcp import ClientSession

from console.engine.job import one_line
from console.engine.text import safe_text
from console.engine.tools.mcp_content import McpBlock, decode_base64, from_bytes
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo, McpUnavailable

MAX_PAGES = 8  # pages of tools/list read at most (a server that pages for ever is not waited on)
POLL_SECONDS = 0.05  # how often a call in flight looks whether the operator stopped the run


async def tool_list(session: ClientSession) -> list[McpToolInfo]:
    """The server's tools, at most :data:`MAX_PAGES` pages of them."""
    tools: list[McpToolInfo] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += [McpToolInfo(t.name, t.description or "", t.input_schema) for t in page.tools]
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def render(result: types.CallToolResult) -> McpCallResult:
    """The text content as text; images, audio and embedded resources decoded (strictly, bounded) for the engine to
    save into the job folder (console.engine.tools.mcp_content), resource links named (never fetched)."""
    parts: list[str] = []
    blocks: list[McpBlock] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            blocks.append(decode_base64(block.type, block.data, mime=block.mime_type))
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.BlobResourceContents):
                blocks.append(decode_base64("resource", res.blob, mime=res.mime_type or "", uri=res.uri))
            else:
                blocks.append(from_bytes("resource", res.text.encode("utf-8", "replace"),
                                         mime=res.mime_type or "text/plain", uri=res.uri))
        elif isinstance(block, types.ResourceLink):
            blocks.append(McpBlock("resource_link", block.mime_type or "", uri=block.uri, name=block.name))
        else:  # a kind of content this client does not know: named, never shown
            kind = getattr(block, "type", type(block).__name__)
            parts.append(f"[{safe_text(str(kind), one_line=True, limit=40)} content not shown]")
    return McpCallResult(not bool(result.is_error), "\n".join(parts), tuple(blocks))


def why(exc: BaseException) -> str:
    """A failure of the session in one line (the first of a group)."""
    if isinstance(exc, BaseExceptionGroup):
        first = exc.exceptions[0] if exc.exceptions else exc
        return why(first)
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    text = str(exc) or type(exc).__name__
    if text == "Connection closed":  # the SDK's words for a server whose output ended
        return "it exited, or closed its output, before answering"
    return safe_text(one_line(text, 200), one_line=True)


def answered(future: concurrent.futures.Future[McpCallResult], should_stop: Callable[[], bool]) -> McpCallResult:
    """The answer of a call running on the server's loop, waited for in steps so that the operator's stop is heard:
    it cancels the call (the SDK tells the server: notifications/cancelled), and the server serves on."""
    while not concurrent.futures.wait([future], timeout=POLL_SECONDS).done:
        if should_stop():
            future.cancel()
            raise McpUnavailable("stopped by the operator (the call was cancelled)")
    return future.result()
