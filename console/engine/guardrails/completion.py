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
from console.engine.job import one_line

MAX_TITLES = 3  # seed: "Plan checker limits to 3 task titles"


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
    plan_exists: bool = True
    phases_left: tuple[str, ...] = ()  # titles of main_plan.md phases not done
    plan_problem: str | None = None  # main_plan.md exists but cannot be read or parsed


@runtime_checkable
class TaskCompletionChecker(Protocol):
    name: str

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult: ...

    def describe(self) -> str: ...


def _titles(items: Sequence[str]) -> str:
    shown = ", ".join(f"'{one_line(t, 80)}'" for t in items[:MAX_TITLES])
    return shown + (f" and {len(items) - MAX_TITLES} more" if len(items) > MAX_TITLES else "")


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


class PlanBasedChecker:
    """Incomplete while there is no plan, while todos other than the final "Call job_complete()" are open,
    or while main_plan.md has phases not done. Names at most 3 titles of each."""

    def __init__(self, name: str = "plan") -> None:
        self.name = name

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        if not context.plan_exists:
            open_tasks = [t for t in context.open_tasks if "job_complete" not in t.lower()]
            todo = f" Open todos: {_titles(open_tasks)}." if open_tasks else ""
            return TaskCompletionResult.incomplete(
                "main_plan.md does not exist yet: finish the bootstrap todos (write the plan in main_plan.md, "
                f"divided into phases) and do the work before finishing.{todo}", self.name)
        if context.plan_problem:
            return TaskCompletionResult.incomplete(
                f"main_plan.md cannot be checked ({one_line(context.plan_problem, 200)}): fix it before "
                "finishing.", self.name)
        open_tasks = [t for t in context.open_tasks if "job_complete" not in t.lower()]
        problems = []
        if open_tasks:
            n = len(open_tasks)
            problems.append(f"{n} todo{'s are' if n != 1 else ' is'} not done: {_titles(open_tasks)}")
        if context.phases_left:
            n = len(context.phases_left)
            problems.append(f"{n} phase{'s' if n != 1 else ''} of main_plan.md "
                            f"{'are' if n != 1 else 'is'} not done: {_titles(context.phases_left)}")
        if not problems:
            return TaskCompletionResult.ok()
        return TaskCompletionResult.incomplete(
            "The job is not finished: " + "; ".join(problems) + ". Complete them (todo_complete), or call "
            "todo_rewind(issue) if the plan must change, before finishing.", self.name)

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
        feedback = "\n".join(r.feedback or "" for r in failed)
        if not self.all_must_pass and len(failed) > 1:
            feedback = "None of the completion checks passed (any one would do):\n" + feedback
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
