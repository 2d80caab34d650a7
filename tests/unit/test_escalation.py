"""Escalation, alone: stuck nudges counted toward asking the operator (and started over by progress or an answer),
refused stops past max_completion_blocks asked about with the checker's reasons, what each answer grants, the
state a kill leaves (a need asked again), the job.toml key, and which provider errors are "unreachable"."""

from __future__ import annotations

import errno
import itertools
import socket
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.enforcement import Enforcer
from console.engine.guardrails import GuardrailsConfig, GuardrailState, build_guardrails
from console.engine.guardrails.escalation import EVIDENCE_KEPT, Escalation, EscalationState
from console.engine.job import format_validation_error
from console.engine.messages import Message, ToolCall
from console.engine.todos import TodoItem, TodoState
from console.providers.errors import network_reason, unreachable_reason
from tests.unit.test_guardrails_world import FakeWorld

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)


# -- the rules ------------------------------------------------------------------------------------------------------
def test_nudges_without_progress_reach_the_threshold_and_progress_or_an_answer_starts_over() -> None:
    esc = Escalation(3)
    for i in range(2):
        esc.nudged(f"repeat: read_file() returned the same result {4 * (i + 1)} times in a row")
    assert not esc.stuck_due()
    assert esc.progressed() and esc.state.stuck_nudges == 0 and not esc.progressed()  # nothing left to reset
    for i in range(3):
        esc.nudged(f"repeat: read_file() returned the same result {4 * (i + 1)} times in a row")
    assert esc.stuck_due()
    evidence = esc.stuck_evidence(idle_turns=12)
    assert evidence == ["repeat: read_file() returned the same result 4 times in a row",
                        "repeat: read_file() returned the same result 8 times in a row",
                        "repeat: read_file() returned the same result 12 times in a row",
                        "3 stuck nudges without progress (stuck_escalate_after = 3)",
                        "no todo completed for 12 turns"]
    esc.ask("stuck", "stuck", evidence)
    assert not esc.stuck_due()  # asked: not again while it waits
    esc.nudged("idle: no todo completed in the last 30 turns (since turn 1)")
    assert esc.answered() == "stuck"
    assert (esc.state.stuck_nudges, esc.state.nudges, esc.state.pending) == (0, [], None)  # the count starts over
    assert esc.answered() is None


def test_zero_never_asks_and_the_threshold_is_bounded() -> None:
    esc = Escalation(0)
    for _ in range(100):
        esc.nudged("repeat")
    assert not esc.stuck_due()
    for bad in (-1, 1001):
        with pytest.raises(ValueError, match="stuck_escalate_after"):
            Escalation(bad)


def test_the_evidence_is_bounded_and_the_same_line_is_kept_once() -> None:
    esc = Escalation(3)
    for i in range(10):
        esc.nudged("x" * 1000 if i % 2 else "same line")
    assert len(esc.state.nudges) <= EVIDENCE_KEPT and all(len(x) <= 300 for x in esc.state.nudges)
    esc.ask("stuck", "m" * 5000, ["e" * 900] * 20)
    assert len(esc.state.message) <= 2000 and len(esc.state.evidence) == 8
    # What the journal keeps reads back, and a state file that lies is refused.
    assert EscalationState.model_validate_json(esc.state.model_dump_json()) == esc.state
    for bad in ({"pending": "coffee"}, {"stuck_nudges": -1}, {"nudges": ["a"] * 50}, {"surprise": 1}):
        with pytest.raises(ValidationError):
            EscalationState.model_validate(bad)
    # A journal written before escalation existed reads as "nothing asked".
    assert GuardrailState.model_validate({}).escalation == EscalationState()


# -- through the enforcer -------------------------------------------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.events: list[ev.EventBase] = []
        self.changes = 0


def enforcer(todos: TodoState | None = None, **table: Any) -> tuple[Enforcer, Recorder]:
    clock = FakeClock(start=T0)
    stream = ev.EventStream(None, clock)
    rec = Recorder()
    stream.subscribe(rec.events.append)
    config = GuardrailsConfig.model_validate(table)

    def changed() -> None:
        rec.changes += 1

    def no_plan() -> Any:
        from console.engine.plan import PlanError

        raise PlanError("main_plan.md does not exist yet")

    enf = Enforcer(build_guardrails(config), events=stream, clock=clock, world=FakeWorld(),  # type: ignore[arg-type]
                   changed=changed, record_intent=lambda key, facts: None, redo=lambda key: None,
                   todos=lambda: todos or TodoState(), load_plan=no_plan)
    enf.start()
    return enf, rec


def same_turn(enf: Enforcer, turn: int) -> None:
    """One turn whose one call reads the same file with the same result, then the turn's feedback."""
    call = ToolCall(id=f"c{turn}", name="read_file", arguments='{"path": "notes.md"}')
    enf.record_turn(turn, [call], {call.id: Message.tool(call, "the same notes", ok=True)})
    enf.collect_feedback(turn, turns_without_progress=turn)


def test_the_stuck_detectors_nudges_are_counted_and_ask_after_the_third() -> None:
    enf, rec = enforcer()
    asks = []
    for turn in range(1, 13):
        same_turn(enf, turn)
        asks.append(enf.stuck_ask(idle_turns=turn))
    nudged = [e for e in rec.events if isinstance(e, ev.StuckDetected)]
    assert len(nudged) == 3  # at the 4th, 8th and 12th repeat
    assert [i + 1 for i, a in enumerate(asks) if a is not None] == [12]
    ask = asks[-1]
    assert ask is not None and ask.reason == "stuck" and ask.message.startswith("the agent looks stuck: 3 nudges")
    assert ask.evidence[0].startswith('repeat: read_file({"path":"notes.md"}) returned the same result 4 times')
    assert ask.evidence[-2:] == ("3 stuck nudges without progress (stuck_escalate_after = 3)",
                                 "no todo completed for 12 turns")
    # Recorded, a kill loses nothing: the next process reads the same need back, to ask again.
    enf.record_ask(ask)
    recorded = GuardrailState.model_validate_json(enf.snapshot().model_dump_json())
    again, _ = enforcer()
    again.restore(recorded)
    assert again.pending() == ask
    # The operator's resume: the count starts over; three more nudges (12 more repeats) before it asks again.
    assert again.answer(resumed=True, by="operator's resume") == "stuck" and again.pending() is None
    asks = []
    for turn in range(13, 25):
        same_turn(again, turn)
        asks.append(again.stuck_ask(idle_turns=turn))
    assert [13 + i for i, a in enumerate(asks) if a is not None] == [24]


def test_errors_in_a_row_and_idle_turns_are_nudges_too() -> None:
    enf, _ = enforcer()
    for turn in range(1, 10):  # the same failing call: nudged at the 3rd, 6th and 9th error
        call = ToolCall(id=f"c{turn}", name="run_tests", arguments="{}")
        enf.record_turn(turn, [call], {call.id: Message.tool(call, "error: make: *** No rule", ok=False)})
        enf.collect_feedback(turn, turns_without_progress=0)
    ask = enf.stuck_ask(idle_turns=9)
    assert ask is not None and ask.evidence[0].startswith("error: run_tests failed 3 times in a row")
    assert "rewind re-plans with your words" in ask.message
    # Bootstrapping or in the final review, a rewind is refused: the need does not offer it (found: it did).
    bare = enf.stuck_ask(idle_turns=9, rewind=False)
    assert bare is not None and "rewind" not in bare.message and bare.message.endswith(", stop ends the run")
    idle, _ = enforcer(feedback=[{"type": "stuck", "idle_turns": 5, "repeat_threshold": 12}])
    for turn in range(1, 16):  # different calls, no todo completed: idle at 5, 10 and 15 turns
        call = ToolCall(id=f"c{turn}", name="read_file", arguments=f'{{"path": "f{turn}.md"}}')
        idle.record_turn(turn, [call], {call.id: Message.tool(call, f"text {turn}", ok=True)})
        idle.collect_feedback(turn, turns_without_progress=turn)
    ask = idle.stuck_ask(idle_turns=15)
    assert ask is not None
    assert [line.split(":")[0] for line in ask.evidence[:3]] == ["idle"] * 3
    assert ask.evidence[-1] == "no todo completed for 15 turns"


def test_progress_starts_the_nudges_over() -> None:
    enf, _ = enforcer()
    for turn in range(1, 9):
        same_turn(enf, turn)  # two nudges
    enf.progressed()  # a todo completed
    assert enf.g.escalation.state.stuck_nudges == 0
    for turn in range(9, 17):
        same_turn(enf, turn)
        assert enf.stuck_ask(idle_turns=0) is None  # two more nudges: not three in a row without progress


def test_stuck_escalate_after_zero_only_nudges() -> None:
    enf, rec = enforcer(stuck_escalate_after=0)
    for turn in range(1, 40):
        same_turn(enf, turn)
        assert enf.stuck_ask(idle_turns=turn) is None
    assert len([e for e in rec.events if isinstance(e, ev.StuckDetected)]) >= 9


def test_refused_stops_past_the_cap_ask_with_the_checkers_reasons_and_the_answer_decides() -> None:
    todos = TodoState(items=[TodoItem(text="Write the report")])
    enf, _ = enforcer(todos, max_completion_blocks=2)
    for _ in range(3):
        verdict = enf.check_stop("end_turn", None)
        assert not verdict.allowed
    assert verdict.give_up is not None and "waits for your operator" in verdict.message
    bare = enf.completion_ask(rewind=False)
    assert bare is not None and "rewind" not in bare.message
    ask = enf.completion_ask()
    assert ask is not None and ask.reason == "completion_refused"
    assert ask.message.startswith("the agent tried to stop 3 times with the job incomplete. Resume gives it 2 more")
    # Nothing declared: seed 000's protocol refused, with the record's words.
    assert ask.evidence[0].startswith("protocol: ") and "main_plan.md" in ask.evidence[0]
    assert ask.evidence[-1] == "3 refused stops without a completed todo (max_completion_blocks = 2)"
    enf.record_ask(ask)
    assert enf.completion_ask() is None  # asked: not again while it waits
    # Stopped: the refusals stay counted (the run ends as incomplete, as before it asked).
    stopped, _ = enforcer(todos, max_completion_blocks=2)
    stopped.restore(enf.snapshot())
    assert stopped.answer(resumed=False, by="operator's stop") == "completion_refused"
    assert stopped.blocked_out() is not None
    # Resumed: the full max_completion_blocks again, and no stale reasons.
    assert enf.answer(resumed=True, by="operator's resume") == "completion_refused"
    assert enf.g.completion_blocks == 0 and enf.blocked_out() is None and enf.g.escalation.state.refusals == []


def test_an_answer_with_nothing_pending_changes_nothing() -> None:
    enf, rec = enforcer(budget_tokens=1000)
    before = rec.changes
    assert enf.answer(resumed=True, by="operator's resume") is None
    assert rec.changes == before and not [e for e in rec.events if isinstance(e, ev.BudgetRaised)]
    enf.forget_ask()
    assert rec.changes == before


# -- job.toml -------------------------------------------------------------------------------------------------------
def test_stuck_escalate_after_is_read_from_job_toml_and_bounded() -> None:
    assert GuardrailsConfig().stuck_escalate_after == 3
    assert build_guardrails(GuardrailsConfig(stuck_escalate_after=5)).escalation.stuck_escalate_after == 5
    for bad, says in ((-1, "greater than or equal to 0"), (1001, "less than or equal to 1000"),
                      ("3", "valid integer"), (True, "valid integer")):
        with pytest.raises(ValidationError) as err:
            GuardrailsConfig.model_validate({"stuck_escalate_after": bad})
        line = format_validation_error("job.toml", err.value)
        assert "key 'stuck_escalate_after'" in line and says in line, line


# -- which errors mean nobody is there ------------------------------------------------------------------------------
def chained(*chain: BaseException) -> BaseException:
    """An SDK-style error raised from a transport error raised from an OS error (the last is the innermost)."""
    for outer, inner in itertools.pairwise(chain):
        outer.__cause__ = inner
    return chain[0]


class APIConnectionError(Exception):
    pass


class ConnectTimeout(Exception):
    pass


class ReadTimeout(Exception):
    pass


@pytest.mark.parametrize(("inner", "reason"), [
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused"),
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "host not found"),
    (socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"), "host not found"),
    (OSError(errno.EHOSTUNREACH, "No route to host"), "no route to host"),
    (OSError(errno.ENETUNREACH, "Network is unreachable"), "network unreachable"),
    (ConnectTimeout("timed out"), "no answer to the connection"),
])
def test_unreachable_errors_are_named(inner: BaseException, reason: str) -> None:
    err = chained(APIConnectionError("Connection error."), Exception("transport"), inner)
    assert unreachable_reason(err) == reason
    assert network_reason(err) == reason


@pytest.mark.parametrize("inner", [ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
                                   ReadTimeout("read timed out"), Exception("peer closed connection")])
def test_a_server_that_was_reached_is_not_unreachable(inner: BaseException) -> None:
    assert unreachable_reason(chained(APIConnectionError("Connection error."), inner)) is None
