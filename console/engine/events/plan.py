"""The events of the plan: the todo list, main_plan.md and the phase transitions (seed 001)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from console.engine.events.base import BoundedInt, EventBase


class TodoItemRecord(BaseModel):
    text: str
    done: bool


class TodosChanged(EventBase):
    type: Literal["todos_changed"] = "todos_changed"
    phase_name: str
    phase_number: BoundedInt
    total_phases: BoundedInt
    kind: str
    items: list[TodoItemRecord]
    reason: str = ""
    display: str = ""
    generation: BoundedInt = 0


class TodoRefused(EventBase):
    """todo_complete refused: the current task names evidence (a tool call, a file read) that the harness's record
    of this phase's calls does not hold (console.engine.evidence). The agent got ``reason`` as the call's result."""

    type: Literal["todo_refused"] = "todo_refused"
    index: BoundedInt  # 1-based, as the Layer 2 list numbers it
    task: str
    missing: list[str]
    reason: str = ""


class PlanChanged(EventBase):
    type: Literal["plan_changed"] = "plan_changed"
    phases: BoundedInt = 0
    complete: BoundedInt = 0
    current: str | None = None
    error: str | None = None


class PhaseTransition(EventBase):
    type: Literal["phase_transition"] = "phase_transition"
    kind: str
    stage: Literal["started", "completed"]
    from_phase: BoundedInt | None = None
    to_phase: BoundedInt | None = None
    to_name: str | None = None
    archive: str | None = None
    issue: str | None = None
