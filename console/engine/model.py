"""The one streaming protocol every model adapter implements.

A provider turns a :class:`ModelRequest` into an iterator of stream events:
text deltas as they arrive, complete tool calls, one usage report and one stop
event, in that order. The engine consumes nothing else, so the scripted model,
OpenAI, Anthropic and any OpenAI-compatible server are interchangeable.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from console.engine.messages import ModelRequest, ToolCall

StopReason = Literal["end_turn", "tool_use", "max_tokens", "error"]


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """The model's reasoning text (``reasoning_content``, thinking): shown to the operator, never replayed."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class Progress:
    """Model output that is not text yet: a tool call's arguments arriving. It keeps the stall watchdog
    quiet (a slow model writing a big file is working, not stalled); the engine reads nothing else from it."""

    chars: int = 0


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the adapter did that the operator should read once, in the adapter's words: the server refused
    a parameter and the request was sent again another way. Recorded as a recoverable provider error; the turn
    goes on (it is no failure of the turn, so no retry of it either)."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    # False when the provider did not report usage and the engine estimated it.
    reported: bool = True
    # Tokens written to the provider's prompt cache (Anthropic's cache_creation_input_tokens): part of
    # input_tokens, priced apart.
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Stop:
    reason: StopReason
    detail: str = ""


StreamEvent = TextDelta | ReasoningDelta | Progress | Notice | ToolCallEvent | Usage | Stop

# What a failure means for the run:
#   transient - worth asking again after a wait (429, 5xx, 529, a reset or cut stream, a stall);
#   context   - the server says the prompt is too long: the context is full, whatever our estimate says;
#   fatal     - asking again gives the same answer (401/403, a bad model name, a rejected request).
ErrorKind = Literal["transient", "context", "fatal"]


class ProviderError(Exception):
    """A provider failed in a way the operator should read (auth, network, bad model).

    Messages must never contain secrets: adapters build them from status codes
    and error types, not from request headers. ``cause`` is a short phrase for a
    retry line ("rate limited", "server error 503"); ``retry_after`` is the
    server's own wait in seconds, when it gave one. ``fix``: for a fatal one the operator can fix, what to do before
    a resume asks again ("set OPENAI_API_KEY to a working key"): the run's end names it, then the resume.
    """

    def __init__(self, message: str, *, kind: ErrorKind = "fatal", cause: str = "",
                 retry_after: float | None = None, fix: str = "") -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.cause = cause or message
        self.retry_after = retry_after
        self.fix = fix


class IncompleteStream(ProviderError):
    """The stream ended without its protocol's end marker: the turn is not complete and is never executed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="transient", cause="stream cut")


class CallHandle:
    """The model call in progress on this thread, so the engine can hang it up from another thread.

    An adapter registers how to hang up what it opened (``on_cancel(closer)``); when the engine abandons the
    call (a stop, a stall, a reply too long) it cancels the handle, which runs the closer on the engine's
    thread at once: the server stops generating (and billing) for a client that is gone. The closer must reach
    the server while the call's own thread is blocked reading the socket: a close() of the fd from another
    thread does not (the reader's poll() keeps the socket open), a shutdown() does
    (console/providers/hang_up.py).

    ``gather``: once the reply has begun, how long (seconds) a read of the call's socket that finds nothing there
    yet waits first, so that the chunks a server sends a token at a time are read together, one wake-up of the
    reading thread for all of them (console/engine/model_call.py sets it; 0: read at once). An adapter whose
    transport can tell whether its socket has anything to read waits so (console/providers/hang_up.py) and says it
    does (``gathers_at_socket``); without one, the engine's worker lets the chunks gather between the items it
    hands over."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closers: list[Callable[[], object]] = []
        self.cancelled = False
        self.gather = 0.0
        self.gathers_at_socket = False

    def on_cancel(self, close: Callable[[], object]) -> None:
        with self._lock:
            if not self.cancelled:
                self._closers.append(close)
                return
        _quietly(close)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            closers, self._closers = self._closers, []
        for close in closers:
            _quietly(close)

    def wait_gathering(self) -> None:
        """Wait :attr:`gather` seconds for more of the reply to come. A sleep, not an event a cancel would end
        (~30 us more CPU a wait on the shared 2-core machine): a call cancelled meanwhile is hung up at once all the
        same, and its thread reads the cut at most a gather later."""
        time.sleep(self.gather)


def _quietly(close: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # a half-dead socket may complain; the call is abandoned either way
        close()


_local = threading.local()


def current_call() -> CallHandle | None:
    """The handle of the model call running on this thread (None outside the engine's worker)."""
    return getattr(_local, "call", None)


def set_current_call(handle: CallHandle | None) -> None:
    _local.call = handle


@runtime_checkable
class Provider(Protocol):
    name: str
    model: str

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]: ...

    def check_ready(self) -> None:
        """Whether the model's server is there to answer, asked once at each session start before its first chat
        request (seed 004's ``check_ollama_ready``), as cheaply as the protocol allows (no tokens). Returns when it
        is ready; raises a transient :class:`ProviderError` when it is not (not reached, still loading), which the
        engine retries as a turn and then asks its operator about (``provider_down``). An answer that says
        something else is wrong (a key, a model name) is the chat request's to say: ready. A model with nothing to
        check (in-process, a hosted API) returns at once."""
        ...


def ready_check(provider: Provider) -> Callable[[], None] | None:
    """The provider's readiness check, or None for one that has none (a test's stand-in that only streams)."""
    check = getattr(provider, "check_ready", None)
    return check if callable(check) else None
