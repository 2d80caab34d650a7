"""The state a step records: Runtime._step_state's JSON (the changed guardrails parts spliced from the dumps it
compared) is what the journal would have written from the snapshot itself."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig, GuardrailState, ToolCallSummary, build_guardrails
from console.engine.job import JobPaths
from console.engine.journal import Journal
from console.engine.runtime import Runtime
from console.engine.state import GUARDRAIL_PARTS, GuardrailParts, StateSnapshot

HEAVY = GuardrailsConfig.model_validate({
    "deadline": "30d", "budget_tokens": 10**9, "max_completion_blocks": 5,
    "policies": [{"type": "read_before_write"},
                 {"type": "sequential", "dependencies": {"publish": ["test", "build"]}}],
    "feedback": [{"type": "static", "name": "Every2", "feedback": "Keep going.", "every_n_calls": 2},
                 {"type": "static", "name": "Changelog", "feedback": "Its format.", "on_file_created": "CHANGELOG.md"},
                 {"type": "stuck"}],
})


def runtime(tmp_path: Path, table: GuardrailsConfig | None) -> Runtime:
    paths = JobPaths(tmp_path / "job")
    paths.root.mkdir(parents=True)
    clock = FakeClock(datetime(2026, 11, 26, 9, 0, tzinfo=UTC))
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock), journal=Journal(paths),
                 guardrails=build_guardrails(table or GuardrailsConfig()))
    rt.guards.start()
    return rt


def check(rt: Runtime, dirty: set[str]) -> dict[str, object]:
    snap, text = rt._step_state(dirty)
    assert text == snap.model_dump_json(exclude_none=True)
    assert StateSnapshot.model_validate_json(text) == StateSnapshot.model_validate_json(
        snap.model_dump_json(exclude_none=True))
    rt._guards_recorded.update(rt._guards_recording)  # as a commit does
    parsed: dict[str, object] = json.loads(text)
    return parsed


def test_the_spliced_state_is_the_snapshots_json_step_after_step(tmp_path: Path) -> None:
    for table, where in ((None, "default"), (HEAVY, "heavy")):
        rt = runtime(tmp_path / where, table)
        g = rt.guardrails
        assert "guardrails_parts" in check(rt, {"guardrails"})  # the first step records every part
        assert check(rt, {"guardrails"}) == {}  # nothing changed: nothing recorded
        for turn in range(1, 25):
            g.feedback.record_call(ToolCallSummary.of("noop", json.dumps({"n": turn}), turn % 5 != 0,
                                                      "ok ✓ \"quoted\" \\ back" if turn % 3 else "", turn))
            g.add_tokens(1000 * turn)
            if turn % 4 == 0:
                g.completion_blocks += 1
            if turn % 6 == 0:
                g.escalation.nudged(f"idle: no todo completed in the last {turn} turns")
            if turn % 7 == 0:
                g.gate.on_result("read_file", {"path": f"notes/{turn}.md"}, True, rt.guards.world)
            dirty = {"guardrails"}
            if turn % 5 == 0:
                rt.todos.install([f"Task {i}" for i in range(4)], kind="phase", phase_name=f"Part {turn}",
                                 phase_number=turn, total_phases=30)
                rt.memory.record(f"Completed step {turn}", rt.clock.now() + timedelta(minutes=turn))
                dirty |= {"todos", "memory"}
            parts = check(rt, dirty).get("guardrails_parts")
            assert isinstance(parts, dict) and {"feedback", "budget"} <= set(parts)
        assert check(rt, {"todos"}).keys() == {"todos"}  # no guardrails among the changes: the snapshot's own dump


def test_the_guardrails_parts_are_the_states_fields_in_order(tmp_path: Path) -> None:
    rt = runtime(tmp_path, HEAVY)
    rt.guardrails.add_tokens(5)
    assert tuple(GuardrailState.model_fields) == GUARDRAIL_PARTS == tuple(GuardrailParts.model_fields)
    whole = rt.guardrails.snapshot()
    assert rt.guardrails.parts() == tuple(getattr(whole, name) for name in GUARDRAIL_PARTS)
