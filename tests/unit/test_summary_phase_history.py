"""The previous summary (Layer 4) the harness writes at each compaction lists every phase once, with its latest
outcome: a phase redone after a rewind is one line that says it was redone and why, never the list the rewind
failed, its failure copy and the redo one after another (which read as the phase done two or three times, and, in
the archives' name order, the redo before the failure).

The record read back from an older run's archives (console.engine.record.from_archives) shares the cause: the
list a rewind took back is no closed phase.
"""

from __future__ import annotations

import pytest

from console.engine import record
from console.engine.context.summary import archived_phases, build_summary, phase_history
from console.engine.runtime import Runtime
from console.engine.todos import TodoManager
from tests.unit.test_rewind_open_transition import finish_list, operator_rewind
from tests.unit.test_rewind_open_transition import rt as rt  # a fixture: phase 1 "Alpha" under way
from tests.unit.test_rewind_phase import _call


def phase_lines(rt: Runtime) -> list[str]:
    text = build_summary(rt.paths, rt.workspace, rt.clock.now())
    return [line for line in text.splitlines() if line.startswith("- Phase ")]


def test_a_phase_redone_after_a_rewind_in_its_transition_is_listed_once_with_its_redo(rt) -> None:
    finish_list(rt)  # phase 1's transition opens (its list archived as done)...
    operator_rewind(rt, phase=1)  # ...and is turned into a rewind (archived again, with the failure note)
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    assert phase_lines(rt) == [
        "- Phase 0 'Bootstrap': 5/5 tasks done",
        "- Phase 1 'Alpha': 5/5 tasks done - FAILED - rewind: (operator) wrong order",
    ]
    finish_list(rt)  # the redo: archived as phase-01-alpha-2.json, which sorts before the failure's name
    assert sorted(a["file"] for a in archived_phases(rt.paths)) == [
        "phase-00-bootstrap.json", "phase-01-alpha-2.json", "phase-01-alpha-rewind.json", "phase-01-alpha.json"]
    _call(rt, "todo_write", todos=[f"b{i}" for i in range(5)])
    for _ in range(2):
        _call(rt, "todo_complete")
    _call(rt, "todo_rewind", issue="b2 needs | the other source")  # phase 2, mid-way: its redo is under way
    _call(rt, "todo_write", todos=[f"b{i}" for i in range(5)])
    assert phase_lines(rt) == [
        "- Phase 0 'Bootstrap': 5/5 tasks done",
        "- Phase 1 'Alpha': 5/5 tasks done (redone after a rewind: (operator) wrong order)",
        "- Phase 2 'Beta': 2/5 tasks done - FAILED - rewind: b2 needs | the other source",
    ]


def test_each_rewind_is_counted_and_the_last_one_named(rt) -> None:
    for issue in ("first try", "second try"):
        _call(rt, "todo_complete")
        _call(rt, "todo_rewind", issue=issue)
        _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    finish_list(rt)
    assert phase_lines(rt)[1:] == ["- Phase 1 'Alpha': 5/5 tasks done (redone after 2 rewinds: second try)"]


def test_a_checkpointed_phase_is_one_line_its_latest_list() -> None:
    base = {"kind": "phase", "phase_name": "Alpha", "phase_number": 1}
    archives = [
        {**base, "file": "phase-01-alpha-checkpoint.json", "transition": "checkpoint", "note": "",
         "archived_at": "2026-01-01T10:00:00+00:00", "items": [{"done": True}, {"done": False}]},
        {**base, "file": "phase-01-alpha.json", "transition": "phase", "note": "",
         "archived_at": "2026-01-01T11:00:00+00:00", "items": [{"done": True}]},
    ]
    assert [(a["file"], rewinds) for a, rewinds in phase_history(archives)] == [("phase-01-alpha.json", [])]


@pytest.mark.parametrize("at", ["not a time", None])
def test_archives_without_a_readable_time_keep_their_name_order(at: str | None) -> None:
    """An archive from an older version, or hand-edited: nothing is dropped and nothing raises."""
    archives = [
        {"file": "phase-01-alpha-rewind.json", "transition": "rewind", "kind": "phase", "phase_name": "Alpha",
         "phase_number": 1, "note": "FAILED - rewind: why", "archived_at": "2026-01-01T10:00:00"},
        {"file": "phase-01-alpha.json", "transition": "phase", "kind": "phase", "phase_name": " alpha ",
         "phase_number": 1, "note": "", "archived_at": at},
        {"file": "phase-02-beta.json", "transition": "phase", "kind": "phase", "phase_name": "Beta",
         "phase_number": 2, "archived_at": "2026-01-01T09:00:00+00:00"},
    ]
    assert [(a["file"], r) for a, r in phase_history(archives)] == [("phase-01-alpha.json", ["why"]),
                                                                    ("phase-02-beta.json", [])]


def test_the_record_read_back_from_archives_leaves_out_a_list_a_rewind_took_back(rt) -> None:
    """An older run (no record of closed phases) resumed after phase 1 was redone in its open transition: phase 1
    was closed once (by the redo), so a rewind of the redo's transition reopens it."""
    finish_list(rt)
    operator_rewind(rt, phase=1)
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    finish_list(rt)
    closed = record.from_archives(archived_phases(rt.paths))
    assert [(c.name, c.number) for c in closed] == [("Alpha", 1)]
    todos = TodoManager(rt.todos.state.model_copy(update={"closed": closed}))
    todos.turn_into_rewind("again", rt.clock.now())
    assert todos.state.closed == []


def section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line]


def test_workspace_summary_lists_a_redone_phase_s_notes_once(rt) -> None:
    """workspace_summary.md after phase 1 was redone: the redo recorded the same note and accomplishment again,
    word for word; each is listed once, where it was last recorded, and says it was recorded twice."""
    def work_phase_1() -> None:
        _call(rt, "add_note", text="inputs: three meeting notes")
        _call(rt, "add_accomplishment", text="Reviewed the inputs")
        finish_list(rt)

    work_phase_1()
    operator_rewind(rt, phase=1)
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    _call(rt, "add_note", text="bullet lists only")
    work_phase_1()
    _call(rt, "generate_workspace_summary")
    text = rt.paths.workspace_summary.read_text()
    assert section(text, "Notes") == ["- Rewind: (operator) wrong order", "- bullet lists only",
                                      "- inputs: three meeting notes (recorded 2 times)"]
    assert section(text, "Accomplishments") == ["- Reviewed the inputs (recorded 2 times)"]
    # The record keeps every entry (the previous summary reads it the same way).
    assert rt.workspace.record.notes.count("inputs: three meeting notes") == 2
    previous = build_summary(rt.paths, rt.workspace, rt.clock.now())
    assert previous.count("inputs: three meeting notes") == 1


def test_the_order_is_the_recorded_one_not_the_clock_s(rt) -> None:
    """A run resumed in another process (or on another machine) may stamp a redone step earlier than the one
    before it: the archives carry their place in the run, and that decides which list of a phase is its latest."""
    finish_list(rt)
    operator_rewind(rt, phase=1)
    archives = archived_phases(rt.paths)
    assert [(a["file"], a["archive_seq"]) for a in archives] == [
        ("phase-00-bootstrap.json", 1), ("phase-01-alpha-rewind.json", 3), ("phase-01-alpha.json", 2)]
    for a in archives:  # every clock backwards
        a["archived_at"] = f"2026-01-01T10:00:{60 - a['archive_seq']:02d}+00:00"
    assert [(a["file"], r) for a, r in phase_history(archives)] == [("phase-00-bootstrap.json", []),
                                                                    ("phase-01-alpha-rewind.json", [])]
