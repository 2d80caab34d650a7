"""``agent-console logs``: a run's story from its events.jsonl, whole or followed (:class:`StoryPrinter`, reading
the log in chunks with :class:`LogReader`; ``--json`` passes the lines through, escaped for a terminal)."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
import typing
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from pydantic import ValidationError

from console.engine import events as ev
from console.engine.bounded_json import BoundsError, loads
from console.engine.text import safe_text
from console.headless.live import HeadlessLog
from console.view import present

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

    def where(self) -> str:
        """The line last read, as a note about a damaged one names it."""
        return f"{self.path}: line {self.line_no}"

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
        # A write is one line or several (the log writes a turn's lines together), each ending with its newline.
        *whole, rest = text.split("\n")
        self.lines.extend([line + "\n" for line in whole])
        if rest:
            self.lines.append(rest)
        return len(text)

    def flush(self) -> None:
        return None


def _event_shape(raw: bytes) -> dict[str, object] | None:
    """``raw`` as JSON if it is one event-shaped object (an int seq, a str type), else None (damage). Parsed with
    bounds (a line, or a store's row, of 5,000 nested arrays is damage, not a RecursionError)."""
    try:
        data = loads(raw)
    except BoundsError:
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
        what = self.reader.where()  # a reader of another source (the store's rows) names the event its own way
        with contextlib.suppress(OSError, ValueError):
            self.err.write(f"agent-console: {safe_text(what, one_line=True)} is not an event (damaged); skipped, as "
                           "is any other damaged line\n")
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
