"""A rewind while a phase transition is open (the phase's last todo done, its next list not yet written) redoes
the phase that transition leaves: the record reopens it in the same change, and whatever main_plan.md says by
then, the list the agent writes next is that phase's, under its label; the phase after it waits for its own work.
"""

from __future__ import annotations

import json

import pytest

from console.engine import events as ev
from console.engine.operator import OperatorState
from console.engine.plan import parse_plan
from console.engine.runtime import Runtime
from console.engine.todos import TodoManager
from tests.evidence_support import do_bootstrap_work
from tests.unit.test_rewind_phase import _call  # one tool call through the registry, as the loop makes it

PLAN = ("# Plan\n\n## Phase 1: Alpha\n" + "".join(f"- [ ] a{i}\n" for i in range(5))
        + "\n## Phase 2: Beta\n" + "".join(f"- [ ] b{i}\n" for i in range(5))
        + "\n## Phase 3: Gamma\n" + "".join(f"- [ ] c{i}\n" for i in range(5)))


@pytest.fixture
def rt(make_job, clock) -> Runtime:
    paths = make_job()
    runtime = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    runtime.phases.ensure_bootstrap()
    do_bootstrap_work(runtime)
    paths.main_plan.write_text(PLAN)
    for _ in range(5):
        _call(runtime, "todo_complete")
    _call(runtime, "todo_write", todos=[f"a{i}" for i in range(5)])
    runtime.take_notices()
    return runtime


def finish_list(rt: Runtime) -> None:
    """Every task of the list through todo_complete: the phase's transition opens."""
    for _ in range(len(rt.todos.state.items)):
        _call(rt, "todo_complete")
    assert rt.todos.state.pending is not None


def operator_rewind(rt: Runtime, **args: object) -> ev.OperatorCommand:
    op = OperatorState()
    op.channel.submit("rewind", {"issue": "wrong order", **args})
    op.apply(rt)
    return [e for e in ev.read_events(rt.paths.events) if isinstance(e, ev.OperatorCommand)
            and e.status != "received"][-1]


def closed(rt: Runtime) -> list[str]:
    return [c.name for c in rt.todos.state.closed or []]


def installed(rt: Runtime) -> tuple[str, int, str]:
    st = rt.todos.state
    assert st.pending is None
    return st.kind, st.phase_number, st.phase_name


def last_completed(rt: Runtime) -> ev.PhaseTransition:
    return [e for e in ev.read_events(rt.paths.events) if isinstance(e, ev.PhaseTransition)
            and e.stage == "completed"][-1]


def test_the_open_transition_s_closing_is_taken_back_with_the_rewind(rt) -> None:
    finish_list(rt)
    assert closed(rt) == ["Alpha"]
    assert operator_rewind(rt, phase=1).status == "applied"
    assert rt.todos.state.pending.kind == "rewind" and closed(rt) == []
    started = [e for e in ev.read_events(rt.paths.events) if isinstance(e, ev.PhaseTransition)][-1]
    assert (started.kind, started.stage, started.from_phase) == ("rewind", "started", 1)
    # The list, archived when the transition opened, is archived again with the failure note the prompt names.
    assert started.archive == "phase-01-alpha-rewind.json"
    first = json.loads((rt.paths.archive / "phase-01-alpha.json").read_text())
    again = json.loads((rt.paths.archive / started.archive).read_text())
    assert (again["transition"], again["note"], again["list_archived_as"]) == (
        "rewind", "FAILED - rewind: (operator) wrong order", "phase-01-alpha.json")
    assert [(i["text"], i["done"]) for i in again["items"]] == [(i["text"], i["done"]) for i in first["items"]]
    prompt = rt.take_notices()[-1].content
    assert prompt.startswith("REWIND") and "as .console/archive/phase-01-alpha-rewind.json" in prompt
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    assert installed(rt) == ("phase", 1, "Alpha")
    moved = last_completed(rt)
    assert (moved.kind, moved.to_phase, moved.to_name) == ("rewind", 1, "Alpha")
    # then phase 1 is closed once, by its own list, and phase 2 comes next
    finish_list(rt)
    _call(rt, "todo_write", todos=[f"b{i}" for i in range(5)])
    assert installed(rt) == ("phase", 2, "Beta") and closed(rt) == ["Alpha"]


def test_the_agent_s_own_rewind_in_an_open_transition_does_the_same(rt) -> None:
    finish_list(rt)
    out = _call(rt, "todo_rewind", issue="a2 needs the other source")
    assert "now a rewind" in out.content and closed(rt) == []
    _call(rt, "todo_write", todos=["a2 from the other source", "a3", "a4", "a5", "a6"])
    assert installed(rt) == ("phase", 1, "Alpha")


def test_a_plan_already_moved_on_is_brought_back_to_the_rewound_phase(rt) -> None:
    """The agent had followed the transition's first steps (phase 1 '✓ COMPLETE', phase 2 '← CURRENT') when
    the rewind landed: the next list is still phase 1's, and the plan says so."""
    finish_list(rt)
    moved_on = (PLAN.replace("## Phase 1: Alpha", "## Phase 1: Alpha ✓ COMPLETE")
                .replace("## Phase 2: Beta", "## Phase 2: Beta ← CURRENT"))
    _call(rt, "write_file", path="main_plan.md", content=moved_on)
    operator_rewind(rt, phase=1)
    out = _call(rt, "todo_write", todos=[f"b{i}" for i in range(5)])
    assert installed(rt) == ("phase", 1, "Alpha")
    assert "the rewind redoes it" in out.content and "a rewind redoes phase 'Alpha'" in out.content
    p = parse_plan(rt.paths.main_plan.read_text())
    assert [(x.name, x.complete, x.marked_current) for x in p.phases] == [
        ("Alpha", False, True), ("Beta", False, False), ("Gamma", False, False)]


def test_a_rewind_never_skips_ahead_to_a_phase_marked_current(rt) -> None:
    """A rewind of phase 2 whose re-plan marks phase 3 current: phase 2's work was not done, so it is phase 2."""
    finish_list(rt)
    _call(rt, "todo_write", todos=[f"b{i}" for i in range(5)])
    assert installed(rt) == ("phase", 2, "Beta")
    _call(rt, "todo_complete")
    assert operator_rewind(rt).status == "applied"
    ahead = PLAN.replace("## Phase 1: Alpha", "## Phase 1: Alpha ✓ COMPLETE").replace(
        "## Phase 3: Gamma", "## Phase 3: Gamma ← CURRENT")
    _call(rt, "write_file", path="main_plan.md", content=ahead)
    out = _call(rt, "todo_write", todos=[f"c{i}" for i in range(5)])
    assert installed(rt) == ("phase", 2, "Beta") and closed(rt) == ["Alpha"]
    assert "marked phase 'Gamma' current, but a rewind redoes phase 'Beta'" in out.content
    assert (last_completed(rt).to_phase, last_completed(rt).to_name) == (2, "Beta")


def test_a_second_rewind_in_the_same_open_transition_keeps_the_record(rt) -> None:
    finish_list(rt)
    operator_rewind(rt, phase=1)
    out = _call(rt, "todo_rewind", issue="still wrong")
    assert out.content.endswith("The transition in progress is now a rewind; its instructions follow.")
    assert closed(rt) == [] and rt.todos.state.pending.issue == "still wrong"
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    assert installed(rt) == ("phase", 1, "Alpha")


def test_a_revised_phase_1_is_the_one_redone(rt) -> None:
    """The rewind's re-plan renames and splits phase 1: the first phase not done is the revision."""
    finish_list(rt)
    operator_rewind(rt)
    revised = PLAN.replace("## Phase 1: Alpha", "## Phase 1: Alpha, sequentially ← CURRENT")
    _call(rt, "write_file", path="main_plan.md", content=revised)
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    assert installed(rt) == ("phase", 1, "Alpha, sequentially")


def test_only_the_transition_s_own_closing_is_taken_back(make_job, clock) -> None:
    """Phases closed before stay closed; a checkpoint (which closes nothing) turned into a rewind reopens
    nothing."""
    todos = TodoManager()
    todos.install(["x"], kind="phase", phase_name="Alpha", phase_number=1, total_phases=3)
    todos.begin_transition("phase", clock.now(), mark_current_done=True)
    todos.install(["y"], kind="phase", phase_name="Beta", phase_number=2, total_phases=3)
    todos.begin_transition("checkpoint", clock.now())
    todos.turn_into_rewind("why", clock.now())
    assert [c.name for c in todos.state.closed or []] == ["Alpha"]
    todos.install(["y"], kind="phase", phase_name="Beta", phase_number=2, total_phases=3, done=[True])
    todos.begin_transition("phase", clock.now())
    assert [c.name for c in todos.state.closed or []] == ["Alpha", "Beta"]
    todos.turn_into_rewind("why", clock.now())
    assert [c.name for c in todos.state.closed or []] == ["Alpha"]
    assert todos.state.pending is not None and todos.state.pending.kind == "rewind"
    with pytest.raises(ValueError):
        TodoManager().turn_into_rewind("nothing open", clock.now())


def test_a_record_read_back_from_the_archives_is_taken_back_too(clock) -> None:
    """A run from before the record was kept, resumed with its phase 1 -> 2 transition open: the record read back
    from the archives (console.engine.record.from_archives) counts the archive of that transition as closing
    phase 1; a rewind then reopens it all the same."""
    from console.engine import record

    todos = TodoManager()
    todos.install(["x"], kind="phase", phase_name="Alpha", phase_number=1, total_phases=2)
    todos.begin_transition("phase", clock.now(), mark_current_done=True)
    archived = {"transition": "phase", "kind": "phase", "phase_name": "Alpha", "phase_number": 1,
                "archived_at": clock.now().isoformat(), "items": [{"text": "x", "done": True}]}
    todos.state.closed = record.from_archives([archived])
    assert [(c.name, c.number, c.by) for c in todos.state.closed] == [("Alpha", 1, "archive")]
    todos.turn_into_rewind("why", clock.now())
    assert todos.state.closed == []
