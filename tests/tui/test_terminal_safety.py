"""The console and the fleet view under hostile text: escape sequences and markup in everything an agent or a job
folder controls are shown as text (visible escapes, literal brackets), no raw control character reaches the screen,
and nothing crashes a view (``[/]`` closes no tag; ``[link="`` opens a broken one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.content import Content

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider, ScriptedTurn
from console.tui.launch import build_fleet_app
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.guardrails import GuardrailsScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.widgets.lines import ItemView
from console.tui.widgets.todo_pane import TodoPane
from tests.conftest import run_settings
from tests.hostile import ATTACK, SHOWN, hostile_turns, raw_controls
from tests.tui.conftest import FROZEN_NOW, attach_app, drive, run_app, settle, wait_for
from tests.tui.fleet_runs import listed
from tests.tui.guardrail_events import Log

WIDE = (200, 50)  # every pane on screen at once
# A folder name holds anything but "/" and NUL: an escape sequence, a bell, a C1 CSI, markup Textual cannot parse.
EVIL_NAME = 'evil[link="x]\x1b]0;pwned\x07\x9bz'
EVIL_SHOWN = 'evil[link="x]\\x1b]0;pwned\\x07\\x9bz'


def screen_text(app: Any) -> str:
    """Every cell of the current screen as the terminal would get it (toasts included), one line per row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def views_text(app: Any) -> str:
    """Every line of every line-drawn pane, on screen or not."""
    return "\n".join(line for view in app.screen.query(ItemView) for line in view.plain_lines())


def words(text: str) -> str:
    """``text`` with its wrapping undone (a pane wraps a long line at any space): for containment checks."""
    return " ".join(text.split())


def hostile_scripted_turns() -> list[ScriptedTurn]:
    return [ScriptedTurn.model_validate(t) for t in hostile_turns(blank_lines=True)]


def test_a_hostile_run_in_the_console_is_shown_as_text(make_job) -> None:
    paths = make_job()
    clock = FakeClock(step=0.001)
    free = GuardrailsConfig.model_validate({"completion": {"type": "none"}})  # job_complete accepted at once
    provider = ScriptedProvider(clock=clock, script=hostile_scripted_turns())
    sup = Supervisor(paths, run_settings(guardrails=free), provider, clock=clock)
    app = run_app(sup)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.run_screen.run_finished, what="the run to end")
        await settle(pilot, app)
        await pilot.press("E")  # every tool call expanded: arguments and results in full
        await settle(pilot, app)
        # A free stop: job_complete accepted, but the record shows nothing done, so the run says incomplete.
        assert app.is_running and app.state.outcome == "incomplete"
        conversation = "\n".join(app.run_screen.conversation.plain_lines())
        assert SHOWN in conversation  # the reply, with its own lines kept
        assert "I will write it." in conversation and "Done." in conversation
        assert f"tool{SHOWN}" in conversation  # the unknown tool's name
        assert f"line 1 {SHOWN}" in conversation  # the file written, and its content read back
        assert f"missing{SHOWN}.md" in conversation  # the failed call
        assert f"All done {SHOWN}" in conversation  # the job_complete call and the completion notice
        assert not raw_controls(views_text(app)) and not raw_controls(screen_text(app))
        assert f"All done {SHOWN}"[:40] in screen_text(app)

    drive(app, body, size=WIDE)


def hostile_log() -> Log:
    """A run's log with the attack in every text the console shows: a phase's name (the todo pane's title), the
    Layer 2 display, feedback, a denial, an error, a recovered file, the guardrails status, a pending restart."""
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="openai", model=f"gpt{ATTACK}", context_window=32_000,
            context_window_source=f"job.toml{ATTACK}", priced=False)
    seq = len(log.events) + 1  # built here: the event's own "kind" field shadows Log.add's first argument
    log.events.append(ev.TodosChanged(
        ts=log.start, seq=seq, session=1, kind="phase", phase_name=f"Evil {ATTACK}", phase_number=1,
        total_phases=2, display=f"Phase: Evil {ATTACK}\n[x] done {ATTACK}\n[ ] next {ATTACK}  ← CURRENT",
        items=[ev.TodoItemRecord(text=f"done {ATTACK}", done=True), ev.TodoItemRecord(text="next", done=False)]))
    log.add(ev.GuardrailsStatus, policies=[ev.PolicyInfo(name=f"p{ATTACK}", kind="sequential", detail=ATTACK)],
            feedback=[ev.FeedbackInfo(name=f"f{ATTACK}", kind="static", trigger=ATTACK, next=ATTACK)],
            checker=f"plan{ATTACK}", verdict=f"incomplete: {ATTACK}", tools=[f"t{ATTACK}"], confinement=ATTACK)
    log.add(ev.TurnStarted, turn=1)
    log.add(ev.ToolCalled, turn=1, call_id="c1", tool=f"write{ATTACK}", arguments=json.dumps({"path": ATTACK}))
    log.add(ev.ToolDenied, turn=1, call_id="c1", tool=f"write{ATTACK}", policy=f"p{ATTACK}", reason=ATTACK)
    log.add(ev.Feedback, turn=1, source=f"src{ATTACK}", severity="warning", message=f"msg {ATTACK}",
            observations=[f"obs {ATTACK}"], suggestions=[f"sug {ATTACK}"], block=f"<feedback>{ATTACK}</feedback>")
    log.add(ev.ErrorEvent, message=f"boom {ATTACK}", where=f"w{ATTACK}", recoverable=True)
    log.add(ev.StateRecovered, file=f"todos.json{ATTACK}", problem=ATTACK, action=ATTACK, moved_to=ATTACK)
    log.add(ev.RestartPending, reason=f"context_full{ATTACK}", usage_pct=0.9, used_tokens=29_000,
            context_window=32_000, next_session=2)
    return log


def test_an_attached_console_shows_every_field_of_a_hostile_log_as_text(make_job) -> None:
    paths = make_job()
    hostile_log().write(paths.events)
    app = attach_app(paths)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.state.restart_pending is not None, what="the log replayed")
        await settle(pilot, app)
        shown = screen_text(app)
        assert not raw_controls(shown) and not raw_controls(views_text(app))
        # The todo pane's title is the phase's name: text, not markup (it used to raise MarkupError on "[/]").
        title = app.main.query_one(TodoPane).border_title
        assert title is not None and Content.from_markup(title).plain.startswith(f"Todo list · Evil {SHOWN}"[:40])
        assert f"Evil {SHOWN}"[:30] in shown
        assert words(f"msg {SHOWN}") in words(views_text(app)) and words(f"boom {SHOWN}") in words(views_text(app))
        # The guardrails view: names, triggers, the verdict, the tools, all from the log.
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GuardrailsScreen), what="the guardrails view")
        await pilot.pause()
        assert not raw_controls(screen_text(app)) and f"p{SHOWN}"[:20] in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, GuardrailsScreen))
        # The rewind dialog's title names the phase (what `r` opens on a run this process runs).
        app.push_screen(RewindScreen(app.state.phase, blink=False))
        await wait_for(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind dialog")
        await pilot.pause()
        assert not raw_controls(screen_text(app)) and "Rewind the current phase · Evil" in screen_text(app)
        # A toast carrying the run's folder and the phase (markup would raise; an escape would act). Raised while
        # the dialog is up, it waits for it to close (console/tui/notices.py).
        app.notify(f"{EVIL_NAME}: {ATTACK}", title=f"t{ATTACK}")
        await pilot.pause()
        assert not raw_controls(screen_text(app)) and EVIL_SHOWN not in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RewindScreen), what="the dialog closed")
        await wait_for(pilot, lambda: EVIL_SHOWN in screen_text(app), what="the toast")
        assert not raw_controls(screen_text(app))
        assert app.is_running

    drive(app, body, size=WIDE)


def test_the_fleet_view_shows_a_hostile_run_folder_as_text(tmp_path: Path) -> None:
    store_path = tmp_path / "data" / "jobs.db"
    store = JobStore(store_path)
    folder = tmp_path / "runs" / EVIL_NAME
    folder.mkdir(parents=True)
    (folder / "instructions.md").write_text("# x\n", encoding="utf-8")
    store.started(folder, EVIL_NAME, "openai", "gpt-6.2-sol", FROZEN_NOW)
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-6.2-sol", context_window=32_000)
    log.add(ev.RestartPending, reason=ATTACK, usage_pct=0.98, used_tokens=27_500, context_window=32_000,
            next_session=2)  # waiting for approval: the row is highlighted (and named under the list)
    log.write(JobPaths(folder).events)
    app = build_fleet_app(store_path, holder=lambda fold: 4242, watch=False, animations=False, keymap={},
                          now=lambda: FROZEN_NOW)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: listed(app, 1), what="the row")
        await wait_for(pilot, lambda: EVIL_SHOWN in screen_text(app), what="the selected run drawn")
        assert app.is_running and isinstance(app.screen, FleetScreen)
        shown = screen_text(app)
        assert not raw_controls(shown)
        assert EVIL_SHOWN in shown  # the run's folder under the list
        assert shown.count('evil[link="x]\\x') >= 2  # and the job column (cut to its width)

    drive(app, body, size=(120, 30))
