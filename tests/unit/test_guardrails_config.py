from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from console.engine.guardrails import (
    Budgets,
    BudgetState,
    CompositeChecker,
    DeadlineFeedback,
    FileExistsChecker,
    GuardrailsConfig,
    GuardrailState,
    ReadBeforeWritePolicy,
    SequentialDependencyPolicy,
    StaticFeedbackProvider,
    StuckDetector,
    ToolCallSummary,
    build_guardrails,
    default_guardrails,
    format_duration,
    parse_duration,
)
from console.engine.guardrails.guardrails import Guardrails
from console.engine.job import format_validation_error
from tests.unit.test_guardrails_world import FakeWorld

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)

EXAMPLE = """
[guardrails]
deadline = "45m"
budget_tokens = 3_000_000
max_completion_blocks = 5
[[guardrails.policies]]
type = "read_before_write"
[[guardrails.policies]]
type = "sequential"
dependencies = { publish = ["test", "build"], build = ["lint"] }
[[guardrails.feedback]]
type = "static"
feedback = "CHANGELOG.md exists: follow its format."
on_file_created = "CHANGELOG.md"
[[guardrails.feedback]]
type = "deadline"
every_n_seconds = 30
warning_threshold_seconds = 120
[guardrails.completion]
type = "composite"
all_must_pass = true
checkers = [{ type = "plan" }, { type = "files", paths = ["report.md"] }]
"""


def example() -> GuardrailsConfig:
    return GuardrailsConfig.model_validate(tomllib.loads(EXAMPLE)["guardrails"])


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as err:
        GuardrailsConfig.model_validate(data)
    return format_validation_error("job.toml", err.value)


def test_the_issue_example_validates_and_builds() -> None:
    config = example()
    assert config.deadline_seconds == 2700
    guardrails = build_guardrails(config)
    assert [type(p) for p in guardrails.gate.policies] == [ReadBeforeWritePolicy, SequentialDependencyPolicy]
    providers = [c.provider for c in guardrails.feedback.configs]
    assert [type(p) for p in providers] == [StaticFeedbackProvider, DeadlineFeedback, StuckDetector]
    assert [c.trigger.describe() for c in guardrails.feedback.configs] == [
        "once when CHANGELOG.md appears", "every 30s", "after every call"]
    assert isinstance(guardrails.checker, CompositeChecker)
    assert (guardrails.budgets.deadline_seconds, guardrails.budgets.budget_tokens) == (2700, 3_000_000)
    guardrails.start(T0)
    status = guardrails.describe(T0)
    assert status == {
        "policies": [("read_before_write", "read_before_write",
                      "write_file, append_file, edit_file of an existing file need a prior read_file of it"),
                     ("sequential", "sequential", "publish <- test, build; build <- lint")],
        "feedback": [("Static", "static", "once when CHANGELOG.md appears", "when CHANGELOG.md appears"),
                     ("Deadline", "deadline", "every 30s", "at 12:00:30"),
                     ("Stuck", "stuck", "after every call", "at call 1")],
        "checker": "composite(all): plan, files[report.md]",
        "max_completion_blocks": 5,
        "completion_blocks": 0,
        "deadline_seconds": 2700.0,
        "deadline_at": "2026-01-15T12:45:00+00:00",
        "budget_tokens": 3_000_000,
        "budget_usd": None,
        "tokens_used": 0,
        "exhausted": None,
    }


def test_the_default_guardrails() -> None:
    guardrails = default_guardrails()
    assert guardrails.gate.policies == ()
    [config] = guardrails.feedback.configs
    assert isinstance(config.provider, StuckDetector) and config.trigger.every_n_calls == 1
    # Seed 002's default: no checker is declared; seed 000's protocol decides (Guardrails.check_completion).
    assert guardrails.checker is None and not guardrails.free_stop and guardrails.low_confidence == 0.5
    assert guardrails.budgets == Budgets(None, None)
    assert guardrails.max_completion_blocks == 5
    assert guardrails.deadline() is None


def test_stuck_and_deadline_entries_and_names() -> None:
    config = GuardrailsConfig.model_validate({"feedback": [
        {"type": "stuck", "enabled": False},
        {"type": "deadline"},
        {"type": "static", "feedback": "a", "every_n_calls": 5},
        {"type": "static", "name": "Second", "feedback": "b", "every_n_seconds": 600, "severity": "caution"},
    ], "completion": {"type": "none"}})
    guardrails = build_guardrails(config)
    assert [(c.provider.name, c.trigger.describe()) for c in guardrails.feedback.configs] == [
        ("Deadline", "every 60s"), ("Static", "every 5 calls"), ("Second", "every 600s")]
    assert guardrails.checker is None
    tuned = build_guardrails(GuardrailsConfig.model_validate(
        {"feedback": [{"type": "stuck", "name": "Loops", "repeat_threshold": 6, "idle_turns": 0}]}))
    [stuck] = [c.provider for c in tuned.feedback.configs]
    assert isinstance(stuck, StuckDetector)
    assert (stuck.name, stuck.repeat_threshold, stuck.idle_turns) == ("Loops", 6, 0)
    files = build_guardrails(GuardrailsConfig.model_validate({"completion": {"type": "files", "paths": ["a.md"]}}))
    assert isinstance(files.checker, FileExistsChecker)


@pytest.mark.parametrize(("data", "expected"), [
    ({"policies": [{"type": "nope"}]},
     "key 'policies.0': missing or unknown type: expected type = \"read_before_write\" or \"sequential\""),
    ({"policies": [{}]}, "key 'policies.0': missing or unknown type"),
    ({"policies": [{"type": "sequential"}]}, "key 'policies.0.sequential.dependencies': Field required"),
    ({"policies": [{"type": "sequential", "dependencies": {"a": ["a"]}}]},
     "key 'policies.0.sequential.dependencies': a tool cannot depend on itself ('a' requires 'a')"),
    ({"policies": [{"type": "sequential", "dependencies": {"a": ["b"], "b": ["c"], "c": ["a"]}}]},
     "dependency cycle: a -> b -> c -> a"),
    ({"policies": [{"type": "sequential", "dependencies": {"bad name": ["x"]}}]},
     "key 'policies.0.sequential.dependencies.bad name.[key]': String should match pattern"),
    ({"policies": [{"type": "sequential", "dependencies": {"a": ["x$"]}}]},
     "key 'policies.0.sequential.dependencies.a.0': String should match pattern"),
    ({"policies": [{"type": "sequential", "dependencies": {"a": []}}]},
     "key 'policies.0.sequential.dependencies.a': List should have at least 1 item"),
    ({"policies": [{"type": "read_before_write"}, {"type": "read_before_write"}]},
     "key 'policies': duplicate policy name 'read_before_write': give each entry of the same type "
     "its own `name`"),
    ({"policies": [{"type": "read_before_write", "read_tools": ["x"], "write_tools": ["x"]}]},
     "a tool cannot be both a read and a write tool: x"),
    ({"policies": [{"type": "read_before_write", "pathparam": "p"}]},
     "key 'policies.0.read_before_write.pathparam': unknown key"),
    ({"feedback": [{"type": "static", "feedback": "x"}]},
     "key 'feedback.0.static': set a trigger: every_n_calls, every_n_seconds or on_file_created"),
    ({"feedback": [{"type": "deadline"}, {"type": "deadline"}]}, "duplicate feedback name 'Deadline'"),
    ({"feedback": [{"type": "static", "name": "Stuck", "feedback": "x", "every_n_calls": 1}]},
     "the name 'Stuck' belongs to the default stuck detector"),
    ({"feedback": [{"type": "static", "name": "a'b", "feedback": "x", "every_n_calls": 1}]},
     "key 'feedback.0.static.name': String should match pattern"),
    ({"feedback": [{"type": "deadline", "every_n_seconds": -5}]},
     "key 'feedback.0.deadline.every_n_seconds': Input should be greater than or equal to 1"),
    ({"feedback": [{"type": "stuck", "every_n_calls": "1"}]},
     "key 'feedback.0.stuck.every_n_calls': Input should be a valid integer"),
    ({"feedback": [{"type": "stuck", "repeat_threshold": 50}]},
     "key 'feedback.0.stuck.repeat_threshold': Input should be less than or equal to 12"),
    ({"feedback": [{"type": "stuck", "enabled": "no"}]},
     "key 'feedback.0.stuck.enabled': Input should be a valid boolean"),
    ({"feedback": [{"type": "deadline", "warning_threshold_seconds": float("inf")}]},
     "key 'feedback.0.deadline.warning_threshold_seconds': Input should be a finite number"),
    ({"feedback": [{"type": "static", "feedback": "x", "on_file_created": "../x"}]},
     "key 'feedback.0.static.on_file_created': '../x' goes outside the job folder"),
    ({"feedback": [{"type": "loud"}]}, "expected type = \"static\" or \"deadline\" or \"stuck\""),
    ({"completion": {"type": "files", "paths": ["/etc/passwd"]}},
     "key 'completion.files.paths.0': '/etc/passwd' is absolute"),
    ({"completion": {"type": "files", "paths": [".console/todos.json"]}}, "is not a file of the job"),
    ({"completion": {"type": "files", "paths": []}}, "key 'completion.files.paths': List should have at least 1"),
    ({"completion": {"type": "composite", "checkers": [{"type": "files"}]}},
     "key 'completion.composite.checkers.0.files.paths': Field required"),
    ({"completion": {"type": "composite", "checkers": [{"type": "none"}]}},
     "key 'completion.composite.checkers.0': missing or unknown type"),
    ({"completion": {"type": "maybe"}}, "key 'completion': missing or unknown type"),
    ({"deadline": "45 minutes"},
     "key 'deadline': deadline: '45 minutes' is not a duration like 45m, 1h30m, 90s"),
    ({"deadline": "31d"}, "key 'deadline': deadline: '31d' must be between 1 second and 30 days"),
    ({"deadline": "0s"}, "must be between 1 second and 30 days"),
    ({"deadline": 1.5}, "key 'deadline"),
    ({"budget_tokens": 10**30}, "key 'budget_tokens': Input should be less than or equal to"),
    ({"budget_tokens": 0}, "key 'budget_tokens': Input should be greater than or equal to 1"),
    ({"max_completion_blocks": 0}, "key 'max_completion_blocks': Input should be greater than or equal to 1"),
    ({"max_completion_blocks": 1001}, "key 'max_completion_blocks': Input should be less than or equal to 1000"),
    ({"max_completion_blocks": True}, "key 'max_completion_blocks': Input should be a valid integer"),
    ({"budget": 5}, "key 'budget': unknown key"),
])
def test_bad_guardrails_name_the_key(data: dict[str, Any], expected: str) -> None:
    message = error_of(data)
    assert message.startswith("job.toml: ")
    assert expected in message, message


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("45m", 2700), ("1h30m", 5400), ("2h", 7200), ("1d", 86400), ("2700", 2700), (2700, 2700),
    (" 1D2H3M4S ", 93784), ("1h0m", 3600),
])
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["45 minutes", "", "m", "1.5h", "-5m", "1m1h", "h1", "1h 30m", "9" * 50, "1w",
                                  "1e3", "١٢"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match=r"^deadline: '.*' is not a duration like 45m, 1h30m, 90s$"):
        parse_duration(text)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 1, 59, 60, 119, 300, 7199, 7200, 7260, 7320, -5)] == [
        "0 seconds", "1 second", "59 seconds", "1 minute", "1 minute", "5 minutes", "119 minutes", "2 hours",
        "2 hours 1 minute", "2 hours 2 minutes", "0 seconds"]


def test_budgets_deadline_from_the_first_start_and_tokens() -> None:
    budgets = Budgets(deadline_seconds=60, budget_tokens=1000)
    state = BudgetState()
    assert budgets.deadline(state) is None
    budgets.start(state, T0)
    budgets.start(state, T0 + timedelta(hours=1))  # a resume keeps the first start
    deadline = budgets.deadline(state)
    assert deadline is not None and deadline.expires_at == T0 + timedelta(seconds=60)
    assert deadline.remaining(T0 + timedelta(seconds=20)) == timedelta(seconds=40)
    assert deadline.elapsed(T0 + timedelta(seconds=20)) == timedelta(seconds=20)
    assert budgets.exhausted(state, T0 + timedelta(seconds=59)) is None
    budgets.add_tokens(state, 999)
    budgets.add_tokens(state, -50)
    assert budgets.exhausted(state, T0) is None
    budgets.add_tokens(state, 1)
    assert budgets.exhausted(state, T0) == "tokens"
    assert budgets.exhausted(state, T0 + timedelta(days=1)) == "tokens"  # sticky: the first one recorded
    late = BudgetState(started_at=T0)
    assert budgets.exhausted(late, T0 + timedelta(seconds=60)) == "deadline"
    assert Budgets().exhausted(BudgetState(tokens_used=10**9), T0 + timedelta(days=999)) is None
    with pytest.raises(ValueError):
        Budgets(deadline_seconds=0)


def _exercise(guardrails: Guardrails, world: FakeWorld) -> None:
    guardrails.start(T0)
    for tool, params in (("read_file", {"path": "CHANGELOG.md"}), ("lint", {}), ("test", {})):
        assert guardrails.gate.check(tool, params, world).allowed
        guardrails.gate.on_result(tool, params, True, world)
        guardrails.feedback.record_call(ToolCallSummary.of(tool, params, True, "ok"))
    guardrails.feedback.collect(now=T0 + timedelta(seconds=40), world=world, deadline=guardrails.deadline())
    guardrails.add_tokens(1234)
    guardrails.completion_blocks = 2


def test_guardrail_state_round_trips_and_restores() -> None:
    world = FakeWorld("CHANGELOG.md")
    guardrails = build_guardrails(example())
    _exercise(guardrails, world)
    state = guardrails.snapshot()
    assert state.feedback.fired_file_triggers == {"Static"}
    assert set(state.feedback.provider_last) == {"Static", "Deadline"}
    back = GuardrailState.model_validate_json(state.model_dump_json())
    assert back == state
    resumed = build_guardrails(example())
    resumed.restore(back)
    assert resumed.snapshot() == state
    assert resumed.gate.check("build", {}, world).allowed
    assert resumed.budget_state.tokens_used == 1234 and resumed.completion_blocks == 2
    guardrails.add_tokens(1)
    assert resumed.budget_state.tokens_used == 1234  # a snapshot is a copy


def test_restore_after_job_toml_changed_keeps_the_matching_parts() -> None:
    world = FakeWorld("CHANGELOG.md")
    old = build_guardrails(example())
    _exercise(old, world)
    changed = build_guardrails(GuardrailsConfig.model_validate({
        "policies": [{"type": "sequential", "dependencies": {"build": ["lint"]}}],
        "feedback": [{"type": "deadline", "name": "Clock"}]}))
    changed.restore(old.snapshot())
    state = changed.snapshot()
    assert set(state.policies) == {"sequential"}
    assert state.policies["sequential"].invoked_tools == {"lint", "test"}
    assert set(state.feedback.provider_last) == set() and state.feedback.fired_file_triggers == set()
    assert state.feedback.tool_call_count == 3 and state.budget.tokens_used == 1234


def test_a_rewind_resets_only_the_completion_blocks() -> None:
    world = FakeWorld("CHANGELOG.md")
    guardrails = build_guardrails(example())
    _exercise(guardrails, world)
    before = guardrails.snapshot()
    guardrails.reset_for_rewind()
    after = guardrails.snapshot()
    assert after.completion_blocks == 0
    assert after.model_copy(update={"completion_blocks": before.completion_blocks}) == before


def test_the_status_after_some_work() -> None:
    guardrails = build_guardrails(example())
    _exercise(guardrails, FakeWorld("CHANGELOG.md"))
    status = guardrails.describe(T0 + timedelta(seconds=50))
    assert status["feedback"] == [
        ("Static", "static", "once when CHANGELOG.md appears", "fired (once per session)"),
        ("Deadline", "deadline", "every 30s", "at 12:01:10"),
        ("Stuck", "stuck", "after every call", "at the next check"),
    ]
    assert (status["tokens_used"], status["completion_blocks"]) == (1234, 2)
