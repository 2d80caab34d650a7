"""The harness's own record of the work (seed 000), and what it says about the plan.

"Completed" must mean the work was done, so the harness judges the plan from what it did itself: which
phases its transitions closed (each a todo list completed task by task through ``todo_complete``), which
todos are open, whether a transition is under way. The checkboxes and "✓ COMPLETE" markers in
``main_plan.md`` are the agent's to edit and are never evidence: a phase the plan marks complete that no
transition closed is still open, and is the next one to work.

A phase is matched to its record by name (case and spacing ignored), as the transitions install it from the
plan; a phase renamed after it was closed reads as open, and the agent is told the names the record holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from console.engine.job_files import one_line
from console.engine.plan import Plan, PlanPhase
from console.engine.todos import ClosedPhase, TodoState

SHOWN = 3  # titles named in a verdict (seed 002: "Plan checker limits to 3 task titles")


def key(name: str) -> str:
    return " ".join(name.lower().split())


def closed_keys(state: TodoState) -> set[str]:
    return {key(c.name) for c in state.closed or []}


def open_phases(plan: Plan, state: TodoState) -> list[PlanPhase]:
    """The plan's phases the harness has not closed, in plan order."""
    done = closed_keys(state)
    return [p for p in plan.phases if key(p.name) not in done]


def is_job_complete_task(text: str) -> bool:
    """Seed 000's last todo, "Call job_complete()": done by the job_complete call itself."""
    return "job_complete" in text.lower()


def final_phase_open(state: TodoState) -> bool:
    """The list is a plan phase whose only open tasks are "Call job_complete()" (seed 000's final phase)."""
    open_items = [i for i in state.items if not i.done]
    return (state.kind == "phase" and state.pending is None and bool(open_items)
            and all(is_job_complete_task(i.text) for i in open_items))


def titles(items: Iterable[str]) -> str:
    items = list(items)
    shown = ", ".join(f"'{one_line(t, 80)}'" for t in items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def unmet(state: TodoState, plan: Plan | None, plan_problem: str | None = None) -> list[str]:
    """What the record says is not done yet, in the agent's words; empty when the plan is done.

    ``plan``: main_plan.md as parsed (None when it does not exist); ``plan_problem``: why it cannot be read."""
    if state.pending is not None:
        p = state.pending
        what = "the bootstrap" if p.from_kind == "bootstrap" else f"phase {p.from_phase} '{one_line(p.from_name, 80)}'"
        return [f"a {p.kind} transition after {what} is in progress: follow its steps (update main_plan.md, then "
                "todo_write the next todo list)"]
    problems: list[str] = []
    if state.kind in ("bootstrap", "empty"):
        problems.append("the bootstrap is not finished: write main_plan.md, divided into phases, and work through "
                        "them")
    open_tasks = [i.text for i in state.items if not i.done and not is_job_complete_task(i.text)]
    if open_tasks:
        n = len(open_tasks)
        problems.append(f"{n} todo{'s are' if n != 1 else ' is'} not done: {titles(open_tasks)}")
    if state.kind in ("bootstrap", "empty"):
        return problems
    if plan_problem:
        problems.append(f"main_plan.md cannot be checked ({one_line(plan_problem, 200)})")
    elif plan is None:
        problems.append("main_plan.md does not exist")
    else:
        left = open_phases(plan, state)
        if final_phase_open(state):
            # The current list is a plan phase ending with "Call job_complete()": job_complete closes it.
            left = [p for p in left if key(p.name) != key(state.phase_name)]
        if left:
            n = len(left)
            problems.append(f"{n} phase{'s' if n != 1 else ''} of main_plan.md {'have' if n != 1 else 'has'} not "
                            f"been worked through {'their' if n != 1 else 'its'} todo list: "
                            f"{titles(p.name for p in left)}")
    return problems


def self_marked(plan: Plan, state: TodoState) -> list[str]:
    """Phases main_plan.md marks complete that the harness never closed (an edit, not the work)."""
    done = closed_keys(state)
    return [p.name for p in plan.phases if p.complete and key(p.name) not in done]


def from_archives(archives: Iterable[dict[str, Any]]) -> list[ClosedPhase]:
    """The closed phases of a run from before the record was kept, read back from the harness's own archives
    (.console/archive, which the agent cannot write): each phase list archived by a phase transition (with its
    file name under ``file``, as :func:`console.engine.context.summary.archived_phases` gives it) that no rewind
    took back."""
    archives = list(archives)
    # A list a rewind took back (the phase transition it was archived by was turned into a rewind, which archived
    # it again and named this one): that phase was not closed by it, it was redone.
    taken_back = {a.get("list_archived_as") for a in archives if a.get("transition") == "rewind"} - {None, ""}
    out = []
    for a in archives:
        if a.get("transition") != "phase" or a.get("kind") != "phase" or a.get("file") in taken_back:
            continue
        try:
            at = datetime.fromisoformat(str(a.get("archived_at")))
        except ValueError:
            continue
        number = a.get("phase_number")
        out.append(ClosedPhase(name=str(a.get("phase_name", "")), number=number if isinstance(number, int) else 0,
                               tasks=len(a.get("items") or []), closed_at=at, by="archive"))
    return sorted(out, key=lambda c: c.closed_at)
