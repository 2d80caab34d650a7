"""Task completion checking (seed 002): verify the goal before the agent may stop.

A stop (``job_complete`` or a turn without a tool call) passes the job's checker; an incomplete result
blocks the stop and its feedback goes back to the agent. The loop bounds the blocks
(``max_completion_blocks``) and bypasses the check once a budget or the deadline is exhausted.

Fail-closed: a checker that raises counts as *incomplete* ("completion check failed: ..."). Blocking on a
buggy checker is bounded by ``max_completion_blocks``, while letting a job stop early on one would report
unfinished work as done, which cannot be undone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from console.engine.guardrails.policies import World
from console.engine.job_files import one_line


@dataclass(frozen=True)
class TaskCompletionResult:
    complete: bool
    feedback: str | None = None
    checker: str | None = None  # which checker said incomplete ("composite/files"), for the operator

    @classmethod
    def ok(cls) -> TaskCompletionResult:
        return cls(True, None, None)

    @classmethod
    def incomplete(cls, feedback: str, checker: str | None = None) -> TaskCompletionResult:
        return cls(False, feedback, checker)


@dataclass(kw_only=True)
class TaskCompletionContext:
    stop_reason: str  # "job_complete" | "end_turn"
    world: World
    tentative_output: Any = None
    open_tasks: tuple[str, ...] = ()  # the active todo list's unfinished items, in order
    # What the harness's own record of the work says is not done (console.engine.record.unmet): open todos,
    # phases no transition closed, a transition under way, no plan. Empty: the plan is done.
    unmet: tuple[str, ...] = ()


@runtime_checkable
class TaskCompletionChecker(Protocol):
    name: str

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult: ...

    def describe(self) -> str: ...


def run_checker(checker: TaskCompletionChecker, context: TaskCompletionContext) -> TaskCompletionResult:
    """``checker.check(context)``, fail-closed: a raise or a wrong answer is an incomplete result."""
    name = str(getattr(checker, "name", type(checker).__name__))
    try:
        result = checker.check(context)
        if not isinstance(result, TaskCompletionResult):
            raise TypeError(f"check() returned {type(result).__name__}, not a TaskCompletionResult")
    except Exception as exc:
        return TaskCompletionResult.incomplete(f"completion check failed: {one_line(repr(exc), 300)}", name)
    if not result.complete and result.checker is None:
        result = TaskCompletionResult.incomplete(result.feedback or f"the {name} check is not satisfied", name)
    return result


def reads_only_the_record(checker: TaskCompletionChecker | None) -> bool:
    """Whether ``checker``'s verdict depends on nothing but the harness's record (the todo list and main_plan.md):
    then the console's verdict is recomputed when those change and never on a timer. A checker that looks at
    other files (files = [...]) or that this module does not know may change its mind at any time."""
    if checker is None or isinstance(checker, PlanBasedChecker | NoChecker):
        return True
    if isinstance(checker, CompositeChecker):
        return all(reads_only_the_record(c) for c in checker.checkers)
    return False


class PlanBasedChecker:
    """Seed 002's plan checker over the session's plan state: here the harness's own record of the work (its
    todo lists and the phases its transitions closed, never checkboxes edited into main_plan.md). Incomplete
    while that record says anything is left; names at most 3 titles of each kind."""

    def __init__(self, name: str = "plan") -> None:
        self.name = name

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        if not context.unmet:
            return TaskCompletionResult.ok()
        return TaskCompletionResult.incomplete(
            "The job is not finished: " + "; ".join(context.unmet) + ". Complete the tasks (todo_complete after "
            "each), or call todo_rewind(issue) if the plan must change, before finishing.", self.name)

    def describe(self) -> str:
        return self.name if self.name == "plan" else f"{self.name}(plan)"


class FileExistsChecker:
    """Incomplete while any of ``paths`` (relative to the job folder) is missing."""

    def __init__(self, paths: Sequence[str], name: str = "files") -> None:
        self.paths = tuple(paths)
        self.name = name

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        missing = [p for p in self.paths if not context.world.file_exists(p)]
        if not missing:
            return TaskCompletionResult.ok()
        shown = ", ".join(one_line(p, 120) for p in missing)
        return TaskCompletionResult.incomplete(
            f"Required file{'s are' if len(missing) != 1 else ' is'} missing: {shown}. Create "
            f"{'them' if len(missing) != 1 else 'it'} before finishing.", self.name)

    def describe(self) -> str:
        return f"{self.name}[{', '.join(one_line(p, 60) for p in self.paths)}]"


class CompositeChecker:
    """Several checkers: all must pass (``all_must_pass``, every failing one is reported) or any may pass.

    The result's ``checker`` names the failing inner checkers under this one, e.g. "composite/files"."""

    def __init__(self, checkers: Sequence[TaskCompletionChecker], all_must_pass: bool = True,
                 name: str = "composite") -> None:
        if not checkers:
            raise ValueError("a composite checker needs at least one checker")
        self.checkers = tuple(checkers)
        self.all_must_pass = all_must_pass
        self.name = name

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        failed: list[TaskCompletionResult] = []
        for checker in self.checkers:
            result = run_checker(checker, context)
            if result.complete and not self.all_must_pass:
                return TaskCompletionResult.ok()
            if not result.complete:
                failed.append(result)
        if not failed:
            return TaskCompletionResult.ok()
        feedback = " ".join(r.feedback or "" for r in failed)
        if not self.all_must_pass and len(failed) > 1:
            feedback = "None of the completion checks passed (any one would do): " + feedback
        return TaskCompletionResult.incomplete(feedback, f"{self.name}/{'+'.join(r.checker or '?' for r in failed)}")

    def describe(self) -> str:
        mode = "all" if self.all_must_pass else "any"
        return f"{self.name}({mode}): {', '.join(c.describe() for c in self.checkers)}"


class NoChecker:
    """type = "none": the agent may stop freely (seed: "no checker allows free stop")."""

    def __init__(self, name: str = "none") -> None:
        self.name = name

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        return TaskCompletionResult.ok()

    def describe(self) -> str:
        return "none (free stop)"
