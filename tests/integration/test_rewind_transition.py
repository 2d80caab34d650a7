"""A rewind at each stage of a phase transition redoes the phase it names (seed 000's todo_rewind, the console's
`r`): afterwards main_plan.md, the todo list, its phase label and the events agree, and the run still ends with
its deliverables.

The defect this guards (a new operator, quickstart at --speed 0.3): `r` pressed while the phase 1 -> 2 transition
was starting logged "rewind of phase 1 started", then installed phase 1's redo under phase 2's label; finishing
it closed phase 2, so the deliverables were never written and the agent gave up.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from console.engine import commands as cmds
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.plan import parse_plan
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider, ScriptedTurn
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import run_settings

# The edits sweep's plan: the same two phases, the same first turns.
from tests.integration.test_kill_points import PLAN, enumerate_kills, work  # noqa: F401 (work: a fixture)
from tests.sweeps import Sweep

ISSUE = "use bullet lists only"
DELIVERABLES = ("action_items.md", "digest.md")
Moment = Callable[[ev.EventBase], bool]


def _starting(kind: str, from_phase: int) -> Moment:
    return lambda e: (isinstance(e, ev.PhaseTransition) and e.kind == kind and e.stage == "started"
                      and e.from_phase == from_phase)


def _done_to(to_phase: int) -> Moment:
    return lambda e: isinstance(e, ev.PhaseTransition) and e.stage == "completed" and e.to_phase == to_phase


def _tasks_done(phase: int, done: int) -> Moment:
    return lambda e: (isinstance(e, ev.TodosChanged) and e.kind == "phase" and e.phase_number == phase
                      and sum(i.done for i in e.items) == done)


class Run:
    """A quickstart run with the scripted model and one operator rewind sent at a chosen moment, as the console
    sends it (with the phase its dialog showed); the plan on disk is read at the first turn after each todo list
    a transition installs."""

    def __init__(self, paths: JobPaths, clock: FakeClock, when: Moment, phase: int | None) -> None:
        self.paths = paths
        self.sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
        self.fired: list[ev.EventBase] = []
        self.plans: list[tuple[ev.PhaseTransition, str]] = []
        self._installed: ev.PhaseTransition | None = None

        def hook(e: ev.EventBase) -> None:
            if not self.fired and when(e):
                self.fired.append(e)
                self.sup.submit(cmds.Rewind(issue=ISSUE, phase=phase))
            if isinstance(e, ev.PhaseTransition) and e.stage == "completed" and e.to_phase is not None:
                self._installed = e
            elif isinstance(e, ev.TurnStarted) and self._installed is not None:
                # The step that installed the list is committed and its effects (plan edits) written by now.
                self.plans.append((self._installed, paths.main_plan.read_text()))
                self._installed = None

        self.sup.subscribe(hook)
        self.result = self.sup.run()

    def events(self) -> list[ev.EventBase]:
        return list(ev.read_events(self.paths.events))

    def transitions(self) -> list[tuple[str, str, int | None, int | None]]:
        return [(e.kind, e.stage, e.from_phase, e.to_phase) for e in self.events()
                if isinstance(e, ev.PhaseTransition)]


def assert_agree(run: Run) -> None:
    """Every transition's record, the list it installed and the plan it left say the same phase."""
    events = run.events()
    lists = [e for e in events if isinstance(e, ev.TodosChanged) and e.reason in ("todo_write", "job_completion")]
    done = [e for e in events if isinstance(e, ev.PhaseTransition) and e.stage == "completed"]
    assert len(lists) == len(done)
    for listed, moved in zip(lists, done, strict=True):
        assert listed.seq < moved.seq
        if moved.to_phase is None:
            assert listed.kind == "completion"
            continue
        assert (listed.kind, listed.phase_number, listed.phase_name) == ("phase", moved.to_phase, moved.to_name)
    assert [t.seq for t, _ in run.plans] == [e.seq for e in done if e.to_phase is not None]
    for moved, text in run.plans:
        plan = parse_plan(text)
        target = plan.phase(moved.to_phase or 0)
        assert target is not None and target.name == moved.to_name
        assert target.marked_current and not target.complete, text
        # The phases before it are done, none after it is (nothing skipped, nothing closed ahead of its work).
        assert all(p.complete for p in plan.phases[:moved.to_phase - 1]), text
        assert not any(p.complete for p in plan.phases[moved.to_phase:]), text
        listed = max((e for e in lists if e.seq < moved.seq), key=lambda e: e.seq)
        assert [i.text for i in listed.items] == target.step_texts
    # The harness's record: each plan phase closed once, in order, by a transition run on its own list.
    todos = json.loads(run.paths.todos.read_text())
    assert [c["name"] for c in todos["closed"]] == ["Review Inputs", "Produce Deliverables"]


def assert_finished(run: Run, reference: dict[str, str]) -> None:
    assert run.fired, "the rewind never happened"
    assert run.result.ok, run.result.detail
    completed = [e for e in run.events() if isinstance(e, ev.JobCompleted)]
    assert len(completed) == 1 and completed[0].confidence > 0.5
    assert sorted(completed[0].deliverables) == sorted(DELIVERABLES)
    for name, text in reference.items():
        assert (run.paths.root / name).read_text() == text
    plan = parse_plan(run.paths.main_plan.read_text())
    assert [p.name for p in plan.phases] == ["Review Inputs", "Produce Deliverables"]
    assert all(p.complete for p in plan.phases)


@pytest.fixture
def reference(make_job, clock) -> dict[str, str]:
    """The deliverables of the same job run without a rewind (the scripted model writes them by fixed recipes,
    and a redone step finds its work already done)."""
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    assert sup.run().ok
    out = {name: (paths.root / name).read_text() for name in DELIVERABLES}
    shutil.rmtree(paths.root)
    return out


def test_a_rewind_as_the_phase_1_to_2_transition_starts_redoes_phase_1(make_job, reference) -> None:
    """The operator's report: `r` (the dialog showing phase 1) as the transition out of phase 1 starts."""
    run = Run(make_job("quickstart"), FakeClock(step=0.001), _starting("phase", 1), phase=1)
    assert run.transitions() == [
        ("bootstrap", "started", 0, None), ("bootstrap", "completed", 0, 1),
        ("phase", "started", 1, None),
        ("rewind", "started", 1, None), ("rewind", "completed", 1, 1),  # phase 1 again, under its own label
        ("phase", "started", 1, None), ("phase", "completed", 1, 2),
        ("phase", "started", 2, None), ("completion", "completed", 2, None),
    ]
    rewound = next(e for e in run.events() if isinstance(e, ev.PhaseTransition) and e.kind == "rewind"
                   and e.stage == "completed")
    assert (rewound.to_name, rewound.issue) == ("Review Inputs", f"(operator) {ISSUE}")
    note = json.loads((run.paths.archive / "phase-01-review-inputs-rewind.json").read_text())["note"]
    assert note == f"FAILED - rewind: (operator) {ISSUE}"
    assert_agree(run)
    assert_finished(run, reference)


@pytest.mark.parametrize(("when", "phase", "redone"), [
    pytest.param(_tasks_done(1, 3), 1, 1, id="before-the-transition"),
    pytest.param(_starting("phase", 1), 1, 1, id="transition-open"),
    pytest.param(_starting("phase", 1), None, 1, id="transition-open-no-phase-named"),
    pytest.param(_done_to(2), 2, 2, id="after-the-transition"),
    pytest.param(_tasks_done(2, 2), None, 2, id="mid-phase-2"),
])
def test_a_rewind_at_each_stage_of_a_transition_redoes_the_phase_it_names(
        make_job, reference, when: Moment, phase: int | None, redone: int) -> None:
    run = Run(make_job("quickstart"), FakeClock(step=0.001), when, phase)
    answers = [e for e in run.events() if isinstance(e, ev.OperatorCommand) and e.command == "rewind"
               and e.status != "received"]
    assert [a.status for a in answers] == ["applied"]
    rewinds = [t for t in run.transitions() if t[0] == "rewind"]
    assert rewinds == [("rewind", "started", redone, None), ("rewind", "completed", redone, redone)]
    assert_agree(run)
    assert_finished(run, reference)


def test_a_rewind_naming_phase_1_after_its_transition_is_done_is_refused(make_job, reference) -> None:
    """The dialog opened in phase 1, the issue typed while the agent moved on: nothing is re-planned."""
    run = Run(make_job("quickstart"), FakeClock(step=0.001), _done_to(2), phase=1)
    answers = [e for e in run.events() if isinstance(e, ev.OperatorCommand) and e.command == "rewind"
               and e.status != "received"]
    assert [(a.status, a.detail) for a in answers] == [
        ("rejected", "phase 1 has already ended (the run is in phase 2 now); rewind not applied")]
    assert not [t for t in run.transitions() if t[0] == "rewind"]
    assert_agree(run)
    assert_finished(run, reference)


# -- crash consistency: the agent's own rewind while a phase transition is open, killed anywhere ------------
def _rewind_in_transition_script() -> list[ScriptedTurn]:
    """Phase 1 completed (its transition opens), then a rewind before the next list: phase 1 is redone."""
    done = C(name="todo_complete")
    return [
        # the bootstrap's work, then its ticks (console.engine.evidence)
        T(calls=[C(name="generate_workspace_summary"), C(name="read_file", arguments={"path": "workspace_summary.md"}),
                 C(name="read_file", arguments={"path": "instructions.md"}), done, done, done]),
        T(calls=[C(name="write_file", arguments={"path": "main_plan.md", "content": PLAN}), done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"c{i}" for i in range(5)]})]),
        T(calls=[C(name="append_file", arguments={"path": "log.md", "content": "- collected c0..c4"}),
                 done, done, done, done, done]),
        T(calls=[C(name="todo_rewind", arguments={"issue": "c2 needs the other source"})]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"c{i}" for i in range(5)]}),
                 C(name="append_file", arguments={"path": "log.md", "content": "- c2 from the other source"}),
                 done, done, done, done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"w{i}" for i in range(5)]}),
                 C(name="write_file", arguments={"path": "out.md", "content": "# Out\n\nc0..c4\n"}),
                 done, done, done, done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": ["Verify all deliverables", "Call job_complete()"]}),
                 done,
                 C(name="job_complete", arguments={"summary": "wrote out.md", "deliverables": ["out.md", "log.md"],
                                                   "confidence": 0.9})]),
    ]


@pytest.mark.sweep
def test_every_kill_point_of_a_rewind_in_an_open_transition_resumes_to_the_same_end(
        work: Path, sweep: Sweep) -> None:  # noqa: F811 (the fixture imported above)
    base = work / "rewind-in-transition"
    base.mkdir()
    (base / "instructions.md").write_text("# Collect\n\nCollect c0..c4 into log.md, then write out.md.\n")
    failures = enumerate_kills(base, _rewind_in_transition_script(), work, sweep)
    assert not failures, "\n".join(failures)
    reference = work / "baseline"
    moved = [(e.kind, e.stage, e.from_phase, e.to_phase, e.to_name)
             for e in ev.read_events(reference / ".console" / "events.jsonl") if isinstance(e, ev.PhaseTransition)]
    assert moved[2:6] == [("phase", "started", 1, None, None), ("rewind", "started", 1, None, None),
                          ("rewind", "completed", 1, 1, "Collect"), ("phase", "started", 1, None, None)]
    assert moved[6] == ("phase", "completed", 1, 2, "Write")
    todos = json.loads((reference / ".console" / "todos.json").read_text())
    assert [c["name"] for c in todos["closed"]] == ["Collect", "Write"]
