"""A run that waits for its operator (a need, their pause, a restart's approval) in whole runs of the scripted model
on a FakeClock: its deadline still ends it; a restart the resumed settings no longer call for is dropped; a signal
is nobody's answer; a resume that answers nothing says what would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from console.cli.common import go_on_hint
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig
from console.engine.job import JobPaths
from console.engine.loop import ShutdownReason
from console.engine.session import DEADLINE_ENDS_WAIT
from console.engine.supervisor import Supervisor
from console.notify import Notifier
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from console.view.present import describe
from tests.conftest import run_settings, time_limit

DEADLINE = GuardrailsConfig(deadline="10m")


class Counting(ScriptedProvider):
    """The scripted replay, counting the model's calls."""

    def __init__(self, clock: FakeClock, script: list[T] | None = None) -> None:
        super().__init__(clock=clock, script=script)
        self.calls = 0

    def stream(self, request):  # type: ignore[no-untyped-def]
        self.calls += 1
        yield from super().stream(request)


def reread() -> T:
    return T(text="Reading it once more.", calls=[C(name="read_file", arguments={"path": "instructions.md"})])


def events(paths: JobPaths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events))


def on(sup: Supervisor, kind: type[ev.EventBase], act: Callable[[ev.EventBase], None]) -> None:
    sup.subscribe(lambda e: act(e) if isinstance(e, kind) else None)


def run(sup: Supervisor):  # type: ignore[no-untyped-def]
    with time_limit(60):  # a run left waiting for an operator who never comes fails the test, not the suite
        return sup.run()


# -- 1. the deadline ends a run that waits --------------------------------------------------------------------------
def test_a_stuck_run_waiting_for_its_operator_ends_at_its_deadline(make_job, clock: FakeClock) -> None:
    paths = make_job()
    provider = Counting(clock, [reread() for _ in range(60)])
    sup = Supervisor(paths, run_settings(guardrails=DEADLINE), provider, clock=clock)
    asked: list[ev.EventBase] = []

    def nobody_answers(e: ev.EventBase) -> None:
        asked.append(e)
        clock.advance(11 * 60)  # the operator is away; the deadline passes while the run waits

    on(sup, ev.NeedsOperator, nobody_answers)
    result = run(sup)
    assert [getattr(a, "reason", None) for a in asked] == ["stuck"]
    # The same end as a deadline reached while working: out of budget, the deadline named.
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED and result.detail.startswith("deadline passed: ")
    assert result.ended == "incomplete" and provider.calls == 12  # no turn after the need (no wrap-up turn)
    evs = events(paths)
    tail = [e for e in evs if e.seq > asked[0].seq and e.type in (
        "budget_exhausted", "needs_operator_cleared", "session_ended", "run_ended", "turn_started")]
    assert [e.type for e in tail] == ["budget_exhausted", "needs_operator_cleared", "session_ended", "run_ended"]
    exhausted, cleared, _, ended = tail
    assert isinstance(exhausted, ev.BudgetExhausted) and exhausted.budget == "deadline" and not exhausted.wrap_up
    shown = describe(exhausted)
    assert shown is not None and "without a wrap-up turn" in shown.detail and "told to wrap up" not in shown.detail
    assert isinstance(cleared, ev.NeedsOperatorCleared) and (cleared.reason, cleared.by) == ("stuck",
                                                                                             DEADLINE_ENDS_WAIT)
    assert isinstance(ended, ev.RunEnded) and ended.reason == "budget_exhausted"
    # What the operator is told to do names the run's own job.toml and the deadline.
    hint = go_on_hint(paths, ended.reason, ended.detail)
    assert hint.startswith(f"raise deadline under [guardrails] in {paths.root / 'job.toml'}")
    # The operator's channels: the need, then the end as out of time with what to do; no reminder after the end.
    notifier = Notifier([], paths.run_id, paths.root.name, clock=clock, look=False, remind=[1])
    told = [m for e in evs if (m := notifier.message_for(e)) is not None]
    assert [m.title for m in told] == [f"agent-console: run {paths.run_id} needs you (stuck)",
                                       f"agent-console: run {paths.run_id} ended (out of time)"]
    assert "raise the deadline in the run folder's job.toml, then agent-console resume" in told[1].body
    clock.advance(3600)
    assert notifier.remind_due() is None
    # The need is closed in the recorded state too: resumed with the deadline still passed, the run ends at once,
    # asking neither its operator nor the model.
    again = Supervisor(paths, run_settings(guardrails=DEADLINE), provider, clock=clock)
    asked.clear()
    result = run(again)
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED and result.detail.startswith("deadline passed: ")
    assert asked == [] and provider.calls == 12


def test_a_later_deadline_lets_the_resumed_run_go_on_without_the_old_need(make_job, clock: FakeClock) -> None:
    paths = make_job()
    provider = Counting(clock, [reread() for _ in range(12)])
    sup = Supervisor(paths, run_settings(guardrails=DEADLINE), provider, clock=clock)
    on(sup, ev.NeedsOperator, lambda e: clock.advance(11 * 60))
    assert run(sup).reason is ShutdownReason.BUDGET_EXHAUSTED
    provider = Counting(clock, [T(text="Resuming.", calls=[C(name="todo_complete")]), T(error="end of script")])
    later = Supervisor(paths, run_settings(guardrails=GuardrailsConfig(deadline="2h")), provider, clock=clock)
    asked: list[ev.EventBase] = []
    on(later, ev.NeedsOperator, asked.append)
    result = run(later)
    assert asked == [] and provider.calls == 2  # the stuck need was closed: not asked again, the agent works
    assert result.reason is ShutdownReason.ERROR and "end of script" in result.detail


def test_a_run_the_operator_paused_ends_at_its_deadline(make_job, clock: FakeClock) -> None:
    paths = make_job("quickstart")
    provider = Counting(clock)
    sup = Supervisor(paths, run_settings(guardrails=DEADLINE), provider, clock=clock)

    def pause_then_leave(e: ev.EventBase) -> None:
        if isinstance(e, ev.TurnStarted) and e.turn == 3:
            sup.pause()
        elif isinstance(e, ev.OperatorCommand) and e.command == "pause" and e.status == "applied":
            clock.advance(11 * 60)

    sup.subscribe(pause_then_leave)
    result = run(sup)
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED and result.detail.startswith("deadline passed: ")
    evs = events(paths)
    assert [e.budget for e in evs if isinstance(e, ev.BudgetExhausted)] == ["deadline"]
    assert not [e for e in evs if isinstance(e, ev.NeedsOperatorCleared)]  # no need was open: none is closed
    assert provider.calls == 3  # the paused turn was dropped; nothing after it


def test_a_restart_waiting_for_approval_ends_at_the_deadline(make_job, clock: FakeClock) -> None:
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=10_000, auto_restart=False, guardrails=GuardrailsConfig(
        deadline="2h")), ScriptedProvider(clock=clock), clock=clock)
    on(sup, ev.NeedsOperator, lambda e: clock.advance(3 * 3600))
    result = run(sup)
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED and result.detail.startswith("deadline passed: ")
    evs = events(paths)
    order = [e.type for e in evs if e.type in ("restart_pending", "needs_operator", "budget_exhausted",
                                                "needs_operator_cleared", "restart_denied", "restart_approved",
                                                "run_ended")]
    assert order == ["restart_pending", "needs_operator", "budget_exhausted", "needs_operator_cleared", "run_ended"]
    cleared = next(e for e in evs if isinstance(e, ev.NeedsOperatorCleared))
    assert (cleared.reason, cleared.by) == ("restart_approval", DEADLINE_ENDS_WAIT)
    # Resumed with the deadline still passed: it ends at once, asking nobody; with a later one the restart (its
    # session's last step calls for it) is asked again.
    for deadline, asks in (("2h", []), ("8h", ["restart_approval"])):
        seen = len(events(paths))
        again = Supervisor(paths, run_settings(context_window=10_000, auto_restart=False, guardrails=GuardrailsConfig(
            deadline=deadline)), ScriptedProvider(clock=clock), clock=clock)
        asked: list[str] = []
        on(again, ev.NeedsOperator, lambda e, sup=again, seen_asks=asked: (
            seen_asks.append(getattr(e, "reason", "")), sup.command("deny_restart")))
        result = run(again)
        assert asked == asks and not [e for e in events(paths)[seen:] if isinstance(e, ev.TurnStarted)]
        assert result.reason is (ShutdownReason.USER_SHUTDOWN if asks else ShutdownReason.BUDGET_EXHAUSTED)


def test_a_deadline_passed_before_a_restart_is_asked_for_ends_the_run_without_asking(make_job, tmp_path: Path,
                                                                                     clock: FakeClock) -> None:
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=10_000, auto_restart=False, guardrails=GuardrailsConfig(
        deadline="2h")), ScriptedProvider(clock=clock), clock=clock)
    # The deadline passes once the reply after the wind-down is in (its budgets were looked at before it): the
    # session ends for a full context after that turn, before any boundary gives a wrap-up turn.
    wound: list[ev.EventBase] = []
    on(sup, ev.WindDown, wound.append)
    on(sup, ev.AssistantMessage, lambda e: clock.advance(3 * 3600) if wound and e.seq > wound[0].seq else None)
    result = run(sup)
    assert result.reason is ShutdownReason.BUDGET_EXHAUSTED and result.detail.startswith("deadline passed: ")
    types = [e.type for e in events(paths)]
    assert types.count("wind_down") == 1 and types.count("budget_exhausted") == 1
    assert "restart_pending" not in types and "needs_operator" not in types and "wrap_up" not in types
    assert [e.reason for e in events(paths) if isinstance(e, ev.SessionEnded)] == ["context_full"]


# -- 2. a restart the resumed settings no longer call for ----------------------------------------------------------
def stop_at_second_restart(paths: JobPaths, clock: FakeClock, window: int) -> Supervisor:
    """Run with --no-auto-restart in ``window``: the first restart approved, the run stopped while the second waits."""
    sup = Supervisor(paths, run_settings(context_window=window, auto_restart=False), ScriptedProvider(clock=clock),
                     clock=clock)
    answers = ["approve_restart", "stop"]
    on(sup, ev.NeedsOperator, lambda e: sup.command(answers.pop(0)))
    result = run(sup)
    assert result.reason is ShutdownReason.USER_SHUTDOWN and answers == []
    return sup


def test_a_larger_window_at_resume_drops_the_restart_that_waited(make_job, clock: FakeClock) -> None:
    paths = make_job("requirements-extraction")
    stop_at_second_restart(paths, clock, 9000)
    seen = len(events(paths))
    sup = Supervisor(paths, run_settings(context_window=12_000, auto_restart=False), ScriptedProvider(clock=clock),
                     clock=clock)
    pending: list[ev.EventBase] = []
    on(sup, ev.RestartPending, pending.append)
    on(sup, ev.NeedsOperator, lambda e: sup.command("deny_restart"))
    run(sup)
    new = events(paths)[seen:]
    started = next(e for e in new if isinstance(e, ev.SessionStarted))
    assert started.reason == "resume" and started.session == 2
    # The need is closed at once, saying why; the session goes on (turns, before any new restart is asked).
    cleared = next(e for e in new if isinstance(e, ev.NeedsOperatorCleared))
    assert cleared.reason == "restart_approval"
    assert cleared.by == ("not needed at window 12,000: the context is 72% of the prompt budget (restarts at 85%); "
                          "the session goes on")
    assert len(cleared.by) <= 120  # the views' line shows it whole
    first_turn = next(e for e in new if isinstance(e, ev.TurnStarted))
    assert cleared.seq < first_turn.seq and first_turn.session == 2
    assert not [e for e in new if isinstance(e, ev.SessionEnded) and e.seq < first_turn.seq]
    # A restart asked later is asked with true figures: the context past the hard threshold of the new budget.
    for p in pending:
        assert isinstance(p, ev.RestartPending) and p.context_window == 12_000 and p.usage_pct >= 0.85


def test_a_restart_that_still_holds_under_the_resumed_window_is_asked_again_with_its_figures(make_job,
                                                                                            clock: FakeClock) -> None:
    paths = make_job("requirements-extraction")
    stop_at_second_restart(paths, clock, 9000)
    seen = len(events(paths))
    sup = Supervisor(paths, run_settings(context_window=9_300, auto_restart=False), ScriptedProvider(clock=clock),
                     clock=clock)
    on(sup, ev.NeedsOperator, lambda e: sup.command("deny_restart"))
    assert run(sup).detail == "restart denied by the operator"
    new = events(paths)[seen:]
    assert not [e for e in new if isinstance(e, (ev.TurnStarted, ev.NeedsOperatorCleared))
                and not (isinstance(e, ev.NeedsOperatorCleared) and e.by == "restart denied")]
    (ended,) = [e for e in new if isinstance(e, ev.SessionEnded)]
    (pending,) = [e for e in new if isinstance(e, ev.RestartPending)]
    # The figures of the window it was resumed with, past its hard threshold: what the session's end says too.
    assert pending.context_window == 9_300 and pending.usage_pct >= 0.85
    assert ended.detail == f"context {pending.usage_pct:.0%} full"


# -- 3. a signal is nobody's answer ----------------------------------------------------------------------------------
def test_sigterm_while_a_restart_waits_ends_the_run_interrupted_and_the_need_open(make_job, clock: FakeClock) -> None:
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=10_000, auto_restart=False), ScriptedProvider(clock=clock),
                     clock=clock)
    # The command-line run's handlers turn SIGTERM into a stop with that source (timeout(1), a shutdown).
    on(sup, ev.NeedsOperator, lambda e: sup.command("stop", source="SIGTERM"))
    result = run(sup)
    assert result.reason is ShutdownReason.INTERRUPTED and "SIGTERM" in result.detail
    evs = events(paths)
    # Nothing says an operator answered: no denial, the need not cleared.
    assert not [e for e in evs if isinstance(e, (ev.RestartDenied, ev.NeedsOperatorCleared))]
    assert [e.source for e in evs if isinstance(e, ev.OperatorCommand)] == ["SIGTERM", "SIGTERM"]  # received, applied
    ended = [e for e in evs if isinstance(e, ev.RunEnded)][-1]
    assert ended.reason == "interrupted" and ended.outcome == "incomplete"
    # The next process asks again (a resume is not an answer either), and the operator answers then.
    seen = len(evs)
    again = Supervisor(paths, run_settings(context_window=10_000, auto_restart=False), ScriptedProvider(clock=clock),
                       clock=clock)
    asked: list[ev.EventBase] = []
    on(again, ev.NeedsOperator, lambda e: (asked.append(e), again.command("deny_restart")))
    assert run(again).detail == "restart denied by the operator"
    new = events(paths)[seen:]
    assert [getattr(a, "reason", "") for a in asked] == ["restart_approval"]
    assert not [e for e in new if isinstance(e, ev.TurnStarted)]  # asked again at once, nothing redone
    assert [e.by for e in new if isinstance(e, ev.NeedsOperatorCleared)] == ["restart denied"]
    # The operator's channels hear it as the same wait (since its first ask), not as a need back after an answer;
    # a runner's notifier learns the first process's part from the log (prime) as a console's hears it live.
    first_need = next(e for e in evs if isinstance(e, ev.NeedsOperator))
    for notifier_of in ("live", "primed"):
        notifier = Notifier([], paths.run_id, paths.root.name, clock=clock, look=False)
        if notifier_of == "primed":
            notifier.prime(evs)
            told = [m for e in new if (m := notifier.message_for(e)) is not None]
        else:
            told = [m for e in evs + new if (m := notifier.message_for(e)) is not None]
        needs = [m for m in told if "needs you" in m.title]
        assert needs and all(m.title == f"agent-console: run {paths.run_id} needs you (restart approval)"
                             for m in needs)
        assert f"Since {first_need.ts.astimezone():%Y-%m-%d %H:%M:%S %Z}" in needs[-1].body


def test_sigterm_while_a_stuck_run_waits_keeps_the_need_for_the_next_process(make_job, clock: FakeClock) -> None:
    paths = make_job()
    provider = Counting(clock, [reread() for _ in range(30)])
    sup = Supervisor(paths, run_settings(), provider, clock=clock)
    on(sup, ev.NeedsOperator, lambda e: sup.command("stop", source="SIGTERM"))
    result = run(sup)
    assert result.reason is ShutdownReason.INTERRUPTED and result.detail == "interrupted by SIGTERM"
    assert not [e for e in events(paths) if isinstance(e, ev.NeedsOperatorCleared)]
    seen = len(events(paths))
    again = Supervisor(paths, run_settings(), provider, clock=clock)
    asked: list[ev.EventBase] = []
    on(again, ev.NeedsOperator, lambda e: (asked.append(e), again.command("stop")))
    result = run(again)
    # Asked again with the same evidence, before any turn; the operator's stop is an answer.
    assert [getattr(a, "reason", "") for a in asked] == ["stuck"] and provider.calls == 12
    assert result.reason is ShutdownReason.USER_SHUTDOWN and "looked stuck" in result.detail
    assert [e.by for e in events(paths)[seen:] if isinstance(e, ev.NeedsOperatorCleared)] == ["operator's stop"]


# -- 4. a resume that answers nothing says what would ---------------------------------------------------------------
def test_resume_while_a_restart_waits_says_to_approve_or_deny(make_job, clock: FakeClock) -> None:
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=10_000, auto_restart=False), ScriptedProvider(clock=clock),
                     clock=clock)
    answers = ["resume", "deny_restart"]
    on(sup, ev.NeedsOperator, lambda e: [sup.command(a) for a in answers])
    assert run(sup).detail == "restart denied by the operator"
    (rej,) = [e for e in events(paths) if isinstance(e, ev.OperatorCommand) and e.status == "rejected"]
    rid = paths.run_id
    assert rej.command == "resume"
    assert rej.detail == f"not paused: it waits for restart approval: agent-console approve {rid} or deny {rid}"


@pytest.mark.parametrize("answers", [["approve_restart", "deny_restart"], ["deny_restart", "approve_restart"]])
def test_two_answers_to_one_restart_the_first_decides_and_the_second_is_told(make_job, clock: FakeClock,
                                                                               answers: list[str]) -> None:
    # A phone's approve and a shell's deny at once (one look at the inbox takes both): the first is applied, the
    # second rejected with why; neither sender is told theirs was applied when it was not.
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=10_000, auto_restart=False, max_turns=60),
                     ScriptedProvider(clock=clock), clock=clock)
    asked: list[int] = []

    def answer(e: ev.NeedsOperator) -> None:
        if e.reason == "restart_approval" and not asked:
            asked.append(1)
            for a in answers:
                sup.command(a)
        elif e.reason == "restart_approval" or asked:
            sup.command("stop")

    on(sup, ev.NeedsOperator, answer)
    result = run(sup)
    cmds = [(e.command, e.status) for e in events(paths) if isinstance(e, ev.OperatorCommand)
            and e.command in ("approve_restart", "deny_restart") and e.status != "received"]
    assert cmds == [(answers[0], "applied"), (answers[1], "rejected")]
    (second,) = [e for e in events(paths) if isinstance(e, ev.OperatorCommand) and e.status == "rejected"]
    first = "approved" if answers[0] == "approve_restart" else "denied"
    assert second.detail == f"the restart was {first} already (the first answer decides): nothing changed"
    if answers[0] == "deny_restart":
        assert result.detail == "restart denied by the operator"
    else:
        assert any(isinstance(e, ev.SessionStarted) and e.session == 2 for e in events(paths))


def test_resume_of_a_run_that_needs_nothing_is_just_not_paused(make_job, clock: FakeClock) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    on(sup, ev.TurnStarted, lambda e: sup.command("resume") if e.turn == 2 else None)
    assert run(sup).ok
    (rej,) = [e for e in events(paths) if isinstance(e, ev.OperatorCommand) and e.status == "rejected"]
    assert rej.detail == "not paused"


class Killed(BaseException):
    """The process dies (as kill -9 would, after the last commit): nothing of the step in flight is kept."""


class DiesAtFirstCall(ScriptedProvider):
    def stream(self, request):  # type: ignore[no-untyped-def]
        raise Killed
        yield  # a generator


class Requests(ScriptedProvider):
    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.requests: list = []

    def stream(self, request):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        yield from super().stream(request)


def test_a_dropped_restart_killed_after_its_record_is_not_dropped_or_told_twice(make_job, clock: FakeClock) -> None:
    paths = make_job("requirements-extraction")
    stop_at_second_restart(paths, clock, 9000)
    seen = len(events(paths))
    dying = Supervisor(paths, run_settings(context_window=12_000, auto_restart=False), DiesAtFirstCall(clock=clock),
                       clock=clock)
    with pytest.raises(Killed):
        run(dying)
    provider = Requests(clock=clock)
    sup = Supervisor(paths, run_settings(context_window=12_000, auto_restart=False), provider, clock=clock)
    on(sup, ev.NeedsOperator, lambda e: sup.command("deny_restart"))
    run(sup)
    new = events(paths)[seen:]
    dropped = [e for e in new if isinstance(e, ev.NeedsOperatorCleared) and e.by.startswith("not needed at window")]
    assert len(dropped) == 1  # recorded with the first process's session start: not judged again
    first = provider.requests[0]
    told = [m for m in first.messages if m.meta.get("kind") == "restart_dropped"]
    assert len(told) == 1 and "The restart announced is not needed" in told[0].content
    assert not [e for e in new if isinstance(e, ev.RestartPending) and e.seq < next(
        t.seq for t in new if isinstance(t, ev.TurnStarted) and t.session == 2)]
