"""A one-shot timer always fires (console.tui.pacing.one_shot), where Textual's set_timer may never call back.

The console keeps a timer to know a call is due (the run screen's drain of the events, a pane's repaint, the
conversation's stream) and schedules none while it is set: a timer that silently never fires freezes that part of
the view for good. Textual's set_timer skips the ticks it is late for, and a one-shot timer has only one: late by
more than its delay when its task first reads the clock (another thread holding the GIL, a sub-millisecond delay),
it ends without calling back. benchmarks/tui.py froze this way in 1 run in 20 (18,696 events left in the bridge).

Here the clock Textual's timers read advances a few milliseconds at every reading, so every timer is late by the
time it looks: deterministic, no wall-clock speed involved."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from textual import _time
from textual.app import App

from console.tui.pacing import one_shot

TUI = Path(__file__).resolve().parents[2] / "console" / "tui"


class Bare(App[None]):
    pass


@pytest.fixture
def late_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each reading of Textual's clock is 5 ms after the previous one."""
    ticks = itertools.count()
    monkeypatch.setattr(_time, "get_time", lambda: 1000.0 + next(ticks) * 0.005)


def _fired(schedule: str, delay: float) -> list[int]:
    """The calls a timer of ``delay`` made, on a Textual app given a few dozen turns of its loop."""
    calls: list[int] = []

    async def main() -> None:
        app = Bare()
        async with app.run_test() as pilot:
            if schedule == "set_timer":
                app.set_timer(delay, lambda: calls.append(1))
            else:
                one_shot(app, delay, lambda: calls.append(1))
            for _ in range(30):
                await pilot.pause()

    asyncio.run(main())
    return calls


@pytest.mark.parametrize("delay", [0.0, 1e-7, 0.001])
def test_one_shot_fires_once_even_when_late(late_clock: None, delay: float) -> None:
    assert _fired("one_shot", delay) == [1]


def test_textual_set_timer_drops_a_late_one_shot(late_clock: None) -> None:
    """Why one_shot exists: with the same clock, Textual's own one-shot timer never calls back. If a Textual upgrade
    makes this fail, set_timer has been fixed upstream and one_shot can go."""
    assert _fired("set_timer", 0.001) == []


def test_one_shot_fires_once_on_a_normal_clock() -> None:
    assert _fired("one_shot", 0.001) == [1]


def test_no_view_schedules_with_set_timer() -> None:
    """Every delayed call in the console goes through one_shot (a set_timer kept as "a call is due" can freeze a
    view); set_interval (a repeating timer, skipping late ticks on purpose) is fine."""
    offenders = [f"{p.relative_to(TUI)}:{n}" for p in sorted(TUI.rglob("*.py")) if p.name != "pacing.py"
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if ".set_timer(" in line]
    assert offenders == []


def _run_screen_absorbs(tmp_path: Path, presses: int = 3, per_burst: int = 6000) -> tuple[int, int]:
    """A run screen fed bursts of events with a press of p before each (the key holds the drain back for a
    moment, then a timer lets it go; a burst is folded in slices, each scheduled by a timer): (events pushed,
    events the screen folded)."""
    from datetime import UTC, datetime, timedelta
    from shutil import copytree

    from console.engine import events as ev
    from console.engine.job import JobPaths
    from console.tui.app import ConsoleApp
    from console.tui.commands import RecordingController

    copytree(Path(__file__).resolve().parents[2] / "sample_jobs" / "quickstart", tmp_path / "job")
    t0 = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
    app = ConsoleApp(controller=RecordingController(), paths=JobPaths(tmp_path / "job"), job_title="late",
                     watch=False, animations=False, keymap={}, now=lambda: t0)
    pushed = 0

    async def main() -> None:
        nonlocal pushed
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            screen = app.run_screen
            for _ in range(presses):
                await pilot.press("p")
                for _ in range(per_burst):
                    pushed += 1
                    app.bridge.push(ev.TextDelta(ts=t0 + timedelta(milliseconds=pushed), seq=pushed, session=1,
                                                 turn=1, text="word "))
                for _ in range(1000):  # ends as soon as all are folded (about 0.2 s): 5 s is a stuck screen
                    await asyncio.sleep(0.005)
                    if screen.events_seen >= pushed and not screen.bridge.pending:
                        break

    asyncio.run(main())
    return pushed, app.run_screen.events_seen if app.run_screen is not None else -1


def test_the_run_screen_absorbs_every_event_when_its_timers_are_late(late_clock: None, tmp_path: Path) -> None:
    pushed, seen = _run_screen_absorbs(tmp_path)
    assert seen == pushed
