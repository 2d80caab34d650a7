"""How the plan events read: todo lists, main_plan.md's errors, phase transitions."""

from __future__ import annotations

from console.engine import events as ev
from console.engine.job_files import one_line
from console.view.present.words import (
    Presented,
    flat,
    phase_label,
    plural,
)


def _todos(e: ev.TodosChanged) -> Presented:
    if e.reason.startswith("transition"):
        why = one_line(e.reason.split(":", 1)[-1], 40)
        return Presented("≡", "todos", "info", f"todo list archived for the {why} transition", source="todos")
    done = [n for n, item in enumerate(e.items) if item.done]
    if e.reason in ("todo_complete", "job_complete") and done:
        return Presented("✓", "todo-done", "success",
                         f"{len(done)}/{len(e.items)} {flat(e.items[done[-1]].text)}", source="todos")
    return Presented("□", "todos", "info", todo_list_text(e), source="todos")


def _refused(e: ev.TodoRefused) -> Presented:
    missing = "; ".join(flat(m, 160) for m in e.missing[:4]) or "evidence"
    return Presented("✗", "todo-refused", "caution", f"todo {e.index} not ticked: {flat(e.task, 120)}",
                     f"no evidence in the record; the agent was told to {missing}", "evidence")


def todo_list_text(e: ev.TodosChanged) -> str:
    """``Review Inputs (1 of 2): 5 tasks``: a todo list, by its phase and size."""
    return f"{phase_label(e) or 'todo list'}: {plural(len(e.items), 'task')}"


def _plan(e: ev.PlanChanged) -> Presented | None:
    if not e.error:
        return None
    return Presented("✎", "plan", "caution", f"main_plan.md: {flat(e.error)}", source="plan")


def _phase(e: ev.PhaseTransition) -> Presented | None:
    if e.stage == "completed":
        name = flat(e.to_name or "", 120)
        target = f"phase {e.to_phase} '{name}'" if e.to_phase else f"'{name}'"
        return Presented("━", "phase", "info", f"{one_line(e.kind, 40)} transition done: now {target}",
                         f"issue: {flat(e.issue)}" if e.issue else "", "phases")
    if e.kind in ("rewind", "checkpoint"):
        return Presented("↺", "phase", "info", f"{e.kind} of phase {e.from_phase} started"
                         + (f": {flat(e.issue)}" if e.issue else ""), source="phases")
    return None
