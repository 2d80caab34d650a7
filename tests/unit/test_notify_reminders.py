"""A need nobody answers is told again, further and further apart; one that comes back right after its answer says
"again" and is sent as more urgent; a resumed run neither forgets since when it waits nor sends the reminders it
missed; a gave-up run is one message whose commands all act on a run no process runs. The run's clock is a fake
one: reminders due hours later are tested without a sleep (against a loopback webhook)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.notify import AGAIN_WITHIN, REMIND_MINUTES, Notifier, history
from tests.notify_server import Loopback, Request, loopback

MIN = 60.0


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")  # the times a message shows are the machine's local ones
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def need(clock: FakeClock, reason: str = "stuck", seq: int = 1, paused: bool = True) -> ev.NeedsOperator:
    return ev.NeedsOperator(ts=clock.now(), seq=seq, session=1, reason=reason,  # type: ignore[arg-type]
                            message="no todo completed in 40 turns", evidence=["read_file(notes.md) x 12"],
                            paused=paused)


def cleared(clock: FakeClock, reason: str = "stuck", seq: int = 2) -> ev.NeedsOperatorCleared:
    return ev.NeedsOperatorCleared(ts=clock.now(), seq=seq, session=1, reason=reason,  # type: ignore[arg-type]
                                   by="operator's resume")


def titles(requests: list[Request]) -> list[str]:
    return [r.body["title"] for r in requests]


def test_an_unanswered_need_is_told_again_further_and_further_apart(server: Loopback) -> None:
    assert REMIND_MINUTES == (15.0, 60.0, 240.0)
    clock = FakeClock()  # 2026-01-15 14:00 UTC
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    n(need(clock))
    [first] = server.wait_for(1)
    assert first.body["type"] == "warning"
    sent_at: list[float] = []
    for _ in range(10 * 60):  # ten hours, a look a minute (the reminders' thread looks as often, or more)
        clock.advance(MIN)
        if n.remind_due() is not None:
            sent_at.append(clock.monotonic() / MIN)
    # 15 min, then an hour after that, then every 4 hours: not 40 messages over a night.
    assert sent_at == [15, 75, 315, 555]
    reminders = server.wait_for(5)[1:]
    assert titles(reminders) == [
        "agent-console: run k3f9q still needs you (stuck): reminder 1, waiting 15 min",
        "agent-console: run k3f9q still needs you (stuck): reminder 2, waiting 1 h 15 min",
        "agent-console: run k3f9q still needs you (stuck): reminder 3, waiting 5 h 15 min",
        "agent-console: run k3f9q still needs you (stuck): reminder 4, waiting 9 h 15 min"]
    # The first is a warning as the need was; from the second (an hour and more of waiting) urgent.
    assert [r.body["type"] for r in reminders] == ["warning", "failure", "failure", "failure"]
    body = reminders[1].body["message"]
    assert body.startswith("Reminder 2: run k3f9q has waited for you since 14:00 (1 h 15 min)")
    # The same need, with the same commands that answer it.
    assert first.body["message"] in body
    for command in ("agent-console resume k3f9q", "agent-console stop k3f9q", "agent-console attach k3f9q"):
        assert command in body
    # Answered: no reminder any more, however long the run goes on.
    n(cleared(clock))
    clock.advance(24 * 60 * MIN)
    assert n.remind_due() is None
    assert n.close() and len(server.requests) == 5


def test_a_machine_back_from_sleep_sends_one_reminder_not_the_ones_it_missed(server: Loopback) -> None:
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    n(need(clock, "budget"))
    clock.advance(30 * 60 * MIN)  # thirty hours without a look
    assert n.remind_due() is not None
    assert n.remind_due() is None  # the next is one gap later, from now
    clock.advance(60 * MIN - 1)
    assert n.remind_due() is None
    clock.advance(1)
    assert n.remind_due() is not None
    assert n.close() and titles(server.wait_for(3))[1] == (
        "agent-console: run k3f9q still needs you (budget reached): reminder 1, waiting 1 d 6 h")


def test_a_need_back_right_after_its_answer_says_again_and_is_urgent(server: Loopback) -> None:
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    n(need(clock, seq=1))
    clock.advance(5 * MIN)
    n(cleared(clock, seq=2))  # the operator resumed it
    clock.advance(3 * MIN)
    n(need(clock, seq=3))  # stuck again at once
    clock.advance(AGAIN_WITHIN - 1)
    n(cleared(clock, seq=4))
    clock.advance(1)
    n(need(clock, seq=5))
    clock.advance(10 * MIN)
    n(cleared(clock, seq=6))
    clock.advance(AGAIN_WITHIN + 1)  # long after its answer: a new need, said as one
    n(need(clock, seq=7))
    got = server.wait_for(4)
    assert titles(got) == [
        "agent-console: run k3f9q needs you (stuck)",
        "agent-console: run k3f9q needs you again (stuck), 2 times since 14:00",
        "agent-console: run k3f9q needs you again (stuck), 3 times since 14:00",
        "agent-console: run k3f9q needs you (stuck)"]
    assert [r.body["type"] for r in got] == ["warning", "failure", "failure", "warning"]
    # Another reason right after an answer is a new need, not "again".
    n(cleared(clock, seq=8))
    n(need(clock, "budget", seq=9))
    assert titles(server.wait_for(5))[4] == "agent-console: run k3f9q needs you (budget reached)"
    # A need that came back has its reminders say so too.
    n(cleared(clock, "budget", seq=10))
    n(need(clock, "budget", seq=11))
    clock.advance(15 * MIN)
    reminder = n.remind_due()
    assert reminder is not None and reminder.kind == "failure" and "Asked 2 times since" in reminder.body
    assert n.close()


def test_reminders_can_be_turned_off(server: Loopback) -> None:
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, remind=(), look=False)
    n(need(clock))
    clock.advance(48 * 60 * MIN)
    assert n.remind_due() is None
    assert n.close() and len(server.wait_for(1)) == 1
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", remind=())
    n(need(clock))
    assert n._timer is None and n.close()  # not even a thread looks
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, remind=(5, 0, -1), look=False)
    assert n.remind == (5.0,)  # a gap of nothing or less is no gap (it would send in a loop)
    assert n.close()


def test_the_reminders_thread_sends_them_on_the_real_clock(server: Loopback) -> None:
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", remind=(0.5 / 60,))  # every half second
    n(need(FakeClock(start=datetime.now().astimezone())))
    got = server.wait_for(3, timeout=20)  # a bound for a failure; a pass takes about a second
    assert n.close()
    assert titles(got)[1].startswith("agent-console: run k3f9q still needs you (stuck): reminder 1, waiting ")
    assert titles(got)[2].startswith("agent-console: run k3f9q still needs you (stuck): reminder 2, waiting ")


def test_a_gave_up_run_is_one_message_with_commands_that_act_on_it(server: Loopback) -> None:
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    n(ev.SessionStarted(ts=clock.now(), seq=1, session=1, reason="new"))
    n(need(clock, "gave_up", seq=2, paused=False))
    n(ev.RunEnded(ts=clock.now(), seq=3, session=1, reason="gave_up", detail="the agent gave up", outcome="gave_up"))
    clock.advance(10 * 60 * MIN)
    assert n.remind_due() is None  # no process waits: nothing reminds (the run's `jobs` row says needs you)
    assert n.close() and len(server.requests) == 1
    [told] = server.wait_for(1)
    assert told.body["title"] == "agent-console: run k3f9q ended (gave up) and needs you"
    body = told.body["message"]
    assert "agent-console resume k3f9q" in body and "agent-console logs k3f9q" in body
    # `stop` would say "no process is running": not offered; nor is a console's keys.
    assert "agent-console stop" not in body and "attach" not in body
    assert "the run has ended, no process runs it" in body


def test_a_resumed_run_remembers_its_needs_and_sends_no_storm(server: Loopback, tmp_path) -> None:
    clock = FakeClock()
    t0 = clock.now()
    log = tmp_path / "events.jsonl"
    earlier = [ev.SessionStarted(ts=t0, seq=1, session=1, reason="new"),
               need(clock, "gave_up", seq=2, paused=False),
               ev.RunEnded(ts=t0, seq=3, session=1, reason="gave_up", outcome="gave_up")]
    torn = '{"type":"needs_operator","seq": 4, "ts\n'  # a kill in the middle of a line
    log.write_text("".join(e.model_dump_json() + "\n" for e in earlier) + torn, encoding="utf-8")
    # The operator fixed the cause and resumed it; it gives up again at once: "again", in a new process.
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    n.prime(history(log))
    assert server.requests == []  # learning sends nothing
    clock.advance(10 * MIN)
    n(ev.SessionStarted(ts=clock.now(), seq=4, session=1, reason="resume"))
    clock.advance(2 * MIN)
    n(need(clock, "gave_up", seq=5, paused=False))
    n(ev.RunEnded(ts=clock.now(), seq=6, session=1, reason="gave_up", outcome="gave_up"))
    assert n.close()
    [again] = server.wait_for(1)
    assert again.body["title"] == "agent-console: run k3f9q ended (gave up again) and needs you, 2 times since 14:00"
    assert again.body["type"] == "failure" and len(server.requests) == 1

    # Killed while it waited for its operator (stuck), resumed 10 hours later: asked again, since its first ask,
    # and its reminders start over from that ask (not the ten hours of them it missed at once).
    clock = FakeClock()
    log.write_text("".join(e.model_dump_json() + "\n" for e in
                           [ev.SessionStarted(ts=clock.now(), seq=1, session=1, reason="new"), need(clock)]))
    n = Notifier([server.url("json", "hook2")], "k3f9q", "audit", clock=clock, look=False)
    n.prime(history(log))
    clock.advance(10 * 60 * MIN)
    n(ev.SessionStarted(ts=clock.now(), seq=3, session=1, reason="resume"))
    n(need(clock, seq=4))
    assert n.remind_due() is None
    clock.advance(15 * MIN)
    reminder = n.remind_due()
    assert n.close()
    [asked] = [r for r in server.wait_for(2) if r.path == "/hook2"]
    assert asked.body["title"] == "agent-console: run k3f9q needs you (stuck)"  # not "again": nobody answered
    assert "Since 2026-01-15 14:00:00 UTC" in asked.body["message"]
    assert reminder is not None and "waiting 10 h 15 min" in reminder.title
    assert history(tmp_path / "missing.jsonl") == []

    # Killed while it waited on its budget, resumed with the budget raised: it goes on, and a need for the same
    # reason hours later is a new one, waiting since its own ask.
    clock = FakeClock()
    log.write_text(need(clock, "budget").model_dump_json() + "\n")
    n = Notifier([server.url("json", "hook3")], "k3f9q", "audit", clock=clock, look=False)
    n.prime(history(log))
    clock.advance(60 * MIN)
    n(ev.SessionStarted(ts=clock.now(), seq=2, session=1, reason="resume"))
    n(ev.TurnStarted(ts=clock.now(), seq=3, session=1, turn=5))
    clock.advance(3 * 60 * MIN)
    n(need(clock, "budget", seq=4))
    assert n.close()
    [later] = [r for r in server.wait_for(4) if r.path == "/hook3"]
    assert "Since 2026-01-15 18:00:00 UTC" in later.body["message"]

    # The same, learnt from the log of a process in between (killed waiting; resumed, went on and ended; resumed
    # again): its budget need, asked right after, is a new one, not "again" nor since the first process's.
    clock = FakeClock()
    t0 = clock.now()
    clock.advance(60 * MIN)
    t1 = clock.now()
    log.write_text("".join(e.model_dump_json() + "\n" for e in [
        ev.SessionStarted(ts=t0, seq=1, session=1, reason="new"),
        ev.NeedsOperator(ts=t0, seq=2, session=1, reason="budget", message="spent"),
        ev.SessionStarted(ts=t1, seq=3, session=1, reason="resume"),
        ev.RunEnded(ts=t1, seq=4, session=1, reason="max_turns", outcome="incomplete")]))
    n = Notifier([server.url("json", "hook4")], "k3f9q", "audit", clock=clock, look=False)
    n.prime(history(log))
    clock.advance(MIN)
    n(ev.SessionStarted(ts=clock.now(), seq=5, session=1, reason="resume"))
    n(need(clock, "budget", seq=6))
    assert n.close()
    [fresh] = [r for r in server.wait_for(5) if r.path == "/hook4"]
    assert fresh.body["title"] == "agent-console: run k3f9q needs you (budget reached)"
    assert "Since 2026-01-15 15:01:00 UTC" in fresh.body["message"]


def test_hostile_text_in_a_reminder_is_made_safe(server: Loopback) -> None:
    clock = FakeClock(start=datetime(2026, 1, 15, 23, 50).astimezone())
    n = Notifier([server.url("json", "hook")], "k3f9q", "job\x1b[31m", clock=clock, look=False)
    n(ev.NeedsOperator(ts=clock.now(), seq=1, session=1, reason="stuck", message="\x1b]52;c;aGk=\x07" + "x" * 9000,
                       evidence=["\x1b[2J" + "y" * 900] * 30))
    clock.advance(timedelta(hours=1).total_seconds())
    reminder = n.remind_due()
    assert n.close() and reminder is not None
    assert "\x1b" not in reminder.body and "\x07" not in reminder.body and len(reminder.body) <= 3500
    assert "since 2026-01-15 23:50" in reminder.body  # another day: the date is said


def test_a_stop_is_no_answer_that_makes_the_next_need_again(server: Loopback) -> None:
    """The operator stopped the run (or denied its restart) and resumed it later: the restart it meets again is
    the question they left open, not a fix that did not work."""
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    for seq, by in ((1, "operator's stop"), (3, "restart denied")):
        n(need(clock, "restart_approval", seq=seq, paused=False))
        clock.advance(MIN)
        n(ev.NeedsOperatorCleared(ts=clock.now(), seq=seq + 1, session=1, reason="restart_approval", by=by))
        clock.advance(MIN)
    n(need(clock, "restart_approval", seq=5, paused=False))
    assert n.close()
    assert set(titles(server.wait_for(3))) == {"agent-console: run k3f9q needs you (restart approval)"}


def test_a_reminder_under_a_minute_says_its_seconds(server: Loopback) -> None:
    """remind_minutes may be as short as 0.5: "waiting 0 min" said nothing."""
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False, remind=(0.5,))
    n(need(clock))
    clock.advance(0.5 * MIN)
    assert n.remind_due() is not None
    assert n.close() and titles(server.wait_for(2))[1] == (
        "agent-console: run k3f9q still needs you (stuck): reminder 1, waiting 30 s")
