"""One stdio MCP server of a run, through the official SDK's ``ClientSession``, behind the engine's synchronous port.

The SDK is async; the engine's tool calls are not. Each server gets an event loop in a thread of its own (anyio's
blocking portal) in which one task holds the server's process and session open until :meth:`StdioServer.close`;
a call is a coroutine run in that loop and waited for, bounded by the server's ``timeout``.

The transport is the SDK's stdio transport's shape (a reader and a writer task between the process's pipes and the
session's streams), written here because the process is ours to start (confined: :mod:`.world`, whose options pass
through an inherited descriptor, which the SDK's ``stdio_client`` cannot give) and because a line from the server is
bounded (:data:`MAX_LINE`): a server that writes a line without end is garbage, not a reason to fill the memory.

Sampling requests are refused (the SDK's default answers them with an error, and the client does not advertise
the capability) unless the operator enabled sampling for the server: then they wait at the server's
:class:`~console.mcp.session.AskDesk` for the engine's answer during a call (console.engine.tools.mcp_sampling).
Elicitation requests (a question to the operator) are refused likewise unless the operator enabled elicitation for
the server (console.engine.tools.mcp_elicitation); roots are not offered. The process tree ends with the server: its
process group, and for a confined one its pid namespace (bwrap's ``--die-with-parent``), are killed at
:meth:`close` and when the harness dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pydantic
from anyio.abc import Process, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.shared.message import SessionMessage

from console.engine.text import safe_text
from console.engine.tools.confine import remove_stand_ins
from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_elicitation import Elicit
from console.engine.tools.mcp_sampling import Ask
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo, McpUnavailable
from console.engine.tools.repos import sweep
from console.mcp.managed import ManagedServer
from console.mcp.session import AskDesk, StartAbandoned, answered, malformed, render, started_within, tool_list, why
from console.mcp.world import McpStartError, Spawn, spawn

# The longest message line a server may send (bytes): past it, the server is answering garbage.
MAX_LINE = 8 * 1024 * 1024
# How long a server has to start and list its tools (docs/mcp.md): not its ``timeout``, which bounds a call (a
# server that starts slowly, npx fetching a package, may serve quick calls; a long call's timeout is no reason to
# wait as long on a start that hangs). The servers start together: the whole start takes at most this long.
START_SECONDS = 30.0
# After how long a start still under way is said (start_servers' ``slow``); a quick one says nothing.
TELL_AFTER = 5.0
# How long the servers' starts are given to end once the command was interrupted (each is told at once).
ABANDON_WAIT = 1.5
STDERR_KEEP = 4096
# How long a server's last words on stderr are waited for once it is gone.
STDERR_WAIT = 1.0
# How long an unconfined server's reaper is given to end the server's tree before its group is killed (a hang
# guard: it kills at once; a chain of orphans is killed a level at a time).
REAPER_WAIT = 15.0
# Requests a server may send that this client refuses (the SDK's defaults answer them with an error); each is noted
# once per server, so that the operator is told (console.mcp.managed).
# What a call answered by a line that is not a valid message says (its request's error; console.mcp.session.why).
MALFORMED = "it answered with a malformed result"
REFUSED = {"sampling/createMessage": "sampling (a completion from the client's model)",
           "elicitation/create": "elicitation (a question to the client's user)",
           "roots/list": "roots (the client's folders)"}


def _answer_to(line: bytes) -> types.RequestId | None:
    """The id of the request a line that is not a valid message answers (a JSON object with an ``id`` and a
    ``result`` or an ``error``, no ``method``), or None: that request fails at once with what was wrong, rather
    than waiting out its timeout for an answer that came."""
    with contextlib.suppress(ValueError, RecursionError):
        data = json.loads(line)
        if isinstance(data, dict) and "method" not in data and ("result" in data or "error" in data):
            ident = data.get("id")
            if isinstance(ident, str | int) and not isinstance(ident, bool):
                return ident
    return None


def _what_is_wrong(line: bytes, exc: ValueError) -> str:
    """The SDK's own validation of ``line`` in one short line: as the answer it claims to be, or as any message."""
    if isinstance(exc, pydantic.ValidationError) and _answer_to(line) is not None:
        with contextlib.suppress(RecursionError):
            try:
                types.JSONRPCResponse.model_validate_json(line, by_name=False)
            except pydantic.ValidationError as precise:
                return malformed(precise)
    if isinstance(exc, pydantic.ValidationError):
        if any(e.get("type") == "json_invalid" for e in exc.errors(include_url=False)):
            return "not JSON"
        return malformed(exc)
    return safe_text(str(exc), one_line=True, limit=160)


@asynccontextmanager
async def _transport(process: Process, on_request: Callable[[str], None] = lambda method: None,
                     on_garbage: Callable[[str], None] = lambda what: None
                     ) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                                              MemoryObjectSendStream[SessionMessage]]]:
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdout is not None and process.stdin is not None
    stdout, stdin = BufferedByteReceiveStream(process.stdout), process.stdin

    async def reader() -> None:
        async with read_writer:
            while True:
                try:
                    line = await stdout.receive_until(b"\n", MAX_LINE)
                except anyio.DelimiterNotFound:
                    await read_writer.send(ValueError(f"the server sent a line longer than {MAX_LINE} bytes"))
                    return
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, OSError):
                    return
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    what = _what_is_wrong(line, exc)
                    on_garbage(what)
                    ident = _answer_to(line)
                    if ident is None:
                        await read_writer.send(exc)
                        continue
                    # An answer of the wrong shape: its request ends now, saying so (the SDK's session would
                    # drop the line and leave the request waiting for its timeout, "no answer").
                    message = types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
                        code=types.INTERNAL_ERROR, message=f"{MALFORMED} ({what})"))
                if isinstance(message, types.JSONRPCRequest) and message.method in REFUSED:
                    on_request(message.method)
                await read_writer.send(SessionMessage(message))

    async def writer() -> None:
        async with write_reader:
            async for item in write_reader:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await stdin.send(data.encode("utf-8"))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    await read_writer.aclose()
                    return

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            tg.cancel_scope.cancel()


async def _end_reaped(process: Process) -> None:
    """An unconfined server's reaper (console.mcp.reaper) told to end: it kills the server and every process left
    under it, then exits; waited for (bounded) before its group is killed."""
    with contextlib.suppress(OSError):
        process.send_signal(signal.SIGTERM)
    with anyio.move_on_after(REAPER_WAIT, shield=True):
        await process.wait()


def _kill(process: Process) -> None:
    """The server's whole tree: its process group (it was started in a session of its own), then itself."""
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(OSError, ProcessLookupError):
        process.kill()


class StdioServer:
    """A started server: its config, the tools it listed, calls, and its end."""

    def __init__(self, config: McpServerConfig, how: Spawn, *, start_seconds: float = START_SECONDS,
                 abandon: threading.Event | None = None) -> None:
        self._config = config
        self._abandon = abandon
        # What the last line that was not a valid message held ("" when none since the call began): a call that
        # then times out says the server wrote garbage, not only that no answer came.
        self._garbage = ""
        self._how = how
        self._tools: list[McpToolInfo] = []
        self._session: ClientSession | None = None
        self._process: Process | None = None
        self._cm = start_blocking_portal()
        self._portal: BlockingPortal = self._cm.__enter__()
        self._stop: anyio.Event = self._portal.call(anyio.Event)
        self.confined_by = how.confined_by
        self.stderr_tail = b""
        # The kinds of request it made that were refused (REFUSED's words), in order, each once.
        self.refused: list[str] = []
        self._desk = AskDesk(self.refused)
        try:
            self._done, self._tools = self._portal.start_task(self._serve, start_seconds)
        except BaseException as exc:
            # An interrupt of the command (a KeyboardInterrupt here, or the start abandoned on another thread) is
            # never the server's failure: its start is cancelled, the server ended, the interrupt goes on.
            interrupted = not isinstance(exc, Exception) or isinstance(exc, StartAbandoned)
            self._end(cancel=interrupted)
            if interrupted:
                raise
            said = _last_line(self.stderr_tail)
            # Its bound named: the operator reads how long it was given (docs/mcp.md), not only "in time".
            first: BaseException = exc
            while isinstance(first, BaseExceptionGroup) and first.exceptions:  # (the transport's task group's)
                first = first.exceptions[0]
            reason = f"it did not answer within {start_seconds:g} s" if isinstance(first, TimeoutError) else why(exc)
            raise McpStartError(f"MCP server {config.name} did not start: {reason}"
                                + (f" (its last words: {said})" if said else "")) from None

    @property
    def config(self) -> McpServerConfig:
        return self._config

    @property
    def killed_why(self) -> str:
        """Why the harness killed it ("" unless it did): console.mcp.world's folder watch."""
        return "; ".join(self._how.killed)

    @property
    def tools(self) -> Sequence[McpToolInfo]:
        return self._tools

    async def _serve(self, start_seconds: float, *, task_status: TaskStatus[list[McpToolInfo]]) -> None:
        how = self._how
        try:
            process = await anyio.open_process(how.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, cwd=how.cwd, env=how.env,
                                               pass_fds=how.pass_fds, start_new_session=True)
        finally:
            for fd in how.pass_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._process = process
        try:
            async with anyio.create_task_group() as tg:
                read_all = anyio.Event()
                tg.start_soon(self._keep_stderr, process, read_all)
                try:
                    await self._session_until_stopped(process, start_seconds, task_status)
                finally:
                    if how.reaped:
                        await _end_reaped(process)
                    _kill(process)
                    # Its last words, once it is gone (what a lingering child still holds open is not waited for).
                    with anyio.move_on_after(STDERR_WAIT, shield=True):
                        await read_all.wait()
                    tg.cancel_scope.cancel()
        finally:
            self._session = None
            _kill(process)
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await process.aclose()

    async def _keep_stderr(self, process: Process, read_all: anyio.Event) -> None:
        """The tail of what the server writes on stderr (at most :data:`STDERR_KEEP` bytes), for the line that says
        why it did not start; the rest is read and dropped, so a chatty server never blocks on a full pipe."""
        assert process.stderr is not None
        with contextlib.suppress(Exception):
            async for chunk in process.stderr:
                self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_KEEP:]
        read_all.set()

    async def _session_until_stopped(self, process: Process, start_seconds: float,
                                     task_status: TaskStatus[list[McpToolInfo]]) -> None:
        # The sampling capability is advertised only when the operator enabled it for this server.
        sampling = self._desk.sampling if self._config.sampling else None
        elicitation = self._desk.elicitation if self._config.elicitation else None  # likewise
        async with (_transport(process, self._refused, self._saw_garbage) as (read, write),
                    ClientSession(read, write, sampling_callback=sampling, elicitation_callback=elicitation)
                    as session):

            async def start() -> list[McpToolInfo]:
                await session.initialize()
                return await tool_list(session)

            tools = await started_within(start, start_seconds, self._abandon)
            self._session = session
            task_status.started(tools)
            await self._stop.wait()

    def _saw_garbage(self, what: str) -> None:
        self._garbage = what

    def _refused(self, method: str) -> None:
        if ((method == "sampling/createMessage" and self._config.sampling)
                or (method == "elicitation/create" and self._config.elicitation)):
            return  # answered (or refused with its reason, in an mcp_sampled/mcp_elicited event): AskDesk
        if REFUSED[method] not in self.refused:
            self.refused.append(REFUSED[method])

    def exited(self, wait: float = 0.0) -> bool:
        """Whether the server's process has ended (waiting up to ``wait`` seconds for it to): a call that failed
        because it died, rather than one that timed out while it lives on."""
        process = self._process
        if process is None or process.returncode is not None:
            return True
        if wait <= 0:
            return False

        async def waited() -> bool:
            with anyio.move_on_after(wait):
                await process.wait()
            return process.returncode is not None

        try:
            return bool(self._portal.call(waited))
        except Exception:  # its loop is gone: so is it
            return True

    def responsive(self, wait: float) -> bool:
        """Whether the server answers a ping within ``wait`` seconds: after a call it was told to abandon (its
        timeout, the deadline), one that does not has not stopped working on it (a handler that blocks its loop)."""
        session = self._session
        if session is None:
            return False

        async def pinged() -> bool:
            with anyio.move_on_after(wait):
                await session.send_ping()
                return True
            return False

        try:
            return bool(self._portal.call(pinged))
        except Exception:  # an error answer, a closed pipe, its loop gone: not a server that serves on
            return False

    def call(self, tool: str, arguments: dict[str, Any], timeout: float,
             should_stop: Callable[[], bool] = lambda: False, *, ask: Ask | None = None,
             elicit: Elicit | None = None) -> McpCallResult:
        self._desk.lend(ask, elicit)
        self._garbage = ""
        try:
            return answered(self._portal.start_task_soon(self._call, tool, arguments, timeout), should_stop,
                            self._desk)
        except McpUnavailable:
            raise
        except TimeoutError:
            garbage = f" (it wrote a line that is not a valid message meanwhile: {self._garbage})" \
                if self._garbage else ""
            raise McpUnavailable(f"no answer within {timeout:g} s{garbage}") from None
        except Exception as exc:  # the server's error, a closed pipe, garbage: never a traceback
            raise McpUnavailable(why(exc)) from None
        finally:
            self._desk.lend(None, None)
            self._sweep()

    def _sweep(self) -> None:
        """What the call left in the job's repositories that git would run (a repository it made, a hook), made
        harmless, as after a command (console.engine.tools.repos)."""
        if self._how.repos is not None:
            with contextlib.suppress(OSError):
                sweep(self._how.cwd, self._how.repos)

    async def _call(self, tool: str, arguments: dict[str, Any], timeout: float) -> McpCallResult:
        session = self._session
        if session is None:
            raise McpUnavailable("the server is not running")
        with anyio.fail_after(timeout) as scope:
            self._desk.scope = scope  # lengthened while a question of the call waits for the operator
            result = await session.call_tool(tool, arguments)
        return render(result)

    def close(self) -> None:
        """End the server (its whole tree) and the loop; idempotent."""
        with contextlib.suppress(Exception):
            self._portal.call(self._stop.set)
        self._end()

    def _end(self, *, cancel: bool = False) -> None:
        """The loop ended (``cancel``: its tasks cancelled, a start still under way among them)."""
        with contextlib.suppress(BaseException):
            if cancel:
                self._cm.__exit__(StartAbandoned, StartAbandoned(), None)
            else:
                self._cm.__exit__(None, None, None)
        remove_stand_ins(self._how.created)
        self._how.created = []
        self._sweep()


def _last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return safe_text(lines[-1], one_line=True, limit=200) if lines else ""


def start_servers(configs: Sequence[McpServerConfig], root: str, world: CommandWorld,
                  environ: Mapping[str, str] | None = None, *,
                  start_seconds: float = START_SECONDS,
                  reach: Callable[[McpServerConfig, float], Any] | None = None,
                  slow: Callable[[list[str]], None] | None = None
                  ) -> tuple[list[ManagedServer], list[str]]:
    """The run's servers (console.mcp.managed: each restarted once if it dies), and one line for each optional one
    that did not start (it is among them, unavailable: its tools answer so). A required one that does not start
    ends them all and raises :class:`McpStartError` naming it. ``reach``: how an HTTP server (a ``url``) is
    reached (console.mcp.http.HttpServer, with the operator's allowed URLs); without it, it is not.

    The servers start together, each on a thread of its own, so the whole start takes at most ``start_seconds``
    (one after the other, three that hang took three times as long, and said nothing meanwhile). This thread waits
    for them: a Ctrl+C (or a signal the caller turned into a KeyboardInterrupt) lands here, every start still under
    way is abandoned at once, what started is ended, and the interrupt goes on (never a "did not start" line).
    ``slow``: told the names of the servers still starting once the start has taken :data:`TELL_AFTER` seconds
    (on this thread), so that the operator hears why nothing else shows."""
    env = os.environ if environ is None else environ
    root = os.path.realpath(root)
    abandon = threading.Event()

    def starter(config: McpServerConfig) -> Callable[[], Any]:
        # How it starts, and starts again after a crash: the same confinement, config, folder and world. The
        # first start's confinement is prepared here, on this thread, one server after the other (it may write the
        # job's docs folder); the processes then start together.
        first: list[Spawn | McpStartError] = []
        if config.url is None:
            try:
                first.append(spawn(config, root, world, env))
            except McpStartError as exc:
                first.append(exc)

        def start() -> Any:
            if config.url is not None:  # reached over streamable HTTP by this process: console.mcp.http
                if reach is None:
                    raise McpStartError(f"MCP server {config.name}: an HTTP server cannot be reached from here")
                return reach(config, start_seconds)
            how = first.pop() if first else spawn(config, root, world, env)
            if isinstance(how, McpStartError):
                raise how
            return StdioServer(config, how, start_seconds=start_seconds, abandon=abandon)

        return start

    starts = [starter(config) for config in configs]
    outcomes: list[ManagedServer | BaseException | None] = [None] * len(configs)

    def start_one(i: int) -> None:
        try:
            outcomes[i] = ManagedServer.start(configs[i], starts[i])
        except BaseException as exc:  # (said below, on the caller's thread)
            outcomes[i] = exc

    threads = [threading.Thread(target=start_one, args=(i,), name=f"mcp-start-{config.name}", daemon=True)
               for i, config in enumerate(configs)]
    try:
        for thread in threads:
            thread.start()
        tell_at = time.monotonic() + TELL_AFTER
        for thread in threads:
            while thread.is_alive():  # in steps: a Ctrl+C is heard at once
                thread.join(0.1)
                if slow is not None and time.monotonic() >= tell_at:
                    slow([c.name for c, t in zip(configs, threads, strict=True) if t.is_alive()])
                    slow = None
    except BaseException:
        abandon.set()
        until = time.monotonic() + ABANDON_WAIT  # (an HTTP start is not told: its thread is left, a daemon)
        for thread in threads:
            thread.join(max(0.0, until - time.monotonic()))
        for outcome in outcomes:
            if isinstance(outcome, ManagedServer):
                outcome.close()
        raise
    started: list[ManagedServer] = []
    problems: list[str] = []
    failed: list[tuple[McpServerConfig, BaseException]] = []
    for config, start, outcome in zip(configs, starts, outcomes, strict=True):
        if isinstance(outcome, ManagedServer):
            started.append(outcome)
            continue
        exc: BaseException = outcome if isinstance(outcome, McpStartError) else McpStartError(
            f"MCP server {config.name} did not start: {why(outcome) if outcome is not None else 'no outcome'}")
        failed.append((config, exc))
        started.append(ManagedServer.unstarted(config, start, str(exc)))
    required = [exc for config, exc in failed if config.required]
    if required:
        for server in started:
            server.close()
        raise McpStartError(f"{required[0]} (a required server: the run was not started)") from None
    for config, exc in failed:
        problems.append(f"{exc} (optional: " + ("its tools answer that it is unavailable)" if config.tools else
                                                "its tools are not known: none is offered)"))
    return started, problems
