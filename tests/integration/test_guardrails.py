"""Guardrails (seed 002) in whole runs, replayed with exact model turns: policies, feedback, completion, budgets."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig, PolicyDecision
from console.engine.job import JobPaths
from console.engine.loop import ShutdownReason
from console.engine.messages import ModelRequest
from console.engine.model import StreamEvent
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.engine.tools.commands import CommandToolConfig
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import run_settings

PLAN = """# Execution Plan

## Overview
Write out.md.

## Phase 1: Write
- [ ] Write out.md
- [ ] Check out.md
- [ ] Record a note
- [ ] Review the result
- [ ] Tidy up
"""


class Recording(ScriptedProvider):
    """The scripted replay, keeping every request (what the agent saw), with a hook before each turn."""

    def __init__(self, clock: FakeClock, script: list[T], before: Callable[[int], None] | None = None) -> None:
        super().__init__(clock=clock, script=script)
        self.requests: list[ModelRequest] = []
        self.before = before

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.requests.append(request)
        if self.before is not None:
            self.before(len(self.requests))
        yield from super().stream(request)


def guardrails(**table: Any) -> GuardrailsConfig:
    return GuardrailsConfig.model_validate(table)


def run(paths: JobPaths, script: list[T], clock: FakeClock, tmp_path: Path, *, before=None, **settings: Any):
    provider = Recording(clock, script, before)
    sup = Supervisor(paths, run_settings(**settings), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"))
    return sup, sup.run(), provider


def events(paths: JobPaths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events))


def results(paths: JobPaths) -> list[tuple[str, bool]]:
    return [(e.tool, e.ok) for e in events(paths) if isinstance(e, ev.ToolResult)]


def write(path: str, content: str = "new\n") -> C:
    return C(name="write_file", arguments={"path": path, "content": content})


def read(path: str) -> C:
    return C(name="read_file", arguments={"path": path})


# -- tool policies -----------------------------------------------------------------------------------
def test_an_unread_existing_file_is_denied_then_allowed_after_read_file(make_job, clock, tmp_path) -> None:
    paths = make_job(files={"notes.md": "# Notes\nold\n"})
    script = [T(calls=[write("notes.md")]), T(calls=[read("notes.md")]), T(calls=[write("notes.md")]),
              T(calls=[write("fresh.md")]), T(error="end of script")]
    _, result, provider = run(paths, script, clock, tmp_path,
                              guardrails=guardrails(policies=[{"type": "read_before_write"}]))
    evs = events(paths)
    (denied,) = [e for e in evs if isinstance(e, ev.ToolDenied)]
    assert (denied.tool, denied.policy, denied.error) == ("write_file", "read_before_write", None)
    assert "notes.md" in denied.reason
    assert results(paths) == [("write_file", False), ("read_file", True), ("write_file", True),
                              ("write_file", True)]
    assert (paths.root / "notes.md").read_text() == "new\n" and (paths.root / "fresh.md").exists()
    # The agent got the reason as the call's own result, right after its call.
    second = provider.requests[1].messages
    assert second[-1].role == "tool" and second[-1].content.startswith("Denied by the read_before_write policy:")
    assert result.reason is ShutdownReason.ERROR  # the script ran out


def test_a_command_tool_before_its_dependency_is_denied_then_allowed(make_job, clock, tmp_path) -> None:
    paths = make_job()
    tools = (CommandToolConfig(name="test", description="Run the tests", command=["true"]),
             CommandToolConfig(name="publish", description="Publish", command=["true"]))
    script = [T(calls=[C(name="publish")]), T(calls=[C(name="test")]), T(calls=[C(name="publish")]),
              T(error="end of script")]
    run(paths, script, clock, tmp_path, tools=tools,
        guardrails=guardrails(policies=[{"type": "sequential", "dependencies": {"publish": ["test"]}}]))
    evs = events(paths)
    (denied,) = [e for e in evs if isinstance(e, ev.ToolDenied)]
    assert (denied.tool, denied.policy) == ("publish", "sequential") and "test" in denied.reason
    assert results(paths) == [("publish", False), ("test", True), ("publish", True)]
    status = next(e for e in evs if isinstance(e, ev.GuardrailsStatus))
    assert status.tools == ["test", "publish"] and status.confinement


class Raising:
    name = "broken"

    def governs(self, tool: str) -> bool:
        return tool == "list_files"

    def check(self, tool, params, *, context) -> PolicyDecision:
        raise RuntimeError("policy bug")

    def on_result(self, tool, params, ok, *, context):
        return context.state


def test_a_policy_that_raises_denies_fail_closed(make_job, clock, tmp_path) -> None:
    from console.engine.guardrails import PolicyGate

    paths = make_job()
    provider = Recording(clock, [T(calls=[C(name="list_files")]), T(calls=[read("instructions.md")]),
                                 T(error="end of script")])
    sup = Supervisor(paths, run_settings(), provider, clock=clock)
    sup.guardrails.gate = PolicyGate([Raising()])
    sup.run()
    (denied,) = [e for e in events(paths) if isinstance(e, ev.ToolDenied)]
    assert denied.policy == "broken" and "policy bug" in (denied.error or "")
    assert results(paths) == [("list_files", False), ("read_file", True)]


def test_policy_state_survives_a_resume_and_a_context_restart(make_job, clock, tmp_path) -> None:
    paths = make_job(files={"notes.md": "# Notes\n" + "filler line\n" * 200})
    table = guardrails(policies=[{"type": "read_before_write"}])
    # First process: read the file, then the model is gone (the run ends resumably).
    run(paths, [T(calls=[read("notes.md")]), T(error="offline")], clock, tmp_path, guardrails=table)
    saved = json.loads((paths.state / "guardrails.json").read_text())
    assert saved["policies"]["read_before_write"]["invoked_keys"] == [["read_file", "notes.md"]]
    # Second process (run --in-place): a small window forces context restarts before the write, which is
    # still allowed because the read is remembered across the resume and the restarts.
    filler = [T(calls=[write(f"part{i}.md", f"# Part {i}\n" + "a line of the report\n" * 120)]) for i in range(6)]
    script = [*filler, T(calls=[write("notes.md")]), T(error="end of script")]
    _, _result, _ = run(paths, script, clock, tmp_path, guardrails=table, context_window=8000)
    evs = events(paths)
    assert any(isinstance(e, ev.RestartApproved) for e in evs)
    assert not [e for e in evs if isinstance(e, ev.ToolDenied)]
    assert results(paths)[-1] == ("write_file", True)


# -- task completion -----------------------------------------------------------------------------------
def complete(*deliverables: str) -> C:
    return C(name="job_complete", arguments={"summary": "done", "deliverables": list(deliverables),
                                             "confidence": 0.9})


def test_job_complete_on_turn_1_is_refused_and_the_run_ends_non_zero(make_job, clock, tmp_path, capsys) -> None:
    from console import cli

    paths = make_job()
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"calls": [{"name": "job_complete", "arguments": {
        "summary": "done", "deliverables": [], "confidence": 1.0}}]}]))
    code = cli.main(["run", str(paths.root), "--in-place", "--headless", "--script", str(script)])
    assert code != 0
    evs = events(paths)
    assert not [e for e in evs if isinstance(e, ev.JobCompleted)]
    (blocked,) = [e for e in evs if isinstance(e, ev.CompletionBlocked)]
    assert blocked.checker == "protocol" and blocked.stop_reason == "job_complete"
    assert "the bootstrap is not finished" in blocked.feedback
    assert not (paths.state / "outcome.json").exists()


def finished_plan_script() -> list[T]:
    """A job whose plan is done: bootstrap, one phase, the completion todos, then job_complete."""
    done = C(name="todo_complete")
    plan = PLAN.replace("## Phase 1: Write", "## Phase 1: Write ← CURRENT")
    return [
        T(calls=[C(name="generate_workspace_summary"), done]),
        # The reads the bootstrap's tasks name, then their ticks (console.engine.evidence).
        T(calls=[C(name="read_file", arguments={"path": "workspace_summary.md"}),
                 C(name="read_file", arguments={"path": "instructions.md"}), done, done, done]),
        T(calls=[write("main_plan.md", PLAN), done, done]),
        T(calls=[write("main_plan.md", plan), C(name="todo_write", arguments={"todos": [
            "Write out.md", "Check out.md", "Record a note", "Review the result", "Tidy up"]})]),
        T(calls=[write("out.md", "# Out\n"), done, done, done, done, done]),
        T(calls=[write("main_plan.md", plan.replace("← CURRENT", "✓ COMPLETE")),
                 C(name="todo_write", arguments={"todos": ["Verify all deliverables", "Generate summary report",
                                                           "Call job_complete()"]})]),
        T(calls=[done, done]),
    ]


@pytest.mark.parametrize(("completion", "ends"), [
    ({"type": "composite", "all_must_pass": True, "checkers": [{"type": "plan"}, {"type": "files",
                                                                                  "paths": ["report.md"]}]},
     "refused"),
    ({"type": "composite", "all_must_pass": False, "checkers": [{"type": "plan"}, {"type": "files",
                                                                                   "paths": ["report.md"]}]},
     "completed"),
    ({"type": "files", "paths": ["out.md"]}, "completed"),
    ({"type": "files", "paths": ["report.md"]}, "refused"),
])
def test_composite_and_files_checkers(make_job, clock, tmp_path, completion, ends) -> None:
    paths = make_job()
    script = [*finished_plan_script(), T(calls=[complete("out.md")]), T(error="end of script")]
    _, result, _ = run(paths, script, clock, tmp_path, guardrails=guardrails(completion=completion))
    evs = events(paths)
    blocked = [e for e in evs if isinstance(e, ev.CompletionBlocked)]
    if ends == "completed":
        assert result.reason is ShutdownReason.JOB_COMPLETE and not blocked
    else:
        assert result.reason is ShutdownReason.ERROR and not [e for e in evs if isinstance(e, ev.JobCompleted)]
        assert len(blocked) == 1 and "report.md" in blocked[0].feedback
        assert blocked[0].checker.endswith("files")


def test_the_plan_checker_names_at_most_three_tasks(make_job, clock, tmp_path) -> None:
    paths = make_job()
    _, _, provider = run(paths, [T(text="All done."), T(error="end of script")], clock, tmp_path)
    (blocked,) = [e for e in events(paths) if isinstance(e, ev.CompletionBlocked)]
    assert blocked.stop_reason == "end_turn"
    told = provider.requests[1].messages[-1]
    assert told.meta.get("kind") == "completion_blocked" and "stop was refused" in told.content
    assert "and 2 more" in blocked.feedback  # 5 bootstrap todos: 3 named, 2 counted


def test_type_none_allows_a_free_stop(make_job, clock, tmp_path) -> None:
    """The stop is free (seed 002: no checker); the outcome is still what the record shows: nothing done."""
    paths = make_job()
    sup, result, _ = run(paths, [T(text="I am done.")], clock, tmp_path,
                         guardrails=guardrails(completion={"type": "none"}))
    assert result.reason is ShutdownReason.AGENT_STOPPED and not result.ok and result.ended == "incomplete"
    assert not [e for e in events(paths) if isinstance(e, ev.CompletionBlocked)]
    assert sup.store.get(paths.root).status == "incomplete"
    (end,) = [e for e in events(paths) if isinstance(e, ev.RunEnded)]
    assert end.outcome == "incomplete"


# -- budgets --------------------------------------------------------------------------------------------
def test_an_exhausted_deadline_bypasses_the_check_and_ends_the_run(make_job, clock, tmp_path) -> None:
    paths = make_job()
    script = [T(calls=[C(name="list_files")]), T(calls=[C(name="list_files")]),
              T(calls=[complete()]), T(error="never asked")]
    # Each turn takes 400 s, but the wrap-up turn's reply comes within its time (WRAP_UP_SECONDS).
    sup, result, provider = run(paths, script, clock, tmp_path, guardrails=guardrails(deadline="10m"),
                                before=lambda n: clock.advance(400 if n < 3 else 10))
    evs = events(paths)
    (spent,) = [e for e in evs if isinstance(e, ev.BudgetExhausted)]
    assert spent.budget == "deadline" and spent.limit == 600
    (bypass,) = [e for e in evs if isinstance(e, ev.CompletionBypassed)]
    assert bypass.stop_reason == "job_complete"
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED and "deadline passed" in result.detail
    assert [e for e in evs if isinstance(e, ev.JobCompleted)]  # the wrap-up's job_complete is the outcome
    assert sup.store.get(paths.root).status == "out of budget"
    wrap = provider.requests[2].messages[-1]
    assert wrap.meta.get("kind") == "wrap_up" and "deadline" in wrap.content
    assert len(provider.requests) == 3


def test_a_wrap_up_turn_that_takes_too_long_is_cut_and_the_run_ends(make_job, clock, tmp_path) -> None:
    """A model still writing its wrap-up reply when the wrap-up turn's time is up is cut: the run ends (out of
    budget), instead of waiting on it without bound."""
    paths = make_job()
    script = [T(calls=[C(name="list_files")]), T(calls=[C(name="list_files")]),
              T(calls=[complete()]), T(error="never asked")]
    _, result, provider = run(paths, script, clock, tmp_path, guardrails=guardrails(deadline="10m"),
                                before=lambda n: clock.advance(400))
    evs = events(paths)
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED and "deadline passed" in result.detail
    assert not [e for e in evs if isinstance(e, ev.JobCompleted)]
    cut = [e for e in evs if isinstance(e, ev.ErrorEvent) and e.where == "budget"]
    # The second turn is cut at the deadline, the wrap-up turn at the end of its time.
    assert [e.message for e in cut] == ["the model's reply was cut: the job's time is up"] * 2
    assert len(provider.requests) == 3


def answering(sup: Supervisor, *answers: str) -> list[ev.NeedsOperator]:
    """The operator, scripted: each needs_operator is answered with the next of ``answers`` (then "stop"), through
    the control channel as the console would. Returns the needs as they come."""
    left, asked = list(answers), []

    def answer(e: ev.EventBase) -> None:
        if isinstance(e, ev.NeedsOperator):
            asked.append(e)
            sup.command(left.pop(0) if left else "stop")

    sup.subscribe(answer)
    return asked


def test_a_spent_token_budget_pauses_and_asks_resume_grants_a_slice_and_stop_ends_it(make_job, clock,
                                                                                      tmp_path) -> None:
    paths = make_job()
    provider = Recording(clock, [T(calls=[C(name="list_files")]) for _ in range(20)])
    # A scripted turn here costs ~2,200 tokens: turn 2 passes 3,000, the slice's turn 3 passes 6,000.
    sup = Supervisor(paths, run_settings(guardrails=guardrails(budget_tokens=3000)), provider, clock=clock,
                     store=JobStore(tmp_path / "jobs.db"))
    asked = answering(sup, "resume")
    result = sup.run()
    evs = events(paths)
    spent = [e for e in evs if isinstance(e, ev.BudgetExhausted)]
    assert [(e.budget, e.limit) for e in spent] == [("tokens", 3000), ("tokens", 6000)]
    assert [a.reason for a in asked] == ["budget", "budget"] and all(a.paused for a in asked)
    assert asked[0].evidence[0].startswith("token budget spent:") and "of 3,000 tokens used" in asked[0].evidence[0]
    assert "resume grants one more slice of 3,000 tokens (the limit becomes 6,000 tokens)" in asked[0].evidence[-1]
    assert "the operator granted 1 more slice of 3,000 tokens so far" in asked[1].evidence
    (raised,) = [e for e in evs if isinstance(e, ev.BudgetRaised)]
    assert (raised.budget, raised.limit, raised.added, raised.grants, raised.by) == (
        "tokens", 6000, 3000, 1, "operator's resume")
    # No turn is begun past a limit: two turns, the ask, the slice's one turn, the ask.
    replies = [e for e in evs if isinstance(e, ev.AssistantMessage)]
    assert len(replies) == len(provider.requests) == 3
    order = [e.type for e in evs if e.type in ("assistant_message", "needs_operator", "budget_raised",
                                               "needs_operator_cleared")]
    assert order == ["assistant_message", "assistant_message", "needs_operator", "needs_operator_cleared",
                     "budget_raised", "assistant_message", "needs_operator", "needs_operator_cleared"]
    # The operator's stop at the second ask ends the run as out of budget, resumable.
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED and "token budget spent" in result.detail
    assert sup.store.get(paths.root).status == "out of budget"
    assert not [e for e in evs if isinstance(e, ev.CompletionBypassed)]
    state = json.loads((paths.state / "guardrails.json").read_text())
    assert state["budget"]["token_grants"] == 1 and state["escalation"]["pending"] is None


def test_a_spent_token_budget_never_lets_a_stop_through_unchecked(make_job, clock, tmp_path) -> None:
    # Before, a spent token budget gave a wrap-up turn whose stop bypassed the completion check. A spend limit
    # now pauses before the next turn: the stop is never asked for, and the operator decides.
    paths = make_job()
    script = [T(calls=[C(name="list_files")]), T(text="Out of budget, stopping."), T(error="never asked")]
    provider = Recording(clock, script)
    sup = Supervisor(paths, run_settings(guardrails=guardrails(budget_tokens=1000)), provider, clock=clock)
    asked = answering(sup)
    result = sup.run()
    assert [a.reason for a in asked] == ["budget"] and len(provider.requests) == 1
    assert not [e for e in events(paths) if isinstance(e, ev.CompletionBypassed)]
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED


# -- feedback --------------------------------------------------------------------------------------------
def test_feedback_triggers_fire_as_specified_and_reach_the_next_request(make_job, clock, tmp_path) -> None:
    paths = make_job()
    table = guardrails(feedback=[
        {"type": "static", "name": "Every2", "feedback": "Two more calls.", "every_n_calls": 2},
        {"type": "static", "name": "Every30s", "feedback": "Half a minute.", "every_n_seconds": 30},
        {"type": "static", "name": "Changelog", "feedback": "CHANGELOG.md exists: follow its format.",
         "on_file_created": "CHANGELOG.md"},
        {"type": "stuck", "enabled": False},
    ])

    def before(n: int) -> None:
        clock.advance(20)  # each turn takes 20 s of (injected) time
        if n == 4:
            (paths.root / "CHANGELOG.md").unlink()  # deleted and created again: it fired once per session

    script = [T(calls=[read("instructions.md")]), T(calls=[write("CHANGELOG.md", "# Changes\n")]),
              T(calls=[read("instructions.md")]), T(calls=[write("CHANGELOG.md", "# Changes\n")]),
              T(calls=[read("instructions.md")]), T(error="end of script")]
    _, _, provider = run(paths, script, clock, tmp_path, before=before, guardrails=table)
    fb = [(e.turn, e.source) for e in events(paths) if isinstance(e, ev.Feedback)]
    assert fb == [(2, "Every2"), (2, "Every30s"), (2, "Changelog"), (4, "Every2"), (4, "Every30s")]
    # Turn 2's blocks, exactly as seed 002 renders them, after the turn's tool result, in the next request.
    after_turn_2 = provider.requests[2].messages
    assert after_turn_2[-2].role == "tool"
    assert after_turn_2[-1].meta.get("kind") == "feedback"
    assert after_turn_2[-1].content == (
        "<feedback provider='Every2'>\nTwo more calls.\n</feedback>\n\n"
        "<feedback provider='Every30s'>\nHalf a minute.\n</feedback>\n\n"
        "<feedback provider='Changelog'>\nCHANGELOG.md exists: follow its format.\n</feedback>")
    # It stays in the history.
    assert after_turn_2[-1] in provider.requests[-1].messages


def test_trigger_state_survives_a_resume(make_job, clock, tmp_path) -> None:
    paths = make_job()
    table = guardrails(feedback=[{"type": "static", "name": "Changelog", "feedback": "Seen.",
                                  "on_file_created": "CHANGELOG.md"}, {"type": "stuck", "enabled": False}])
    run(paths, [T(calls=[write("CHANGELOG.md")]), T(error="offline")], clock, tmp_path, guardrails=table)
    run(paths, [T(calls=[read("instructions.md")]), T(error="offline")], clock, tmp_path, guardrails=table)
    assert [e.source for e in events(paths) if isinstance(e, ev.Feedback)] == ["Changelog"]


def test_guardrails_status_describes_what_guards_the_run(make_job, clock, tmp_path) -> None:
    paths = make_job()
    run(paths, [T(calls=[read("instructions.md")]), T(error="offline")], clock, tmp_path,
        guardrails=guardrails(deadline="45m", budget_tokens=3_000_000,
                              policies=[{"type": "read_before_write"}],
                              feedback=[{"type": "deadline", "every_n_seconds": 30}]))
    status = [e for e in events(paths) if isinstance(e, ev.GuardrailsStatus)][-1]
    assert [p.name for p in status.policies] == ["read_before_write"]
    assert [f.name for f in status.feedback] == ["Deadline", "Stuck"]
    assert status.checker.startswith("protocol") and status.verdict.startswith("incomplete")
    assert status.budget_tokens == 3_000_000 and status.tokens_used > 0
    assert status.deadline_at is not None
    assert status.deadline_at - clock.now() < timedelta(minutes=45)
