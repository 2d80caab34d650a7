"""The view's fold of a run, kept on disk: ``.console/view-fold.json``, so that a console attaching to a long run folds
only the log's tail after it (issue 37: 100,000 events parsed with pydantic cost an attach 2 s of CPU and 230 MB).

What it is: the :class:`ConsoleState` every view folds from ``events.jsonl``, as it stood after the log's first
``offset`` bytes (a whole number of lines), written by the run's runner every so often (:class:`FoldKeeper`) and by a
console that folded a long log whole (:func:`keep`). Folding the rest of the log from ``offset`` on gives exactly the
state the whole log's fold gives (tests/unit/test_kept_fold.py compares them over real runs).

When it is believed (:func:`load`), and otherwise ignored (the whole log is folded, as without it):

- it carries this operator's seal (console.engine.seal) for this run folder, as a record of kind ``view-fold``: a
  job folder from elsewhere, or a file planted in ``.console/`` by anything but this operator's harness, is never
  believed (the agent's commands do not see ``.console/`` at all: console.engine.tools.confine; a run without
  confinement still cannot seal). The seal covers the file's body byte for byte: damage is caught by it too;
- its version is this module's :data:`VERSION` and its body reads back as a :class:`KeptFold` (pydantic);
- the log still holds what it was folded from: at least ``offset`` bytes, a line ending at ``offset``, and the
  ``TAIL_CHECK`` bytes before it hash to what the record says (a log moved aside and begun again is another log);
- it was folded from the same blank state the reader's would be (its provider, model, window and thresholds).

Written atomically (console.engine.atomic, its temp file in ``.console/tmp``): a kill -9 mid-write leaves the older
one (a longer tail to fold) or none, never a torn one that is believed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections import Counter, deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from console.engine import events as ev
from console.engine.atomic import atomic_write_bytes
from console.engine.job_files import JobError, JobPaths
from console.engine.seal import Seal, read_record
from console.view.present.words import Presented
from console.view.state.fold import ConsoleState
from console.view.state.parts import (
    EXPERIENCES_KEEP,
    FEEDBACK_KEEP,
    TREND_KEEP,
    ExperienceItem,
    FeedbackItem,
    GaugeState,
    McpServerTally,
    Need,
    ProviderTally,
)
from console.view.story import DENIED_KEEP, Told

NAME = "view-fold.json"  # in the run's .console/
SEAL_KIND = "view-fold"  # what its MAC says it is (console.engine.seal)
VERSION: Literal[1] = 1  # of the record's shape; another is ignored (the whole log is folded)
TAIL_CHECK = 4096  # bytes of the log before ``offset`` the record hashes
MAX_BYTES = 32 << 20  # a record larger than this is none (it holds a few hundred short items)
KEEP_EVERY = 512 * 1024  # bytes of log the runner lets grow before it keeps its fold again
KEEP_CHECK = 2.0  # seconds between its looks at the log's size
READ_CHUNK = 4 << 20  # bytes of log it folds at a time


# Built at first use, not at import (pydantic's defer_build): these models take in most event types, and the fleet
# imports this module for its later folds but lists its runs before any (~15 ms of its start's CPU).
DEFERRED = ConfigDict(defer_build=True)


class GaugeRecord(BaseModel):
    model_config = DEFERRED

    used: int
    window: int
    window_source: str
    budget: int
    soft: float
    hard: float
    trend: list[int]
    last_action: str
    last_action_ts: datetime | None
    last_input: int
    last_cached: int
    last_output: int
    reported: bool


class GuardsRecord(BaseModel):
    model_config = DEFERRED

    status: ev.GuardrailsStatus | None
    denials: dict[str, int]
    delivered: dict[str, ProviderTally]
    last_blocked: ev.CompletionBlocked | None
    bypassed: ev.CompletionBypassed | None
    exhausted: dict[str, ev.BudgetExhausted]
    stuck: int
    sandbox: ev.CommandSandbox | None
    mcp: dict[str, McpServerTally]


class ToldRecord(BaseModel):
    model_config = DEFERRED

    denied: list[str]
    refusing: bool
    refused_tick: bool
    last_feedback: ev.Feedback | None


class FoldRecord(BaseModel):
    """Every field of :class:`ConsoleState` its fold of the log sets (``FOLDED``), typed."""

    model_config = ConfigDict(arbitrary_types_allowed=False, defer_build=True)

    provider: str
    model: str
    session: int
    turn: int
    last_seq: int
    run_started: datetime | None
    first_started: datetime | None
    last_ts: datetime | None
    ended_at: datetime | None
    outcome: str | None
    outcome_detail: str
    paused: bool
    stopping: bool
    todos: ev.TodosChanged | None
    gauge: GaugeRecord
    restart_pending: ev.RestartPending | None
    needs: Need | None
    acknowledged: bool
    feedback: list[FeedbackItem]
    experiences: list[ExperienceItem]
    guards: GuardsRecord
    told: ToldRecord
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    turns_total: int
    tool_calls: int
    masked_total: int
    completed_summary: str
    job_cost: float | None
    priced: bool | None
    price_told: bool
    retry: ev.ModelRetry | None
    last_event: Presented | None
    span_start: datetime | None
    span_end: datetime | None
    active_before: timedelta


class Blank(BaseModel):
    """The blank state the fold began from (ConsoleState's arguments but the title, which no event changes)."""

    model_config = DEFERRED

    provider: str
    model: str
    window: int
    soft: float
    hard: float


class KeptFold(BaseModel):
    """The record (the body the seal covers)."""

    model_config = DEFERRED

    version: Literal[1]
    offset: int  # bytes of the log folded: whole lines
    tail_sha256: str  # of the log's TAIL_CHECK bytes before offset
    events: int  # events folded
    messages: int  # of them, assistant messages (the conversation's "not shown" count)
    blank: Blank
    state: FoldRecord


# ConsoleState's attributes the fold never sets from the log: its title (the folder's name, given), what this
# console asked for (its own commands), its handlers.
NOT_FOLDED = frozenset({"job_title", "requested", "_handlers"})
PRIVATE = {"_span_start": "span_start", "_span_end": "span_end", "_active_before": "active_before"}


def blank_of(state: ConsoleState) -> Blank:
    g = state.gauge
    return Blank(provider=state.provider, model=state.model, window=g.window, soft=g.soft, hard=g.hard)


def record_of(state: ConsoleState) -> FoldRecord:
    g, gu, t = state.gauge, state.guards, state.told
    return FoldRecord(
        provider=state.provider, model=state.model, session=state.session, turn=state.turn, last_seq=state.last_seq,
        run_started=state.run_started, first_started=state.first_started, last_ts=state.last_ts,
        ended_at=state.ended_at, outcome=state.outcome, outcome_detail=state.outcome_detail, paused=state.paused,
        stopping=state.stopping, todos=state.todos,
        gauge=GaugeRecord(used=g.used, window=g.window, window_source=g.window_source, budget=g.budget, soft=g.soft,
                          hard=g.hard, trend=list(g.trend), last_action=g.last_action,
                          last_action_ts=g.last_action_ts, last_input=g.last_input, last_cached=g.last_cached,
                          last_output=g.last_output, reported=g.reported),
        restart_pending=state.restart_pending, needs=state.needs, acknowledged=state.acknowledged,
        feedback=list(state.feedback), experiences=list(state.experiences.values()),
        guards=GuardsRecord(status=gu.status, denials=dict(gu.denials), delivered=gu.delivered,
                            last_blocked=gu.last_blocked, bypassed=gu.bypassed, exhausted=gu.exhausted,
                            stuck=gu.stuck, sandbox=gu.sandbox, mcp=gu.mcp),
        told=ToldRecord(denied=list(t.denied), refusing=t.refusing, refused_tick=t.refused_tick,
                        last_feedback=t.last_feedback),
        input_tokens=state.input_tokens, output_tokens=state.output_tokens, cached_tokens=state.cached_tokens,
        turns_total=state.turns_total, tool_calls=state.tool_calls, masked_total=state.masked_total,
        completed_summary=state.completed_summary, job_cost=state.job_cost, priced=state.priced,
        price_told=state.price_told, retry=state.retry, last_event=state.last_event,
        span_start=state._span_start, span_end=state._span_end, active_before=state._active_before)


def restore(record: FoldRecord, into: ConsoleState) -> ConsoleState:
    """``into`` (a blank state) as the fold ``record`` keeps; its bounded collections bounded as the fold's are."""
    r = record
    into.provider = r.provider
    into.model = r.model
    into.session = r.session
    into.turn = r.turn
    into.last_seq = r.last_seq
    into.run_started = r.run_started
    into.first_started = r.first_started
    into.last_ts = r.last_ts
    into.ended_at = r.ended_at
    into.outcome = r.outcome
    into.outcome_detail = r.outcome_detail
    into.paused = r.paused
    into.stopping = r.stopping
    into.todos = r.todos
    into.restart_pending = r.restart_pending
    into.needs = r.needs
    into.acknowledged = r.acknowledged
    into.input_tokens = r.input_tokens
    into.output_tokens = r.output_tokens
    into.cached_tokens = r.cached_tokens
    into.turns_total = r.turns_total
    into.tool_calls = r.tool_calls
    into.masked_total = r.masked_total
    into.completed_summary = r.completed_summary
    into.job_cost = r.job_cost
    into.priced = r.priced
    into.price_told = r.price_told
    into.retry = r.retry
    into.last_event = r.last_event
    rg = r.gauge
    into.gauge = GaugeState(used=rg.used, window=rg.window, window_source=rg.window_source, budget=rg.budget,
                            soft=rg.soft, hard=rg.hard, trend=deque(rg.trend, maxlen=TREND_KEEP),
                            last_action=rg.last_action, last_action_ts=rg.last_action_ts, last_input=rg.last_input,
                            last_cached=rg.last_cached, last_output=rg.last_output, reported=rg.reported)
    into.feedback = deque(r.feedback, maxlen=FEEDBACK_KEEP)
    into.experiences = {item.entry_id: item for item in r.experiences[-EXPERIENCES_KEEP:]}
    gu, rgu = into.guards, r.guards
    gu.status, gu.denials, gu.delivered = rgu.status, Counter(rgu.denials), dict(rgu.delivered)
    gu.last_blocked, gu.bypassed, gu.exhausted = rgu.last_blocked, rgu.bypassed, dict(rgu.exhausted)
    gu.stuck, gu.sandbox, gu.mcp = rgu.stuck, rgu.sandbox, dict(rgu.mcp)
    told = Told()
    told.denied = deque(r.told.denied, maxlen=DENIED_KEEP)
    told.refusing, told.refused_tick, told.last_feedback = r.told.refusing, r.told.refused_tick, r.told.last_feedback
    into.told = told
    into._span_start, into._span_end, into._active_before = r.span_start, r.span_end, r.active_before
    return into


@dataclass
class Resumed:
    """A kept fold that holds for the log: the state after its first ``offset`` bytes."""

    state: ConsoleState
    offset: int
    events: int
    messages: int


def path_of(paths: JobPaths) -> Path:
    return paths.state / NAME


def _read(path: Path, limit: int) -> bytes | None:
    """A file's bytes (at most ``limit``) without following a link or waiting on a pipe; None: no regular file, or
    a longer one (the seal's own reader, one byte more to tell)."""
    data = read_record(path, limit + 1)
    return data if data is not None and len(data) <= limit else None


def tail_digest(log: Path, offset: int) -> str | None:
    """The hash of the log's :data:`TAIL_CHECK` bytes before ``offset``; None when the log does not hold ``offset``
    bytes ending in a whole line."""
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size < offset:
            return None
        start = max(0, offset - TAIL_CHECK)
        data = os.pread(fd, offset - start, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) != offset - start or (offset and not data.endswith(b"\n")):
        return None
    return hashlib.sha256(data).hexdigest()


def load(paths: JobPaths, seal: Seal, blank: ConsoleState) -> Resumed | None:
    """The kept fold of the run in ``paths``, restored onto ``blank`` (a fresh state, as the reader would fold the
    whole log into), when it holds (see the module); None otherwise: the whole log is folded, as without one."""
    data = _read(path_of(paths), MAX_BYTES)
    if data is None:
        return None
    mac, newline, body = data.partition(b"\n")
    if not newline or not seal.holds(SEAL_KIND, paths.root, body, mac.decode("ascii", "replace")):
        return None
    try:
        kept = KeptFold.model_validate_json(body)
    except (ValidationError, ValueError, RecursionError):
        return None
    if kept.blank != blank_of(blank) or tail_digest(paths.events, kept.offset) != kept.tail_sha256:
        return None
    return Resumed(restore(kept.state, blank), kept.offset, kept.events, kept.messages)


def keep(paths: JobPaths, seal: Seal, state: ConsoleState, blank: Blank, offset: int, events: int,
         messages: int) -> bool:
    """Keep ``state`` (folded from ``blank`` over the log's first ``offset`` bytes: ``events`` events, ``messages``
    of them assistant messages) for the next reader, sealed, in one atomic write; whether it was."""
    digest = tail_digest(paths.events, offset)
    if digest is None:
        return False
    try:
        body = KeptFold(version=VERSION, offset=offset, tail_sha256=digest, events=events, messages=messages,
                        blank=blank, state=record_of(state)).model_dump_json().encode()
    except ValueError:  # a state the record cannot hold (none is known): nothing is kept, readers fold the log
        return False
    mac = seal.mac(SEAL_KIND, paths.root, body)
    try:
        atomic_write_bytes(path_of(paths), mac.encode() + b"\n" + body, durable=False, tmp_dir=paths.state / "tmp")
    except OSError:
        return False
    return True


def fold_lines(state: ConsoleState, data: bytes) -> tuple[int, int]:
    """Fold the whole lines of ``data`` into ``state`` (a damaged line is passed, as every reader of the log passes
    it); the events folded and how many were assistant messages."""
    events = messages = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            e = ev.parse_event(raw)
        except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
            continue
        state.apply(e)
        events += 1
        messages += isinstance(e, ev.AssistantMessage)
    return events, messages


class FoldKeeper:
    """The runner's part that keeps the view's fold of its run (a deferred subscriber of its events: it runs on a
    thread of its own while the run waits, never in the middle of a turn). It folds the log itself, not the events
    it is handed (those only wake it): the kept fold is of the bytes a reader reads, whatever else wrote them. At
    most every :data:`KEEP_CHECK` seconds it looks at the log's size; once :data:`KEEP_EVERY` bytes were appended
    since it last kept, it folds them and keeps the fold. It starts from the fold kept already (a resumed run)."""

    def __init__(self, paths: JobPaths, seal: Seal) -> None:
        self.paths = paths
        self.seal = seal
        self.state: ConsoleState | None = None
        self.blank = blank_of(ConsoleState())
        self.offset = 0
        self.kept = 0  # the offset last kept
        self.events = 0
        self.messages = 0
        self.checked = float("-inf")

    def __call__(self, event: ev.EventBase) -> None:
        if isinstance(event, ev.RunEnded):  # its last words: kept whole (a finished run's attach folds nothing)
            self.catch_up(force=True)
            return
        now = time.monotonic()
        if now - self.checked < KEEP_CHECK:
            return
        self.checked = now
        self.catch_up()

    def catch_up(self, *, force: bool = False) -> bool:
        """Fold what the log gained and keep the fold when enough did (``force``: whatever it gained); whether a
        fold was kept."""
        if self.state is None:
            resumed = load(self.paths, self.seal, ConsoleState())
            if resumed is not None:
                self.state, self.offset, self.kept = resumed.state, resumed.offset, resumed.offset
                self.events, self.messages = resumed.events, resumed.messages
            else:
                self.state = ConsoleState()
        try:
            size = os.stat(self.paths.events).st_size
        except OSError:
            return False
        if size < self.offset:  # the log was moved aside and begun again: fold it anew
            self.state, self.offset, self.kept, self.events, self.messages = ConsoleState(), 0, 0, 0, 0
        if size - self.kept < (1 if force else KEEP_EVERY):
            return False
        try:
            with open(self.paths.events, "rb") as fh:
                fh.seek(self.offset)
                while self.offset < size:  # a slice at a time: a resumed run's long log is never held whole
                    data = fh.read(min(READ_CHUNK, size - self.offset))
                    end = data.rfind(b"\n")
                    if end < 0:
                        if len(data) < READ_CHUNK:
                            break  # the line being written: next time
                        data += fh.readline()  # a line longer than a slice
                        end = data.rfind(b"\n")
                        if end < 0:
                            break
                    events, messages = fold_lines(self.state, data[:end + 1])
                    self.offset += end + 1
                    self.events += events
                    self.messages += messages
                    fh.seek(self.offset)
        except OSError:
            return False  # looked at again at the next look (the run never waits on its view's fold)
        if self.offset == self.kept:
            return False
        if keep(self.paths, self.seal, self.state, self.blank, self.offset, self.events, self.messages):
            self.kept = self.offset
            return True
        return False


class Kept:
    """A run's kept fold as a console reads it and keeps it (console.tui.follow: an attach's first read)."""

    def __init__(self, paths: JobPaths, seal: Seal) -> None:
        self.paths = paths
        self.seal = seal

    @classmethod
    def of_operator(cls, paths: JobPaths) -> Kept | None:
        """The run's kept fold under this operator's seal (their config's data dir); None when their key cannot be
        read (nothing is kept nor believed then: the whole log is folded)."""
        from console.engine.seal import SealError
        from console.locations import read_locations

        try:
            found = read_locations()  # without building the settings' models when that is sure
            if found is None:
                from console.settings import load_settings

                found = load_settings().locations
            return cls(paths, Seal.of(found.data_dir))
        except (SealError, JobError, ValueError, OSError):  # a bad config: said by the command that loaded it first
            return None

    def load(self, blank: ConsoleState) -> Resumed | None:
        return load(self.paths, self.seal, blank)

    def keep(self, state: ConsoleState, blank: Blank, offset: int, events: int, messages: int) -> bool:
        return keep(self.paths, self.seal, state, blank, offset, events, messages)
