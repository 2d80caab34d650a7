"""A run's story as lines of text: the live log of ``run --headless``, and ``agent-console logs`` (a finished run's,
or a live one's, followed). One compact line per turn (its calls and tokens) with the model's text under it, todo
and phase milestones, and one line per thing the engine, the guardrails or the operator did, needs-you moments
first among them (in :mod:`console.view.present`'s words, the same as the console's; :class:`console.view.story.Told`
says which events are told, for every view).

The first line names the run (its short id, when the caller gives it) and says when the model is the offline
scripted demo. Costs are shown when the model's price is known (the turn's on its line, the job's at a session's
and the run's end); otherwise one line says so, once. A model retry is one line while the engine waits.

Every line is written by :meth:`HeadlessLog.write`, which makes each piece of it safe for the terminal
(:func:`console.engine.text.safe_text`: an escape sequence in a tool's name or a summary is shown, never run)
before colouring it: the colours are the only control sequences the log writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import threading
import time
import typing
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from pydantic import ValidationError

from console.engine import events as ev
from console.engine.text import safe_text
from console.view import present
from console.view.present import Presented
from console.view.story import Told

# A line as pieces: plain text, or (colour code, text); HeadlessLog.write makes each safe, then colours it.
Part = str | tuple[str, str]

# Colours by severity, and the kinds that get their own (the run's structure stands out from what happens in it).
SEVERITY_COLOR = {"info": "36", "caution": "33", "warning": "1;33", "error": "31", "success": "32"}
KIND_COLOR = {"session": "1", "restart": "1", "session-end": "2", "run-end": "2", "masked": "35", "wind-down": "35",
              "compacted": "2", "restart-pending": "1;33", "restart-approved": "35", "restart-denied": "33",
              "operator": "35", "received": "2", "phase": "1;36", "done": "1;32", "recovered": "1;33",
              "todos": "36", "todo-done": "32", "needs-you": "1;31", "needs-cleared": "32", "reply": "",
              "result": "2"}
# Tools whose result a milestone line says (a task done, a new todo list, the job complete): not said twice.
SAID_BY_MILESTONE = frozenset({"todo_complete", "todo_write", "job_complete"})
INDENT = " " * 8  # the turn line's calls column: the model's text and the results go under the calls


def use_color(stream: object) -> bool:
    """Colours on a terminal only, and never when NO_COLOR is set (https://no-color.org) or TERM is dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False


class HeadlessLog:
    """An event subscriber writing the story to ``out``.

    ``run_id``: the run's short id, said on the first line; ``provider``: the provider's name if known before the
    first session starts (otherwise the session_started event says it). ``results``: a line per tool call's result
    under its turn (``logs``; the live log stays compact). ``say_end``: say how the run ended even when its cost is
    unknown (``logs``: no closing line of the cli follows). ``flush``: flush after every line (a live log); else the
    caller flushes (:meth:`flush`).

    What happens during a turn (its results, todo milestones, denials, feedback...) is held and written under the
    turn's line, which is written when the turn ends (its token_usage: the tokens are on it); a needs-you moment is
    written at once, the turn's line first without its tokens."""

    def __init__(self, out: TextIO, color: bool = False, *, run_id: str = "", provider: str = "",
                 results: bool = False, say_end: bool = False, flush: bool = True) -> None:
        self.out = out
        self.color = color
        self.run_id = run_id
        self.provider = provider
        self.results = results
        self.say_end = say_end
        self.autoflush = flush
        self._lock = threading.Lock()
        self._last_msg: ev.AssistantMessage | None = None  # the turn in flight, until its line is written
        self._results: list[tuple[Part, ...]] = []  # its calls' results, under its reply
        self._held: list[tuple[Part, ...]] = []  # what happened in it (failures, denials...), under its results
        self._told = Told()  # which events are told (the one answer every view shares)
        self._phase = ""
        self._job_cost: float | None = None  # the whole job's, from the last token_usage that knew it
        self._price_told = False
        self._restart_answer = False  # the restart-pending line just said how to answer (its needs-you need not)
        self._said_run = False  # the first line (the run's) is written
        self.closed = False

    def _c(self, code: str, text: str) -> str:
        text = safe_text(text, one_line=True)
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and code else text

    def write(self, *parts: Part) -> None:
        """One line of the log: each part (plain text, or a colour code and its text) made safe, then coloured."""
        line = "".join(self._c(*part) if isinstance(part, tuple) else self._c("", part) for part in parts)
        if not self._said_run:
            self._say_run()
        with self._lock:
            if self.closed:
                return
            try:
                self.out.write(line + "\n")
                if self.autoflush:
                    self.out.flush()
            except (OSError, ValueError):
                # The reader went away (`| head`, a closed SSH session): the run goes on without its log.
                self.closed = True

    def flush(self) -> None:
        with self._lock:
            if self.closed:
                return
            try:
                self.out.flush()
            except (OSError, ValueError):
                self.closed = True

    def _color(self, p: Presented) -> str:
        if p.kind in ("feedback", "error", "session-end", "run-end") and p.severity in ("warning", "error"):
            return SEVERITY_COLOR[p.severity]
        return KIND_COLOR.get(p.kind, SEVERITY_COLOR.get(p.severity, ""))

    def _demo(self) -> str:
        return f"; {present.DEMO}" if present.is_demo(self.provider) else ""

    def _say_run(self) -> None:
        """The log's first line names the run (and says when the model is the scripted demo)."""
        if self._said_run:
            return
        self._said_run = True
        if self.run_id or present.is_demo(self.provider):
            head = f"run {self.run_id}" if self.run_id else "run"
            self.write(("1", head + self._demo()))

    def _turn_line(self, *parts: Part) -> None:
        """A line about the turn in flight goes under that turn's line; between turns it is written at once."""
        if self._last_msg is not None:
            self._held.append(parts)
        else:
            self.write(*parts)

    def __call__(self, e: ev.EventBase) -> None:
        if not self._told.sees(e):
            return
        if isinstance(e, ev.AssistantMessage):
            if self._last_msg is not None:
                self._write_turn(None)  # the turn before never got its usage (a kill): its line all the same
            self._last_msg = e
            return
        if isinstance(e, ev.TokenUsage):
            self._job_cost = e.job_cost_usd if e.job_cost_usd is not None else self._job_cost
            if self._last_msg is not None:
                self._write_turn(e)
            return
        if isinstance(e, ev.SessionStarted | ev.SessionEnded | ev.RunEnded) and self._last_msg is not None:
            self._write_turn(None)  # a turn cut short: its line without tokens, and what it held
        if isinstance(e, ev.ToolResult):
            if e.ok:
                if self.results and e.tool not in SAID_BY_MILESTONE:
                    self._result(("2", f"{INDENT}← {present.result_text(e)}"))
                return
        elif isinstance(e, ev.TodosChanged):
            self._todos(e)
            return
        elif isinstance(e, ev.NeedsOperator):
            self._needs(e)
            return
        p = present.describe(e)
        if p is None or p.kind == "tool":
            return
        if isinstance(e, ev.SessionStarted):
            self._session(e, p)
        elif isinstance(e, ev.SessionEnded):
            self.write((self._color(p), p.text + self._cost_so_far()))
        elif isinstance(e, ev.RunEnded):
            self._run_ended(e, p)
        elif isinstance(e, ev.RestartPending):
            run = self.run_id or "JOB"
            self.write((self._color(p), f"{p.line}; answer with `agent-console approve {run}` or "
                                        f"`agent-console deny {run}`"))
            self._restart_answer = True
        elif isinstance(e, ev.PhaseTransition) and e.stage == "completed":
            self._turn_line((self._color(p), f"== {p.line} =="))
        elif isinstance(e, ev.JobCompleted):
            self._turn_line((self._color(p), f"{p.icon} {p.line}"))
        else:
            self._turn_line((self._color(p), f"  {p.icon} {p.line}"))

    def _result(self, *parts: Part) -> None:
        if self._last_msg is not None:
            self._results.append(parts)
        else:
            self.write(*parts)

    def _session(self, e: ev.SessionStarted, p: Presented) -> None:
        self.provider = e.provider or self.provider
        first = not self._said_run
        self._said_run = True
        self.write((self._color(p), (f"run {self.run_id} · " if first and self.run_id else "") + p.line))
        # Said once per log, and only when the engine said so (an older log has no "priced" at all).
        if "priced" in e.model_fields_set and not e.priced and not self._price_told:
            self._price_told = True
            self.write(("2", f"  {present.unpriced_text(e.model)}"))

    def _run_ended(self, e: ev.RunEnded, p: Presented) -> None:
        # Live, the cli's own last line says how the run ended; this one adds the job's cost, when it is known.
        if self._job_cost is None and not self.say_end:
            return
        text = present.run_ended_text(e, self.run_id)
        if self.say_end and p.detail and p.detail != e.reason:
            text += f" ({p.detail})"
        if self._job_cost is not None:
            text += f"; job cost {present.cost(self._job_cost)}"
        self.write((self._color(p), text + self._demo()))

    def _needs(self, e: ev.NeedsOperator) -> None:
        """A needs-you moment, at once and whole: the headline, its evidence, and how to answer it."""
        p = present.describe(e)
        assert p is not None
        if self._last_msg is not None:
            self._write_turn(None)  # the turn it happened in first, without its tokens (they come later)
        self.write((self._color(p), f"{p.icon} {p.text}"))
        for line in p.lines:
            self.write(("33", f"    {line}"))
        said = self._restart_answer and e.reason == "restart_approval"
        answer = "" if said else present.needs_answer(e, self.run_id)
        how = "; ".join(x for x in (p.detail, answer) if x)
        if how:
            self.write(("1", f"    {how}"))
        self._restart_answer = False

    def _write_turn(self, e: ev.TokenUsage | None) -> None:
        """The turn's line: its tool calls and tokens (and cost; none when ``e`` is None: the turn was cut short,
        or its line is due before its end), the model's text, then the calls' results and what happened in it."""
        m = self._last_msg
        if m is None:
            return
        self._last_msg = None
        tools = ", ".join(f"{safe_text(c.name, one_line=True, limit=60)}({present.tool_args(c.name, c.arguments)})"
                          for c in m.tool_calls) or "(no tool call)"
        if e is None:
            self.write(f"  t{m.turn:<4} {tools}")
        else:
            tok = present.tokens
            cached = f", {tok(e.cached_input_tokens)} cached" if e.cached_input_tokens else ""
            est = "~" if not e.reported else ""
            budget = e.prompt_budget or e.context_window
            ctx = f" | ctx {e.context_tokens / budget:.0%}" if budget else ""
            cost = f" | {present.cost(e.cost_usd)}" if e.cost_usd is not None else ""
            tokens = f"[{est}{tok(e.input_tokens)} in{cached}, {tok(e.output_tokens)} out{ctx}{cost}]"
            self.write(f"  t{e.turn:<4} {tools}  ", ("2", tokens))
        reply = present.describe(m)
        if reply is not None:
            self.write((self._color(reply), f"{INDENT}{reply.icon} {reply.text}"))
        for parts in (*self._results, *self._held):
            self.write(*parts)
        self._results.clear()
        self._held.clear()

    def _cost_so_far(self) -> str:
        return f"; job cost so far {present.cost(self._job_cost)}" if self._job_cost is not None else ""

    def _todos(self, e: ev.TodosChanged) -> None:
        """Milestones: a new todo list (its phase and size), a task done, a list archived at a transition."""
        p = present.describe(e)
        assert p is not None
        if e.reason.startswith("transition"):
            self._turn_line((self._color(p), f"-- {p.text} --"))
            return
        label = present.phase_label(e)
        if label != self._phase or e.reason in ("todo_write", "bootstrap", "resume", "job_completion"):
            self._phase = label
            self._turn_line(("1;36", f"[{present.todo_list_text(e)}]"))
        if p.kind == "todo-done":
            self._turn_line((self._color(p), f"    {p.icon} {p.text}"))


# -- agent-console logs: a run's story from its events.jsonl, whole or followed ------------------------------------
READ_CHUNK = 1 << 20  # bytes read at a time: a huge log streams through, never loaded whole
MAX_LINE = 64 << 20  # a "line" longer than this is no event the engine wrote (damage): skipped to its end
POLL_S = 0.25  # how often a followed log is looked at (one stat when nothing changed)
LOCK_EVERY_S = 1.0  # how often, while nothing comes, the run lock is asked whether a process still runs the run
QUIET_S = 1.0  # with no process running the run, how long nothing new must come before following stops
# The start of a line as the engine writes it: its seq and type, read without parsing the rest of the line.
_HEAD = re.compile(rb'\{"v":\d+,"ts":"[^"\\]*","seq":(\d+),"session":\d+,"type":"([a-z_]+)"')
KNOWN_TYPES = frozenset(cls.model_fields["type"].default for cls in typing.get_args(typing.get_args(ev.Event)[0]))
# What --json escapes of a line that is valid JSON: the characters a terminal could take for commands (C1 controls
# such as U+009B CSI, bidi overrides, ...; str.isprintable says which). They can only be inside a JSON string (raw
# controls are not valid JSON), where a \uXXXX escape is the same text to jq. Printable text is left as it is.
_NON_ASCII = re.compile(r"[^\x20-\x7e]")


class LogReader:
    """The lines of a run's ``events.jsonl`` as they become complete, from the start: read a chunk at a time
    (never the whole file), a line being written is read once its newline is there, a torn last line cut away by
    the next run's repair is read again whole, and a log replaced under the reader (moved aside and rewritten) is
    read again from its start (:attr:`rewound` is then the last seq read before: the caller skips up to it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: BinaryIO | None = None
        self._id: tuple[int, int] = (0, 0)
        self._seen: tuple[int, ...] = ()
        self._pending = bytearray()  # the start of a line whose newline has not come yet
        self._skipping = False  # inside a line over MAX_LINE: dropped up to its end
        self.line_no = 0  # complete lines read so far (the number of the last one)
        self.rewound = False

    def close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None

    def _open(self) -> bool:
        try:
            # Non-blocking: a named pipe where the log should be must not hang the reader.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        except OSError:
            return False
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return False
        self._fh = os.fdopen(fd, "rb", buffering=0)
        self._id = (st.st_dev, st.st_ino)
        return True

    def changed(self) -> bool:
        """Whether the log may hold something new since the last look (one stat)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if seen == self._seen:
            return False
        self._seen = seen
        return True

    def _check_replaced(self) -> None:
        assert self._fh is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return  # gone for now (moved aside): what is open is still readable
        at = self._fh.tell()
        if (st.st_dev, st.st_ino) == self._id and st.st_size >= at:
            return
        if (st.st_dev, st.st_ino) == self._id and st.st_size >= at - len(self._pending):
            # The torn line we hold the start of was cut (a resume repairs the log before appending): read it again.
            self._fh.seek(at - len(self._pending))
            self._pending.clear()
            return
        self.close()
        self._pending.clear()
        self._skipping = False
        self.line_no = 0
        self.rewound = True

    def lines(self) -> Iterator[bytes | None]:
        """The complete lines appended since the last call (without their newline), until the end of the file;
        None for a line too long to be an event."""
        if self._fh is not None:
            self._check_replaced()
        if self._fh is None and not self._open():
            return
        assert self._fh is not None
        while True:
            try:
                chunk = self._fh.read(READ_CHUNK)
            except OSError:
                return
            if not chunk:
                return
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    break
                if self._skipping:
                    self._skipping = False
                    self.line_no += 1
                    yield None
                else:
                    line = bytes(self._pending) + chunk[start:nl] if self._pending else chunk[start:nl]
                    self._pending.clear()
                    self.line_no += 1
                    yield line
                start = nl + 1
            if not self._skipping:
                self._pending += chunk[start:]
                if len(self._pending) > MAX_LINE:
                    self._pending.clear()
                    self._skipping = True


@dataclass
class LogEnd:
    """How ``logs`` ended: ``done`` (the log so far was shown), ``ended`` (followed to the run's end),
    ``gone`` (followed until no process ran the run, which did not end cleanly), ``closed`` (the reader of the
    output went away); ``last``: the type of the last event read."""

    how: str
    last: str = ""


class _Tail:
    """The last ``n`` lines written (``logs --lines N``): what a stream of any length keeps in memory."""

    def __init__(self, n: int) -> None:
        self.lines: deque[str] = deque(maxlen=n)

    def write(self, text: str) -> int:
        self.lines.append(text)
        return len(text)

    def flush(self) -> None:
        return None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON that jq reads")


def _event_shape(raw: bytes) -> dict[str, object] | None:
    """``raw`` as JSON if it is one event-shaped object (an int seq, a str type), else None (damage)."""
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or type(data.get("seq")) is not int or not isinstance(data.get("type"), str):
        return None
    return data


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch.isprintable() or ch == "\t":
        return ch
    code = ord(ch)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


class StoryPrinter:
    """``agent-console logs``: a run's events.jsonl as its story (the headless log's lines, with the calls'
    results) or, ``as_json``, as the events themselves (one JSON object a line, as the log has them).

    Lines are read as they are complete and a chunk at a time (see :class:`LogReader`); a line that is no event
    (damage) is skipped with one note on ``err``; an event of a type this version does not know is left out of the
    story and passed through by --json. ``since``: from the event with that seq on; ``lines``: only the last that
    many lines (events, with --json) of what the log holds so far, then (following) every new one."""

    def __init__(self, path: Path, out: TextIO, err: TextIO, *, run_id: str = "", as_json: bool = False,
                 since: int = 0, lines: int = 0, color: bool = False) -> None:
        self.path = path
        self.out = out
        self.err = err
        self.as_json = as_json
        self.since = since
        self.reader = LogReader(path)
        self._tail = _Tail(lines) if lines > 0 else None
        self._sink: TextIO = self._tail if self._tail is not None else out  # type: ignore[assignment]
        self.log = HeadlessLog(self._sink, color, run_id=run_id, results=True, say_end=True, flush=False)
        self.closed = False
        self.last_type = ""
        self.last_seq = 0
        self._damage_told = False

    # -- output ----------------------------------------------------------------------------------------------
    def _write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self._sink.write(text)
        except (OSError, ValueError):
            self.closed = True

    def flush(self) -> None:
        if self.as_json:
            if not self.closed:
                try:
                    self.out.flush()
                except (OSError, ValueError):
                    self.closed = True
        else:
            self.log.flush()
            self.closed = self.closed or self.log.closed

    def end_tail(self) -> None:
        """What --lines kept goes out; every line from here on is written as it comes."""
        if self._tail is None:
            return
        kept, self._tail = self._tail.lines, None
        self._sink = self.out
        self.log.out = self.out
        for text in kept:
            self._write(text)
        self.flush()

    def _damaged(self) -> None:
        if self._damage_told:
            return
        self._damage_told = True
        with contextlib.suppress(OSError, ValueError):
            self.err.write(f"agent-console: {safe_text(str(self.path), one_line=True)}: line {self.reader.line_no} "
                           "is not an event (damaged); skipped, as is any other damaged line\n")
            self.err.flush()

    # -- input -----------------------------------------------------------------------------------------------
    def pump(self) -> bool:
        """Show what the log holds that was not shown yet; True if anything was read."""
        got = False
        for raw in self.reader.lines():
            got = True
            self._line(raw)
            if self.closed or self.log.closed:
                self.closed = True
                break
        self.flush()
        return got

    def _line(self, raw: bytes | None) -> None:
        if raw is None:
            self._damaged()
            return
        raw = raw.strip()
        if not raw:
            return
        head = _HEAD.match(raw)
        if head is not None:
            seq, kind = int(head[1]), head[2].decode()
            if not self._wanted(seq):
                return
            if not self.as_json and not present.in_story(kind) and kind in KNOWN_TYPES:
                # Not told (a turn's start, bookkeeping): only checked to be JSON, not made into an event.
                if _event_shape(raw) is None:
                    self._damaged()
                else:
                    self.last_type, self.last_seq = kind, seq
                return
        if self.as_json:
            self._json(raw)
        else:
            self._story(raw)

    def _wanted(self, seq: int) -> bool:
        if self.reader.rewound and seq <= self.last_seq:
            return False  # the log was replaced: what was read before is not said twice
        return seq >= self.since

    def _json(self, raw: bytes) -> None:
        data = _event_shape(raw)
        if data is None:
            self._damaged()
            return
        seq = data["seq"]
        assert isinstance(seq, int)
        if not self._wanted(seq):
            return
        self.last_type, self.last_seq = str(data["type"]), seq
        text = raw.decode("utf-8", "replace")
        if not text.isprintable():
            text = _NON_ASCII.sub(_escape, text)
        self._write(text + "\n")

    def _story(self, raw: bytes) -> None:
        try:
            e = ev.parse_event(raw.decode("utf-8", "replace"))
        except (ValidationError, ValueError, RecursionError):
            data = _event_shape(raw)
            if data is None or data["type"] in KNOWN_TYPES:
                self._damaged()
            elif self._wanted(data["seq"]):  # type: ignore[arg-type]
                self.last_type, self.last_seq = str(data["type"]), data["seq"]  # type: ignore[assignment]
            return
        if not self._wanted(e.seq):
            return
        self.last_type, self.last_seq = e.type, e.seq  # type: ignore[attr-defined]
        self.log(e)

    # -- following -------------------------------------------------------------------------------------------
    def follow(self, holder: Callable[[], int | None], *, poll: float = POLL_S, quiet: float = QUIET_S,
               lock_every: float = LOCK_EVERY_S, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> LogEnd:
        """Show every new event as it comes, until the run ends (its run_ended), no process runs it and nothing
        new came for ``quiet`` seconds, or the output's reader goes away. Sleeps between looks: no busy loop."""
        if self.closed:
            return LogEnd("closed", self.last_type)
        pid = holder()
        if self.last_type == "run_ended" and pid is None:
            return LogEnd("ended", self.last_type)  # a finished run: nothing more will come
        last_new = checked = clock()
        while True:
            sleep(poll)
            if self.reader.changed() and self.pump():
                if self.closed:
                    return LogEnd("closed", self.last_type)
                last_new = clock()
                if self.last_type == "run_ended":
                    return LogEnd("ended", self.last_type)
                continue
            now = clock()
            if now - checked >= lock_every:
                pid, checked = holder(), now
            if pid is None and now - last_new >= quiet:
                self.pump()  # what came just before the process let go
                return LogEnd("closed" if self.closed else "ended" if self.last_type == "run_ended" else "gone",
                              self.last_type)
