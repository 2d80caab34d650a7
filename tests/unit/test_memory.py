from __future__ import annotations

import json
from datetime import UTC, datetime

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.memory import MAX_RECENT_TASKS, MemoryState, WorkingMemory, task_summary

NOW = datetime(2026, 1, 11, 10, 0, tzinfo=UTC)


def test_deterministic_summaries() -> None:
    assert task_summary("Implement logout endpoint. It clears the session.", True) == (
        "Completed: Implement logout endpoint")
    long = "Extract requirements from lines 1-150 of docs/specification.md into requirements.md"
    assert task_summary(long, True) == "Completed: " + long[:60] + "..."
    assert task_summary("x", False, "API has no batch mode") == "Failed: API has no batch mode"
    assert task_summary("x", False) == "Failed: Unknown reason"


def test_cap_of_100_with_pruning_logged(tmp_path) -> None:
    log = ev.EventStream(tmp_path / "events.jsonl", FakeClock())
    mem = WorkingMemory(events=log)
    for i in range(150):
        mem.record(f"task {i}", NOW)
    assert len(mem.state.completed_tasks) == MAX_RECENT_TASKS
    assert mem.state.completed_tasks[0].intent == "task 50"
    log.close()
    records = [e for e in ev.read_events(tmp_path / "events.jsonl") if isinstance(e, ev.MemoryUpdated)]
    assert sum(1 for r in records if r.what == "task_recorded") == 150  # the log keeps everything
    pruned = [r for r in records if r.what == "pruned"]
    assert pruned and pruned[-1].detail == {"total": 101, "kept": 100, "removed": 1, "max_cap": 100}


def test_legacy_records_are_backfilled(make_job, clock) -> None:
    """A memory.json from before intents existed loads, is backfilled, and is saved with the new field."""
    from console.engine.runtime import Runtime
    from console.engine.state import load_projections

    paths = make_job()
    paths.state.mkdir()
    (paths.state / "memory.json").write_text(
        json.dumps({"completed_tasks": [{"task_id": "task-001", "completed_at": NOW.isoformat()}]}))
    state, problems = load_projections(paths, clock.now())
    assert problems == []
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock), state=state)
    assert rt.memory.state.completed_tasks[0].intent == "[Legacy] task-001"
    assert json.loads((paths.state / "memory.json").read_text())["completed_tasks"][0]["intent"] == \
        "[Legacy] task-001"
    assert MemoryState.model_validate_json((paths.state / "memory.json").read_text()).completed_tasks


def test_render_last_five_and_active_blockers(tmp_path) -> None:
    mem = WorkingMemory()
    assert mem.render() == ""
    for i in range(7):
        mem.record(f"Task number {i}", NOW)
    mem.block("Add password reset flow", "Waiting for email service configuration", NOW)
    text = mem.render()
    assert "Task number 1" not in text and all(f"Task number {i}" in text for i in range(2, 7))
    assert 'task-0008: "Add password reset flow" - Reason: Waiting for email service configuration' in text
    assert mem.resolve_blockers(NOW) == 1 and "Active Blockers" not in mem.render()
