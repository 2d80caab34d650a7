"""The money budget: ``[guardrails] budget_usd``, counted from the model's prices, spent after the deadline and the
token budget are looked at, with its limits and status; a spend limit that asks the operator, whose resume grants
one more slice (recorded); and the warning when no price is known (so the budget can never be reached)."""

from __future__ import annotations

import tomllib
import typing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.enforcement import WRAP_UP, BudgetTurn, Enforcer, limits
from console.engine.guardrails import Budgets, BudgetState, GuardrailsConfig, GuardrailState, build_guardrails
from console.engine.guardrails.budgets import MAX_COST_USED
from console.engine.job import format_validation_error
from console.engine.todos import TodoState

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)
# The events the lead's events.py must accept for a spent money budget (budget="cost").
COST_EVENTS = all("cost" in typing.get_args(cls.model_fields["budget"].annotation)
                  for cls in (ev.BudgetExhausted, ev.CompletionBypassed))
needs_cost_events = pytest.mark.skipif(not COST_EVENTS, reason="events.BudgetExhausted/CompletionBypassed.budget do "
                                                               "not accept 'cost' yet (the lead adds it)")


# -- job.toml -------------------------------------------------------------------------------------------------------
def test_budget_usd_is_read_from_job_toml() -> None:
    config = GuardrailsConfig.model_validate(tomllib.loads(
        "[guardrails]\nbudget_tokens = 3_000_000\nbudget_usd = 5.0\n")["guardrails"])
    assert config.budget_usd == 5.0
    assert build_guardrails(config).budgets == Budgets(None, 3_000_000, 5.0)
    whole = GuardrailsConfig.model_validate(tomllib.loads("[guardrails]\nbudget_usd = 12\n")["guardrails"])
    assert whole.budget_usd == 12.0 and isinstance(whole.budget_usd, float)  # whole dollars are dollars too
    assert GuardrailsConfig().budget_usd is None and build_guardrails(GuardrailsConfig()).budgets.budget_usd is None


@pytest.mark.parametrize(("value", "expected"), [
    (0, "key 'budget_usd': Input should be greater than 0"),
    (-5.0, "key 'budget_usd': Input should be greater than 0"),
    (2e6, "key 'budget_usd': Input should be less than or equal to 1000000"),
    ("5", "key 'budget_usd': Input should be a valid number"),
    ("$5", "key 'budget_usd': Input should be a valid number"),
    (True, "key 'budget_usd': Input should be a valid number"),
    (float("inf"), "key 'budget_usd': Input should be a finite number"),
    (float("nan"), "key 'budget_usd': Input should be a finite number"),
])
def test_a_bad_budget_usd_names_the_key(value: object, expected: str) -> None:
    with pytest.raises(ValidationError) as err:
        GuardrailsConfig.model_validate({"budget_usd": value})
    message = format_validation_error("job.toml", err.value)
    assert message.startswith("job.toml: ") and expected in message, message


def test_budgets_refuse_a_money_budget_out_of_bounds() -> None:
    for bad in (0.0, -1.0, 1e7):
        with pytest.raises(ValueError, match="budget_usd"):
            Budgets(budget_usd=bad)


# -- the budget -----------------------------------------------------------------------------------------------------
def test_cost_is_spent_after_the_deadline_and_the_tokens() -> None:
    budgets = Budgets(budget_usd=5.0)
    state = BudgetState()
    budgets.start(state, T0)
    budgets.add_cost(state, 4.99)
    for ignored in (-1.0, 0.0, float("inf"), float("nan")):
        budgets.add_cost(state, ignored)
    assert state.cost_usd == pytest.approx(4.99) and budgets.exhausted(state, T0) is None
    budgets.add_cost(state, 0.01)
    assert budgets.exhausted(state, T0) == "cost"
    assert budgets.exhausted(state, T0 + timedelta(days=1)) == "cost"  # sticky
    # All three spent at once: the deadline is said first, then the tokens, then the money.
    every = Budgets(deadline_seconds=60, budget_tokens=100, budget_usd=1.0)
    spent = BudgetState(started_at=T0, tokens_used=100, cost_usd=1.0)
    assert every.exhausted(spent, T0 + timedelta(seconds=60)) == "deadline"
    spent = BudgetState(started_at=T0, tokens_used=100, cost_usd=1.0)
    assert every.exhausted(spent, T0) == "tokens"
    spent = BudgetState(started_at=T0, tokens_used=99, cost_usd=1.0)
    assert every.exhausted(spent, T0) == "cost"
    # Without a money budget, money spent is only counted.
    assert Budgets().exhausted(BudgetState(cost_usd=1e6), T0) is None


def test_the_cost_counted_is_bounded_and_recorded_state_is_validated() -> None:
    state = BudgetState(cost_usd=MAX_COST_USED - 1)
    Budgets().add_cost(state, 1e9)
    assert state.cost_usd == MAX_COST_USED
    for bad in (-1.0, float("inf"), MAX_COST_USED * 10):
        with pytest.raises(ValidationError):
            BudgetState(cost_usd=bad)
    assert BudgetState.model_validate({"exhausted": "cost", "cost_usd": 5.5}).exhausted == "cost"


# -- enforcement ----------------------------------------------------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.events: list[ev.EventBase] = []
        self.changes = 0


def enforcer(budget_usd: float | None = 5.0, **guardrails: Any) -> tuple[Enforcer, Recorder, FakeClock]:
    clock = FakeClock(start=T0)
    stream = ev.EventStream(None, clock)
    rec = Recorder()
    stream.subscribe(rec.events.append)
    config = GuardrailsConfig.model_validate({"budget_usd": budget_usd, "completion": {"type": "none"},
                                              **guardrails})

    def changed() -> None:
        rec.changes += 1

    enf = Enforcer(build_guardrails(config), events=stream, clock=clock, world=None,  # type: ignore[arg-type]
                   changed=changed, record_intent=lambda key, facts: None, redo=lambda key: None,
                   todos=TodoState, load_plan=lambda: None)  # type: ignore[arg-type, return-value]
    return enf, rec, clock


def test_the_job_cost_is_counted_and_returned() -> None:
    enf, _rec, _ = enforcer()
    assert enf.count_tokens(1000, None) is None  # no price known: no cost to say
    assert enf.count_tokens(1000, 0.25) == 0.25
    assert enf.count_tokens(1000, None) == 0.25  # a turn without a price says the job's so far
    assert enf.count_tokens(1000, 0.5) == 0.75
    assert enf.g.budget_state.cost_usd == 0.75 and enf.g.budget_state.tokens_used == 4000


@needs_cost_events
def test_a_spent_money_budget_asks_the_operator_and_a_grant_raises_it_by_one_slice() -> None:
    enf, rec, _ = enforcer(budget_usd=5.0)
    enf.start(priced=True)
    assert not [e for e in rec.events if isinstance(e, ev.ErrorEvent)]  # priced: nothing to warn about
    enf.count_tokens(10_000, 4.99)
    assert enf.budget_turn() == BudgetTurn()
    enf.count_tokens(1000, 0.02)
    verdict = enf.budget_turn()
    # A spend limit: no wrap-up turn is spent past it, the operator is asked.
    assert verdict.wrap_up is None and verdict.ends is None
    assert verdict.ask == "money budget spent: $5.01 of $5.00 used"
    assert verdict.evidence[-1] == ("resume grants one more slice of $5.00 (the limit becomes $10.00); stop ends "
                                    "the run as out of budget")
    [spent] = [e for e in rec.events if isinstance(e, ev.BudgetExhausted)]
    assert (spent.budget, spent.limit, spent.used) == ("cost", 5.0, 5.01)
    assert enf.budget_turn().ask == verdict.ask  # asked again until answered, said once
    assert len([e for e in rec.events if isinstance(e, ev.BudgetExhausted)]) == 1
    assert enf.spent() is None and enf.cut_at() is None  # nothing ends the run or cuts a call: it waits
    assert enf.spend_limit() == "money budget spent: $5.01 of $5.00 used"
    # The operator's resume: one more slice of the same size, recorded (state and event).
    assert enf.grant("operator's resume")
    [raised] = [e for e in rec.events if isinstance(e, ev.BudgetRaised)]
    assert (raised.budget, raised.limit, raised.added, raised.used, raised.grants) == ("cost", 10.0, 5.0, 5.01, 1)
    assert enf.g.budget_state.cost_grants == 1 and enf.g.budget_state.exhausted is None
    assert enf.budget_turn() == BudgetTurn() and enf.spend_limit() is None
    assert not enf.grant("again")  # nothing to grant: no more raises without a limit reached
    enf.count_tokens(10, 5.0)
    again = enf.budget_turn()
    assert again.ask == "money budget spent: $10.01 of $10.00 used"
    assert "the operator granted 1 more slice of $5.00 so far" in again.evidence
    assert len([e for e in rec.events if isinstance(e, ev.BudgetExhausted)]) == 2  # a new episode, said again


@needs_cost_events
def test_a_grant_survives_a_restore_and_a_kill_while_asking_asks_again() -> None:
    enf, _, _ = enforcer(budget_tokens=1000, budget_usd=None)
    enf.start(priced=True)
    enf.count_tokens(1200)
    assert enf.budget_turn().ask is not None
    recorded = GuardrailState.model_validate_json(enf.snapshot().model_dump_json())  # what the journal keeps
    assert recorded.budget.exhausted == "tokens"
    # Killed while it asked: the next process asks again at its first boundary (nothing was granted).
    again, rec, _ = enforcer(budget_tokens=1000, budget_usd=None)
    again.restore(recorded)
    again.start(priced=True)
    verdict = again.budget_turn()
    assert verdict.ask == "token budget spent: 1,200 of 1,000 tokens used"
    assert not [e for e in rec.events if isinstance(e, ev.BudgetExhausted)]  # the same episode: not said twice
    assert again.grant("operator's resume")
    granted = GuardrailState.model_validate_json(again.snapshot().model_dump_json())
    third, _, _ = enforcer(budget_tokens=1000, budget_usd=None)
    third.restore(granted)
    third.start(priced=True)
    assert third.budget_turn() == BudgetTurn() and third.g.budgets.token_limit(third.g.budget_state) == 2000


@needs_cost_events
def test_raising_the_money_budget_lets_the_run_go_on() -> None:
    enf, _, _ = enforcer(budget_usd=1.0)
    enf.start(priced=True)
    enf.count_tokens(10, 1.5)
    assert enf.budget_turn().ask is not None
    raised, _, _ = enforcer(budget_usd=10.0)
    raised.restore(enf.snapshot())  # job.toml changed before the next run
    raised.start(priced=True)
    assert raised.g.budget_state.exhausted is None and raised.budget_turn() == BudgetTurn()


def test_limits_and_reasons_of_each_budget() -> None:
    enf, _, clock = enforcer(budget_usd=2.5, deadline="10m", budget_tokens=1000)
    enf.start(priced=True)
    enf.count_tokens(400, 1.25)
    clock.advance(90)
    assert limits.limit(enf.g, clock, "cost") == (2.5, 1.25)
    assert limits.limit(enf.g, clock, "tokens") == (1000.0, 400.0)
    assert limits.limit(enf.g, clock, "deadline") == (600.0, 90.0)
    assert [limits.shown_limit(enf.g, k) for k in ("cost", "tokens", "deadline")] == ["$2.50", "1,000 tokens",
                                                                                       "10 minutes"]
    assert enf.why("cost") == "money budget spent: $1.25 of $2.50 used"
    assert enf.why("tokens") == "token budget spent: 400 of 1,000 tokens used"
    assert set(WRAP_UP) == {"deadline"}  # the spend limits ask the operator: no wrap-up turn
    assert all("{limit}" in text for text in WRAP_UP.values())


def test_a_money_budget_without_a_price_is_said_once_at_the_start() -> None:
    enf, rec, _ = enforcer(budget_usd=5.0)
    enf.start(priced=False)
    [error] = [e for e in rec.events if isinstance(e, ev.ErrorEvent)]
    assert error.where == "guardrails" and error.recoverable
    assert error.message.startswith("budget_usd = $5.00 can never be reached: no price is known for this model")
    for priced in (True, None):  # a price, or a caller that does not say: nothing to warn about
        enf, rec, _ = enforcer(budget_usd=5.0)
        enf.start(priced=priced)
        assert not [e for e in rec.events if isinstance(e, ev.ErrorEvent)]
    enf, rec, _ = enforcer(budget_usd=None)
    enf.start(priced=False)  # no money budget: nothing can be missed
    assert not [e for e in rec.events if isinstance(e, ev.ErrorEvent)]


def test_the_status_carries_the_money_budget_and_says_it_again_at_each_percent() -> None:
    enf, rec, _ = enforcer(budget_usd=10.0)
    enf.start(priced=True)
    enf.status(force=True)
    statuses = lambda: [e for e in rec.events if isinstance(e, ev.GuardrailsStatus)]  # noqa: E731
    assert len(statuses()) == 1
    enf.count_tokens(10, 0.05)  # half a percent of the budget: not worth a status
    enf.status()
    assert len(statuses()) == 1
    enf.count_tokens(10, 0.06)
    enf.status()
    assert len(statuses()) == 2
    if "budget_usd" in ev.GuardrailsStatus.model_fields:
        last = statuses()[-1]
        assert (last.budget_usd, last.cost_usd) == (10.0, 0.11)  # type: ignore[attr-defined]
    # No money budget: the cost moving is no reason for a new status.
    enf, rec, _ = enforcer(budget_usd=None)
    enf.status(force=True)
    enf.count_tokens(0, 3.0)
    enf.status()
    assert len([e for e in rec.events if isinstance(e, ev.GuardrailsStatus)]) == 1
