"""Seed 004 in real runs: the restart marker names the session and the previous session's turn count (also
when that session was resumed after a kill), max_restarts counts sessions, carryover_turns is the run's
setting, and the wind-down message and the mask notice give the share of the whole window."""

from __future__ import annotations

import re

import pytest

from console.engine import events as ev
from console.engine.context.pressure import WIND_DOWN_MESSAGE
from console.engine.context.tokens import estimate_message
from console.engine.guardrails.feedback import (
    Feedback,
    FeedbackContext,
    FeedbackProviderConfig,
    FeedbackRunner,
    FeedbackTrigger,
)
from console.engine.loop import ShutdownReason
from console.engine.messages import Message
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import Recording, run_settings

WINDOW = 10_000
SEED_WIND_DOWN = ("[Context window {}% full. Please wrap up your current task and write any important state to "
                  "workspace files. The session will restart shortly.]")


def kind(m: Message) -> str:
    return str(m.meta.get("kind", ""))


def markers(provider: Recording) -> dict[str, str]:
    """Each restart marker the model was sent, once."""
    return {m.content: m.content for r in provider.requests for m in r.messages if kind(m) == "restart_marker"}


def replies_by_session(paths) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for e in ev.read_events(paths.events):
        if isinstance(e, ev.AssistantMessage):
            out.setdefault(e.session, set()).add(e.turn)
    return out


def test_restart_marker_wind_down_and_mask_notice_are_seed_004s(make_job, clock) -> None:
    paths = make_job("requirements-extraction")
    provider = Recording(clock=clock)
    result = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=10), provider, clock=clock).run()
    assert result.ok, result.detail
    assert result.sessions >= 3
    turns = replies_by_session(paths)
    found = sorted(markers(provider), key=lambda t: int(re.search(r"Session #(\d+)\.", t)[1]))
    assert len(found) == result.sessions - 1
    for n, text in enumerate(found, start=2):
        # The seed's words, the session's number, and how many turns the previous session ran.
        assert text.startswith(f"[Session restarted. Session #{n}. Previous session context was full. "
                               f"Session #{n - 1} ran {len(turns[n - 1])} turns."), text
        assert text.endswith("Check your workspace files for progress state.]")
    evs = list(ev.read_events(paths.events))
    # The wind-down message: seed 004's words, with the share of the whole window (not of the prompt budget).
    winds = [e for e in evs if isinstance(e, ev.WindDown)]
    assert winds
    for w in winds:
        first = w.message.splitlines()[0]
        assert first == WIND_DOWN_MESSAGE.format(pct=w.used_tokens / WINDOW)
        assert first == SEED_WIND_DOWN.format(round(100 * w.used_tokens / WINDOW))
        assert w.used_tokens / w.prompt_budget >= 0.85 > w.used_tokens / WINDOW  # the two bases differ here
    # The mask notice: the same basis (the window), with what was used once the masking freed its tokens.
    notices = {m.content: m for r in provider.requests for m in r.messages if kind(m) == "mask_notice"}
    masked = [e for e in evs if isinstance(e, ev.ContextMasked)]
    assert masked and len(notices) == len(masked)
    shown = sorted(int(re.match(r"\[Context window (\d+)% full: ", t)[1]) for t in notices)
    expected = sorted(round(100 * (e.used_after - estimate_message(next(iter(notices.values())))) / WINDOW)
                      for e in masked)
    assert all(abs(a - b) <= 1 for a, b in zip(shown, expected, strict=True)), (shown, expected)


@pytest.mark.parametrize(("max_restarts", "sessions"), [(0, 1), (1, 1), (2, 2), (3, 3)])
def test_max_restarts_counts_sessions_as_seed_004(make_job, clock, max_restarts, sessions) -> None:
    paths = make_job("requirements-extraction")
    result = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=max_restarts),
                        ScriptedProvider(clock=clock), clock=clock).run()
    assert result.reason is ShutdownReason.ERROR
    assert f"max_restarts ({max_restarts}) reached" in result.detail
    assert (result.sessions, result.restarts) == (sessions, sessions - 1)
    started = [e for e in ev.read_events(paths.events) if isinstance(e, ev.SessionStarted)]
    assert len(started) == sessions


@pytest.mark.parametrize("carry", [0, 1, 5])
def test_carryover_turns_is_the_runs_setting(make_job, clock, carry) -> None:
    paths = make_job("requirements-extraction")
    provider = Recording(clock=clock)
    result = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=3, carryover_turns=carry),
                        provider, clock=clock).run()
    assert result.sessions == 3, result.detail
    restarts = [e for e in ev.read_events(paths.events) if isinstance(e, ev.SessionStarted) and e.reason == "restart"]
    assert len(restarts) == 2
    # The marker says how many whole turns came along: never more than carryover_turns (the carryover's
    # token budget may allow fewer).
    carried = [int(m[1]) if (m := re.search(r"The last (\d+) turns? (?:is|are) carried over", t)) else 0
               for t in markers(provider)]
    if carry == 0:
        assert carried == [0, 0] and all(e.carryover_messages == 0 for e in restarts)
    else:
        assert all(1 <= n <= carry for n in carried), carried
        assert all(e.carryover_messages > 0 for e in restarts)


class Interrupted(BaseException):
    """A kill in the middle of a step (a BaseException: the engine's `except Exception` must not eat it)."""


class DieAt:
    kind, name = "die", "Die"

    def __init__(self, call: int) -> None:
        self.call = call

    def should_run(self, context: FeedbackContext) -> bool:
        if context.tool_call_count >= self.call:
            raise Interrupted
        return False

    def provide(self, context: FeedbackContext) -> Feedback:  # pragma: no cover - never due
        raise AssertionError


def test_the_turn_count_of_a_session_resumed_after_a_kill_counts_all_its_turns(make_job, clock) -> None:
    paths = make_job("requirements-extraction")
    first = Supervisor(paths, run_settings(context_window=WINDOW), ScriptedProvider(clock=clock), clock=clock)
    first.guardrails.feedback = FeedbackRunner([FeedbackProviderConfig(DieAt(6), FeedbackTrigger(every_n_calls=1))])
    with pytest.raises(Interrupted):
        first.run()
    before = replies_by_session(paths).get(1, set())
    assert len(before) >= 4  # the kill came well inside session 1
    provider = Recording(clock=clock)
    result = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=2), provider, clock=clock).run()
    assert result.sessions == 2, result.detail
    turns = replies_by_session(paths)
    assert len(turns[1]) > len(before)  # session 1 went on after the resume, then filled up
    (marker,) = markers(provider)
    assert f"Session #1 ran {len(turns[1])} turns." in marker, (marker, len(turns[1]))


def test_an_older_runs_journal_without_the_turn_count_resumes_and_restarts(make_job, clock) -> None:
    """A journal written before the session's turn count was recorded: the run resumes, and the marker counts
    the turns it saw (those since the resume; the earlier ones were never recorded)."""
    paths = make_job("requirements-extraction")
    first = Supervisor(paths, run_settings(context_window=WINDOW), ScriptedProvider(clock=clock), clock=clock)
    first.guardrails.feedback = FeedbackRunner([FeedbackProviderConfig(DieAt(6), FeedbackTrigger(every_n_calls=1))])
    with pytest.raises(Interrupted):
        first.run()
    journal = paths.state / "checkpoint.jsonl"
    text = journal.read_text()
    older = re.sub(r'("context":\{[^{}]*?),?"turns":\d+', r"\1", text)
    assert older != text and not re.search(r'"context":\{[^{}]*"turns"', older)
    journal.write_text(older)
    before = len(replies_by_session(paths)[1])
    provider = Recording(clock=clock)
    result = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=2), provider, clock=clock).run()
    assert result.sessions == 2, result.detail
    total = len(replies_by_session(paths)[1])
    (marker,) = markers(provider)
    ran = int(re.search(r"Session #1 ran (\d+) turns?\.", marker)[1])
    assert ran == total - before  # the replies recorded since the resume


def test_each_token_usage_event_carries_context_used_pct_as_seed_004(make_job, clock) -> None:
    """Seed 004: ``logger.log_event(&LogEntry::TokenUsage { ... context_used_pct: context_manager.usage_percentage(),
    })``: every token_usage says how full the window is (the next prompt's share of the whole window, a fraction
    like wind_down's usage_pct), and a log written before the field was recorded still reads."""
    paths = make_job("requirements-extraction")
    result = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=2), ScriptedProvider(clock=clock),
                        clock=clock).run()
    assert result.sessions == 2, result.detail
    usage = [e for e in ev.read_events(paths.events) if isinstance(e, ev.TokenUsage)]
    assert len(usage) > 5
    for e in usage:
        assert e.context_window == WINDOW
        assert e.context_used_pct == round(e.context_tokens / WINDOW, 4), e
    # It rises as the window fills, past the share of the soft threshold before the restart.
    assert max(e.context_used_pct or 0 for e in usage) > min(e.context_used_pct or 1 for e in usage)
    # An older run's line, without the field: it reads, and says nothing it does not know.
    line = usage[0].model_dump_json(exclude={"context_used_pct"})
    assert "context_used_pct" not in line
    old = ev.parse_event(line)
    assert isinstance(old, ev.TokenUsage) and old.context_used_pct is None
    assert old.context_tokens == usage[0].context_tokens
