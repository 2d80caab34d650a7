"""The agent's todo tools: todo_complete, todo_write, todo_rewind, archive_and_reset (seed 000)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from console.engine.tools.registry import NoArgs, Tool, ToolArgs, ToolOutcome

if TYPE_CHECKING:
    from console.engine.runtime import Runtime


class TodoInput(ToolArgs):
    task: str = Field(min_length=1, max_length=500, description="What to do, as one short imperative sentence")
    done: bool = Field(default=False, description="Already done")


class TodoWriteArgs(ToolArgs):
    todos: list[TodoInput] = Field(
        min_length=1, max_length=50, description="The whole todo list, in order (5-20 tasks per phase)"
    )

    @field_validator("todos", mode="before")
    @classmethod
    def _strings_are_tasks(cls, v: Any) -> Any:
        # Models often send plain strings; accepting them avoids a pointless error round-trip.
        if isinstance(v, list):
            return [{"task": x} if isinstance(x, str) else x for x in v]
        return v


class TodoRewindArgs(ToolArgs):
    issue: str = Field(min_length=1, max_length=4000,
                       description="Why the current approach fails and what could work instead")


def todo_complete(rt: Runtime, _: NoArgs) -> ToolOutcome:
    r = rt.phases.complete_current()
    return ToolOutcome(r.ok, r.message)


def todo_write(rt: Runtime, a: TodoWriteArgs) -> ToolOutcome:
    r = rt.phases.write_todos([t.task.strip() for t in a.todos], [t.done for t in a.todos])
    return ToolOutcome(r.ok, r.message)


def todo_rewind(rt: Runtime, a: TodoRewindArgs) -> str:
    archive_note = rt.phases.rewind(a.issue.strip())
    return f"Rewind started: the todo list was archived with your issue as its failure note. {archive_note}"


def archive_and_reset(rt: Runtime, _: NoArgs) -> str:
    if rt.todos.state.pending is not None:
        return "A phase transition is already in progress; follow its steps and call todo_write."
    name = rt.todos.state.phase_number
    msg = rt.phases.begin("reset")
    return f"Todo list of phase {name} archived and reset. {msg}"


TODO_TOOLS: list[Tool] = [
    Tool("todo_complete", "Mark the current task (the first incomplete one) complete. Takes no arguments. "
         "Call it after finishing each task.", NoArgs, todo_complete, "call after finishing each task (no args)"),
    Tool("todo_write", "Replace the todo list with the given tasks. Use it to write the next phase's todo list "
         "during a phase transition.", TodoWriteArgs, todo_write, "write the whole todo list (bulk update)"),
    Tool("todo_rewind", "Panic button: the current approach is not working. Archives the todo list with your "
         "issue and guides you through re-planning.", TodoRewindArgs, todo_rewind,
         "when stuck: archive the list with the issue and re-plan"),
    Tool("archive_and_reset", "Escape hatch: archive the current todo list and start a phase transition now.",
         NoArgs, archive_and_reset, "archive the list and start a transition"),
]
