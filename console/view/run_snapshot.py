"""One run as a page shows it, in plain strings: its state and phase, the context's pressure, what it needs, its todo
list, the feedback it was given and the tail of its story. Built from the fleet's fold of the run (the same
ConsoleState every view folds) and the tail of its log, each event in the one presentation every view uses
(console.view.present); every string through safe_text. Read on the thread that folds the run."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from pydantic import ValidationError

from console.engine import events as ev
from console.engine.text import safe_text
from console.view import present
from console.view.fleet import STORY_TAIL, FleetRow, RemoteFold, RunFold
from console.view.plan_file import read_plan
from console.view.run_offers import phase_refused
from console.view.story import Told

TAIL_BYTES = 256 * 1024  # of the log read for the story's tail (a long tool result is cut in the log already)
TAIL_LINES = STORY_TAIL
TAIL_MARGIN = 10  # story lines read beyond those shown (a line another one tells already is left out)
FEEDBACK_LINES = 8
LINE = 400  # characters of one line


def _s(text: object, limit: int = LINE) -> str:
    return safe_text(str(text or ""), one_line=True, limit=limit)


@dataclass(frozen=True)
class WaitingQuestion:
    """The question an MCP server asks the operator now (a ``mcp_question`` need): its id (what the answer names),
    the server's words, and its form's fields as the run told them (name, line), each through safe_text."""

    id: str | None
    message: str
    fields: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class RunSnapshot:
    id: str
    job: str
    state: str
    phase: str
    pressure: str  # "62% of 150k tokens (soft 70%, hard 85%)"
    cost: str
    need: str
    todos: tuple[tuple[bool, str], ...]
    todo_title: str
    feedback: tuple[tuple[str, str], ...]  # (severity, line)
    tail: tuple[tuple[str, str], ...]  # (severity, line)
    # A rewind (the operator's text: the agent re-plans the phase around it): why not now ("": it applies), and the
    # phase it names (the engine refuses it if the run is in another phase by the time it lands).
    rewind_refused: str = "its state is not read yet"
    rewind_phase: int | None = None
    # main_plan.md as the plan pane shows it (console.view.plan_file: the agent's text, read safely, bounded), or
    # why it is not shown (another machine's run: its folder is there).
    plan: str = ""
    # An MCP server's question waiting for the operator while a runner holds the run (the page's form answers it).
    question: WaitingQuestion | None = None


def snapshot(row: FleetRow, fold: RunFold | None) -> RunSnapshot:
    st = fold.state if fold is not None else None
    todos: tuple[tuple[bool, str], ...] = ()
    title = ""
    pressure = ""
    feedback: tuple[tuple[str, str], ...] = ()
    refused, phase = "no process runs it", None
    if st is not None and row.has_runner:
        no = phase_refused("rewind", st)
        refused = no.message if no is not None else ""
        t = st.todos
        phase = t.phase_number if t is not None and t.kind in ("phase", "transition") and t.phase_number > 0 else None
    if st is not None:
        if st.todos is not None:
            todos = tuple((item.done, _s(item.text)) for item in st.todos.items)
            title = _s(present.todo_list_text(st.todos))
        g = st.gauge
        if g.budget or g.window:
            budget = g.budget or g.window
            # The thresholds in the console's words (its gauge: "soft 70%  hard 85%"): soft is where masking
            # starts, hard where the wind-down comes (it said "wind down at" the soft one, "restart at" the hard).
            pressure = (f"{present.fill(g.used / budget)} of {present.tokens(budget)} tokens (soft {g.soft:.0%}, "
                        f"hard {g.hard:.0%})")
        feedback = tuple((f.severity, _s(f.message)) for f in list(st.feedback)[-FEEDBACK_LINES:])
    return RunSnapshot(id=_s(row.id, 64), job=_s(row.job, 80), state=_s(row.state_text, 40),
                       phase=_s(row.phase_long or row.phase, 120), pressure=pressure,
                       cost=present.cost(row.cost) if row.cost is not None else "", need=_s(row.need_line),
                       todos=todos, todo_title=title, feedback=feedback,
                       tail=story_tail(fold) if fold is not None else (), rewind_refused=refused,
                       rewind_phase=phase, plan=plan_of(row, fold), question=waiting_question(row, fold))


def waiting_question(row: FleetRow, fold: RunFold | None) -> WaitingQuestion | None:
    """The question the run's need asks, while a runner holds the run (it is answered by that runner only)."""
    from console.engine.questions import question_fields, question_id

    need = fold.state.needs if fold is not None else None
    if need is None or need.reason != "mcp_question" or not row.has_runner:
        return None
    return WaitingQuestion(id=question_id(need.message), message=safe_text(need.message, limit=2000),
                           fields=tuple((name, _s(line)) for name, line in question_fields(need.evidence)))


def plan_of(row: FleetRow, fold: RunFold | None) -> str:
    """The run's plan for its page: main_plan.md of its folder, or why it is not shown here."""
    if isinstance(fold, RemoteFold):
        return (f"main_plan.md is not shown: this run's folder is on {_s(row.host, 80)}, and the shared store "
                "carries its events, not its files.")
    return read_plan(row.path / "main_plan.md")


def story_tail(fold: RunFold) -> tuple[tuple[str, str], ...]:
    """The last :data:`TAIL_LINES` lines of the run's story (the events an operator sees, each once), from the last
    :data:`TAIL_BYTES` of its log: its lines parsed from the newest back, only until they hold enough of the story
    (a live page draws this each time its run moves: a busy run's 256 KB were ~1,000 events parsed for 40 lines).
    Another machine's run: from what its fold kept of the store's events (its log is on its machine)."""
    if isinstance(fold, RemoteFold):
        return tuple((p.severity, _s(present.brief(p))) for p in fold.story)
    try:  # as every reader of a log opens it: never blocking, and only a file (a named pipe there is no log)
        fd = os.open(fold.paths.events, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ()
        start = max(0, st.st_size - TAIL_BYTES)
        data = os.pread(fd, TAIL_BYTES, start)
    except OSError:
        return ()
    finally:
        os.close(fd)
    raws = data.split(b"\n")[1 if start else 0:-1]  # whole lines only: not one the cut began, nor one being written
    newest: list[tuple[ev.EventBase, present.Presented | None]] = []  # each with its line (None: none of its own)
    lines_found = 0
    for raw in reversed(raws):
        if not raw.strip():
            continue
        try:
            e = ev.parse_event(raw.decode("utf-8", "replace"))
        except (ValidationError, ValueError, RecursionError):
            continue
        p = present.describe(e) if present.in_story(e) else None
        newest.append((e, p))
        lines_found += p is not None
        if lines_found >= TAIL_LINES + TAIL_MARGIN:  # the oldest, told without what came before, are not shown
            break
    told = Told()
    lines: list[tuple[str, str]] = []
    for e, p in reversed(newest):
        if not told.said_elsewhere(e) and p is not None:
            lines.append((p.severity, _s(present.brief(p))))
    return tuple(lines[-TAIL_LINES:])


def look(rows: list[FleetRow], folds: list[RunFold], rid: str) -> RunSnapshot | None:
    """The snapshot of the run ``rid`` among the fleet's ``rows`` (None: no such run now)."""
    row = next((r for r in rows if r.id == rid), None)
    if row is None:
        return None
    fold = next((f for f in folds if f.paths.root == row.path), None)
    return snapshot(row, fold)
