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
    assert ('task-0008 blocked 10:00: "Add password reset flow" - Reason: Waiting for email service configuration'
            in text)
    assert mem.resolve_blockers(NOW) == 1 and "Active Blockers" not in mem.render()


def test_each_active_blocker_says_when_it_was_blocked() -> None:
    """Seed 003: ``active_blockers?: Array<{ task_id: string; reason: string; blocked_at: string; }>`` and
    ``blocked_at: t.blocked_at``: the block says when each blocker was blocked, as it says when each task was done."""
    mem = WorkingMemory()
    mem.record("Implement user authentication module", NOW)
    mem.block("Add password reset flow", "Waiting for email service configuration", NOW.replace(hour=10, minute=5))
    text = mem.render()
    assert "- task-0002 blocked 10:05: \"Add password reset flow\"" in text
    assert "1. task-0001 10:00 ✓" in text


def test_a_blocker_recorded_without_blocked_at_still_reads() -> None:
    """An older memory.json (or journal) whose blocker has no blocked_at: valid, shown without a time."""
    old = json.dumps({"completed_tasks": [], "next_id": 2, "blockers": [
        {"task_id": "task-0001", "task": "Add password reset flow", "reason": "No mail server"}]})
    state = MemoryState.model_validate_json(old)
    assert state.blockers[0].blocked_at is None
    text = WorkingMemory(state).render()
    assert '- task-0001: "Add password reset flow" - Reason: No mail server' in text
    assert MemoryState.model_validate_json(state.model_dump_json()).blockers[0].blocked_at is None


def test_the_goal_and_the_previous_task_only_when_the_current_task_asks_for_them() -> None:
    """Seed 003's buildMinimalState keeps them conditional: "Include goal if relevant (existing logic)" when
    ``instructionsLower.includes('goal')``, and "Include queue if temporal references (existing logic)" when
    ``instructionsLower.includes('previous') || instructionsLower.includes('last task') ||
    instructionsLower.includes('earlier')``; the recent tasks and blockers are always there."""
    mem = WorkingMemory()
    mem.record("Extract the requirements. All of them.", NOW)
    asked: list[int] = []

    def goal() -> str:
        asked.append(1)
        return "# Quickstart\n\nRead the   notes and produce two files.\n"

    plain = mem.prompt_block("Write digest.md", goal)
    assert plain == mem.render() and "Goal" not in plain and "Previous task" not in plain
    assert not asked  # instructions.md is not even read for a task that does not speak of the goal
    with_goal = mem.prompt_block("Check digest.md against the job's Goal", goal)
    assert with_goal.startswith("WORKING MEMORY\nGoal (instructions.md): # Quickstart Read the notes and produce "
                                "two files.\nRecent Task History")
    assert "Previous task" not in with_goal
    for words in ("Fix what the previous task left", "Redo the LAST TASK", "Compare with the earlier draft"):
        back = mem.prompt_block(words, goal)
        assert ('Previous task: task-0001 "Extract the requirements. All of them." - Completed: Extract the '
                "requirements") in back, words
        assert "Goal" not in back and back.endswith(mem.render().partition("\n")[2])
    # Nothing to refer back to yet: no line, and no empty block.
    assert WorkingMemory().prompt_block("Fix the previous task", goal) == ""
    # Long instructions: their start, and where the rest is.
    long = mem.prompt_block("Meet the goal", lambda: "word " * 400)
    line = long.splitlines()[1]
    assert line.endswith("... [the rest is in instructions.md]") and len(line) < 700
