"""The parts of a session, each built alone over a SessionState (no Session): the state's own steps, asking the
model (an outage, an overflow, the readiness check), asking the operator (a need, its answer, a stop), a turn's
recorded steps, and what comes between turns. Whole sessions are the integration tests'."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.between_turns import BetweenTurns
from console.engine.enforcement import Ask
from console.engine.journal import Checkpoint, Conversation
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import ProviderError, Stop, StreamEvent, TextDelta, Usage
from console.engine.model_asking import MAX_OVERFLOWS, ModelAsking
from console.engine.operator import OperatorState
from console.engine.operator_asking import OperatorAsking
from console.engine.runtime import Runtime
from console.engine.session import session_context
from console.engine.session_state import SessionState
from console.engine.shutdown import ShutdownReason
from console.engine.tools import default_registry
from console.engine.turn import SessionDeps, TurnOutput, build_request
from console.engine.turn_steps import TurnSteps
from tests.conftest import run_settings


class Model:
    """A provider that answers ``text``, or raises ``error`` for every request (and its readiness check)."""

    name, model = "stand-in", "m"

    def __init__(self, text: str = "", error: ProviderError | None = None, *, check: bool = False) -> None:
        self.text, self.error, self.asked = text, error, 0
        if check:
            self.check_ready = self._check

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.asked += 1
        if self.error is not None:
            raise self.error
        yield TextDelta(self.text)
        yield Usage(100, 5, 0)
        yield Stop("end_turn")

    def _check(self) -> None:
        if self.error is not None:
            raise self.error


class Parts:
    """One session's state over a runtime of its own, and every event it emits."""

    def __init__(self, rt: Runtime, provider: Any, **settings: Any) -> None:
        st = run_settings(**{"retry_total_wait": 5.0, "unreachable_wait": 5.0, **settings})
        self.deps = SessionDeps(rt, provider, default_registry(), st, OperatorState(), seed=1)
        self.state = SessionState(self.deps, 1, Conversation([Message.user("Begin.", kind="kickoff")]),
                                  Checkpoint(session=1), "the system prompt", session_context(st),
                                  fresh_system=False)
        self.seen: list[ev.EventBase] = []
        rt.events.subscribe(self.seen.append, text=False)
        self.asked: list[tuple[str, bool]] = []

    def need(self, ask: Ask, *, commit: bool = True) -> None:
        """What a part is given to ask the operator: here, it only notes the ask."""
        self.asked.append((ask.reason, commit))

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self.seen]

    def start_turn(self) -> ModelRequest:
        s = self.state
        s.cp.turn += 1
        s.turns_here += 1
        return build_request(s.deps, s.system, s.conversation)


@pytest.fixture
def parts(make_rt: Callable[..., Runtime]) -> Callable[..., Parts]:
    return lambda provider=None, **settings: Parts(make_rt(), provider or Model("hello"), **settings)


# -- the shared state ------------------------------------------------------------------------------------------------
def test_the_state_commits_a_step_and_ends_as_a_stop_or_a_signal_ends_it(parts) -> None:
    p = parts()
    s = p.state
    s.cp.session = 0
    s.commit()
    assert s.cp.session == 1 and s.cp.context is not None  # the step says which session, and its context's figures
    p.start_turn()
    assert s.end(ShutdownReason.MAX_TURNS, "enough").turns == 1
    s.unask()
    assert (s.cp.turn, s.turns_here) == (0, 0)  # the turn that did not happen is asked again under its number
    assert s.stop_end("stopped by the operator").reason is ShutdownReason.USER_SHUTDOWN
    s.deps.operator.interrupted_by = "SIGTERM"
    ended = s.stop_end("stopped by the operator")
    assert (ended.reason, ended.detail) == (ShutdownReason.INTERRUPTED, "interrupted by SIGTERM")


# -- asking the model ------------------------------------------------------------------------------------------------
def test_asking_the_model_alone_returns_its_reply(parts) -> None:
    p = parts(Model("the answer"))
    model = ModelAsking(p.state)
    model.overflows = 2
    out = model.turn(p.start_turn())
    assert isinstance(out, TurnOutput) and out.text == "the answer"
    assert model.overflows == 0  # a reply ends a run of "prompt too long" answers


def test_asking_the_model_alone_asks_the_operator_when_the_model_stays_down(parts) -> None:
    p = parts(Model(error=ProviderError("connection refused", kind="transient", cause="not reached")))
    model = ModelAsking(p.state)
    assert model.turn(p.start_turn()) is None  # no reply, no end: the run holds for its operator
    s, op = p.state, p.deps.operator
    assert (s.cp.turn, s.turns_here) == (0, 0)  # the turn is asked again, under its number, once they resume
    assert (op.needs, op.paused) == ("provider_down", True)
    assert p.kinds().count("ModelRetry") >= 1 and p.kinds()[-2:] == ["ErrorEvent", "NeedsOperator"]
    assert model.down.startswith("the model could not be reached:") and "limit 5 s" in model.down


def test_asking_the_model_alone_ends_the_session_on_a_failure_the_operator_must_fix(parts) -> None:
    p = parts(Model(error=ProviderError("401 unauthorized", fix="set the key")))
    ended = ModelAsking(p.state).turn(p.start_turn())
    assert ended is not None and not isinstance(ended, TurnOutput)
    assert (ended.reason, ended.detail, ended.fix) == (ShutdownReason.ERROR, "401 unauthorized", "set the key")


def test_asking_the_model_alone_takes_a_refused_prompt_as_a_full_context(parts) -> None:
    p = parts(Model(error=ProviderError("prompt is too long", kind="context")))
    model, s = ModelAsking(p.state), p.state
    # The session's first prompt, no reply in it yet: nothing can be taken out, the run ends.
    first = model.turn(p.start_turn())
    assert first is not None and not isinstance(first, TurnOutput) and first.reason is ShutdownReason.ERROR
    assert "lower context_window" in first.detail
    # With replies to take out: the context counts as full (the pressure masks or restarts), MAX_OVERFLOWS times.
    s.conversation.append(Message.assistant("done so far", []))
    model.overflows = 0
    for _ in range(MAX_OVERFLOWS):
        s.cp.evaluated = True
        assert model.turn(p.start_turn()) is None
        assert s.cm.used > s.cm.budget and not s.cp.evaluated and s.cp.turn == 0
    last = model.turn(p.start_turn())
    assert last is not None and not isinstance(last, TurnOutput) and last.reason is ShutdownReason.ERROR


def test_the_readiness_check_alone_asks_before_any_turn_and_is_made_once(parts) -> None:
    provider = Model(error=ProviderError("connection refused", kind="transient", cause="not reached"), check=True)
    p = parts(provider)
    model = ModelAsking(p.state)
    assert model.model_ready() is None and model.ready_checked
    assert p.deps.operator.needs == "provider_down" and provider.asked == 0  # no chat request was made
    assert p.state.cp.turn == 0  # no turn was asked: none is given back
    fine = parts(Model("hi", check=True))
    ready = ModelAsking(fine.state)
    assert ready.model_ready() is None and ready.ready_checked and fine.deps.operator.needs is None


# -- asking the operator ---------------------------------------------------------------------------------------------
def test_asking_the_operator_alone_records_a_need_and_their_stop_ends_the_run_as_the_need_says(parts) -> None:
    p = parts()
    operator, op, guards = OperatorAsking(p.state), p.deps.operator, p.state.rt.guards
    operator.need(Ask("stuck", "the agent looks stuck", ["the same call 5 times"]))
    pending = guards.pending()
    assert (op.needs, op.paused) == ("stuck", True) and pending is not None and pending.reason == "stuck"
    op.stop_requested = True
    ended = operator.stopped("")
    assert (ended.reason, ended.detail) == (ShutdownReason.USER_SHUTDOWN,
                                            "stopped by the operator, asked because the agent looked stuck")
    assert op.needs is None and guards.pending() is None and p.kinds()[-1] == "NeedsOperatorCleared"


def test_asking_the_operator_alone_ends_a_stop_while_the_model_was_down_with_why_it_was(parts) -> None:
    p = parts()
    operator, op = OperatorAsking(p.state), p.deps.operator
    op.needs, op.paused, op.stop_requested = "provider_down", True, True  # asked by the model's part
    ended = operator.stopped("the model could not be reached: 3 tries over 5 s")
    assert (ended.reason, ended.detail) == (ShutdownReason.MODEL_UNAVAILABLE,
                                            "the model could not be reached: 3 tries over 5 s")
    assert op.needs is None


def test_asking_the_operator_alone_takes_their_resume_as_the_answer(parts) -> None:
    p = parts()
    operator, op, rt = OperatorAsking(p.state), p.deps.operator, p.state.rt
    operator.need(Ask("stuck", "the agent looks stuck", []))
    assert not operator.answers()  # still paused: nobody answered
    op.needs, op.paused = None, False  # the operator's resume (console.engine.operator)
    assert operator.answers() and rt.guards.pending() is None
    assert operator.hold() is None  # not held: the notice the answer gave joins the conversation as a step
    assert p.state.conversation[-1].meta.get("kind") == "operator_notice"


# -- a turn's steps --------------------------------------------------------------------------------------------------
def test_a_turn_alone_records_its_reply_then_each_call_with_its_result(parts) -> None:
    p = parts()
    turns, s = TurnSteps(p.state, p.need), p.state
    p.start_turn()
    call = ToolCall(id="c1", name="no_such_tool", arguments="{}")
    turns.record_reply(TurnOutput("calling", [call], Usage(100, 5, 0), Stop("tool_use")))
    assert s.cp.stage == "tools" and s.conversation[-1].role == "assistant"
    assert turns.finish_turn() is None
    assert s.conversation[-1].role == "tool" and s.conversation[-1].tool_call_id == "c1"
    assert s.cp.stage == "boundary" and p.kinds()[-2:] == ["TokenUsage", "GuardrailsStatus"]
    assert turns.prompt().system == "the system prompt"


def test_a_turn_alone_asks_the_operator_through_what_it_was_given_with_its_step(parts) -> None:
    p = parts()
    turns, s = TurnSteps(p.state, p.need), p.state
    for _ in range(10):
        p.start_turn()
        turns.record_reply(TurnOutput("I am done.", [], Usage(100, 5, 0), Stop("end_turn")))
        assert turns.finish_turn() is None  # the stop is refused: the plan is not done
        if p.asked:
            break
    # Refused stops past the limit ask the operator, recorded by the bookkeeping's own commit (commit=False).
    assert p.asked == [("completion_refused", False)]
    assert s.conversation[-1].meta.get("kind") == "completion_blocked"


# -- between turns ---------------------------------------------------------------------------------------------------
def test_between_turns_alone_winds_down_then_ends_the_session_for_a_restart(parts) -> None:
    p = parts(context_window=8_000)
    between, s = BetweenTurns(p.state, p.need), p.state
    for n in range(3):
        s.conversation.extend([Message.assistant(f"turn {n}", []), Message.user(f"go on {n}")])
    s.cm.reset(int(s.cm.budget * 0.9))  # past the hard threshold, nothing worth masking
    assert between.pressure() is None and s.conversation[-1].meta.get("kind") == "wind_down"
    assert s.cp.evaluated and p.kinds()[-1] == "WindDown"
    s.cm.record_usage(s.cm.used, 50)  # the wind-down turn
    ended = between.pressure()
    assert ended is not None and ended.reason is ShutdownReason.CONTEXT_FULL and ended.carryover


def test_between_turns_alone_drops_a_restart_a_larger_window_does_not_need(parts) -> None:
    p = parts(auto_restart=False)
    between, s = BetweenTurns(p.state, p.need), p.state
    recorded = s.cm.snapshot()
    between.restart_dropped(recorded)
    assert s.conversation[-1].meta.get("kind") == "restart_dropped"
    cleared = p.seen[-1]
    assert isinstance(cleared, ev.NeedsOperatorCleared) and cleared.reason == "restart_approval"
    assert between.budgets() is None and p.asked == []  # no budget set: nothing to ask
