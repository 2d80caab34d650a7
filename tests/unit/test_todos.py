from __future__ import annotations

import json
from datetime import UTC, datetime

from console.engine.todos import TodoItem, TodoManager, TodoState, render_layer2


class Sink:
    """Records what a manager reports: the components it changed and the files to write after the commit."""

    def __init__(self) -> None:
        self.changes: list[str] = []
        self.files: dict[str, str] = {}

    def changed(self, component: str) -> None:
        self.changes.append(component)

    def effect(self, path: str, content: str) -> None:
        self.files[path] = content

NOW = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)

SEED_DISPLAY = """\
═══════════════════════════════════════════════════════════════════
                         ACTIVE TODO LIST
═══════════════════════════════════════════════════════════════════

Phase: Requirement Extraction (2 of 4)

[x] 1. Process section 1-3
[x] 2. Process section 4-6
[ ] 3. Consolidate findings      ← CURRENT
[ ] 4. Write extraction_results.md
[ ] 5. Validate format

Progress: 2/5 tasks complete

───────────────────────────────────────────────────────────────────
INSTRUCTION: Complete task 3, then call todo_complete()
═══════════════════════════════════════════════════════════════════"""


def seed_state() -> TodoState:
    texts = ["Process section 1-3", "Process section 4-6", "Consolidate findings", "Write extraction_results.md",
             "Validate format"]
    return TodoState(kind="phase", phase_name="Requirement Extraction", phase_number=2, total_phases=4,
                     items=[TodoItem(text=t, done=i < 2) for i, t in enumerate(texts)])


def test_layer2_display_is_exactly_the_seed_format() -> None:
    assert render_layer2(seed_state()) == SEED_DISPLAY


def test_layer2_when_all_done_and_during_transition(tmp_path) -> None:
    st = seed_state()
    for i in st.items:
        i.done = True
    text = render_layer2(st)
    assert "Progress: 5/5 tasks complete" in text and "← CURRENT" not in text
    mgr = TodoManager(seed_state())
    mgr.begin_transition("phase", NOW)
    shown = mgr.render()
    assert "transition in progress" in shown
    assert "INSTRUCTION: Read main_plan.md, instructions.md and workspace_summary.md," in shown


def test_complete_current_marks_first_incomplete_and_reports_it() -> None:
    sink = Sink()
    mgr = TodoManager(sink=sink)
    mgr.install(["a", "b", "c"], kind="phase", phase_name="P", phase_number=1, total_phases=2)
    index, item = mgr.complete_current(NOW)
    assert (index, item.text, mgr.remaining) == (0, "a", 2)
    assert sink.changes == ["todos", "todos"]
    reloaded = TodoManager(TodoState.model_validate_json(mgr.state.model_dump_json()))
    assert [i.done for i in reloaded.state.items] == [True, False, False]


def test_archive_name_carries_phase_number_and_is_unique() -> None:
    sink = Sink()
    mgr = TodoManager(sink=sink)
    mgr.install(["a"], kind="phase", phase_name="Document Analysis", phase_number=3, total_phases=4)
    p, archived = mgr.begin_transition("phase", NOW)
    assert p.archive == "phase-03-document-analysis.json" and [i.text for i in archived.items] == ["a"]
    mgr.finish_transition()
    mgr.install(["b"], kind="phase", phase_name="Document Analysis", phase_number=3, total_phases=4)
    p2, _ = mgr.begin_transition("rewind", NOW, issue="broken")
    assert p2.archive == "phase-03-document-analysis-rewind.json"
    record = json.loads(sink.files[f".console/archive/{p2.archive}"])
    assert record["note"] == "FAILED - rewind: broken"
    assert [i["text"] for i in record["items"]] == ["b"]
    # A third list of the same phase gets its own name, chosen from the state (not from the disk).
    mgr.finish_transition()
    mgr.install(["c"], kind="phase", phase_name="Document Analysis", phase_number=3, total_phases=4)
    assert mgr.begin_transition("phase", NOW)[0].archive == "phase-03-document-analysis-2.json"
    replay = TodoManager(TodoState.model_validate_json(mgr.state.model_dump_json()))
    replay.finish_transition()
    replay.install(["d"], kind="phase", phase_name="Document Analysis", phase_number=3, total_phases=4)
    assert replay.begin_transition("phase", NOW)[0].archive == "phase-03-document-analysis-3.json"


def test_recover_finishes_an_older_versions_interrupted_archive() -> None:
    """State written by an older version: a transition recorded, its archive not yet written."""
    mgr = TodoManager()
    mgr.install(["a", "b"], kind="phase", phase_name="P", phase_number=1, total_phases=1)
    st = mgr.state
    for i in st.items:
        i.done = True
    from console.engine.todos import PendingTransition

    st.pending = PendingTransition(kind="phase", from_phase=1, from_name="P", archive="phase-01-p.json",
                                   started_at=NOW)
    sink = Sink()
    again = TodoManager(TodoState.model_validate_json(st.model_dump_json()), sink=sink)
    assert list(sink.files) == [".console/archive/phase-01-p.json"]
    assert again.state.items == [] and again.state.archived
    # Loading the result once more changes nothing: recovery is idempotent.
    sink2 = Sink()
    TodoManager(TodoState.model_validate_json(again.state.model_dump_json()), sink=sink2)
    assert sink2.files == {} and sink2.changes == []
