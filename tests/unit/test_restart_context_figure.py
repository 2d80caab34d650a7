"""The context figure (ctx %) after a context restart: the new session's own first prompt from its start, not the
full context of the session it replaces until its first turn (seed 004: a restart starts small, with the carried
turns; the console, the fleet and `logs` say so at once)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from console.engine import events as ev
from console.view import present
from console.view.state import ConsoleState
from console.view.state.parts import GAUGE

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BUDGET = 8_800


def at(seq: int) -> dict[str, object]:
    return {"ts": T0 + timedelta(seconds=seq), "seq": seq}


def full_first_session() -> ConsoleState:
    st = ConsoleState("job")
    st.apply(ev.SessionStarted(**at(1), session=1, context_window=10_000))
    st.apply(ev.TokenUsage(**at(2), session=1, turn=9, input_tokens=7_900, output_tokens=100, context_tokens=7_920,
                           prompt_budget=BUDGET, context_window=10_000))
    st.apply(ev.WindDown(**at(3), session=1, usage_pct=0.9, used_tokens=7_920))
    st.apply(ev.SessionEnded(**at(4), session=1, reason="context_full", turns=9))
    st.apply(ev.ContextCompacted(**at(5), session=2, messages_before=40, messages_after=7, summary_chars=900,
                                 reason="restart"))
    assert round(st.gauge.pct, 2) == 0.9
    return st


def test_a_restart_s_new_session_shows_its_own_estimate_at_once() -> None:
    st = full_first_session()
    changed = st.apply(ev.SessionStarted(**at(6), session=2, reason="restart", carryover_messages=6,
                                         prompt_tokens_est=2_640, prompt_budget=BUDGET, context_window=10_000))
    assert GAUGE in changed  # the gauge and the fleet's ctx column are redrawn now
    assert (st.gauge.used, st.gauge.limit) == (2_640, BUDGET) and f"{st.gauge.pct:.0%}" == "30%"
    p = present.describe(ev.SessionStarted(**at(6), session=2, reason="restart", carryover_messages=6,
                                           prompt_tokens_est=2_640, prompt_budget=BUDGET))
    assert p is not None
    assert p.text == "session 2 started after a context restart: 6 messages carried over"
    assert p.detail == "its first prompt: ~2.6k tokens (30% of the prompt budget)"
    # Its first turn's usage goes on from there.
    st.apply(ev.TurnStarted(**at(7), session=2, turn=10, prompt_tokens_est=2_650))
    assert st.gauge.used == 2_650


def test_a_log_written_before_the_estimate_was_said_still_reads() -> None:
    """An events.jsonl from an older version: its restart's session_started has no estimate; the figure then
    waits for the first turn's, as it did, and nothing else changes."""
    st = full_first_session()
    line = json.dumps({"v": 1, "type": "session_started", "ts": (T0 + timedelta(seconds=6)).isoformat(), "seq": 6,
                       "session": 2, "reason": "restart", "provider": "scripted", "model": "m",
                       "carryover_messages": 6, "context_window": 10_000})
    e = ev.parse_event(line)
    assert isinstance(e, ev.SessionStarted) and (e.prompt_tokens_est, e.prompt_budget) == (0, 0)
    st.apply(e)
    assert st.gauge.used == 7_920
    described = present.describe(e)
    assert described is not None and described.detail == ""
    st.apply(ev.TurnStarted(**at(7), session=2, turn=10, prompt_tokens_est=2_650))
    assert st.gauge.used == 2_650
