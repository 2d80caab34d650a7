"""Past 100% of the prompt budget the context is said as over, the same in every view (console.view.present.fill,
context_full): a wind-down's run showed "ctx 107%" and "context 107% full"."""

from __future__ import annotations

from datetime import UTC, datetime

from console.engine import events as ev
from console.view import present

T0 = datetime(2026, 11, 26, 17, 0, tzinfo=UTC)


def test_fill_caps_with_an_over_marker():
    assert present.fill(0.96) == "96%" and present.fill(1.0) == "100%" and present.fill(0.0) == "0%"
    assert present.fill(1.07) == "100%+" and present.fill(3.0) == "100%+"


def test_event_lines_say_over_full_and_of_what():
    pending = ev.RestartPending(ts=T0, seq=1, session=1, usage_pct=1.07, used_tokens=9_150, context_window=10_000,
                                prompt_budget=8_550, next_session=2, carryover_messages=4, carryover_tokens=800)
    line = present.describe(pending).line
    assert "107% full" not in line and "context over full (107% of the prompt budget)" in line, line
    wind = ev.WindDown(ts=T0, seq=2, session=1, usage_pct=0.93, used_tokens=8_000)
    assert "context 93% full: wind-down sent" in present.describe(wind).line
