"""Following a run's event log from another process (an attached console): replay, then poll for new lines.

Runs on a worker thread. Everything it touches is handed in when it starts (the log, the bridge, the
controller), so a worker of a run the fleet has left can never feed the run shown next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.engine import events as ev
from console.tui.bridge import EventBridge
from console.tui.commands import Controller
from console.tui.workers import Cancellable as Cancellable
from console.tui.workers import worker_sleep as worker_sleep

if TYPE_CHECKING:  # imported when a long log is first read: the fleet's process never needs it
    from console.view.state.kept import Kept, Resumed

FOLLOW_INTERVAL = 0.15  # how often the log is polled
# A log larger than this is shown newest first: its newest messages and the latest state-bearing events at
# once (the panes are filled within a moment), then the exact fold of the whole log replaces the state.
QUICK_BYTES = 2 * 2**20
# A long log's attach shows at most this many of its newest messages (a screen holds a dozen; `logs` has all):
# drawing 200 would take most of a second.
QUICK_KEEP = 60
# With a kept fold of the run, the bytes of the log's end read for its newest messages (more when they are older).
TAIL_WINDOW = 2 * 2**20
DRAW_FIRST = 0.4  # seconds the view has to draw the newest events before the whole log is parsed
# The events that fill the panes before the whole log is folded (their last one before the newest messages).
SEED_TYPES = (b"session_started", b"todos_changed", b"token_usage", b"guardrails_status", b"command_sandbox",
              b"launch_settings", b"needs_operator", b"needs_operator_cleared", b"restart_pending")
RUNNER_INTERVAL = 1.0  # how often the run lock is asked whether a process runs the job


def split_history(events: list[ev.EventBase], keep: int) -> tuple[list[ev.EventBase], list[ev.EventBase]]:
    """A long history cut in two: the older part (for the state's fold only) and the part that holds the
    newest ``keep`` assistant messages (which the conversation shows; it keeps no more than that anyway)."""
    seen = 0
    for i in range(len(events) - 1, -1, -1):
        if isinstance(events[i], ev.AssistantMessage):
            seen += 1
            if seen >= keep:
                return events[:i], events[i:]
    return [], events


def _type(line: bytes) -> bytes:
    """An event line's type, read from its bytes (the type comes within the line's first fields)."""
    i = line.find(b'"type":"', 0, 256)
    if i < 0:
        return b""
    j = line.find(b'"', i + 8, i + 64)
    return line[i + 8:j] if j > 0 else b""


def _last_line_of(data: bytes, kind: bytes, before: int) -> int | None:
    """Where the last whole line of event type ``kind`` that starts before ``before`` starts (None: there is none).
    The type's bytes may also occur inside a line of another type (in a nested object): such a hit is passed."""
    needle = b'"type":"' + kind + b'"'
    pos = before
    while (i := data.rfind(needle, 0, pos)) >= 0:
        start = data.rfind(b"\n", 0, i) + 1
        stop = data.find(b"\n", start)
        if stop >= 0 and _type(data[start:stop]) == kind:
            return start
        pos = i
    return None


def _first_line_of(data: bytes, kind: bytes, before: int) -> int | None:
    """Where the first whole line of event type ``kind`` starts, if it starts before ``before``."""
    needle = b'"type":"' + kind + b'"'
    pos = 0
    while (i := data.find(needle, pos, before)) >= 0:
        start = data.rfind(b"\n", 0, i) + 1
        stop = data.find(b"\n", start)
        if stop >= 0 and _type(data[start:stop]) == kind:
            return start
        pos = i + len(needle)
    return None


def _parse(lines: list[bytes]) -> list[ev.EventBase]:
    out: list[ev.EventBase] = []
    for raw in lines:
        if raw.strip():
            try:
                out.append(ev.parse_event(raw.decode("utf-8", "replace")))
            except (ValueError, RecursionError):  # a damaged line (pydantic's ValidationError is a ValueError)
                continue
    return out


class Folded:
    """The exact fold of a long log's older part (done on the follower's thread), for the view to adopt."""

    def __init__(self, state: Any, upto_seq: int, older_events: int, older_messages: int, seed: int = 0) -> None:
        self.seed = seed  # of the older events, how many went ahead as the seed
        self.state = state
        self.upto_seq = upto_seq
        self.older_events = older_events
        self.older_messages = older_messages


def quick_first_read(path: Path, bridge: EventBridge, keep: int, on_history: Callable[[list[ev.EventBase]], None],
                     make_state: Callable[[], Any], on_folded: Callable[[Folded], None],
                     worker: Cancellable, kept: Kept | None = None) -> int | None:
    """The first read of a long log, newest first; returns the offset to follow from (None: not long).

    1. The newest ``keep`` messages (found by their bytes, not parsed) and the last event of each kind in
       SEED_TYPES before them are parsed: the seed goes to ``on_history`` (the state folds it), the newest
       events to the bridge. The panes are filled from these.
    2. Then the whole log is parsed and folded into a fresh state here, on this thread, and handed over with
       the seq it covers (``on_folded``): the view adopts it, and folds only what comes after.

    ``kept``: the run's fold kept on disk (console.view.state.kept). When one holds for this log, its state and the
    log's tail after it are the fold (exactly the whole log's), handed over first; then the newest messages go to the
    bridge: no seed, no pass over the whole log (100,000 events parsed cost 2 s of CPU and 230 MB). When none
    holds, the whole log's fold is kept for the next attach once it is made."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size < QUICK_BYTES:
        return None
    from console.view.state.kept import blank_of, fold_lines

    blank = make_state()
    resumed = kept.load(blank) if kept is not None else None
    keep = min(keep, QUICK_KEEP)
    # With a kept fold, only the log's end is read: from the kept offset, or from TAIL_WINDOW before the end when
    # the newest messages lie before it (read again whole when the window holds fewer than ``keep`` of them).
    window = size if resumed is None else max(size - resumed.offset, TAIL_WINDOW)
    while True:
        base = max(0, size - window)
        try:
            with path.open("rb") as fh:
                fh.seek(base)
                data = fh.read(size - base)
        except OSError:
            return None
        lead = 0 if base == 0 or (resumed is not None and base == resumed.offset) else data.find(b"\n") + 1
        end = data.rfind(b"\n")
        if end < lead and base == 0:
            return None
        split, seen = _newest(data, keep, lead, end) if end >= lead else (lead, 0)
        if seen >= keep or base == 0:
            break
        window = size  # the window held too few of them
    newer = _parse(data[split:end].split(b"\n"))
    if resumed is not None:
        return _resumed(resumed, data, base, end, newer, bridge, on_folded)
    # Found by searching the bytes from the end (C speed), not by looking at each of 100,000 lines in Python
    # (~0.4 s before anything could be drawn): the seed before the newest messages.
    seed_at = [at for kind in SEED_TYPES if (at := _last_line_of(data, kind, split)) is not None]
    first_start = _first_line_of(data, b"session_started", split)
    if first_start is not None and first_start not in seed_at:
        seed_at.append(first_start)
    seed = _parse([data[i:data.index(b"\n", i)] for i in sorted(seed_at)])
    on_history(seed)
    bridge.push_many(newer)
    # The view draws the newest events first, with the processor to itself (parsing holds the GIL).
    drawn_by = time.monotonic() + 2.0
    while bridge.pending and time.monotonic() < drawn_by and not worker.is_cancelled:
        time.sleep(0.01)
    worker_sleep(worker, DRAW_FIRST)
    if worker.is_cancelled:
        return end + 1
    state, blank_was = blank, blank_of(blank) if kept is not None else None
    # Folded line by line (never a list of 100,000 events held at once), then kept for the next attach.
    older_events, messages = fold_lines(state, data[:split])
    state.apply_all(newer)
    if kept is not None and blank_was is not None:
        kept.keep(state, blank_was, end + 1, older_events + len(newer),
                  messages + sum(1 for e in newer if isinstance(e, ev.AssistantMessage)))
    if not worker.is_cancelled:
        on_folded(Folded(state, newer[-1].seq if newer else state.last_seq, older_events, messages, len(seed)))
    return end + 1


def _newest(data: bytes, keep: int, lead: int, end: int) -> tuple[int, int]:
    """Where the newest ``keep`` assistant messages of ``data`` start (``lead`` when fewer), and how many it found."""
    split, seen, pos = lead, 0, end
    while seen < keep:
        start = _last_line_of(data, b"assistant_message", pos)
        if start is None or start < lead:
            return lead, seen
        seen += 1
        split = pos = start
    return split, seen


def _resumed(resumed: Resumed, data: bytes, base: int, end: int, newer: list[ev.EventBase], bridge: EventBridge,
             on_folded: Callable[[Folded], None]) -> int:
    """The first read from a kept fold: the log's tail after it folded onto it, handed over (the view adopts it),
    then the newest messages to the bridge (the conversation draws them; the state has them already)."""
    from console.view.state.kept import fold_lines

    state = resumed.state
    events, messages = fold_lines(state, data[resumed.offset - base:end + 1])
    shown = sum(1 for e in newer if isinstance(e, ev.AssistantMessage))
    on_folded(Folded(state, newer[-1].seq if newer else state.last_seq, resumed.events + events - len(newer),
                     resumed.messages + messages - shown))
    bridge.push_many(newer)
    return base + end + 1


def follow_log(path: Path, bridge: EventBridge, controller: Controller, worker: Cancellable,
               on_runner: Callable[[int | None], None],
               on_history: Callable[[list[ev.EventBase]], None] | None = None, keep: int = 0,
               make_state: Callable[[], Any] | None = None, on_folded: Callable[[Folded], None] | None = None,
               kept: Kept | None = None) -> None:
    """Push every event of ``path`` into ``bridge`` (from the first line), then each new one, until cancelled;
    call ``on_runner`` with the pid of the process running the job whenever it changes (None: nobody).

    ``on_history``: the first read's older part, beyond the newest ``keep`` messages, goes there instead of
    the bridge (replaying 100,000 events through the conversation would cost seconds it throws away).
    ``kept``: the run's fold kept on disk (see :func:`quick_first_read`).

    A controller that follows its run itself (``follow_events``: a run of another machine, followed from the shared
    store by :class:`console.tui.store_follow.StoreController`) does, with the same arguments."""
    if (own := controller.follower) is not None:
        own(bridge, worker, on_runner, on_history, keep, make_state, on_folded)
        return
    offset = 0
    pid: int | None = -1
    checked = 0.0
    first = True
    if on_history is not None and make_state is not None and on_folded is not None and keep > 0:
        quick = quick_first_read(path, bridge, keep, on_history, make_state, on_folded, worker, kept)
        if quick is not None:
            offset, first = quick, False
    while not worker.is_cancelled:
        try:
            events, offset = ev.read_new(path, offset)
        except OSError:
            events = []
        if first and events and on_history is not None and keep > 0:
            older, events = split_history(events, keep)
            if older and not worker.is_cancelled:
                on_history(older)
        first = False
        if events and not worker.is_cancelled:
            bridge.push_many(events)
        now = time.monotonic()
        if now - checked >= RUNNER_INTERVAL:
            checked = now
            current = controller.runner_pid()
            if current != pid:
                pid = current
                on_runner(pid)
        worker_sleep(worker, FOLLOW_INTERVAL)
