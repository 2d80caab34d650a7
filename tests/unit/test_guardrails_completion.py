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
from console.engine.guardrails.completion import reads_only_the_record
from tests.unit.test_guardrails_world import FakeWorld


def ctx(world: FakeWorld | None = None, **kwargs: Any) -> TaskCompletionContext:
    return TaskCompletionContext(stop_reason="job_complete", world=world or FakeWorld(), **kwargs)


def test_plan_checker_says_what_the_record_leaves() -> None:
    """Seed 002's plan checker reads the session's plan state: here the harness's record (console.engine.record)."""
    result = PlanBasedChecker().check(ctx(unmet=("main_plan.md does not exist",)))
    assert not result.complete and result.checker == "plan"
    assert result.feedback == (
        "The job is not finished: main_plan.md does not exist. Complete the tasks (todo_complete after each), or "
        "call todo_rewind(issue) if the plan must change, before finishing.")
    both = PlanBasedChecker().check(ctx(unmet=("1 todo is not done: 'One'", "1 phase of main_plan.md has not been "
                                               "worked through its todo list: 'Ship'")))
    assert both.feedback is not None and "'One'; 1 phase" in both.feedback


def test_plan_checker_passes_when_the_record_shows_the_plan_done() -> None:
    # Open todos alone are not its evidence: the record's verdict is (it leaves out "Call job_complete()").
    assert PlanBasedChecker().check(ctx(open_tasks=("Call job_complete()",))).complete
    assert PlanBasedChecker().check(ctx()).complete


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
    both = checker.check(ctx(unmet=("1 todo is not done: 'A'",)))
    assert both.checker == "composite/plan+files"
    # One line: the agent and the log never see a literal "\n" between two checkers' words.
    assert both.feedback is not None and "\n" not in both.feedback and "'A'. Complete" in both.feedback
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
    assert NoChecker().check(ctx(unmet=("main_plan.md does not exist",), open_tasks=("A",))).complete
    assert NoChecker().describe() == "none (free stop)"


def test_nothing_declared_is_seed_000s_protocol() -> None:
    """Seed 002's default: no checker; seed 000's protocol (the record) decides, under its own name."""
    guardrails = default_guardrails()
    assert guardrails.checker is None and not guardrails.free_stop
    refused = guardrails.check_completion(ctx(unmet=("main_plan.md does not exist",)))
    assert (refused.complete, refused.checker) == (False, "protocol")
    assert guardrails.check_completion(ctx()).complete
    assert guardrails.describe_checker().startswith("protocol")


def test_a_declared_checker_applies_on_top_of_the_protocol() -> None:
    guardrails = default_guardrails()
    guardrails.checker = FileExistsChecker(["report.md"])
    both = guardrails.check_completion(ctx(unmet=("1 todo is not done: 'A'",)))
    assert (both.complete, both.checker) == (False, "protocol+files")
    assert "'A'" in (both.feedback or "") and "report.md" in (both.feedback or "")
    files_only = guardrails.check_completion(ctx())
    assert (files_only.complete, files_only.checker) == (False, "files")
    assert guardrails.check_completion(ctx(FakeWorld("report.md"))).complete
    # A declared plan checker says what the protocol would, once.
    guardrails.checker = PlanBasedChecker()
    assert guardrails.check_completion(ctx(unmet=("x",))).checker == "plan"


def test_the_facade_checks_fail_closed_and_checkers_are_protocols() -> None:
    guardrails = default_guardrails()
    assert not guardrails.check_completion(ctx(unmet=("main_plan.md does not exist",))).complete
    guardrails.checker = Exploding()
    assert guardrails.check_completion(ctx()).feedback == "completion check failed: RuntimeError('no\\nway')"
    for checker in (PlanBasedChecker(), FileExistsChecker(["x"]), CompositeChecker([NoChecker()]), NoChecker()):
        assert isinstance(checker, TaskCompletionChecker)


class _Custom:
    name = "custom"

    def check(self, context: TaskCompletionContext) -> TaskCompletionResult:
        return TaskCompletionResult.ok()

    def describe(self) -> str:
        return "custom"


def test_which_checkers_read_only_the_record() -> None:
    """The console's verdict of a checker that reads only the record (todos, main_plan.md) is recomputed when they
    change, never on a timer; one that looks at files, or that the engine does not know, is looked at again every
    few seconds."""
    assert reads_only_the_record(None)
    assert reads_only_the_record(PlanBasedChecker())
    assert reads_only_the_record(NoChecker())
    assert reads_only_the_record(CompositeChecker([PlanBasedChecker(), NoChecker()]))
    assert not reads_only_the_record(FileExistsChecker(["report.md"]))
    assert not reads_only_the_record(CompositeChecker([PlanBasedChecker(), FileExistsChecker(["a"])]))
    assert not reads_only_the_record(CompositeChecker([CompositeChecker([_Custom()])]))
    assert not reads_only_the_record(_Custom())
