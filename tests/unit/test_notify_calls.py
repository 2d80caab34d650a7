"""A call says what is true, need kind by need kind: "again" (and urgent) only for a need that comes back after the
operator's answer did not resolve it, or that nobody answers (its reminders); never for a new request the operator
answered. With auto-restart off each restart is its own "needs you": a warning the first time, information once
the operator has approved one (a long run must not page them urgently at every restart). Against a loopback
webhook, on a fake clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import get_args

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.needs import NEW_EACH_TIME
from console.notify import Notifier
from tests.notify_server import Loopback, loopback

MIN = 60.0
# The needs that are the same need when they come back after an answer (the answer did not resolve them): every
# kind but a new request each time. "gave_up" and "crashed" end the run (their "again" is tested with resumes in
# test_notify_reminders.py).
# fleet_budget: a raise that was not enough is the same need back (the day's spend past the new limit), as budget.
UNRESOLVED = ("stuck", "budget", "provider_down", "store_down", "completion_refused", "fleet_budget")


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def ask(clock: FakeClock, reason: str, seq: int, session: int = 1) -> ev.NeedsOperator:
    return ev.NeedsOperator(ts=clock.now(), seq=seq, session=session, reason=reason,  # type: ignore[arg-type]
                            message=f"{reason} message", paused=reason != "restart_approval")


def answer(clock: FakeClock, reason: str, seq: int, by: str) -> ev.NeedsOperatorCleared:
    return ev.NeedsOperatorCleared(ts=clock.now(), seq=seq, session=1, reason=reason, by=by)  # type: ignore[arg-type]


def test_every_need_kind_is_either_a_new_request_or_one_that_comes_back() -> None:
    kinds = set(get_args(ev.NeedReason))
    assert {"restart_approval", "mcp_question"} == NEW_EACH_TIME
    assert kinds == {*NEW_EACH_TIME, *UNRESOLVED, "gave_up", "crashed"}


def test_restarts_approved_then_asked_again_are_new_requests_not_again(server: Loopback) -> None:
    """--no-auto-restart: each restart asks, the operator approves each within seconds. The second and later are
    no "again" and no failure: information, each saying how many were approved before."""
    clock = FakeClock()  # 2026-01-15 14:00 UTC
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    seq = 0
    for session in (1, 2, 3, 4):
        n(ask(clock, "restart_approval", seq := seq + 1, session))
        clock.advance(20)  # approved at once
        n(answer(clock, "restart_approval", seq := seq + 1, "restart approved"))
        clock.advance(3 * MIN)  # the next restart comes soon: well within the time an unresolved need is "again"
    got = server.wait_for(4)
    assert [r.body["title"] for r in got] == [
        "agent-console: run k3f9q needs you (restart approval)",
        "agent-console: run k3f9q needs you (restart approval; 1 approved before)",
        "agent-console: run k3f9q needs you (restart approval; 2 approved before)",
        "agent-console: run k3f9q needs you (restart approval; 3 approved before)"]
    assert [r.body["type"] for r in got] == ["warning", "info", "info", "info"]
    assert not any("again" in r.body["title"] or "times since" in r.body["title"] for r in got)
    assert "A new request: 2 earlier ones of this run approved, the last at 14:03." in got[2].body["message"]
    assert "agent-console approve k3f9q" in got[3].body["message"]  # each still says how to answer it
    # One nobody answers is reminded, and its reminders escalate as any unanswered need's do.
    n(ask(clock, "restart_approval", seq := seq + 1, 5))
    clock.advance(15 * MIN)
    first = n.remind_due()
    clock.advance(60 * MIN)
    second = n.remind_due()
    assert first is not None and second is not None
    assert first.title.startswith("agent-console: run k3f9q still needs you (restart approval): reminder 1")
    assert (first.kind, second.kind) == ("warning", "failure")
    assert n.close()


def test_a_restart_denied_then_asked_again_is_no_approval_to_count(server: Loopback) -> None:
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    n(ask(clock, "restart_approval", 1))
    n(answer(clock, "restart_approval", 2, "restart denied"))
    clock.advance(MIN)
    n(ask(clock, "restart_approval", 3))
    assert n.close()
    got = server.wait_for(2)
    assert [r.body["title"] for r in got] == ["agent-console: run k3f9q needs you (restart approval)"] * 2
    assert [r.body["type"] for r in got] == ["warning", "warning"]


@pytest.mark.parametrize("reason", UNRESOLVED)
def test_a_need_back_after_its_answer_is_again_and_urgent(reason: str, server: Loopback) -> None:
    """The operator resumed it; the same need comes back minutes later: the answer did not resolve it."""
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    n(ask(clock, reason, 1))
    clock.advance(2 * MIN)
    n(answer(clock, reason, 2, "operator's resume"))
    clock.advance(3 * MIN)
    n(ask(clock, reason, 3))
    assert n.close()
    first, again = server.wait_for(2)
    assert "again" not in first.body["title"] and first.body["type"] == "warning"
    assert " again " in again.body["title"] and again.body["title"].endswith(", 2 times since 14:00")
    assert again.body["type"] == "failure"


@pytest.mark.parametrize("reason", UNRESOLVED)
def test_a_need_nobody_answers_is_reminded_and_then_urgent(reason: str, server: Loopback) -> None:
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    n(ask(clock, reason, 1))
    clock.advance(15 * MIN)
    first = n.remind_due()
    clock.advance(60 * MIN)
    second = n.remind_due()
    assert n.close()
    assert first is not None and second is not None
    assert "still needs you" in first.title and "still needs you" in second.title
    assert (first.kind, second.kind) == ("warning", "failure")
