"""The event stream: stamps, records (through the journal's outbox) and publishes a run's events."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.engine import failpoints
from console.engine.clock import Clock, SystemClock
from console.engine.events.base import EventBase
from console.engine.events.feed import DeferredView
from console.engine.events.log import last_seq, seq_of
from console.engine.events.registry import IN_PROCESS_ONLY
from console.engine.model_json import model_json

# How much of the log's end is read for the events a step wrote before its commit (logged_of_call).
LOGGED_TAIL = 1 << 20
# The key of a call's intent that says its step wrote events to the log before its commit (an MCP server's question
# while the call waits: console.engine.tools.mcp_tools). The resume of that call, after a kill, finds them there
# (logged_of_call) and writes none of them again (console.engine.runtime.Runtime.logged_early).
LOGGED_EARLY = "asked"

Subscriber = Callable[[EventBase], None]


@functools.cache
def _type_of(cls: type[EventBase]) -> Any:
    """An event class's type name (a class property of pydantic's, looked up at every event otherwise)."""
    return cls.model_fields["type"].default


def _without(subscribers: tuple[Subscriber, ...], fn: Subscriber) -> tuple[Subscriber, ...]:
    """``subscribers`` less the first that is ``fn`` (as list.remove)."""
    out = list(subscribers)
    out.remove(fn)
    return tuple(out)


class EventStream:
    """Stamps, records and publishes events.

    Subscribers (the console, the headless log) get every event at once. The
    log gets them through an outbox: while a step of the run is in flight its
    events are held, the step's journal commit carries them, and only then are
    they appended to events.jsonl (:meth:`take_held` + :meth:`write_lines`), so a
    kill can neither log the effects of a step that never committed nor lose
    those of one that did (a resume appends what the journal has and the log
    lacks: :meth:`append_committed`). Events that report rather than change
    anything (a turn starting, a command received while streaming) are written
    at once with :meth:`observe`. A torn last line from a crash is repaired
    before the first append.
    """

    def __init__(self, log_path: Path | None, clock: Clock | None = None, session: int = 0) -> None:
        self.log_path = log_path
        self.clock = clock or SystemClock()
        self.session = session
        self._lock = threading.Lock()
        # A tuple, made anew when a subscriber comes or goes: each event is handed to the one it finds, without a
        # copy made under the lock (five events a turn).
        self._subscribers: tuple[Subscriber, ...] = ()
        self._views: list[DeferredView] = []
        self._text_subscribers = 0
        self._failed: set[int] = set()
        self._fd: int | None = None
        self._held: list[str] = []
        # Until a run starts stepping, events go straight to the log.
        self.holding = False
        self.seq = 0
        if log_path is not None:
            log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._repair_torn_tail(log_path)
            self.seq = last_seq(log_path)
            # 0600: the audit log holds the conversation's tool calls and results, the operator's only.
            self._fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    @staticmethod
    def _repair_torn_tail(path: Path) -> None:
        """Close or cut a last line without its newline: jq must read every line of the log.

        A whole event (a kill between its last byte and the newline, or a copy that dropped the final
        newline) is kept and closed: it may be one that no journal holds (an observed one). A half-written one
        is cut; nothing is lost by it: an event the journal committed is appended again whole by
        :meth:`append_committed`, and one it did not commit described a step that is redone.
        """
        try:
            if not path.is_file() or path.stat().st_size == 0:
                return
            with path.open("rb+") as fh:
                size = fh.seek(0, os.SEEK_END)
                back = min(size, 1 << 20)
                fh.seek(size - back)
                tail = fh.read(back)
                if tail.endswith(b"\n"):
                    return
                cut = tail.rfind(b"\n")
                if (cut < 0 and back < size) or seq_of(tail[cut + 1:]) is not None:
                    fh.seek(size)
                    fh.write(b"\n")  # a whole event, or a line over a megabyte: keep it, close it
                    return
                fh.truncate(size - back + cut + 1 if cut >= 0 else 0)
        except OSError:
            return

    def subscribe(self, fn: Subscriber, *, deferred: bool = False, text: bool = True) -> Callable[[], None]:
        """``fn`` gets every event from now on; ``deferred``: a view, fed on a thread of its own while the run
        waits, never in the middle of a turn (console.engine.events.feed). ``text`` False: it has no use for the
        streamed text (text_delta, a piece of a reply at a time); when no subscriber has, none is made
        (:attr:`streams_text`): a reply streams in hundreds of pieces, and the log keeps it whole anyway."""
        if deferred:
            view = DeferredView(fn, self._subscriber_failed)
            fn = view
            with self._lock:
                self._views.append(view)
        with self._lock:
            self._subscribers = (*self._subscribers, fn)
            if text:
                self._text_subscribers += 1

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers = _without(self._subscribers, fn)
                    if text:
                        self._text_subscribers -= 1
                views = [v for v in self._views if v is fn]
                self._views = [v for v in self._views if v is not fn]
            for v in views:
                v.close()

        return unsubscribe

    @property
    def streams_text(self) -> bool:
        """Whether a subscriber takes the streamed text (text_delta events): else they are not made."""
        return self._text_subscribers > 0

    def settle_views(self, timeout: float = 2.0) -> bool:
        """Wait until the deferred views have every event so far (not the run's: benchmarks and tests)."""
        return all([view.settle(timeout) for view in list(self._views)])

    def quiet(self) -> None:
        """The run waits (its model is asked, it holds for its operator): the deferred views get what came."""
        for view in self._views:
            view.wake()

    def emit(self, cls: type[EventBase], **fields: Any) -> EventBase:
        with self._lock:
            self.seq += 1
            event = cls(ts=self.clock.now(), seq=self.seq, session=self.session, **fields)
            type_name = fields.get("type") or _type_of(cls)
            if type_name not in IN_PROCESS_ONLY:
                try:
                    line = model_json(event).decode()
                except ValueError:
                    # Unencodable text (a lone surrogate) must not take the engine down: escape it.
                    line = json.dumps(event.model_dump(mode="json"), ensure_ascii=True)
                if self.holding:
                    self._held.append(line)
                else:
                    self._write([line])
            subscribers = self._subscribers
        for fn in subscribers:
            try:
                fn(event)
            except Exception as exc:  # a broken view must never stop the agent
                self._subscriber_failed(fn, exc)
        return event

    def _subscriber_failed(self, fn: Subscriber, exc: Exception) -> None:
        """Report a failing view once; one whose output is gone (a closed pipe) is dropped.

        Reporting must not fail either: stderr may be the same closed pipe.
        """
        gone = isinstance(exc, OSError)
        with self._lock:
            if gone and fn in self._subscribers:
                self._subscribers = _without(self._subscribers, fn)
            first = id(fn) not in self._failed
            self._failed.add(id(fn))
        if first:
            with contextlib.suppress(Exception):
                what = "stopped receiving events" if gone else "failed on an event (it keeps receiving them)"
                print(f"agent-console: a view {what}: {exc!r}", file=sys.stderr, flush=True)

    # -- the outbox ------------------------------------------------------------------------------
    @property
    def holds_lines(self) -> bool:
        """Whether events wait to be written (read without the lock: a line held meanwhile is written by the
        step that holds it, or by the next look)."""
        return bool(self._held)

    def take_held(self) -> list[str]:
        """The held lines, for the journal commit that records them (then :meth:`write_lines`)."""
        with self._lock:
            out, self._held = self._held, []
            return out

    def write_lines(self, lines: list[str]) -> None:
        with self._lock:
            self._write(lines)

    def observe(self) -> None:
        """Write what is held now: only events that report, not ones that record an effect."""
        self.write_lines(self.take_held())

    def discard_held(self) -> None:
        """A step failed before its commit: its events describe nothing that happened."""
        self.take_held()

    def append_committed(self, events: list[dict[str, Any]]) -> int:
        """Append events the journal committed but the log never got (a kill between the two)."""
        lines = []
        for e in events:
            try:
                lines.append(json.dumps(e, ensure_ascii=False, separators=(",", ":")))
            except (TypeError, ValueError):
                continue
        with self._lock:
            self._write(lines)
            for e in events:
                if isinstance(e.get("seq"), int):
                    self.seq = max(self.seq, e["seq"])
        return len(lines)

    def logged_of_call(self, call_id: str) -> list[dict[str, Any]]:
        """The events at the log's end that name the tool call ``call_id``: what a call's step wrote before its
        commit (an MCP server's question, written while the call waits), found again by the resume after a kill
        (whole lines only, as the log's repair left them). Read from the last LOGGED_TAIL bytes: the interrupted
        step's events are the last the killed process wrote, before the resumed one's few."""
        if self.log_path is None or not call_id:
            return []
        try:
            with open(self.log_path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - LOGGED_TAIL))
                tail = fh.read()
        except OSError:
            return []
        needle = json.dumps(call_id).encode()
        found: list[dict[str, Any]] = []
        for line in tail.splitlines()[1 if size > LOGGED_TAIL else 0:]:
            if needle not in line:
                continue
            with contextlib.suppress(ValueError, RecursionError):
                event = json.loads(line)
                if isinstance(event, dict) and event.get("call_id") == call_id:
                    found.append(event)
        return found

    def _write(self, lines: list[str]) -> None:
        if self._fd is None or not lines:
            return
        data = ("\n".join(lines) + "\n").encode("utf-8", "replace")
        fd = self._fd
        if failpoints.installed():  # the kill-point tests' (the closure is not made at every write of a run)
            failpoints.hit("events", tear=lambda: os.write(fd, data[: max(1, len(data) // 2)]))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    def sync(self) -> None:
        """Make everything logged so far durable (called at the end of a run)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Write what is still held (an orderly end) and close the log; the deferred views get what they have not
        yet (before the command's closing lines)."""
        try:
            self.observe()  # may fail (a full disk): the views and the log are closed all the same
        finally:
            for view in list(self._views):
                view.close()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
