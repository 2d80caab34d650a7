"""One streamable-HTTP MCP server of a run, through the official SDK's ``streamable_http_client`` and ``ClientSession``,
behind the engine's synchronous port (as :class:`console.mcp.client.StdioServer`).

Such a server runs elsewhere: nothing of it runs on this machine, so there is nothing of it to confine. What is ours
to bound is the engine's process, which makes the HTTP requests, and the operator's allow-list is the border:

- every request (the first, each redirect the SDK follows, the event stream) goes only to a URL the operator's
  config allows (``[mcp] urls``, or the URL of the operator's own ``[[mcp.servers]]`` entry); anything else is
  refused before it is sent (:class:`_Border`). The SDK follows a redirect only within the endpoint's origin; the
  border refuses one that leaves the allowed path too.
- the credentials are the operator's: ``bearer_token_env_var`` and ``env_http_headers`` name variables of the
  operator's environment, read at the start; job.toml cannot set them. Their values are cut out of every line this
  server's errors and answers make (a server that echoes a token back does not put it in the run's log).
- a JSON answer is at most :data:`MAX_BODY` bytes, an event of the stream at most as much (the SDK's
  ``max_sse_event_size``); a call is bounded by the server's ``timeout``, the start by ``START_SECONDS``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from console.engine.tools.mcp_config import McpServerConfig, shown_url, url_allowed
from console.engine.tools.mcp_content import McpBlock
from console.engine.tools.mcp_elicitation import Elicit
from console.engine.tools.mcp_sampling import Ask
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo, McpUnavailable
from console.mcp.session import AskDesk, answered, render, tool_list, why
from console.mcp.world import McpStartError

# The most bytes one HTTP answer (a JSON message) or one event of a stream may hold: as a stdio server's line.
MAX_BODY = 8 * 1024 * 1024
START_SECONDS = 30.0
# How long connecting, sending and waiting for a pooled connection may take; reading waits for the call's timeout
# (and, on the server's event stream, the SDK's five minutes before it reconnects).
CONNECT_SECONDS = 15.0
READ_SECONDS = 300.0
REDACTED = "[credential]"


class BorderError(Exception):
    """A request the operator's allow-list refuses (the message is one line). Raised in the SDK's transport, it ends
    the session: a server that sends us elsewhere is not asked again."""


class TooLong(httpx2.StreamError):
    """An answer past its bound. A StreamError: the SDK's transport turns it into the error of that one request (the
    session serves on), as it does a body it cannot read."""


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise TooLong(f"the server's answer is longer than {self._limit:,} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Border(httpx2.AsyncBaseTransport):
    """The HTTP transport of one server: requests only to the allowed URLs, JSON answers bounded."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, allowed: Sequence[str], limit: int | None = None) -> None:
        self._inner = inner
        self._allowed = tuple(allowed)
        self._limit = MAX_BODY if limit is None else limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        if not url_allowed(url, self._allowed):
            raise BorderError(f"a request to {shown_url(url)} was refused: not at a URL the operator's config allows "
                              "(urls under [mcp] in the config file)")
        response = await self._inner.handle_async_request(request)
        # An event stream is bounded per event by the SDK (max_sse_event_size); anything else as a whole.
        if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _BoundedStream(response.stream, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def credentials(config: McpServerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The headers of ``config``'s requests, their values from the operator's environment (named in the config)."""
    wanted = dict(config.env_http_headers)
    if config.bearer_token_env_var:
        wanted["Authorization"] = config.bearer_token_env_var
    missing = sorted({name for name in wanted.values() if not environ.get(name)})
    if missing:
        raise McpStartError(f"MCP server {config.name}: the operator's environment has no {', '.join(missing)} "
                            "(named by its [[mcp.servers]] entry in the config file); set it and start the run again")
    headers = {header: environ[name] for header, name in wanted.items()}
    if config.bearer_token_env_var:
        headers["Authorization"] = f"Bearer {headers['Authorization']}"
    return headers


def _why(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return _why(exc.exceptions[0]) if exc.exceptions else "it failed"
    if isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
        return "it could not be reached"
    if isinstance(exc, httpx2.TimeoutException):
        return "it did not answer in time"
    if str(exc) == "Connection closed":  # the SDK's words once its transport ended (a refused redirect, a reset)
        return "the connection to it ended"
    return why(exc)


class HttpServer:
    """A server reached over streamable HTTP: its config, the tools it listed, calls, and the session's end."""

    def __init__(self, config: McpServerConfig, allowed: Sequence[str], environ: Mapping[str, str], *,
                 start_seconds: float = START_SECONDS) -> None:
        assert config.url is not None
        self._config = config
        self._url = config.url
        if not url_allowed(config.url, allowed):
            raise McpStartError(f"MCP server {config.name}: {shown_url(config.url)} is not at a URL the operator's "
                                "config allows (urls under [mcp] in the config file)")
        self._allowed = tuple(allowed)
        self._headers = credentials(config, environ)
        # The values no line may show (a token, and the whole Authorization header's value).
        self._secrets = sorted({v for v in self._headers.values() if v}
                               | {environ[n] for n in (config.bearer_token_env_var,) if n and environ.get(n)},
                               key=len, reverse=True)
        self._tools: list[McpToolInfo] = []
        self._session: ClientSession | None = None
        self.confined_by = f"elsewhere: HTTP at {shown_url(config.url)} (the operator's allowed URLs)"
        # As a started stdio server says (console.mcp.managed.Live): an HTTP server has no stderr of ours, its
        # refused requests noted are only a sampling between two calls (the SDK's defaults answer the others
        # unseen), and it never "exits": a call that fails says why (it is not restarted).
        self.stderr_tail = b""
        self.refused: list[str] = []
        # Its sampling requests and questions, when the operator enabled them (console.mcp.session).
        self._desk = AskDesk(self.refused)
        self._cm = start_blocking_portal()
        self._portal: BlockingPortal = self._cm.__enter__()
        self._stop: anyio.Event = self._portal.call(anyio.Event)
        try:
            self._done, self._tools = self._portal.start_task(self._serve, start_seconds)
        except BaseException as exc:
            self._end()
            raise McpStartError(f"MCP server {config.name} did not start: {self._hide(_why(exc))} "
                                f"({shown_url(config.url)})") from None

    @property
    def config(self) -> McpServerConfig:
        return self._config

    @property
    def tools(self) -> Sequence[McpToolInfo]:
        return self._tools

    def _hide(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def _hide_block(self, block: McpBlock) -> McpBlock:
        """A block with the credentials cut out of its words; one whose data holds one is not saved."""
        data, why = block.data, block.why
        if data is not None and any(secret.encode() in data for secret in self._secrets):
            data, why = None, "it holds a credential of the server's"
        return replace(block, mime=self._hide(block.mime), uri=self._hide(block.uri), name=self._hide(block.name),
                       data=data, why=self._hide(why))

    async def _serve(self, start_seconds: float, *, task_status: TaskStatus[list[McpToolInfo]]) -> None:
        border = _Border(httpx2.AsyncHTTPTransport(), self._allowed)
        # A question to the operator keeps the call's stream quiet while it waits: its time is the read's too.
        quiet = max(READ_SECONDS, self._config.elicitation_timeout + READ_SECONDS) if self._config.elicitation \
            else READ_SECONDS
        timeout = httpx2.Timeout(CONNECT_SECONDS, read=quiet)
        async with (httpx2.AsyncClient(headers=self._headers, timeout=timeout, transport=border,
                                       follow_redirects=False) as client,
                    streamable_http_client(self._url, http_client=client, max_sse_event_size=MAX_BODY)
                    as (read, write),
                    ClientSession(read, write, sampling_callback=self._desk.sampling if self._config.sampling
                                  else None,
                                  elicitation_callback=self._desk.elicitation if self._config.elicitation
                                  else None) as session):
            with anyio.fail_after(start_seconds):
                await session.initialize()
                tools = await tool_list(session)
            self._session = session
            try:
                task_status.started(tools)
                await self._stop.wait()
            finally:
                self._session = None

    def call(self, tool: str, arguments: dict[str, Any], timeout: float,
             should_stop: Callable[[], bool] = lambda: False, *, ask: Ask | None = None,
             elicit: Elicit | None = None) -> McpCallResult:
        self._desk.lend(ask, elicit)
        try:
            answer = answered(self._portal.start_task_soon(self._call, tool, arguments, timeout), should_stop,
                              self._desk)
            return McpCallResult(answer.ok, self._hide(answer.text), tuple(self._hide_block(b) for b in answer.blocks))
        except McpUnavailable as exc:
            raise McpUnavailable(self._hide(str(exc))) from None
        except TimeoutError:
            raise McpUnavailable(f"no answer within {timeout:g} s") from None
        except Exception as exc:  # the server's error, a refused redirect, garbage: never a traceback
            raise McpUnavailable(self._hide(_why(exc))) from None
        finally:
            self._desk.lend(None, None)

    async def _call(self, tool: str, arguments: dict[str, Any], timeout: float) -> McpCallResult:
        session = self._session
        if session is None:
            raise McpUnavailable("the server is not reachable any more")
        with anyio.fail_after(timeout) as scope:
            self._desk.scope = scope  # lengthened while a question of the call waits for the operator
            result = await session.call_tool(tool, arguments)
        return render(result)

    def exited(self, wait: float = 0.0) -> bool:
        return False

    killed_why = ""  # a server elsewhere is never killed by this run

    def responsive(self, wait: float) -> bool:
        """A server elsewhere is not this run's to kill: a call it does not abandon is its own business (the run's
        end closes the session)."""
        return True

    def close(self) -> None:
        """End the session (the SDK's DELETE tells the server) and the loop; idempotent."""
        with contextlib.suppress(Exception):
            self._portal.call(self._stop.set)
        self._end()

    def _end(self) -> None:
        with contextlib.suppress(Exception):
            self._cm.__exit__(None, None, None)
