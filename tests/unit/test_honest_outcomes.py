"""Issue 19, point 1-3: "completed" means the harness's own record shows the plan done.

Driven through the agent's tools on a Runtime, as a hostile or a careless agent would call them: ticked boxes in
main_plan.md, todo_write lists that say "done", job_complete during a transition, a stale or empty deliverable,
and seed 000's own final phase ("... Call job_complete()") and its unrecoverable case (giving up).
"""

from __future__ import annotations

import json
import os
from datetime import datetime

import pytest

from console.engine import events as ev
from console.engine import record
from console.engine.loop import ShutdownReason
from console.engine.messages import ToolCall
from console.engine.plan import parse_plan
from console.engine.runtime import Runtime
from console.engine.state import JobOutcome
from console.engine.supervisor import outcome_of, status_for
from console.engine.todos import TodoState
from console.engine.tools import ToolOutcome, default_registry
from console.outcome import EXIT_FAILED, EXIT_GAVE_UP, EXIT_OK, EXIT_RUN_FAILED, EXIT_STOPPED, exit_code_for
from tests.evidence_support import do_bootstrap_work

REG = default_registry()
STEPS = [f"Step {i}" for i in range(1, 6)]
FINAL = ["Verify all deliverables", "Generate summary report", "Call job_complete()"]


def plan(*, work_done: bool = False, final_done: bool = False, final: bool = True) -> str:
    box = "x" if work_done else " "
    text = "# Execution Plan\n\n## Phase 1: Work" + (" ✓ COMPLETE" if work_done else "") + "\n"
    text += "".join(f"- [{box}] {s}\n" for s in STEPS)
    if final:
        fbox = "x" if final_done else " "
        text += "\n## Phase 2: Final Review" + (" ✓ COMPLETE" if final_done else "") + "\n"
        text += "".join(f"- [{fbox}] {s}\n" for s in FINAL)
    return text


@pytest.fixture
def rt(make_job, clock) -> Runtime:
    paths = make_job(files={"input.md": "# Input\n"})
    r = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    r.seen = []  # type: ignore[attr-defined]
    r.events.subscribe(r.seen.append)  # type: ignore[attr-defined]
    r.guardrails.start(clock.now())  # the job's first start: deliverables must be written after it
    r.phases.ensure_bootstrap()
    do_bootstrap_work(r)
    return r


def call(rt: Runtime, name: str, **args: object) -> ToolOutcome:
    parsed = REG.parse(ToolCall(id="c", name=name, arguments=json.dumps(args)))
    return parsed if isinstance(parsed, ToolOutcome) else REG.run(rt, *parsed)


def seen(rt: Runtime, kind: type[ev.EventBase]) -> list:
    return [e for e in rt.seen if isinstance(e, kind)]  # type: ignore[attr-defined]


def bootstrap(rt: Runtime, text: str) -> None:
    """The bootstrap, honestly: the plan written, each todo completed through todo_complete."""
    assert call(rt, "write_file", path="main_plan.md", content=text).ok
    for _ in range(5):
        assert call(rt, "todo_complete").ok
    assert rt.todos.state.pending is not None and rt.todos.state.pending.kind == "bootstrap"


def work_phase(rt: Runtime) -> None:
    assert call(rt, "todo_write", todos=STEPS).ok
    assert rt.todos.state.phase_name == "Work"
    for _ in STEPS:
        assert call(rt, "todo_complete").ok


def complete(rt: Runtime, confidence: float = 0.9, notes: str = "", deliverables: tuple[str, ...] = ()
             ) -> ToolOutcome:
    return call(rt, "job_complete", summary="Done", deliverables=list(deliverables), confidence=confidence,
                notes=notes)


# -- the exploit of the issue: boxes the agent ticked itself ---------------------------------------------------------
def test_ticked_boxes_and_a_self_ticked_todo_list_complete_nothing(rt) -> None:
    (rt.paths.root / "report.md").write_text("stub\n")
    assert call(rt, "write_file", path="main_plan.md", content=plan(work_done=True, final_done=True)).ok
    wrote = call(rt, "todo_write", todos=[{"task": i.text, "done": True} for i in rt.todos.state.items])
    # todo_write never marks a task done: the list stays open, and the agent is told why.
    assert wrote.ok and "5 tasks marked done were kept open" in wrote.content and "todo_complete" in wrote.content
    assert rt.todos.state.done_count == 0 and rt.todos.state.pending is None
    refused = complete(rt, 0.99, deliverables=("report.md",))
    assert not refused.ok and rt.outcome is None and not seen(rt, ev.JobCompleted)
    (blocked,) = seen(rt, ev.CompletionBlocked)
    assert blocked.checker == "protocol" and "the bootstrap is not finished" in blocked.feedback


def test_a_plan_marked_complete_is_not_the_record_and_its_phases_are_worked(rt) -> None:
    bootstrap(rt, plan(work_done=True))  # the agent marked phase 1 complete before doing it
    out = call(rt, "todo_write", todos=STEPS)
    # The first phase the harness has not closed is next, whatever the plan says; its marks are cleared.
    assert out.ok and rt.todos.state.phase_name == "Work" and rt.todos.state.phase_number == 1
    assert "marked phase 'Work' complete, but its todo list was never worked" in out.content
    reread = parse_plan((rt.paths.root / "main_plan.md").read_text())
    assert not reread.phases[0].complete and reread.phases[0].marked_current
    assert record.self_marked(reread, rt.todos.state) == []


def test_job_complete_while_a_transition_is_pending_is_refused_with_the_reason(rt) -> None:
    bootstrap(rt, plan())
    refused = complete(rt, 0.95)
    assert not refused.ok and "a bootstrap transition after the bootstrap is in progress" in refused.content
    assert rt.outcome is None and rt.todos.state.pending is not None


def test_a_deliverable_must_be_non_empty_and_written_during_the_job(rt) -> None:
    old = rt.paths.root / "old.md"
    old.write_text("written long ago\n")
    os.utime(old, (946684800, 946684800))  # 2000-01-01: before the job's first start
    (rt.paths.root / "empty.md").write_text("")
    out = complete(rt, 0.9, deliverables=("old.md", "empty.md", "missing.md"))
    assert not out.ok
    assert "old.md was not written during this job" in out.content and "empty.md is empty" in out.content
    assert "missing.md does not exist" in out.content
    assert not seen(rt, ev.CompletionBlocked)  # the files, not a premature stop: nothing counted


# -- seed 000's final phase, as written --------------------------------------------------------------------------
def test_seed_000s_final_phase_ends_with_the_job_complete_call_itself(rt) -> None:
    (rt.paths.root / "out.md").write_text("# Out\n")
    bootstrap(rt, plan())
    work_phase(rt)
    assert [c.name for c in rt.todos.state.closed or []] == ["Work"]
    assert call(rt, "todo_write", todos=FINAL).ok
    assert (rt.todos.state.kind, rt.todos.state.phase_name) == ("phase", "Final Review")
    assert call(rt, "todo_complete").ok and call(rt, "todo_complete").ok
    # Ticking "Call job_complete()" is not the job's end: the call is, and it is told so (nothing counted).
    tick = call(rt, "todo_complete")
    assert not tick.ok and "is done by calling job_complete" in tick.content
    done = complete(rt, 0.9, deliverables=("out.md",))
    assert done.ok and done.end_session and rt.outcome is not None and not rt.outcome.gave_up
    assert not seen(rt, ev.CompletionBlocked)
    # No second, system-made final list; the phase is closed by the call and marked so in the plan.
    assert not [e for e in seen(rt, ev.TodosChanged) if e.reason == "job_completion"]
    assert [(c.name, c.by) for c in rt.todos.state.closed or []] == [("Work", "transition"),
                                                                      ("Final Review", "job_complete")]
    assert all(i.done for i in rt.todos.state.items)
    assert parse_plan((rt.paths.root / "main_plan.md").read_text()).all_complete
    assert rt.guards.unmet() == []
    (completed,) = seen(rt, ev.JobCompleted)
    assert completed.unmet == []


def test_a_plan_without_a_final_phase_gets_the_system_final_list_once(rt) -> None:
    bootstrap(rt, plan(final=False))
    work_phase(rt)
    # No phase left in the record: seed 000's edge case, the final todos are injected.
    assert rt.todos.state.kind == "completion" and [i.text for i in rt.todos.state.items] == FINAL
    assert call(rt, "todo_complete").ok and call(rt, "todo_complete").ok
    assert complete(rt, 0.9).ok


# -- seed 000's unrecoverable case: giving up ----------------------------------------------------------------------
def test_giving_up_needs_notes_and_is_accepted_at_any_time(rt) -> None:
    bootstrap(rt, plan())  # a transition is pending: a completion would be refused, giving up is not
    terse = complete(rt, 0.2, notes="no")
    assert not terse.ok and "say why in notes" in terse.content and rt.outcome is None
    assert not seen(rt, ev.CompletionBlocked)
    out = complete(rt, 0.2, notes="The API the job needs answers 403 to every call; a human must renew the key.")
    assert out.ok and out.end_session and rt.outcome is not None and rt.outcome.gave_up
    (gave,) = seen(rt, ev.JobGaveUp)
    assert gave.confidence == 0.2 and "403" in gave.notes and gave.unmet and not seen(rt, ev.JobCompleted)


def test_the_low_confidence_bound_is_the_jobs_setting(rt) -> None:
    rt.guardrails.low_confidence = 0.0  # [guardrails] low_confidence = 0: no confidence counts as giving up
    out = complete(rt, 0.1, notes="short")
    assert not out.ok and "job_complete was refused" in out.content and rt.outcome is None


def test_a_resumed_give_up_goes_on_with_the_operators_word(rt) -> None:
    complete(rt, 0.0, notes="Nothing in the folder can be parsed; the input format is unknown to me.")
    assert rt.job_done
    before = rt.reopen_outcome()
    assert before is not None and before.gave_up and rt.outcome is None and not rt.job_done
    (notice,) = rt.take_notices()
    assert "resumed the job after you gave up" in notice.content and "input format" in notice.content
    assert rt.reopen_outcome() is None  # once


# -- the record read back, and the outcomes ---------------------------------------------------------------------
def test_an_older_runs_closed_phases_are_read_back_from_its_archives() -> None:
    archives = [
        {"transition": "bootstrap", "kind": "bootstrap", "phase_name": "Bootstrap", "archived_at":
         "2026-01-01T10:00:00+00:00", "items": [{}] * 5},
        {"transition": "phase", "kind": "phase", "phase_name": "Beta", "phase_number": 2, "archived_at":
         "2026-01-01T12:00:00+00:00", "items": [{}] * 6},
        {"transition": "phase", "kind": "phase", "phase_name": "Alpha", "phase_number": 1, "archived_at":
         "2026-01-01T11:00:00+00:00", "items": [{}] * 5},
        {"transition": "rewind", "kind": "phase", "phase_name": "Gamma", "archived_at": "2026-01-01T13:00:00"},
        {"transition": "phase", "kind": "phase", "phase_name": "Bad", "archived_at": "not a time"},
    ]
    closed = record.from_archives(archives)
    assert [(c.name, c.number, c.tasks, c.by) for c in closed] == [("Alpha", 1, 5, "archive"),
                                                                   ("Beta", 2, 6, "archive")]
    state = TodoState(kind="completion", closed=closed, items=[])
    assert record.unmet(state, parse_plan("## Phase 1: alpha\n- [ ] a\n## Phase 2: BETA\n- [ ] b\n")) == []


def test_the_record_names_what_is_left() -> None:
    # Phase One is ticked in the plan, but no transition closed it; Two is the list under way.
    state = TodoState(kind="phase", phase_name="Two", closed=[])
    left = record.unmet(state, parse_plan("## Phase 1: One\n- [x] a\n## Phase 2: Two\n- [ ] b\n"))
    assert left == ["2 phases of main_plan.md have not been worked through their todo list: 'One', 'Two'"]
    assert record.unmet(state, None) == ["main_plan.md does not exist"]
    assert "cannot be checked (no phases)" in record.unmet(state, None, "no phases")[0]


@pytest.mark.parametrize(("reason", "outcome", "unmet", "ended", "status", "code"), [
    (ShutdownReason.JOB_COMPLETE, JobOutcome(summary="s", confidence=0.9), [], "completed", "completed", EXIT_OK),
    # a job_complete in a deadline's wrap-up turn, unchecked: completed only if the record bears it out
    (ShutdownReason.BUDGET_EXHAUSTED, JobOutcome(summary="s", confidence=0.9), [], "completed", "completed", EXIT_OK),
    (ShutdownReason.BUDGET_EXHAUSTED, JobOutcome(summary="s", confidence=0.9), ["x"], "incomplete", "out of budget",
     EXIT_FAILED),
    # a free stop, and a job_complete a free stop let through, are what the record says
    (ShutdownReason.AGENT_STOPPED, None, [], "completed", "completed", EXIT_OK),
    (ShutdownReason.AGENT_STOPPED, None, ["x"], "incomplete", "incomplete", EXIT_FAILED),
    (ShutdownReason.JOB_COMPLETE, JobOutcome(summary="s", confidence=0.9), ["x"], "incomplete", "incomplete",
     EXIT_FAILED),
    (ShutdownReason.GAVE_UP, JobOutcome(summary="s", confidence=0.1, gave_up=True), ["x"], "gave_up", "gave up",
     EXIT_GAVE_UP),
    (ShutdownReason.USER_SHUTDOWN, None, ["x"], "incomplete", "stopped", EXIT_STOPPED),
    (ShutdownReason.MAX_TURNS, None, ["x"], "incomplete", "incomplete", EXIT_FAILED),
    (ShutdownReason.ERROR, None, ["x"], "failed", "failed", EXIT_RUN_FAILED),
])
def test_each_end_has_one_outcome_status_and_exit_code(reason, outcome, unmet, ended, status, code) -> None:
    got = outcome_of(reason, outcome, unmet)
    assert (got, status_for(reason, got), exit_code_for(reason.value, outcome=got)) == (ended, status, code)


def test_an_older_log_without_an_outcome_keeps_its_exit_codes() -> None:
    assert exit_code_for("job_complete") == EXIT_OK and exit_code_for("error") == EXIT_FAILED
    assert exit_code_for("user_shutdown", interrupted_by="SIGTERM") == 130


def test_closed_phases_survive_the_state_file(rt) -> None:
    bootstrap(rt, plan())
    work_phase(rt)
    again = TodoState.model_validate_json(rt.todos.state.model_dump_json())
    assert [c.name for c in again.closed or []] == ["Work"]
    assert isinstance(again.closed[0].closed_at, datetime)  # type: ignore[index]
