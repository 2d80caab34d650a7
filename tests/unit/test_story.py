"""Which events an operator sees (console.view.story.Told): one answer for the headless log, the console's panes
and the fleet, and one answer (console.engine.runs.liveness) for how a run stands."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest

from console.engine import events as ev
from console.engine.runs import (
    COMPLETED,
    GAVE_UP,
    GONE,
    INTERRUPTED,
    NEEDS,
    PAUSED,
    RUNNING,
    STARTING,
    STOPPED,
    Seen,
    liveness,
)
from console.headless import HeadlessLog
from console.view.state import FEEDBACK, ConsoleState
from console.view.story import DENIED_KEEP, Told

T = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)


def events() -> list[ev.EventBase]:
    """A turn with a denied call, a refused job_complete, a failed call, and a stuck detector that its feedback
    block already told."""
    return [
        ev.ToolDenied(ts=T, seq=1, session=1, turn=1, call_id="d", tool="write_file", policy="rbw",
                      reason="read first"),
        ev.ToolResult(ts=T, seq=2, session=1, turn=1, call_id="d", tool="write_file", ok=False, content="denied"),
        ev.CompletionBlocked(ts=T, seq=3, session=1, reason="todos: 2 left", stop_reason="job_complete"),
        ev.ToolResult(ts=T, seq=4, session=1, turn=1, call_id="j", tool="job_complete", ok=False, content="refused"),
        ev.ToolResult(ts=T, seq=5, session=1, turn=1, call_id="f", tool="read_file", ok=False, content="no such file"),
        ev.Feedback(ts=T, seq=6, session=1, source="stuck", message="No todo completed in 6 turns."),
        ev.StuckDetected(ts=T, seq=7, session=1, reason="No todo completed in 6 turns."),
        ev.StuckDetected(ts=T, seq=20, session=1, reason="No todo completed in 6 turns."),
        ev.TurnStarted(ts=T, seq=21, session=1, turn=2),
    ]


def test_told_says_what_no_other_line_says():
    told = Told()
    seen = [e.seq for e in events() if told.sees(e)]
    # The denial's and the refusal's error results are said on their own lines; the stuck event right after its
    # feedback block repeats it (a later one does not); a turn's start is not in the story.
    assert seen == [1, 3, 5, 6, 20]


def test_the_feedback_pane_and_the_headless_log_tell_the_same_failures():
    st = ConsoleState("job")
    changed = [st.apply(e) for e in events()]
    assert [f.seq for f in st.feedback] == [1, 3, 5, 6, 20]
    assert FEEDBACK not in changed[1] and FEEDBACK not in changed[3] and FEEDBACK not in changed[6]
    out = io.StringIO()
    log = HeadlessLog(out)
    for e in events():
        log(e)
    log.flush()
    lines = out.getvalue().splitlines()
    # One line each for the denial, the refusal, the failed call, the feedback block and the later stuck event:
    # the denied call's and the refused job_complete's error results are not failures of their own.
    assert [line.split()[0] for line in lines] == ["⊗", "↩", "✗", "◆", "⚠"]
    assert "write_file failed" not in out.getvalue() and "job_complete failed" not in out.getvalue()


def test_denied_calls_remembered_are_bounded():
    told = Told()
    for n in range(DENIED_KEEP * 3):
        told.sees(ev.ToolDenied(ts=T, seq=n, session=1, turn=1, call_id=f"c{n}", tool="t", policy="p", reason="r"))
    assert len(told.denied) == DENIED_KEEP
    last = f"c{DENIED_KEEP * 3 - 1}"
    assert not told.sees(ev.ToolResult(ts=T, seq=1, session=1, turn=1, call_id=last, tool="t", ok=False, content=""))


# -- liveness -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("stored", "pid", "gone", "detail", "seen", "state", "kind"), [
    # A process holds the lock: the log says what it does; without the log the store's word stands.
    ("running", 7, False, "", Seen(), RUNNING, "running"),
    ("running", 7, False, "", Seen(started=False), STARTING, "starting"),
    ("running", 7, False, "", Seen(paused=True), PAUSED, "paused"),
    ("running", 7, False, "", Seen(restart_pending=True), NEEDS, "needs"),
    ("running", 7, False, "", Seen(needs="stuck", paused=True), NEEDS, "needs"),
    ("awaiting approval", 7, False, "", None, "awaiting approval", "needs"),
    ("running", 7, False, "", None, RUNNING, "running"),
    # Nobody holds it: the store's live word is a run that died, unless it crashed needing its operator.
    ("running", None, False, "", None, INTERRUPTED, "interrupted"),
    ("needs you", None, False, "stuck: looping", None, INTERRUPTED, "interrupted"),
    ("needs you", None, False, "crashed: boom", None, NEEDS, "needs"),
    ("running", None, False, "", Seen(needs="crashed"), NEEDS, "needs"),
    ("running", None, False, "", Seen(needs="crashed", ended=True), INTERRUPTED, "interrupted"),
    ("gave up", None, False, "", None, GAVE_UP, "needs"),
    ("gave up", None, False, "", Seen(outcome="gave up"), NEEDS, "needs"),
    ("running", None, False, "", Seen(outcome="completed"), COMPLETED, "completed"),
    ("completed", None, False, "", None, COMPLETED, "completed"),
    ("stopped", None, False, "", None, STOPPED, "stopped"),
    ("out of budget", None, False, "", None, "out of budget", "stopped"),
    ("failed", None, False, "", None, "failed", "failed"),
    ("", None, False, "", None, "failed", "failed"),
    # A folder gone: only its row is left (whatever the store said).
    ("running", None, True, "", None, GONE, GONE),
    ("completed", None, True, "", Seen(), GONE, GONE),
])
def test_liveness_is_one_answer(stored, pid, gone, detail, seen, state, kind):
    live = liveness(stored, pid, gone=gone, detail=detail, seen=seen)
    assert (live.state, live.kind) == (state, kind)
    assert live.live == (state in (RUNNING, STARTING, PAUSED, NEEDS))


def test_a_refused_tick_is_told_once_by_its_todo_refused_line() -> None:
    from console.view import present

    refused = ev.TodoRefused(ts=T, seq=1, session=1, index=1, task="Read \x1b[31mnotes.md",
                             missing=["read notes.md with read_file(path='notes.md')"], reason="todo_complete refused")
    result = ev.ToolResult(ts=T, seq=2, session=1, turn=1, call_id="t", tool="todo_complete", ok=False,
                           content="todo_complete refused: ...")
    other = ev.ToolResult(ts=T, seq=3, session=1, turn=1, call_id="u", tool="todo_complete", ok=False,
                          content="There is no incomplete task.")
    told = Told()
    assert [told.sees(e) for e in (refused, result, other)] == [True, False, True]
    line = present.describe(refused)
    assert line is not None and line.kind == "todo-refused" and "\x1b" not in line.line
    assert "todo 1 not ticked" in line.text and "read notes.md with read_file" in line.detail
