"""A key's effect on a run's screen: frames paced from the last one drawn (console.tui.pacing), the footer's keys
changed in place (console.tui.widgets.footer), and the events and repaints of a flood held back while a key's
effect is drawn. No test here reads a wall clock's speed: the pacing is checked on a fake clock."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from console.engine import events as ev
from console.engine.job import JobPaths
from console.tui import pacing
from console.tui.app import ConsoleApp
from console.tui.commands import RecordingController
from console.tui.pacing import FrameTimer
from console.tui.screens import run_intake
from console.tui.widgets.footer import KeyFooter
from console.tui.widgets.status import StatusLine

QUICKSTART = Path(__file__).resolve().parents[2] / "sample_jobs" / "quickstart"
T0 = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)


# -- pacing, on a fake clock -----------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorded(FrameTimer):
    """A FrameTimer whose waits are noted (and pass the fake clock on) instead of slept."""

    waits: list[float]
    clock: Clock

    async def _wait(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        self.clock.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(pacing._time, "get_time", fake.__call__)
    return fake


def paced(body: Callable[[Recorded, list[float], Clock], Awaitable[None]], clock: Clock) -> None:
    """Run ``body`` with a started Recorded timer (interval 1 s) whose callback notes the fake time and pauses it,
    as a screen's update does."""

    async def main() -> None:
        app = App()
        async with app.run_test():
            ticks: list[float] = []
            timer: Recorded

            def update() -> None:
                ticks.append(clock.now)
                timer.pause()

            timer = Recorded(app, 1.0, callback=update, pause=True)
            timer.waits, timer.clock = [], clock
            timer._start()
            try:
                await body(timer, ticks, clock)
            finally:
                timer.stop()

    asyncio.run(main())


async def turn() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_frame_asked_for_after_a_quiet_period_is_drawn_at_once(clock: Clock) -> None:
    async def body(timer: Recorded, ticks: list[float], clock: Clock) -> None:
        timer.resume()
        await turn()
        assert ticks == [100.0] and timer.waits == []
        clock.now += 5.0  # quiet for five periods: Textual's timer would wait one to two more
        timer.resume()
        await turn()
        assert ticks == [100.0, 105.0] and timer.waits == []

    paced(body, clock)


def test_frames_asked_for_sooner_wait_what_is_left_of_the_period(clock: Clock) -> None:
    async def body(timer: Recorded, ticks: list[float], clock: Clock) -> None:
        timer.resume()
        await turn()
        clock.now += 0.25
        timer.resume()
        await turn()
        assert timer.waits == [0.75]  # one frame a period at most: a flood costs at most MAX_FPS frames a second
        assert ticks == [100.0, 101.0]

    paced(body, clock)


def test_a_key_lifts_the_cap_for_a_moment(clock: Clock) -> None:
    async def body(timer: Recorded, ticks: list[float], clock: Clock) -> None:
        timer.resume()
        await turn()
        clock.now += 0.01
        timer.hurry()
        timer.resume()
        await turn()
        assert timer.waits == [] and ticks == [100.0, 100.01]
        clock.now += pacing.HURRY_WINDOW + 0.01  # the moment has passed: capped again
        timer.resume()
        await turn()
        assert timer.waits == [round(1.0 - pacing.HURRY_WINDOW - 0.01, 6)] and ticks[-1] == 101.01

    paced(body, clock)


# -- the console -----------------------------------------------------------------------------------------------------
def console(tmp_path: Path) -> tuple[ConsoleApp, RecordingController]:
    shutil.copytree(QUICKSTART, tmp_path / "quickstart")
    controller = RecordingController()
    app = ConsoleApp(controller=controller, paths=JobPaths(tmp_path / "quickstart"), job_title="frames",
                     watch=False, animations=False, keymap={}, now=lambda: T0)
    return app, controller


def drive(app: ConsoleApp, body: Callable[[Any], Awaitable[None]], size: tuple[int, int] = (200, 50)) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await body(pilot)

    asyncio.run(main())


def test_the_run_screen_draws_through_the_frame_timer(tmp_path: Path) -> None:
    app, _ = console(tmp_path)

    async def body(pilot: Any) -> None:
        screen = app.run_screen
        timer = screen._update_timer
        assert isinstance(timer, FrameTimer)
        # Textual asks for its timer by this property only: its own was never made.
        assert screen._Screen__update_timer is None  # type: ignore[attr-defined]
        drawn = timer.frames
        screen.query_one(StatusLine).refresh()
        await pilot.pause()
        assert timer.frames > drawn

    drive(app, body)


def footer_keys(app: ConsoleApp) -> list[FooterKey]:
    return list(app.run_screen.query_one(Footer).query(FooterKey))


def test_p_changes_the_footer_in_place_and_draws_what_a_recompose_draws(tmp_path: Path) -> None:
    app, controller = console(tmp_path)

    async def body(pilot: Any) -> None:
        footer = app.run_screen.query_one(Footer)
        assert isinstance(footer, KeyFooter)
        before = footer_keys(app)
        assert [k.description for k in before if k.key == "p"] == ["Pause"]
        await pilot.press("p")
        await pilot.pause()
        assert controller.sent[-1][0] == "pause"
        after = footer_keys(app)
        assert [id(k) for k in after] == [id(k) for k in before]  # the same widgets: nothing mounted
        assert [(k.description, k.action) for k in after if k.key == "p"] == [("Resume", "resume")]
        in_place = app.export_screenshot()
        footer.refresh(recompose=True)  # what Textual's Footer would have done
        await pilot.pause()
        await pilot.pause()
        assert [id(k) for k in footer_keys(app)] != [id(k) for k in before]
        assert app.export_screenshot() == in_place
        await pilot.press("p")
        await pilot.pause()
        assert [(k.description, k.action) for k in footer_keys(app) if k.key == "p"] == [("Pause", "pause")]

    drive(app, body)


def test_a_footer_with_other_keys_is_composed_again(tmp_path: Path) -> None:
    app, _ = console(tmp_path)

    async def body(pilot: Any) -> None:
        footer = app.run_screen.query_one(KeyFooter)
        count = len(footer_keys(app))
        footer.show_command_palette = not footer.show_command_palette  # a key less
        footer.call_later(footer.bindings_changed, app.run_screen)  # as the screen's signal calls it
        await pilot.pause()
        await pilot.pause()
        assert len(footer_keys(app)) == count - 1

    drive(app, body)


def turn_events(seq: int, turn: int) -> list[ev.EventBase]:
    def at(n: int) -> dict[str, Any]:
        return {"ts": T0 + timedelta(seconds=seq + n), "seq": seq + n, "session": 1}

    return [ev.TurnStarted(turn=turn, prompt_tokens_est=100, **at(0)),
            ev.AssistantMessage(turn=turn, text=f"reply {turn}: \x1b[31m[red]not markup[/red]", **at(1))]


def test_events_wait_while_a_key_is_drawn_then_are_folded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_intake, "KEY_FIRST", 3600.0)  # held for good: nothing here depends on timing
    app, _ = console(tmp_path)

    async def body(pilot: Any) -> None:
        screen = app.run_screen
        conversation = screen.conversation
        await pilot.press("p")
        await pilot.pause()
        assert conversation._held() > 0
        for e in turn_events(1, 1):
            app.bridge.push(e)
        await pilot.pause()
        assert app.bridge.pending == 2 and screen.events_seen == 0  # the key's frames first
        screen.drain_events(everything=True)  # what the run's end does, hold or not
        conversation.flush()
        await pilot.pause()
        assert screen.events_seen == 2
        text = "\n".join(conversation.plain_lines())
        assert "reply 1:" in text and "[red]not markup[/red]" in text  # never parsed as markup
        assert "\x1b" not in text  # safe_text: the escape shown, not sent to the terminal

    drive(app, body)
