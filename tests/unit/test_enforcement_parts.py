"""Each part of the enforcer built alone over an EnforcementContext (no Enforcer): the tool gate, the stops, the
feedback, the status, the budgets and the asks do their one job with only the context and the parts they are
handed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.enforcement import Ask, BudgetTurn, EnforcementContext, limits
from console.engine.enforcement.asks import Asks
from console.engine.enforcement.budgets import BudgetWatch
from console.engine.enforcement.feedback import FeedbackDelivery
from console.engine.enforcement.gate import ToolGate
from console.engine.enforcement.status import StatusReport
from console.engine.enforcement.stops import Stops
from console.engine.guardrails import GuardrailsConfig, build_guardrails
from console.engine.messages import Message, ToolCall
from console.engine.plan import Plan, PlanError
from console.engine.todos import TodoItem, TodoState
from tests.unit.test_guardrails_world import FakeWorld

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)


@dataclass
class Run:
    """What a part is handed, and what it did: the events it emitted and how often it said the state changed."""

    ctx: EnforcementContext
    clock: FakeClock
    world: FakeWorld
    events: list[ev.EventBase] = field(default_factory=list)
    changes: int = 0
    todos: TodoState = field(default_factory=TodoState)

    def of(self, kind: type[ev.EventBase]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def context(*files: str, **table: Any) -> Run:
    clock = FakeClock(start=T0)
    stream = ev.EventStream(None, clock)
    world = FakeWorld(*files)
    holder: list[Run] = []

    def changed() -> None:
        holder[0].changes += 1

    ctx = EnforcementContext(guardrails=build_guardrails(GuardrailsConfig.model_validate(table)), events=stream,
                             clock=clock, world=world, changed=changed,  # type: ignore[arg-type]
                             todos=lambda: holder[0].todos)
    run = Run(ctx, clock, world)
    holder.append(run)
    stream.subscribe(run.events.append)
    return run


def no_plan() -> Plan:
    raise PlanError("main_plan.md does not exist yet")


def one_open_todo() -> TodoState:
    return TodoState(items=[TodoItem(text="Write the report", done=False)])


def test_the_tool_gate_denies_records_what_it_looked_at_and_judges_a_redo_as_the_first_attempt() -> None:
    run = context("notes.md", policies=[{"type": "read_before_write"}])
    intents: dict[str, dict[str, Any]] = {}
    gate = ToolGate(run.ctx, record_intent=intents.__setitem__, redo=lambda key: intents.pop(key, None))
    denied = gate.check(1, "c1", "write_file", {"path": "notes.md", "content": "x"})
    assert denied is not None and denied.startswith("Denied by the read_before_write policy: ")
    [event] = run.of(ev.ToolDenied)
    assert (event.call_id, event.tool, event.policy) == ("c1", "write_file", "read_before_write")
    # A new file: allowed, and the decision is recorded before the call makes the file exist...
    assert gate.check(1, "c2", "write_file", {"path": "new.md", "content": "x"}) is None
    assert intents == {"c2#gate": {"allowed": True}}
    run.world.add("new.md")
    # ...so the redo of that call after a kill is allowed as the first attempt was, though the file exists now.
    assert gate.check(1, "c2", "write_file", {"path": "new.md", "content": "x"}) is None
    assert intents == {} and len(run.of(ev.ToolDenied)) == 1
    # The policies learn from a result: a read makes the write allowed, and the state change is said.
    gate.after_call("read_file", {"path": "notes.md"}, True, denied=False)
    assert run.changes == 1
    assert gate.check(2, "c3", "write_file", {"path": "notes.md", "content": "y"}) is None


def test_stops_are_refused_while_the_record_shows_work_left_and_counted_past_the_bound() -> None:
    run = context(max_completion_blocks=1)
    run.todos = one_open_todo()
    stops = Stops(run.ctx, load_plan=no_plan)
    assert stops.unmet() and stops.blocked_out() is None
    first = stops.check_stop("end_turn", None)
    assert not first.allowed and first.give_up is None and "Refused stop 1 of at most 1" in first.message
    assert stops.last_refusal and run.changes == 1
    second = stops.check_stop("job_complete", None)
    assert not second.allowed and second.give_up == stops.blocked_out() and second.give_up is not None
    assert [e.blocks for e in run.of(ev.CompletionBlocked)] == [1, 2]
    # A new run is the operator's decision to go on: the count past the bound starts over.
    stops.new_run()
    assert run.ctx.guardrails.completion_blocks == 0 and stops.blocked_out() is None and run.changes == 3


def test_a_free_stop_is_let_through_and_a_passed_deadline_bypasses_the_checker() -> None:
    run = context(completion={"type": "none"})
    run.todos = one_open_todo()
    assert Stops(run.ctx, load_plan=no_plan).check_stop("end_turn", None).allowed
    late = context(deadline="1m")
    late.todos = one_open_todo()
    late.ctx.guardrails.start(late.clock.now())
    late.ctx.guardrails.budget_state.exhausted = "deadline"
    verdict = Stops(late.ctx, load_plan=no_plan).check_stop("end_turn", None)
    assert verdict.allowed and verdict.bypassed and late.of(ev.CompletionBypassed)


def test_feedback_records_the_turns_and_delivers_the_stuck_detectors_nudge_to_on_stuck() -> None:
    run = context("notes.md", feedback=[{"type": "static", "feedback": "Keep notes.", "every_n_calls": 2}])
    heard: list[str] = []
    feedback = FeedbackDelivery(run.ctx, on_stuck=heard.append)
    delivered = []
    for turn in range(1, 5):
        call = ToolCall(id=f"c{turn}", name="read_file", arguments='{"path": "notes.md"}')
        feedback.record_turn(turn, [call], {call.id: Message.tool(call, "the same notes", ok=True)})
        delivered.append(feedback.collect(turn, turns_without_progress=turn)[1])
    assert [bool(text) for text in delivered] == [False, True, False, True]
    assert "Keep notes." in delivered[1]
    assert {e.source for e in run.of(ev.Feedback)} >= {"Static"}
    # The fourth repeat of the same call is the stuck detector's: an event, a nudge counted, and on_stuck told.
    assert len(run.of(ev.StuckDetected)) == 1 and len(heard) == 1 and heard[0].startswith("repeat")
    assert run.ctx.guardrails.escalation.state.stuck_nudges == 1


def test_the_status_is_said_when_it_changes_or_when_forced() -> None:
    run = context()
    run.todos = one_open_todo()
    report = StatusReport(run.ctx, Stops(run.ctx, load_plan=no_plan))
    report.confinement, report.command_tools = "bwrap", ["test"]
    report.emit()
    report.emit()  # nothing changed: nothing said
    [status] = run.of(ev.GuardrailsStatus)
    assert status.verdict.startswith("incomplete: ") and status.confinement == "bwrap" and status.tools == ["test"]
    report.emit(force=True)
    run.todos = TodoState(items=[TodoItem(text="Write the report", done=True)])
    report.emit()  # the todo list changed: the verdict is looked at again
    assert len(run.of(ev.GuardrailsStatus)) == 3
    assert run.of(ev.GuardrailsStatus)[-1].verdict != status.verdict


def test_a_spent_token_budget_asks_and_a_grant_raises_it_by_a_slice_and_says_the_status() -> None:
    run = context(budget_tokens=1000)
    report = StatusReport(run.ctx, Stops(run.ctx, load_plan=no_plan))
    budgets = BudgetWatch(run.ctx, report)
    budgets.start(priced=True)
    assert budgets.count_tokens(999) is None and budgets.budget_turn() == BudgetTurn()
    budgets.count_tokens(1)
    turn = budgets.budget_turn()
    assert turn.ask == "token budget spent: 1,000 of 1,000 tokens used" == budgets.spend_limit()
    assert "resume grants one more slice of 1,000 tokens" in turn.evidence[-1]
    assert len(run.of(ev.BudgetExhausted)) == 1 and budgets.spent() is None  # a spend limit waits: it ends nothing
    assert budgets.grant("operator") and not budgets.grant("again")
    [raised] = run.of(ev.BudgetRaised)
    assert (raised.limit, raised.added, raised.by) == (2000, 1000, "operator")
    assert run.of(ev.GuardrailsStatus)  # the grant says the status again
    assert limits.limit(run.ctx.guardrails, run.clock, "tokens") == (2000.0, 1000.0)


def test_the_deadline_gives_a_wrap_up_turn_then_ends_the_run() -> None:
    run = context(deadline="10m")
    budgets = BudgetWatch(run.ctx, StatusReport(run.ctx, Stops(run.ctx, load_plan=no_plan)))
    budgets.start()
    assert budgets.seconds_to_cut() == 600.0
    run.clock.advance(601)
    wrap = budgets.budget_turn()
    assert wrap.wrap_up is not None and "10 minutes" in wrap.wrap_up and budgets.spent() is not None
    assert budgets.budget_turn().ends == budgets.spent()


def test_asks_record_the_need_and_an_answer_grants_what_it_says() -> None:
    run = context(max_completion_blocks=1)
    run.todos = one_open_todo()
    stops = Stops(run.ctx, load_plan=no_plan)
    asks = Asks(run.ctx, stops=stops,
                budgets=BudgetWatch(run.ctx, StatusReport(run.ctx, stops)))
    assert asks.completion_ask() is None and asks.pending() is None and asks.answer(resumed=True, by="x") is None
    stops.check_stop("end_turn", None)
    stops.check_stop("end_turn", None)
    ask = asks.completion_ask(rewind=False)
    assert isinstance(ask, Ask) and ask.reason == "completion_refused" and "rewind" not in ask.message
    assert ask.evidence[-1] == "2 refused stops without a completed todo (max_completion_blocks = 1)"
    asks.record_ask(ask)
    assert asks.pending() == ask and asks.completion_ask() is None  # asked: not again while it waits
    assert asks.answer(resumed=True, by="operator") == "completion_refused"
    assert asks.pending() is None and run.ctx.guardrails.completion_blocks == 0


@pytest.mark.parametrize("answer", [True, False])
def test_an_answer_at_a_spend_limit_grants_a_slice_only_when_the_run_goes_on(answer: bool) -> None:
    run = context(budget_tokens=10)
    stops = Stops(run.ctx, load_plan=no_plan)
    budgets = BudgetWatch(run.ctx, StatusReport(run.ctx, stops))
    asks = Asks(run.ctx, stops=stops, budgets=budgets)
    budgets.start()
    budgets.count_tokens(10)
    turn = budgets.budget_turn()
    assert turn.ask is not None
    asks.record_ask(Ask("budget", turn.ask, turn.evidence))
    assert asks.answer(resumed=answer, by="operator") == "budget"
    assert (budgets.spend_limit() is None) is answer and len(run.of(ev.BudgetRaised)) == int(answer)
