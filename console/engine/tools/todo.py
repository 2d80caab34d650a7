"""The agent's todo tools: todo_complete, todo_write, todo_rewind, archive_and_reset (seed 000)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from console.engine.tools.registry import Example, Failure, NoArgs, Tool, ToolArgs, ToolOutcome

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


IN_TRANSITION = Failure("a phase transition is in progress (there is no active list)",
                        "follow the transition's steps; they end with todo_write")
PHASES_RULE = ("Completing the last task of a phase starts the phase transition: the system archives the list and "
               "gives the steps (update main_plan.md, then todo_write the next phase's tasks).")

TODO_TOOLS: list[Tool[Any]] = [
    Tool("todo_complete", "Mark the current task complete; call it after finishing each task.", NoArgs,
         todo_complete, "call after finishing each task",
         examples=(Example({}, "After finishing the task marked CURRENT"),),
         errors=(IN_TRANSITION,
                 Failure("there is no incomplete task", "todo_write the next tasks; in the final review, call "
                                                        "job_complete"),
                 Failure("the current task is \"Call job_complete()\"", "call job_complete itself: that is the "
                                                                      "task"),
                 Failure("the task names a tool call or a file read that this phase's record does not hold",
                         "make the call it names (or read_file the file), then call todo_complete again")),
         rules=("It completes the task marked CURRENT in the ACTIVE TODO LIST, never another: do that task first.",
                "A task that names a tool as a call (\"using generate_workspace_summary()\") needs a successful "
                "call of it in this phase; one that says to read a job file (\"Read instructions.md\") needs a "
                "read_file of it. Otherwise it is refused, and the result says what is missing.",
                PHASES_RULE)),
    Tool("todo_write", "Replace the todo list, e.g. with the next phase's tasks at a phase transition.",
         TodoWriteArgs, todo_write, "write the whole todo list",
         examples=(Example({"todos": ["Read the 2019 input files", "Convert them to CSV in data/", "Check the row "
                                      "counts", "Write the totals to totals.md", "Review totals.md"]},
                           "Write a phase's list (tasks may be plain strings)"),
                   Example({"todos": [{"task": "Draft the outline", "done": True}, {"task": "Write section 1"},
                                      {"task": "Write section 2"}, {"task": "Write section 3"},
                                      {"task": "Proofread the draft"}]},
                           "Keep a task that todo_complete already completed, marked so")),
         errors=(Failure("main_plan.md cannot be read as a plan (during a transition)",
                         "fix main_plan.md as the error says, then call todo_write again"),),
         rules=("A phase has 5-20 tasks, each one short imperative sentence, in order.",
                "It never marks a task done: \"done\" is kept only for a task todo_complete completed (in this "
                "list, or the one a transition archived); any other stays open, and the result says so.",
                "During a phase transition the list is the next phase of main_plan.md; otherwise it replaces the "
                "current list.")),
    Tool("todo_rewind", "Panic button when the approach is not working: archives the todo list with your issue, "
         "then guides re-planning.", TodoRewindArgs, todo_rewind,
         "when stuck: archive the list with the issue and re-plan",
         examples=(Example({"issue": "The 2019 files are XML, not CSV, so the parser fails on every one; convert them "
                                     "to CSV first, then parse."}, "Give up on an approach that cannot work"),),
         errors=(Failure("the issue is empty or longer than 4000 characters", "say in a few sentences why the "
                                                                              "approach fails and what could work"),),
         rules=("The issue is recorded in experiences.md (Failed Approaches) and stays a blocker until a phase "
                "completes.", "Called during a transition, it turns that transition into a rewind.")),
    Tool("archive_and_reset", "Escape hatch: archive the current todo list and start a phase transition now.",
         NoArgs, archive_and_reset, "archive the list and start a transition",
         examples=(Example({}, "Start a transition now, e.g. when the list no longer fits the plan"),),
         errors=(Failure("a phase transition is already in progress", "follow its steps and call todo_write"),),
         rules=("Prefer todo_rewind when the approach fails: it records why.",)),
]
