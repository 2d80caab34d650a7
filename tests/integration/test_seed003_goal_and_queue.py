"""Seed 003's conditional goal and queue, in the prompts of a real run: the job's goal (instructions.md) reaches
the model only in the turns whose current todo speaks of the goal, the previous task only in those that refer
back; the recent tasks and the active blockers (with when each was blocked) are in every prompt after them."""

from __future__ import annotations

import re

from console.engine import events as ev
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import Recording, run_settings

PLAN = "# Plan\n\n## Phase 1: Check\n- [ ] collect\n- [ ] check\n- [ ] fix\n"
TODOS = ["Collect the notes into notes.md", "Check notes.md against the job's goal",
         "Fix what the previous task found"]
def read(path: str) -> C:
    return C(name="read_file", arguments={"path": path})


INSTRUCTIONS = "# Notes job\n\nCollect the meeting notes and check them.\n"


def test_goal_and_previous_task_reach_the_model_only_when_the_current_todo_asks(make_job, clock) -> None:
    """Seed 003: "Include goal if relevant (existing logic)" and "Include queue if temporal references (existing
    logic)", while "ALWAYS: Include last 3-5 completed tasks" and "ALWAYS: Include active blockers"."""
    paths = make_job(instructions=INSTRUCTIONS)
    done = C(name="todo_complete")
    script = [
        T(calls=[C(name="generate_workspace_summary"), done, read("workspace_summary.md"), done,
                 read("instructions.md"), done]),
        T(calls=[C(name="write_file", arguments={"path": "main_plan.md", "content": PLAN}), done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": TODOS})]),
        T(calls=[C(name="write_file", arguments={"path": "notes.md", "content": "- notes\n"}), done]),  # collect
        T(calls=[read("notes.md"), done]),  # check, against the goal
        T(calls=[C(name="todo_rewind", arguments={"issue": "the notes of meeting 2 are missing"})]),  # fix
        T(error="end of script"),
    ]
    provider = Recording(clock=clock, script=script)
    Supervisor(paths, run_settings(), provider, clock=clock).run()
    current = [m[1] if (m := re.search(r"\] \d+\. (.*?)\s+← CURRENT", r.protected)) else None
               for r in provider.requests]
    assert [c for c in dict.fromkeys(current) if c in TODOS] == TODOS
    goal = "Goal (instructions.md): # Notes job Collect the meeting notes and check them."
    for request, todo in zip(provider.requests, current, strict=True):
        wants_goal, refers_back = todo == TODOS[1], todo == TODOS[2]
        assert (goal in request.protected) is wants_goal, todo
        assert ("Previous task: " in request.protected) is refers_back, todo
    (fix,) = [r for r, todo in zip(provider.requests, current, strict=True) if todo == TODOS[2]]
    assert re.search(r'Previous task: task-\d+ "Check notes.md against the job\'s goal" - Completed: Check',
                     fix.protected)
    # The rewind made a blocker: the next prompt carries it, with when it was blocked.
    last = provider.requests[-1].protected
    blocked = next(e for e in ev.read_events(paths.events) if isinstance(e, ev.MemoryUpdated)
                   and e.what == "blocker_added")
    assert re.search(rf"- {blocked.detail['task_id']} blocked \d\d:\d\d: \"Fix what the previous task found\" - "
                     r"Reason: the notes of meeting 2 are missing", last), last
