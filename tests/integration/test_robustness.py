"""Edge cases found in review: crash windows, hand edits, hostile paths, commands at the wrong moment."""

from __future__ import annotations

import json
import os

from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.supervisor import Supervisor
from console.engine.todos import TodoManager, TodoState
from console.engine.tools import ToolOutcome, default_registry
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import run_settings
from tests.evidence_support import do_bootstrap_work

PLAN = "# Plan\n\n## Phase 1: Alpha\n" + "".join(f"- [ ] a{i}\n" for i in range(5)) + \
       "\n## Phase 2: Beta\n" + "".join(f"- [ ] b{i}\n" for i in range(5))


def _runtime(paths, clock) -> Runtime:
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    rt.phases.ensure_bootstrap()
    do_bootstrap_work(rt)  # the work the bootstrap's tasks name (console.engine.evidence)
    return rt


def _call(rt, name, **args) -> ToolOutcome:
    reg = default_registry()
    parsed = reg.parse(ToolCall(id="x", name=name, arguments=json.dumps(args)))
    return parsed if isinstance(parsed, ToolOutcome) else reg.run(rt, *parsed)


def test_no_saved_state_is_a_finished_list_without_its_transition(make_job, clock, monkeypatch) -> None:
    """The last completion and the transition it opens are one write: no crash can land between them."""
    saved = []
    original = TodoManager.save

    def recording(self) -> None:
        original(self)
        saved.append(self.state.model_copy(deep=True))

    monkeypatch.setattr(TodoManager, "save", recording)
    paths = make_job("quickstart")
    assert Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock).run().ok
    stuck = [s for s in saved if s.kind in ("bootstrap", "phase") and s.items and s.current_index is None
             and s.pending is None]
    assert stuck == [] and len(saved) > 20


def todos_of(paths) -> TodoState:
    return TodoState.model_validate_json(paths.todos.read_text())


def test_a_finished_list_left_by_an_older_crash_moves_on_at_start(make_job, clock) -> None:
    """todos.json of an older version (no journal): a finished list with no transition open moves on."""
    paths = make_job("quickstart")
    mgr = TodoManager()
    mgr.install(["a", "b"], kind="bootstrap", phase_name="Bootstrap", phase_number=0, total_phases=0,
                done=[True, True])
    paths.state.mkdir()
    paths.todos.write_text(mgr.state.model_dump_json())
    paths.main_plan.write_text(PLAN)
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock, script=[T(error="stop")]), clock=clock)
    sup.run()
    st = todos_of(paths)
    assert st.pending is not None and st.pending.kind == "bootstrap"
    assert (paths.archive / "phase-00-bootstrap.json").exists()


def test_job_complete_is_committed_before_it_is_announced(make_job, clock, tmp_path) -> None:
    from console.engine.store import JobStore

    paths = make_job("quickstart")
    store = JobStore(tmp_path / "jobs.db")
    assert Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock, store=store).run().ok
    # a kill -9 after job_complete but before the turn's checkpoint commit: the journal says not done
    paths.checkpoint.unlink()
    store.ended(paths.root, "failed", clock.now(), "simulated")
    again = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock, store=store).run()
    assert again.ok and again.detail == "the job was already complete"
    assert store.get(paths.root).status == "completed"
    assert sum(1 for e in ev.read_events(paths.events) if e.type == "job_completed") == 1


def test_plan_is_written_before_the_new_todos(make_job, clock) -> None:
    paths = make_job()
    rt = _runtime(paths, clock)
    paths.main_plan.write_text(PLAN)
    order = []
    write_plan, install = rt.write_plan, rt.todos.install
    rt.write_plan = lambda *a, **k: (order.append("plan"), write_plan(*a, **k))[1]
    rt.todos.install = lambda *a, **k: (order.append("todos"), install(*a, **k))[1]
    for _ in range(5):
        _call(rt, "todo_complete")
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    assert order == ["plan", "todos"]


def test_commands_sent_mid_turn_wait_for_the_turn_boundary(make_job, clock) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    sent = []

    def hook(e: ev.EventBase) -> None:
        if isinstance(e, ev.TextDelta) and e.turn == 16 and not sent:
            sent.append(e.seq)
            sup.force_checkpoint()

    sup.subscribe(hook)
    assert sup.run().ok
    evs = list(ev.read_events(paths.events))
    received = next(e for e in evs if isinstance(e, ev.OperatorCommand) and e.status == "received")
    turn16_results = [e.seq for e in evs if isinstance(e, ev.ToolResult) and e.turn == 16]
    assert turn16_results and received.seq > max(turn16_results)
    assert all(e.ok for e in evs if isinstance(e, ev.ToolResult) and e.turn == 16)


def test_symlinks_cannot_reach_outside_or_into_harness_state(make_job, clock, tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("# TOP SECRET\nAPI_KEY=sk-live-123\n")
    paths = make_job()
    rt = _runtime(paths, clock)
    os.symlink(secret, paths.root / "data.md")
    os.symlink(paths.state, paths.root / "state")
    assert "sk-live" not in _call(rt, "search_files", pattern="API_KEY").content
    assert "data.md" not in _call(rt, "list_files").content
    out = _call(rt, "write_file", path="state/todos.json", content="{}")
    assert not out.ok and "is refused" in out.content
    assert not _call(rt, "read_file", path=".CONSOLE/todos.json").ok
    _call(rt, "generate_workspace_summary")
    assert "TOP SECRET" not in paths.workspace_summary.read_text()


def test_bad_paths_are_tool_errors_not_crashes(make_job, clock) -> None:
    paths = make_job()
    rt = _runtime(paths, clock)
    seen = []
    rt.events.subscribe(seen.append)
    assert "NUL" in _call(rt, "write_file", path="a\x00b.md", content="x").content
    assert "at most 255 bytes" in _call(rt, "write_file", path="x" * 300 + ".md", content="x").content
    out = _call(rt, "write_file", path="instructions.md/x.md", content="x")
    assert not out.ok and "Check the path" in out.content
    assert not any(e.type == "error" for e in seen)


def test_search_is_stopped_by_its_deadline(make_job, clock, monkeypatch) -> None:
    from console.engine.tools import search_files

    monkeypatch.setattr(search_files, "SEARCH_SECONDS", 0.0)
    rt = _runtime(make_job(), clock)
    out = _call(rt, "search_files", pattern="(a+)+$")
    assert not out.ok and "was stopped" in out.content


def test_a_phase_inserted_by_hand_does_not_get_marked_complete(make_job, clock) -> None:
    paths = make_job()
    rt = _runtime(paths, clock)
    paths.main_plan.write_text(PLAN)
    for _ in range(5):
        _call(rt, "todo_complete")
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])  # phase 1 Alpha
    for _ in range(5):
        _call(rt, "todo_complete")
    _call(rt, "todo_write", todos=[f"b{i}" for i in range(5)])  # phase 2 Beta
    # the operator inserts a phase before Beta while the agent works on Beta
    text = paths.main_plan.read_text().replace("## Phase 2: Beta", "## Phase 2: Hotfix\n- [ ] h1\n\n## Phase 3: Beta")
    paths.main_plan.write_text(text)
    for _ in range(5):
        _call(rt, "todo_complete")
    out = _call(rt, "todo_write", todos=["h1", "h2", "h3", "h4", "h5"])
    plan = paths.main_plan.read_text()
    assert "## Phase 3: Beta ✓ COMPLETE" in plan  # the phase the agent finished, found by name
    assert "## Phase 2: Hotfix ← CURRENT\n- [ ] h1" in plan  # the inserted one is next, not ticked
    assert "Phase 2 'Hotfix' (2 of 3)" in out.content


def test_operator_checkpoint_and_rewind_are_refused_during_bootstrap(make_job, clock) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    fired = []

    def hook(e: ev.EventBase) -> None:
        if isinstance(e, ev.TurnStarted) and e.turn == 2 and not fired:
            fired.append(1)
            sup.force_checkpoint()
            sup.rewind("nope")

    sup.subscribe(hook)
    assert sup.run().ok
    rejected = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand) and
                e.status == "rejected"]
    assert [(e.command, e.detail) for e in rejected] == [
        ("checkpoint", "the job is still bootstrapping: there is no plan to re-orient to yet"),
        ("rewind", "the job is still bootstrapping: there is no plan to re-orient to yet")]


def test_rewind_during_an_open_transition_becomes_a_rewind(make_job, clock) -> None:
    paths = make_job()
    rt = _runtime(paths, clock)
    paths.main_plan.write_text(PLAN)
    for _ in range(5):
        _call(rt, "todo_complete")
    _call(rt, "todo_write", todos=[f"a{i}" for i in range(5)])
    for _ in range(5):
        _call(rt, "todo_complete")
    rt.take_notices()
    assert rt.todos.state.pending.kind == "phase"
    rt.phases.rewind("(operator) Beta must come before Alpha's review")
    assert rt.todos.state.pending.kind == "rewind"
    (notice,) = rt.take_notices()
    assert notice.content.startswith("REWIND") and "Beta must come before" in notice.content
    assert not any(not t.success for t in rt.memory.state.completed_tasks)  # no bogus failed task


def test_the_run_lock_is_exclusive(make_job) -> None:
    paths = make_job()
    a, b = RunLock(paths), RunLock(paths)
    assert a.acquire()
    assert not b.acquire()
    assert b.holder() == os.getpid()
    a.release()
    assert b.holder() is None and b.acquire()
    b.release()


def test_replayed_turns_with_a_rewind_in_bootstrap_still_plan(make_job, run_job) -> None:
    """An agent may rewind during bootstrap; its next todo_write installs phase 1 from the plan."""
    paths = make_job()
    script = [T(calls=[C(name="write_file", arguments={"path": "main_plan.md", "content": PLAN})]),
              T(calls=[C(name="todo_rewind", arguments={"issue": "planning differently"})]),
              T(calls=[C(name="todo_write", arguments={"todos": [f"a{i}" for i in range(5)]})]),
              T(error="end")]
    run_job(paths, script)
    st = todos_of(paths)
    assert (st.kind, st.phase_name, st.phase_number) == ("phase", "Alpha", 1)
