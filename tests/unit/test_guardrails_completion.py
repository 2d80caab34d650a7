from __future__ import annotations

from typing import Any

from console.engine.guardrails import (
    CompositeChecker,
    FileExistsChecker,
    NoChecker,
    PlanBasedChecker,
    TaskCompletionChecker,
    TaskCompletionContext,
    TaskCompletionResult,
    default_guardrails,
    run_checker,
)
from tests.unit.test_guardrails_world import FakeWorld


def ctx(world: FakeWorld | None = None, **kwargs: Any) -> TaskCompletionContext:
    return TaskCompletionContext(stop_reason="job_complete", world=world or FakeWorld(), **kwargs)


def test_plan_checker_needs_a_plan() -> None:
    result = PlanBasedChecker().check(ctx(plan_exists=False))
    assert not result.complete and result.checker == "plan"
    assert result.feedback is not None and result.feedback.startswith("main_plan.md does not exist yet: ")


def test_plan_checker_names_at_most_three_tasks() -> None:
    tasks = ("Write tests", "Fix bug", "Update docs", "Release", "Announce", "Call job_complete()")
    result = PlanBasedChecker().check(ctx(open_tasks=tasks))
    assert result == TaskCompletionResult.incomplete(
        "The job is not finished: 5 todos are not done: 'Write tests', 'Fix bug', 'Update docs' and 2 more. "
        "Complete them (todo_complete), or call todo_rewind(issue) if the plan must change, before finishing.",
        "plan")


def test_plan_checker_ignores_the_final_job_complete_todo_and_counts_phases() -> None:
    assert PlanBasedChecker().check(ctx(open_tasks=("call JOB_COMPLETE() now",))).complete
    assert PlanBasedChecker().check(ctx()).complete
    result = PlanBasedChecker().check(ctx(open_tasks=("One",), phases_left=("Phase 3: Ship",)))
    assert result.feedback == (
        "The job is not finished: 1 todo is not done: 'One'; 1 phase of main_plan.md is not done: "
        "'Phase 3: Ship'. Complete them (todo_complete), or call todo_rewind(issue) if the plan must change, "
        "before finishing.")
    problem = PlanBasedChecker().check(ctx(plan_problem="no phases found"))
    assert not problem.complete and "no phases found" in (problem.feedback or "")


def test_files_checker_names_the_missing_files() -> None:
    checker = FileExistsChecker(["report.md", "out/data.csv", "notes.md"])
    result = checker.check(ctx(FakeWorld("notes.md")))
    assert result == TaskCompletionResult.incomplete(
        "Required files are missing: report.md, out/data.csv. Create them before finishing.", "files")
    assert checker.check(ctx(FakeWorld("report.md", "out/data.csv", "notes.md"))).complete
    assert checker.describe() == "files[report.md, out/data.csv, notes.md]"


def test_composite_all_reports_every_failing_checker_by_name() -> None:
    checker = CompositeChecker([PlanBasedChecker(), FileExistsChecker(["report.md"])])
    assert checker.describe() == "composite(all): plan, files[report.md]"
    only_files = checker.check(ctx())
    assert (only_files.complete, only_files.checker) == (False, "composite/files")
    assert only_files.feedback == "Required file is missing: report.md. Create it before finishing."
    both = checker.check(ctx(open_tasks=("A",)))
    assert both.checker == "composite/plan+files"
    assert both.feedback is not None and both.feedback.count("\n") == 1
    assert checker.check(ctx(FakeWorld("report.md"))).complete


def test_composite_any_passes_if_one_passes() -> None:
    checker = CompositeChecker([FileExistsChecker(["a.md"], name="a"), FileExistsChecker(["b.md"], name="b")],
                               all_must_pass=False, name="either")
    assert checker.check(ctx(FakeWorld("b.md"))).complete
    result = checker.check(ctx())
    assert result.checker == "either/a+b"
    assert result.feedback is not None and result.feedback.startswith("None of the completion checks passed")
    nested = CompositeChecker([checker, PlanBasedChecker()])
    assert nested.check(ctx(FakeWorld("a.md"))).complete
    assert nested.check(ctx()).checker == "composite/either/a+b"
    assert nested.describe() == "composite(all): either(any): a[a.md], b[b.md], plan"


class Exploding:
    name = "exploding"

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        raise RuntimeError("no\nway")

    def describe(self) -> str:
        return "exploding"


def test_a_raising_checker_is_incomplete_fail_closed() -> None:
    result = run_checker(Exploding(), ctx())
    assert result == TaskCompletionResult.incomplete("completion check failed: RuntimeError('no\\nway')",
                                                     "exploding")
    composite = CompositeChecker([NoChecker(), Exploding()])
    assert composite.check(ctx()).checker == "composite/exploding"
    # any-mode: another checker passing is enough
    assert CompositeChecker([Exploding(), NoChecker()], all_must_pass=False).check(ctx()).complete


def test_no_checker_is_a_free_stop() -> None:
    assert NoChecker().check(ctx(plan_exists=False, open_tasks=("A",))).complete
    guardrails = default_guardrails()
    guardrails.checker = None
    assert guardrails.check_completion(ctx(plan_exists=False)).complete
    assert guardrails.describe_checker() == "none (free stop)"


def test_the_facade_checks_fail_closed_and_checkers_are_protocols() -> None:
    guardrails = default_guardrails()
    assert not guardrails.check_completion(ctx(plan_exists=False)).complete
    guardrails.checker = Exploding()
    assert guardrails.check_completion(ctx()).feedback == "completion check failed: RuntimeError('no\\nway')"
    for checker in (PlanBasedChecker(), FileExistsChecker(["x"]), CompositeChecker([NoChecker()]), NoChecker()):
        assert isinstance(checker, TaskCompletionChecker)
