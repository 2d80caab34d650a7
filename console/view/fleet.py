"""The fleet: every run in the jobs store, each folded from its own event log. Pure Python: no Textual here.

Each run's ``events.jsonl`` is folded with the same :class:`ConsoleState` the single-run console uses, from
the byte where the last poll stopped, so a poll of 200 idle runs is 200 ``stat`` calls. Whether a process
still runs a job is the job's run lock's answer (a run the store says is running, whose lock nobody holds,
died: it is shown as interrupted). The view gets immutable :class:`FleetRow` snapshots; the fold lives on the
poller's thread only.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from console.engine.job_files import JobPaths
from console.engine.run_lock import RunLock
from console.engine.runs import (
    COMPLETED,
    FAILED,
    FAILED_LIKE,
    GAVE_UP,
    GONE,
    INTERRUPTED,
    LIVE,
    NEEDS,
    PAUSED,
    RUNNING,
    STARTING,
    STOPPED,
    Seen,
    job_name,
    liveness,
    run_id,
)
from console.engine.store import FINISHED, JobRow, JobStore, Store, StoreError, folder_gone, open_store
from console.view.format import clip, elapsed

# The typed events, the fold and the words of each event are imported when a log is first folded (after the list's
# first frame, which shows the store's rows alone: ~45 ms of CPU before a fleet's first frame otherwise; issue 37).
if TYPE_CHECKING:
    from console.engine import events as ev
    from console.engine.seal import Seal
    from console.view import present
    from console.view.state import ConsoleState

__all__ = ["COMPLETED", "FAILED", "FAILED_LIKE", "FLEET_LIMIT", "GAVE_UP", "GONE", "INTERRUPTED", "LIVE", "NEEDS",
           "ORDER", "PAUSED", "RUNNING", "STARTING", "STOPPED", "WAITING", "Fleet", "FleetRow", "Listed", "RunFold",
           "RunSeat", "classify", "first_row", "matches", "snapshot"]

# The newest finished runs listed; every run that lives or waits for its operator is listed whatever its age.
FLEET_LIMIT = 500
STORY_TAIL = 40  # lines of a run's story a page shows (console.view.run_snapshot)
READ_CHUNK = 8 << 20  # the most of one log folded per poll: a huge log is caught up over several polls
# A tool call's line, as the engine writes it (pydantic's compact JSON): the last one before a kept fold's offset is
# found by searching the bytes, not by parsing every line.
TOOL_CALLED = b'"type":"tool_called"'
REMOTE_PAGE = 20000  # events of other machines' runs fetched from a shared store at a time

# States as the fleet shows them, most urgent first (the sort order of the list): the engine's words
# (console.engine.runs.liveness decides them). WAITING is the older name of "needs you".
WAITING = NEEDS
ORDER = {NEEDS: 0, PAUSED: 1, RUNNING: 2, STARTING: 3, INTERRUPTED: 4, FAILED: 5, STOPPED: 6, COMPLETED: 7, GONE: 8}
# The reason in the state column (20 cells: "needs you: approval"); the detail line says it in full.
NEED_SHORT = {"restart_approval": "approval", "stuck": "stuck", "budget": "budget", "completion_refused": "refused",
              "provider_down": "provider", "crashed": "crashed", "gave_up": "gave up",
              "store_down": "store", "fleet_budget": "fleet $", "mcp_question": "question"}
@dataclass(frozen=True)
class FleetRow:
    """One run as the fleet view shows it."""

    path: Path
    id: str
    name: str  # the run folder's name
    job: str  # the job's name (the folder name without the run's timestamp)
    state: str  # one of the states above, or the store's word for a failure ("out of budget")
    kind: str  # the state's family: waiting | running | paused | starting | interrupted | stopped | failed | ...
    phase: str  # "2/4", "boot", "done", ""
    phase_long: str
    ctx: float | None  # share of the prompt budget in use
    cost: float | None
    elapsed: str
    last: str  # the last event an operator would care about, one line
    detail: str  # why it ended (or the store's note)
    pending_seq: int  # the restart_pending event's seq while one waits (0: none)
    started_at: str
    pid: int | None
    # How the run's commands run: "" (confined, or no commands), "unconfined" (run --unconfined), "refused"
    # (no sandbox works there).
    sandbox: str = ""
    # What the run needs its operator for (console.engine.needs): the reason ("" while it needs nothing), its
    # message, since when (local "14:02", with the date when not today) and the asking event's seq (a new one rings).
    needs: str = ""
    needs_message: str = ""
    needs_since: str = ""
    needs_seq: int = 0
    # The machine whose run it is, for a run of another machine sharing the store ("": this one's), and its key
    # in the store (what its commands are addressed to).
    host: str = ""
    key: str = ""
    # A run of another machine whose runner holds its lease now (its pid is that machine's: ``pid`` stays None).
    leased: bool = False
    # The operator acknowledged how it ended (console.engine.acknowledge): it asks for them no more.
    acknowledged: bool = False
    # What its priced turns cost today, the operator's local day (console.view.ledger; None: nothing priced today).
    today: float | None = None

    @property
    def has_runner(self) -> bool:
        """A process runs it: here (its lock's pid) or on its own machine (a current lease)."""
        return self.pid is not None or self.leased

    @property
    def needs_label(self) -> str:
        """``restart approval``: the reason in words ("" while the run needs nothing)."""
        if not self.needs:
            return ""
        from console.view.state import need_label

        return need_label(self.needs)

    @property
    def state_text(self) -> str:
        """The state as its cell shows it: ``needs you: approval`` (the reason, short), else the state."""
        if self.kind == "needs" and self.needs:
            return f"{self.state}: {NEED_SHORT.get(self.needs) or self.needs_label}"
        return self.state

    @property
    def resume(self) -> str:
        """What ``r`` does for this run: "unpause" (a live run that is paused, or asks for its operator with
        anything but a restart, which ``a`` / ``d`` answer), "start" (a run no process runs that has not completed
        and whose folder is there), or "" (nothing)."""
        # A live run's question of an MCP server is answered (agent-console answer), never resumed: not offered.
        asks = bool(self.pending_seq) or self.needs == "mcp_question"
        if self.host:
            # Its folder is on its own machine: started there (agent-console resume ID); a live one unpauses from
            # here through the store.
            return "unpause" if self.leased and self.state in (PAUSED, NEEDS) and not asks else ""
        if self.pid is not None:
            return "unpause" if self.state in (PAUSED, NEEDS) and not asks else ""
        # With no process, a run that needs its operator crashed or its agent gave up: resuming it goes on.
        return "start" if self.state in (INTERRUPTED, STOPPED, FAILED, NEEDS, GAVE_UP) or self.state in FAILED_LIKE \
            else ""

    @property
    def ackable(self) -> bool:
        """What ``k`` acknowledges: a run of this machine no process runs, that asks for its operator (its agent
        gave up, it crashed) or failed, not acknowledged yet (console.engine.acknowledge). A live run's need is
        answered instead; another machine's run is acknowledged there, where its folder is."""
        if self.has_runner or self.host or self.acknowledged or self.state == GONE:
            return False
        return self.state == NEEDS or self.kind == "failed" or self.state in FAILED_LIKE

    @property
    def pausable(self) -> bool:
        """What ``p`` pauses: a live run at work (here, or another machine's through the store). A paused one
        unpauses with ``r``; one that waits for its operator is answered, not paused."""
        return self.has_runner and self.state in (RUNNING, STARTING)

    @property
    def need_line(self) -> str:
        """``restart approval since 14:02: the context is full...`` ("" while the run needs nothing)."""
        if not self.needs:
            return ""
        since = f" since {self.needs_since}" if self.needs_since else ""
        return f"{self.needs_label}{since}: {self.needs_message}" if self.needs_message else self.needs_label + since


class Listed(list[FleetRow]):
    """The fleet's rows, how many older finished runs the store holds beyond them (``older``), and whether every
    run's log was folded for them (``folded``; False for the first paint, the store's rows alone)."""

    def __init__(self, rows: list[FleetRow] | None = None, older: int = 0, folded: bool = True) -> None:
        super().__init__(rows or [])
        self.older = older
        self.folded = folded


class RunSeat:
    """A run of the store as the fleet knows it before its log is read: its folder and its run lock (whose holder
    says whether a process runs it)."""

    def __init__(self, row: JobRow) -> None:
        self.paths = JobPaths(Path(row.path))
        self.lock = RunLock(self.paths)


class RunFold(RunSeat):
    """One run's log folded so far (poller thread only).

    ``seal``: the operator's key. With it, the first fold starts from the run's kept view fold
    (console.view.state.kept: ``.console/view-fold.json``, kept by its runner, believed only under this key and
    for this log's bytes), as an attach does, and folds only the log after it; what the kept fold does not hold
    (the cost ledger's spend, the run's last tool call) is read from the log before it by a search of its bytes
    that parses only those events' lines (console.view.ledger.fold_log), a slice per poll."""

    def __init__(self, row: JobRow, seal: Seal | None = None) -> None:
        from console.view.ledger import Spend
        from console.view.state import ConsoleState

        super().__init__(row)
        self.state = ConsoleState(Path(row.path).name)
        self.offset = 0
        self.size = -1
        self.last = ""
        self._tool: present.Presented | None = None
        self.spend = Spend()  # the cost ledger's fold of the same events (today's spend)
        self._seal = seal  # None once the kept fold was looked for (or when there is no key)
        self._before = 0  # bytes of log the kept fold stood for: their spend and last tool call read apart
        self._read_before = 0  # of them, read so far
        self._digest: str | None = None  # of the log's bytes before _before, when the kept fold was believed

    def catch_up(self) -> bool:
        """Fold what was appended since the last call; True if anything was."""
        if self._seal is not None:
            self._resume(self._seal)
        if self._read_before < self._before:
            return self._read_kept_part()
        try:
            size = os.stat(self.paths.events).st_size
        except FileNotFoundError:
            if self.offset == 0:
                self.size = 0  # no log (yet): read to its end, nothing in it
            return False
        except OSError:
            return False
        if size == self.size:
            return False
        from console.engine import events as ev
        from console.view.ledger import Spend
        from console.view.state import ConsoleState

        if size < self.offset:  # the log was replaced (moved aside as corrupt): start over
            self.state = ConsoleState(self.paths.root.name)
            self.spend = Spend()
            self.offset = self._before = self._read_before = 0
        events, self.offset = ev.read_new(self.paths.events, self.offset, limit=READ_CHUNK)
        self.size = size if self.offset >= size else -1  # not at the end yet: read on at the next poll
        return self._apply(events)

    @property
    def read_whole(self) -> bool:
        """Whether the whole log is folded (or there is none): the run's own figures are then its whole story."""
        return self.size >= 0 and self._read_before >= self._before

    def _resume(self, seal: Seal) -> None:
        """Start from the run's kept view fold when it holds for its log (else from the log's start, as without)."""
        from console.view.state import ConsoleState
        from console.view.state.kept import load, tail_digest

        self._seal = None
        resumed = load(self.paths, seal, ConsoleState(self.paths.root.name))
        if resumed is not None:
            self.state, self.offset, self._before, self._read_before = resumed.state, resumed.offset, resumed.offset, 0
            self._digest = tail_digest(self.paths.events, resumed.offset)

    def _read_kept_part(self) -> bool:
        """One slice of the log the kept fold stands for: its spend (the ledger's events only) and its last tool
        call; True (the row may have changed)."""
        from pydantic import ValidationError

        from console.engine import events as ev
        from console.view import present
        from console.view.ledger import Spend, fold_log
        from console.view.state import ConsoleState
        from console.view.state.kept import tail_digest

        data = b""
        try:
            with open(self.paths.events, "rb") as fh:
                fh.seek(self._read_before)
                data = fh.read(min(READ_CHUNK, self._before - self._read_before))
                end = data.rfind(b"\n")
                if end < 0 and data:
                    data += fh.readline()  # a line longer than a slice
                    end = data.rfind(b"\n")
        except OSError:
            end = -1
        data = data[:end + 1]
        self._read_before += max(end, 0) + 1
        if end < 0 or (self._read_before >= self._before  # read to the end: still the log the kept fold was of?
                       and tail_digest(self.paths.events, self._before) != self._digest):
            # The log was moved aside and begun again meanwhile: what was read is another log's; fold it whole.
            self.state, self.spend, self._tool = ConsoleState(self.paths.root.name), Spend(), None
            self.offset = self._before = self._read_before = 0
            self.size = -1
            self.last = ""
            return True
        fold_log(data, self.spend)
        at = data.rfind(TOOL_CALLED)
        if at >= 0:
            line = data[data.rfind(b"\n", 0, at) + 1:data.find(b"\n", at)]
            with contextlib.suppress(ValidationError, ValueError, RecursionError):
                if isinstance(e := ev.parse_event(line), ev.ToolCalled):
                    self._tool = present.describe(e)
        self._say()
        return True

    def _apply(self, events: list[ev.EventBase]) -> bool:
        """Fold ``events`` into the state and say what the run does now; whether there were any."""
        from console.engine import events as ev
        from console.view import present

        self.state.apply_all(events)
        self.spend.add(events)
        # The newest of: what the state fold found worth saying, and the last tool call (the state leaves tool
        # calls out of its notices; in a list of runs, "read_file notes.md" is what a run is doing).
        tool = next((e for e in reversed(events) if isinstance(e, ev.ToolCalled)), None)
        if tool is not None:
            self._tool = present.describe(tool)
        self._say()
        return bool(events)

    def _say(self) -> None:
        from console.view import present

        said = [p for p in (self._tool, self.state.last_event) if p is not None]
        if said:
            self.last = present.brief(max(said, key=lambda p: p.seq), 160)


class RemoteFold(RunFold):
    """A run of another machine sharing the store: its log is the store's ``events`` table, folded from the seq
    where the last poll stopped (:meth:`Fleet._fold` fetches every run's new events in one query)."""

    def __init__(self, row: JobRow, key: str) -> None:
        from console.view.story import Told

        super().__init__(row)
        self.key = key
        self.seq = 0
        # The end of its story, as its log's tail would tell it (its log is on its own machine): what a page of
        # the run shows (console.view.run_snapshot), each event in the one presentation, kept as they come.
        self.story: deque[present.Presented] = deque(maxlen=STORY_TAIL)
        self._told = Told()

    def catch_up(self) -> bool:
        return False  # fed by apply_bodies

    def apply_bodies(self, bodies: list[tuple[int, str | None]]) -> bool:
        """Fold the store's bodies (their JSON text; None: larger than a body may be). Each is parsed with bounds
        (:func:`console.engine.events.parse_event`): one that is no event is passed over alone, as in a log."""
        from console.engine import events as ev
        from console.view import present

        events = []
        for seq, body in bodies:
            self.seq = max(self.seq, seq)
            if body is None:
                continue
            try:
                events.append(ev.parse_event(body))
            except ValueError:
                continue  # a type a newer version adds, or a body no event (damaged, hostile): as in a log
        for e in events:
            if present.in_story(e) and not self._told.said_elsewhere(e) and (p := present.describe(e)) is not None:
                self.story.append(p)
        return self._apply(events)


def classify(row: JobRow, st: ConsoleState, pid: int | None, gone: bool = False) -> tuple[str, str]:
    """(state shown, its family) for a run: the lock says whether it lives (a lease, for a run of another
    machine), the fold what it does (:func:`console.engine.runs.liveness`, the one answer every view gives)."""
    from console.view.liveness import seen_of

    live = liveness(row.status, pid, gone=gone, detail=row.detail or "", seen=seen_of(st),
                    leased=row.remote and bool(row.leased))
    return live.state, live.kind


def snapshot(row: JobRow, fold: RunFold, pid: int | None, now: datetime) -> FleetRow:
    from console.view import present

    st = fold.state
    state, kind = classify(row, st, pid, gone=pid is None and not row.remote and folder_gone(fold.paths.root))
    leased = row.remote and bool(row.leased)
    running = pid is not None or leased  # a process runs it, here or on its machine
    end = st.ended_at if (not running and st.ended_at) else (now if running else st.last_ts)
    g = st.gauge
    # The run's own log says what it cost (as `costs` counts it). The store's figure stands in while a log is still
    # being read, and for another machine's run (its log is not here); for a run of this machine whose whole log
    # holds no cost, only its zero (a run starting: its start records $0.00) does: a row (anyone's, in a shared
    # store) showed $2.00 for a run with no log, which `costs` and the title's "today" never counted.
    cost = st.job_cost
    if cost is None and (row.remote or not fold.read_whole or row.cost_usd == 0):
        cost = row.cost_usd
    detail = row.summary if state == COMPLETED else (st.outcome_detail or row.detail or "")
    if state == INTERRUPTED and not detail:
        detail = "no process runs it"
    if state == GONE:
        detail = "its folder no longer exists"
    need = st.needs if kind == "needs" else None
    phase = present.phase_short(st.todos)
    if phase == "final" and state == COMPLETED:  # done; one that stopped or gave up in its final review is "final"
        phase = "done"
    return FleetRow(
        path=fold.paths.root, id=run_id(row.path), name=fold.paths.root.name, job=job_name(fold.paths.root),
        state=state, kind=kind, phase=phase, phase_long=st.phase,
        ctx=g.pct if g.limit else None,
        cost=cost, elapsed=elapsed(st.run_started, end) if st.run_started else "", last=fold.last,
        detail=clip(detail or "", 300),
        pending_seq=st.restart_pending.seq if (st.restart_pending is not None and running) else 0,
        started_at=row.started_at, pid=pid,
        sandbox=_sandbox(st),
        needs=need.reason if need is not None else "",
        needs_message=clip(need.message, 300) if need is not None else "",
        needs_since=since_text(need.since, now) if need is not None else "",
        needs_seq=need.seq if need is not None else 0,
        host=row.host if row.remote else "",
        key=row.key if row.remote else "",
        leased=leased,
        acknowledged=st.acknowledged,
        today=fold.spend.on(now.astimezone().date()),
    )


# What a blank fold says of a run (console.view.liveness.seen_of of a ConsoleState that folded nothing).
BLANK_SEEN = Seen(started=False)


def first_row(row: JobRow, seat: RunSeat, pid: int | None, now: datetime) -> FleetRow:
    """The row :func:`snapshot` makes of a run whose log is not read yet (its fold blank), from the store's row alone,
    without the fold's modules: what the fleet's first frame lists (tests/tui/test_fleet_start.py holds the two
    equal for every kind of row)."""
    leased = row.remote and bool(row.leased)
    gone = pid is None and not row.remote and folder_gone(seat.paths.root)
    live = liveness(row.status, pid, gone=gone, detail=row.detail or "", seen=BLANK_SEEN, leased=leased)
    state, kind = live.state, live.kind
    detail = row.summary if state == COMPLETED else (row.detail or "")
    if state == INTERRUPTED and not detail:
        detail = "no process runs it"
    if state == GONE:
        detail = "its folder no longer exists"
    return FleetRow(
        path=seat.paths.root, id=run_id(row.path), name=seat.paths.root.name, job=job_name(seat.paths.root),
        state=state, kind=kind, phase="", phase_long="", ctx=None, cost=row.cost_usd, elapsed="", last="",
        detail=clip(detail or "", 300), pending_seq=0, started_at=row.started_at, pid=pid,
        host=row.host if row.remote else "", key=row.key if row.remote else "", leased=leased)


def since_text(ts: datetime, now: datetime) -> str:
    """``14:02`` (local time), ``01-14 14:02`` when that was not today."""
    local = ts.astimezone()
    return local.strftime("%H:%M") if local.date() == now.astimezone().date() else local.strftime("%m-%d %H:%M")


def _sandbox(st: ConsoleState) -> str:
    box = st.guards.sandbox
    return box.mode if box is not None and box.mode != "confined" else ""


class Fleet:
    """The runs of the jobs store, folded; :meth:`poll` brings them up to date (call it from one thread)."""

    def __init__(self, store_path: Path, now: Callable[[], datetime], limit: int = FLEET_LIMIT,
                 holder: Callable[[RunSeat], int | None] | None = None,
                 clock: Callable[[], float] = time.monotonic, url: str | None = None,
                 seal: Seal | None = None) -> None:
        """``holder``: the pid of the process running a run, or None (default: its run lock's answer).
        ``clock``: seconds, what a poll's folding ``budget`` is counted in. ``url``: a shared store's (None: the
        embedded one at ``store_path``). ``seal``: the operator's key, with which a run's first fold starts from
        its kept view fold (:class:`RunFold`; None: every log is folded from its start)."""
        self.seal = seal
        self.store_path = store_path
        self.url = url
        self.now = now
        self.clock = clock
        self.limit = limit
        self.holder = holder or (lambda fold: fold.lock.holder())
        self.folds: dict[str, RunFold] = {}
        self.rows: Listed = Listed()
        self.error = ""
        self._store: Store | None = None
        self._read: set[str] = set()  # the runs read in a round a poll's budget cut short: the next skips them

    def poll(self, fold: bool = True, budget: float | None = None) -> Listed:
        """Every run's row, most urgent first (needs you, paused, running, then ended, newest first):
        every run the store does not record as finished, whatever its age, and the ``limit`` newest finished
        ones (``older`` of the result counts the rest).

        ``fold``: bring each run's fold up to date (False: the store's rows with what is folded so far, which
        is what the first paint shows before a few hundred logs are read). ``budget``: seconds of folding this
        poll may spend (None: no bound); the logs are read most urgent first (the runs the store does not
        record as finished, then the newest), and the rest at the next poll: the result's ``folded`` says
        whether every log was caught up."""
        try:
            if self._store is None and self.url:
                self._store = open_store(self.url, self.store_path)
            elif self._store is None and self.store_path.exists():  # no database yet: no run yet
                self._store = JobStore(self.store_path)
            listed, older = self._store.list_live_and_recent(self.limit) if self._store is not None else ([], 0)
            self.error = ""
        except StoreError as exc:
            if self._store is not None:
                self._store.close()
            self._store = None
            self.error = str(exc)
            return self.rows
        except (sqlite3.Error, OSError) as exc:
            self._store = None  # opened again at the next poll (it may have been moved aside and made anew)
            self.error = f"{self.store_path}: the jobs database cannot be read ({exc})"
            return self.rows
        for row in listed if fold else ():  # a run's fold is made when its log is first read
            if _fold_key(row) not in self.folds:
                self.folds[_fold_key(row)] = (RemoteFold(row, row.key) if row.remote
                                              else RunFold(row, self.seal))
        caught_up = fold and self._fold(listed, budget)
        now = self.now()
        rows = [self._row(row, now) for row in listed]
        for gone in set(self.folds) - {_fold_key(r) for r in listed}:
            del self.folds[gone]
        rows.sort(key=lambda r: r.started_at, reverse=True)
        rows.sort(key=lambda r: ORDER.get(r.state, ORDER[FAILED]))
        self.rows = Listed(rows, older, folded=caught_up)
        return self.rows

    def _row(self, row: JobRow, now: datetime) -> FleetRow:
        run = self.folds.get(_fold_key(row))
        if run is not None:
            return snapshot(row, run, None if row.remote else self.holder(run), now)
        seat = RunSeat(row)  # no log read yet (the first frame's poll): the store's row alone
        return first_row(row, seat, None if row.remote else self.holder(seat), now)

    def _fold(self, listed: list[JobRow], budget: float | None) -> bool:
        """Catch up the logs of ``listed`` (the store's order: newest first), the runs not finished first;
        True when every one was, False when ``budget`` seconds ran out first (the next call goes on where this
        one stopped, so every log is read in turn)."""
        started = self.clock()
        if not self._fold_remote([r for r in listed if r.remote], started, budget):
            return False
        listed = [r for r in listed if not r.remote]
        order = [r.path for r in listed if r.status not in FINISHED] + [r.path for r in listed if r.status in FINISHED]
        for path in order:
            if path in self._read:
                continue
            if budget is not None and self.clock() - started >= budget:
                return False
            if self.folds[path].catch_up():
                time.sleep(0)  # let the UI thread in between two logs (the GIL): a key pressed now acts now
            self._read.add(path)
        self._read.clear()
        return True


    def _fold_remote(self, rows: list[JobRow], started: float, budget: float | None) -> bool:
        """The runs of other machines: their new events from the store, in two queries whatever their number
        (which runs' last seq moved, then the events after each fold's seq, a page at a time). False when
        ``budget`` ran out first (the next poll goes on from where each fold stopped)."""
        from console.engine.store import is_shared

        store = self._store
        if not rows or store is None or not is_shared(store):
            return True
        folds = {f.key: f for r in rows if isinstance(f := self.folds.get(_fold_key(r)), RemoteFold)}
        try:
            last = store.last_seqs(list(folds))
            behind = {k: f.seq for k, f in folds.items() if last.get(k, 0) > f.seq}
            while behind:
                if budget is not None and self.clock() - started >= budget:
                    return False
                got = store.events_of_many(behind, REMOTE_PAGE)
                by_run: dict[str, list[tuple[int, str | None]]] = {}
                for key, seq, body in got:
                    by_run.setdefault(key, []).append((seq, body))
                for key, bodies in by_run.items():
                    folds[key].apply_bodies(bodies)
                if len(got) < REMOTE_PAGE:
                    break  # every run's events after its seq came
                behind = {k: f.seq for k, f in folds.items() if last.get(k, 0) > f.seq}
        except StoreError as exc:
            self.error = str(exc)
        return True

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def _fold_key(row: JobRow) -> str:
    """A run's fold: another machine's by its store key (two machines may each have a run in a folder of the same
    path), this machine's by its folder."""
    return f"key:{row.key}" if row.remote else row.path


def matches(row: FleetRow, text: str) -> bool:
    """The filter: every word of ``text`` is in the run's id, name, state or last event (any case)."""
    hay = f"{row.id} {row.name} {row.state} {row.needs_label} {row.phase_long} {row.last}".lower()
    return all(word in hay for word in text.lower().split())
