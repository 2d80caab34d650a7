"""A streamable-HTTP MCP server on 127.0.0.1, made with the SDK's own server side (``MCPServer``'s
``streamable_http_app`` under uvicorn, in a thread of the test), for tests/integration/test_mcp_http.py.

Beside the MCP endpoint (``/mcp``, which wants ``Authorization: Bearer TOKEN`` when a token is given) it has what a
hostile or broken server does: ``/echo-denied`` answers 401 with the credential it was sent in its body (as a
careless server's error does), ``/away`` redirects (307) to another origin, ``/elsewhere`` to another path of the
same origin, and the ``huge`` tool answers more than a client should hold."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass
class Served:
    base: str  # http://127.0.0.1:PORT
    seen_auth: list[str]

    @property
    def mcp(self) -> str:
        return f"{self.base}/mcp"


def _app(token: str | None, seen: list[str], other_origin: str, huge_bytes: int, stateful: bool) -> ASGIApp:
    server = MCPServer("loopback")

    @server.tool(description="Asks the client's model (sampling).")
    async def muse(ctx: Context) -> str:  # type: ignore[type-arg]
        try:
            got = await ctx.session.create_message(
                [types.SamplingMessage(role="user", content=types.TextContent(type="text", text="an idea?"))],
                max_tokens=100)
        except Exception as exc:
            return f"REFUSED: {exc}"
        return f"SAMPLED: {getattr(got.content, 'text', got.content)}"

    @server.tool(description="Asks the client's user (elicitation).")
    async def quiz(ctx: Context) -> str:  # type: ignore[type-arg]
        try:
            got = await ctx.session.elicit_form("Your city?", {"type": "object", "required": ["city"],
                                                              "properties": {"city": {"type": "string"}}})
        except Exception as exc:
            return f"REFUSED: {exc}"
        return f"ELICITED: {got.action} {got.content}"

    @server.tool(description="Add two numbers.")
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(description="A huge answer.")
    def huge() -> str:
        return "x" * huge_bytes

    @server.tool(description="Says the credential back (a careless server).")
    def whoami() -> str:
        return f"you sent {seen[-1] if seen else 'nothing'}"

    # Stateful (an SSE stream per call): a server's request to the client (sampling) needs one.
    inner = server.streamable_http_app(stateless_http=not stateful, json_response=not stateful)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        request = Request(scope)
        auth = request.headers.get("authorization", "")
        path = scope["path"]
        if path.startswith("/mcp"):
            seen.append(auth)
        response: Response | None = None
        if path.startswith("/echo-denied"):
            # A JSON-RPC error, which the SDK hands on as the server's words: the credential in them.
            response = JSONResponse({"jsonrpc": "2.0", "id": None,
                                     "error": {"code": -32001, "message": f"bad credentials: {auth}"}},
                                    status_code=401)
        elif path.startswith("/away"):
            response = RedirectResponse(f"{other_origin}/mcp", status_code=307)
        elif path.startswith("/elsewhere"):
            response = RedirectResponse("/mcp", status_code=307)
        elif path.startswith("/mcp") and token is not None and auth != f"Bearer {token}":
            response = JSONResponse({"error": "unauthorized"}, status_code=401)
        if response is not None:
            await response(scope, receive, send)
            return
        await inner(scope, receive, send)

    return app


@contextmanager
def serve(token: str | None = None, *, other_origin: str = "http://127.0.0.1:9", huge_bytes: int = 64,
          stateful: bool = False) -> Iterator[Served]:
    """The server, listening until the block ends."""
    seen: list[str] = []
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(_app(token, seen, other_origin, huge_bytes, stateful), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:  # started is set once it listens (the socket is already bound)
            if not thread.is_alive():
                raise RuntimeError("the loopback MCP server did not start")
            time.sleep(0.01)
        yield Served(f"http://127.0.0.1:{port}", seen)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
