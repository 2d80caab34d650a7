"""A rewind names its phase (issue 18, point 6): applied while that phase is current, refused with a message
once it has ended (or before it started), whatever the command's args hold."""

from __future__ import annotations

import json

import pytest

from console.engine import events as ev
from console.engine.commands import CommandError
from console.engine.control import ControlChannel
from console.engine.messages import ToolCall
from console.engine.operator import OperatorState
from console.engine.runtime import Runtime
from console.engine.tools import ToolOutcome, default_registry
from tests.evidence_support import do_bootstrap_work

PLAN = "# Plan\n\n## Phase 1: Alpha\n" + "".join(f"- [ ] a{i}\n" for i in range(5)) + \
       "\n## Phase 2: Beta\n" + "".join(f"- [ ] b{i}\n" for i in range(5))


def _call(rt: Runtime, name: str, **args: object) -> ToolOutcome:
    reg = default_registry()
    parsed = reg.parse(ToolCall(id="x", name=name, arguments=json.dumps(args)))
    return parsed if isinstance(parsed, ToolOutcome) else reg.run(rt, *parsed)


@pytest.fixture
def rt(make_job, clock) -> Runtime:
    paths = make_job()
    runtime = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    runtime.phases.ensure_bootstrap()
    do_bootstrap_work(runtime)
    paths.main_plan.write_text(PLAN)
    return runtime


def to_phase(rt: Runtime, number: int) -> None:
    """Finish the list in place and write the next phase's: phase ``number`` is current."""
    while rt.todos.state.kind != "phase" or rt.todos.state.phase_number < number:
        for _ in range(len(rt.todos.state.items) or 5):
            _call(rt, "todo_complete")
        prefix = "ab"[rt.todos.state.phase_number] if rt.todos.state.phase_number < 2 else "c"
        _call(rt, "todo_write", todos=[f"{prefix}{i}" for i in range(5)])
        rt.take_notices()
    assert rt.todos.state.kind == "phase" and rt.todos.state.phase_number == number


def rewind(rt: Runtime, **args: object) -> ev.OperatorCommand:
    op = OperatorState()
    op.channel.submit("rewind", {"issue": "wrong order", **args})
    op.apply(rt)
    answers = [e for e in ev.read_events(rt.paths.events) if isinstance(e, ev.OperatorCommand)
               and e.status != "received"]
    return answers[-1]


def test_a_rewind_of_the_current_phase_applies(rt) -> None:
    to_phase(rt, 1)
    answer = rewind(rt, phase=1)
    assert answer.status == "applied" and rt.todos.state.pending.kind == "rewind"


def test_a_rewind_without_a_phase_applies_to_the_current_one(rt) -> None:
    """The command line without --phase, and an older console: as before."""
    to_phase(rt, 1)
    assert rewind(rt).status == "applied"


def test_a_rewind_of_a_phase_that_has_ended_is_refused(rt) -> None:
    to_phase(rt, 2)
    before = rt.todos.state.model_copy(deep=True)
    answer = rewind(rt, phase=1)
    assert answer.status == "rejected"
    assert answer.detail == "phase 1 has already ended (the run is in phase 2 now); rewind not applied"
    assert rt.todos.state == before  # nothing archived, nothing re-planned
    assert not [e for e in ev.read_events(rt.paths.events) if isinstance(e, ev.PhaseTransition)
                and e.kind == "rewind"]


def test_a_rewind_of_a_phase_not_started_is_refused(rt) -> None:
    to_phase(rt, 1)
    answer = rewind(rt, phase=2)
    assert answer.status == "rejected"
    assert answer.detail == "phase 2 is not the current phase (the run is in phase 1 now); rewind not applied"
    answer = rewind(rt, phase="1")  # a number as text (the inbox is JSON someone may write by hand)
    assert answer.status == "applied"


def test_a_rewind_named_during_bootstrap_is_refused_as_not_started(rt) -> None:
    answer = rewind(rt, phase=1)
    assert answer.status == "rejected" and "the job is still bootstrapping" in answer.detail
    assert answer.detail.startswith("phase 1 is not the current phase")


def test_a_rewind_while_the_phase_s_transition_is_open_re_plans_that_phase(rt) -> None:
    """The phase's last todo done, the agent not yet at its next list: the phase the dialog showed is the one
    the transition leaves, and the rewind turns the transition into a rewind of it (as before)."""
    to_phase(rt, 1)
    for _ in range(5):
        _call(rt, "todo_complete")
    assert rt.todos.state.pending is not None and rt.todos.state.phase_number == 1
    assert rewind(rt, phase=1).status == "applied" and rt.todos.state.pending.kind == "rewind"


@pytest.mark.parametrize("phase", [True, 0, -3, 2.5, "two", "", "1e400", float("nan"), float("inf"), [1],
                                   {"n": 1}, "9" * 5000])
def test_garbage_phases_are_refused_never_raised(rt, phase) -> None:
    """Refused where the command is made (the typed command: the sender is told, nothing is queued), and the
    same bytes dropped into the inbox are moved aside and reported: never applied, never a traceback."""
    to_phase(rt, 1)
    op = OperatorState(ControlChannel(rt.paths.inbox))
    with pytest.raises(CommandError) as refused:
        op.channel.submit("rewind", {"issue": "wrong order", "phase": phase})
    assert len(str(refused.value)) < 200 and str(refused.value).startswith("rewind: ")
    rt.paths.inbox.mkdir(parents=True, exist_ok=True)
    raw = {"command": "rewind", "args": {"issue": "wrong order", "phase": phase}}
    (rt.paths.inbox / "0001-garbage.json").write_text(json.dumps(raw, allow_nan=True))
    assert op.apply(rt) == []
    answers = [e for e in ev.read_events(rt.paths.events) if isinstance(e, ev.OperatorCommand)]
    assert [(e.command, e.status) for e in answers] == [("invalid", "rejected")]
    assert "0001-garbage.json" in answers[0].detail and len(answers[0].detail) < 400
    assert rt.todos.state.pending is None


def test_a_whole_float_is_a_phase_number(rt) -> None:
    to_phase(rt, 1)
    assert rewind(rt, phase=1.0).status == "applied"
