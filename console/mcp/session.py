"""What a server's session gives whatever way it is reached (stdio: console.mcp.client, streamable HTTP:
console.mcp.http): its tool list read page by page (bounded), a call's result as the text the agent reads, a
failure in one line, and the desk where its sampling requests and its questions to the operator (elicitation) wait
for the engine (:class:`AskDesk`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
import pydantic
from mcp import ClientSession

from console.engine.job_files import one_line
from console.engine.text import safe_text
from console.engine.tools.mcp_content import McpBlock, decode_base64, from_bytes
from console.engine.tools.mcp_elicitation import Elicit, ElicitAnswer, ElicitAsk
from console.engine.tools.mcp_sampling import Ask, AskRefused, SamplingAnswer, SamplingAsk
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo, McpUnavailable

MAX_PAGES = 8  # pages of tools/list read at most (a server that pages for ever is not waited on)
POLL_SECONDS = 0.05  # how often a call in flight looks whether the operator stopped the run
# The most sampling requests of a server waiting for the engine at once (its flood beyond is refused at once; the
# engine's own cap, sampling_per_call, bounds how many are answered).
MAX_WAITING = 8
# How a sampling request between two tool calls is named to the operator (console.mcp.managed says it once).
BETWEEN = "sampling between two of its tool calls (there is no call to charge it to)"
BETWEEN_QUESTIONS = "elicitation between two of its tool calls (a question is asked only during a call)"
# How often a server's start looks whether it was abandoned (the command was interrupted meanwhile).
ABANDON_POLL = 0.05
_T = TypeVar("_T")


class StartAbandoned(Exception):
    """A server's start was given up because the command was interrupted (Ctrl+C, SIGTERM): never the server's
    fault, never a "did not start" line."""


async def started_within(start: Callable[[], Awaitable[_T]], seconds: float,
                         abandon: threading.Event | None = None) -> _T:
    """``start()``'s value within ``seconds`` (TimeoutError past them), given up at once (:class:`StartAbandoned`)
    when ``abandon`` is set: the servers start together on threads of their own, and the command's Ctrl+C lands on
    the main thread, which sets it."""
    got: list[_T] = []

    async def watch(scope: anyio.CancelScope) -> None:
        assert abandon is not None
        while not abandon.is_set():
            await anyio.sleep(ABANDON_POLL)
        scope.cancel()

    with anyio.fail_after(seconds):
        try:
            async with anyio.create_task_group() as tg:
                if abandon is not None:
                    tg.start_soon(watch, tg.cancel_scope)
                got.append(await start())
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the start's own failure, as it raised it (not in the group's wrapping)
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
    if not got:
        raise StartAbandoned("the start was interrupted")
    return got[0]


def malformed(exc: pydantic.ValidationError) -> str:
    """What the SDK's validation found wrong in a server's answer, in one short line: the first error's place and
    message ("result: Input should be a valid dictionary")."""
    errors = exc.errors(include_url=False)
    if not errors:
        return safe_text(one_line(str(exc), 160), one_line=True)
    first = errors[0]
    place = ".".join(str(p) for p in first.get("loc", ()))
    text = f"{place}: {first.get('msg', '')}" if place else str(first.get("msg", ""))
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    return safe_text(one_line(text, 160), one_line=True) + more


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
    if isinstance(exc, pydantic.ValidationError):  # the SDK's check of an answer's shape: the server sent garbage
        return f"it answered with a malformed result ({malformed(exc)})"
    text = str(exc) or type(exc).__name__
    if text == "Connection closed":  # the SDK's words for a server whose output ended
        return "it exited, or closed its output, before answering"
    return safe_text(one_line(text, 200), one_line=True)


def answered(future: concurrent.futures.Future[McpCallResult], should_stop: Callable[[], bool],
             desk: AskDesk | None = None) -> McpCallResult:
    """The answer of a call running on the server's loop, waited for in steps so that the operator's stop is heard:
    it cancels the call (the SDK tells the server: notifications/cancelled), and the server serves on. Between the
    steps, the server's requests waiting at ``desk`` are answered here, on the engine's thread."""
    while True:
        # A request of the server's rings the desk's bell: it is answered at once, not at the next look.
        waiting: list[concurrent.futures.Future[Any]] = [future] if desk is None else [future, desk.bell]
        concurrent.futures.wait(waiting, timeout=POLL_SECONDS, return_when=concurrent.futures.FIRST_COMPLETED)
        if future.done():
            break
        if desk is not None:
            desk.call = future  # a question waits no longer than its call
            desk.serve()
        if should_stop():
            future.cancel()
            raise McpUnavailable("stopped by the operator (the call was cancelled)")
    return future.result()


def sampling_ask(params: types.CreateMessageRequestParams) -> SamplingAsk:
    """The SDK's request as the engine takes it: text only (why not, in ``refused``), the rest of it named."""
    messages: list[tuple[str, str]] = []
    refused = ""
    for m in params.messages[:256]:
        texts = []
        for block in m.content_as_list:
            if isinstance(block, types.TextContent):
                texts.append(block.text)
            elif not refused:
                kind = safe_text(str(getattr(block, "type", type(block).__name__)), one_line=True, limit=40)
                refused = f"its messages hold {kind} content: only text is answered"
        messages.append((str(m.role), "\n".join(texts)))
    if len(params.messages) > 256:
        refused = refused or f"it holds {len(params.messages)} messages"
    if params.tools:
        refused = refused or "it offers tools: a sampling here never calls a tool"
    return SamplingAsk(tuple(messages), params.max_tokens, params.system_prompt or "",
                       str(params.include_context or ""), refused)


class AskDesk:
    """Where a server's sampling requests and questions (elicitation) wait for the engine's thread. The engine lends
    its :data:`Ask` and :data:`Elicit` for the length of one call (:meth:`lend`); a request that comes while none is
    lent (between calls) is refused: there is no call to charge it to."""

    def __init__(self, refused: list[str] | None = None) -> None:
        # Where a request refused for coming between two calls is noted (the server's ``refused``: said once).
        self._refused = refused
        self._lent: Ask | None = None
        self._elicit: Elicit | None = None
        self._wait = 0.0  # how long a question may wait for the operator (the call's timeout grows by it meanwhile)
        # The call in flight (a question is cancelled when it ends), and its timeout's scope on the server's loop
        # (set by the client's call: lengthened while a question waits for the operator).
        self.call: concurrent.futures.Future[Any] | None = None
        self.scope: Any = None
        # The call's questions waiting now (on the server's loop), and once the first of them began: the call's
        # deadline then and the time (the call's own time is lengthened by the time some question waited, once
        # however many waited together).
        self._asking = 0
        self._own = self._since = 0.0
        # Set when a request comes (the engine's thread waits on it with the call), made anew when it is served.
        self.bell: concurrent.futures.Future[None] = concurrent.futures.Future()
        # Each request with its reply and whether the server withdrew it (notifications/cancelled: a question is
        # then over, not left waiting for an answer nobody reads).
        self._waiting: queue.Queue[tuple[SamplingAsk | ElicitAsk, concurrent.futures.Future[Any],
                                         threading.Event]] = queue.Queue(maxsize=MAX_WAITING)

    def lend(self, ask: Ask | None, elicit: Elicit | None = None) -> None:
        """The call's ask and elicit (None, None: the call is over: what still waits is refused)."""
        self._lent, self._elicit = ask, elicit
        self._wait = elicit.wait if elicit is not None else 0.0
        if ask is None and elicit is None:
            self.call = self.scope = None
            self.serve()

    def serve(self) -> None:
        """Answer what waits (on the engine's thread)."""
        if self.bell.done():
            self.bell = concurrent.futures.Future()  # before the queue is read: a request put after it rings again
        while True:
            try:
                request, reply, withdrawn = self._waiting.get_nowait()
            except queue.Empty:
                return
            if not reply.set_running_or_notify_cancel():
                continue
            try:
                if isinstance(request, ElicitAsk):
                    elicit, call = self._elicit, self.call
                    if elicit is None:
                        raise AskRefused("a question is asked only during a tool call of this server")
                    reply.set_result(elicit(request, _ended(call, withdrawn)))
                    continue
                lent = self._lent
                if lent is None:
                    raise AskRefused("sampling is answered only during a tool call of this server")
                reply.set_result(lent(request))
            except AskRefused as exc:
                reply.set_exception(exc)
            except Exception as exc:  # the engine's fault, never the server's to see in detail
                reply.set_exception(AskRefused(f"the harness could not answer it ({type(exc).__name__})"))

    async def _waited(self, request: SamplingAsk | ElicitAsk, kind: str) -> Any:
        """The engine's answer to ``request`` (on the server's loop), or :class:`AskRefused`."""
        reply: concurrent.futures.Future[Any] = concurrent.futures.Future()
        withdrawn = threading.Event()
        try:
            self._waiting.put_nowait((request, reply, withdrawn))
        except queue.Full:
            raise AskRefused(f"more than {MAX_WAITING} requests at once") from None
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            self.bell.set_result(None)
        between = f"{kind} is answered only during a tool call of this server"
        if self._lent is None and self._elicit is None and reply.cancel():  # the call ended before the engine took it
            raise AskRefused(between)
        try:
            # The server's loop runs on asyncio (anyio's blocking portal): the engine's answer is awaited there,
            # and a cancelled request cancels it (the engine does not start it, or its answer is dropped).
            return await asyncio.wrap_future(reply)
        except concurrent.futures.CancelledError:
            raise AskRefused(between) from None
        except asyncio.CancelledError:
            # The server withdrew it (notifications/cancelled cancels this callback) or the session is ending: a
            # question the engine asks already ends now (its answer could reach no one).
            withdrawn.set()
            raise

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams
                       ) -> types.CreateMessageResult | types.ErrorData:
        """The SDK's sampling callback (on the server's loop): the request waits for the engine's answer."""
        if self._lent is None:
            if self._refused is not None and BETWEEN not in self._refused:
                self._refused.append(BETWEEN)
            return _refusal("sampling is answered only during a tool call of this server")
        try:
            answer: SamplingAnswer = await self._waited(sampling_ask(params), "sampling")
        except AskRefused as exc:
            return _refusal(str(exc))
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=answer.text),
                                         model=answer.model, stop_reason=answer.stop_reason)

    async def elicitation(self, context: Any, params: types.ElicitRequestParams
                          ) -> types.ElicitResult | types.ErrorData:
        """The SDK's elicitation callback (on the server's loop): the question waits for the operator's answer, and
        the call's timeout grows by the time it may wait (once the call's last question waiting is answered, it is
        the call's own time lengthened by the time questions waited, counted once when several waited together)."""
        if self._elicit is None:
            if self._refused is not None and BETWEEN_QUESTIONS not in self._refused:
                self._refused.append(BETWEEN_QUESTIONS)
            return _refusal("a question is asked only during a tool call of this server", "elicitation")
        if isinstance(params, types.ElicitRequestFormParams):
            request = ElicitAsk(params.message, params.requested_schema)
        else:  # a URL to open (an OAuth flow, a payment): never handed to the operator from a server
            request = ElicitAsk(str(getattr(params, "message", "")), None,
                                refused="it asks the operator to open a URL (URL mode): only a form is asked here")
        scope, wait = self.scope, self._wait
        if scope is not None:
            if not self._asking:
                self._own, self._since = scope.deadline, anyio.current_time()
            scope.deadline += wait  # each may wait its whole time after those before it (they are asked in turn)
        self._asking += 1
        try:
            answer: ElicitAnswer = await self._waited(request, "a question")
        except AskRefused as exc:
            return _refusal(str(exc), "elicitation")
        finally:
            self._asking -= 1
            if scope is not None and not self._asking:  # the last one ended: the time they waited, given once
                scope.deadline = self._own + (anyio.current_time() - self._since)
        content: dict[str, str | int | float | bool | list[str] | None] = dict(answer.content)
        return types.ElicitResult(action=answer.action, content=content if answer.action == "accept" else None)


def _ended(call: concurrent.futures.Future[Any] | None, withdrawn: threading.Event) -> Callable[[], str]:
    """Why a question of ``call`` is over ("" while the server waits for its answer): the call ended, or the
    server withdrew the question."""
    def over() -> str:
        if call is not None and call.done():
            return "the call's end (the server no longer waits)"
        return "the server withdrew its question" if withdrawn.is_set() else ""

    return over


def _refusal(why: str, kind: str = "sampling") -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"{kind} refused: {one_line(why, 300)}")
