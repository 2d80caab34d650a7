"""The parts of a run's screen, each built alone (no RunScreen, no ConsoleApp): the run they share
(RunContext), its commands (RunCommands), leaving it (Leaving), the restart's question (RestartPrompt) and its panes
(RunPanes). Each gets the run and plain functions: a test stands in for every one of them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Size

from console.engine import events as ev
from console.engine.commands import (
    MAX_TEXT,
    AnyCommand,
    ApproveRestart,
    CommandError,
    Pause,
    Resume,
    Rewind,
    Stop,
    parse_command,
)
from console.engine.job import JobPaths
from console.tui.commands import RecordingController
from console.tui.screens import run_keys
from console.tui.screens.approval import NOTICE_TITLE, RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.main import RunPanes
from console.tui.screens.quit import QuitScreen
from console.tui.screens.restart_prompt import RestartPrompt
from console.tui.screens.rewind import RewindScreen
from console.tui.screens.run_context import RunContext
from console.tui.screens.run_keys import RunCommands
from console.tui.screens.run_leave import STOP_PATIENCE, Leaving
from console.view.state import ConsoleState

TS = datetime(2026, 1, 1, tzinfo=UTC)


class Said:
    """Stands in for notify, ask and the other functions a part is given: records what it was asked to do."""

    def __init__(self) -> None:
        self.notices: list[tuple[str, str]] = []
        self.asked: list[tuple[Any, Any]] = []
        self.calls: list[str] = []

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: Any = None) -> None:
        self.notices.append((title, message))

    def ask(self, dialog: Any, done: Any) -> None:
        self.asked.append((dialog, done))

    def call(self, name: str) -> Any:
        return lambda *args: self.calls.append(name)


def context(tmp_path: Path, **kw: Any) -> RunContext:
    st = ConsoleState("job")
    st.session = 1
    # In its first phase: a run with no todo list yet offers no checkpoint or rewind (tests/unit/test_run_offers.py).
    st.todos = ev.TodosChanged(ts=datetime(2026, 1, 1, tzinfo=UTC), seq=1, session=1, phase_name="Alpha",
                               phase_number=1, total_phases=2, kind="phase", items=[])
    return RunContext(st, RecordingController(), JobPaths(tmp_path), "k3f9q", **kw)


def sent(ctx: RunContext) -> list[AnyCommand]:
    """The typed commands the run's RecordingController was sent."""
    assert isinstance(ctx.controller, RecordingController)
    return ctx.controller.commands


def commands(ctx: RunContext, said: Said) -> RunCommands:
    return RunCommands(ctx, notify=said.notify, ask=said.ask, sent=said.call("sent"),
                       runner_changed=said.call("runner_changed"), retract=lambda title: said.calls.append(title),
                       resume_key=lambda: "p", in_background=lambda job, done, group: done(job()),
                       ui_alive=lambda: True)


def test_run_context_reads_the_facts_of_its_run(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    facts = ctx.facts()
    assert facts.active and ctx.active and facts.runner_pid == 1 and not facts.startable and not facts.local
    assert ctx.name == "k3f9q" and ctx.host == "" and ctx.resume_hint == ""
    ctx.finished = True
    assert not ctx.active and not ctx.facts().active


def test_run_commands_send_through_the_controller_and_say_a_refusal(tmp_path: Path) -> None:
    ctx, said = context(tmp_path), Said()
    keys = commands(ctx, said)
    keys.toggle_pause()
    assert sent(ctx) == [Pause()] and ctx.state.requested == {"pause": "pausing after this turn"}
    assert said.calls == ["sent"]  # drawn at once
    keys.toggle_pause()  # pausing: p resumes
    assert sent(ctx)[-1] == Resume() and "pause" not in ctx.state.requested
    keys.rewind()
    dialog, done = said.asked[-1]
    assert isinstance(dialog, RewindScreen)
    done("the tests are the spec")
    assert sent(ctx)[-1] == Rewind(issue="the tests are the spec", phase=1)  # the phase the operator saw
    assert ctx.rewind_text == "the tests are the spec"  # kept until the engine applies it
    keys.approve()
    assert said.calls[-2:] == [NOTICE_TITLE, "sent"] and sent(ctx)[-1] == ApproveRestart()
    ctx.finished = True
    keys.pause()
    assert said.notices[-1][0] == "No pause"
    assert sent(ctx)[-1] == ApproveRestart()  # nothing sent


def test_a_rewind_text_the_command_refuses_is_said_as_before_and_not_sent(tmp_path: Path) -> None:
    """The rewind's text is the operator's: a text the typed command refuses (longer than it may be) is said with
    the line parse_command says for it, under "rewind not sent", and kept for the next try."""
    ctx, said = context(tmp_path), Said()
    keys = commands(ctx, said)
    keys.rewind()
    _dialog, done = said.asked[-1]
    long = "x" * (MAX_TEXT + 1)
    done(long)
    with pytest.raises(CommandError) as refused:
        parse_command("rewind", {"issue": long})
    assert said.notices[-1] == ("rewind not sent", str(refused.value)) and sent(ctx) == []
    assert str(refused.value) == "rewind: String should have at most 4000 characters (issue)"
    assert "sent" not in said.calls and "rewind" not in ctx.state.requested


def test_run_commands_start_a_run_again_in_the_background(tmp_path: Path, monkeypatch: Any) -> None:
    from console.tui.commands import InboxController

    ctx, said = context(tmp_path), Said()
    ctx.controller = InboxController(ctx.paths)  # nobody holds the run's lock: it can be started again
    ctx.state.mark_finished("stopped", "", None)
    started: list[Path] = []
    monkeypatch.setattr(run_keys, "resume_in_background", lambda folder, by: started.append(folder))
    keys = commands(ctx, said)
    keys.resume_run()
    dialog, done = said.asked[-1]
    assert isinstance(dialog, ConfirmScreen)
    done(True)
    assert started == [tmp_path] and ctx.state.requested == {"start": "starting again"}
    assert said.notices[-1][0] == "Resumed"


def test_leaving_a_run_of_this_process_asks_then_stops_it(tmp_path: Path) -> None:
    ctx, said = context(tmp_path), Said()
    exits: list[int] = []
    later: list[float] = []
    leaving = Leaving(ctx, in_fleet=False, exit=exits.append, back=said.call("back"), ask=said.ask, push=said.ask,
                      notify=said.notify, send=lambda *a, **k: True, status_refresh=said.call("status"),
                      later=lambda delay, then: later.append(delay))
    leaving.quit()
    dialog, done = said.asked[-1]
    assert isinstance(dialog, ConfirmScreen) and exits == []
    done(True)
    assert ctx.quit_requested and sent(ctx) == [Stop(), Stop()]
    assert ctx.state.requested["stop"] == "stopping, then quitting"
    leaving.quit()
    assert said.notices[-1][1] == "Waiting for the run to stop…"
    ctx.finished, ctx.exit_code = True, 3
    leaving.stop_and_quit()
    assert exits == [3]
    fleet = Leaving(ctx, in_fleet=True, exit=exits.append, back=said.call("back"), ask=said.ask, push=said.ask,
                    notify=said.notify, send=lambda *a, **k: True, status_refresh=said.call("status"),
                    later=lambda delay, then: later.append(delay))
    fleet.quit()
    assert said.calls[-1] == "back"
    ctx.controller.attached = True  # type: ignore[misc]  # attached alone: detach or stop, asked
    ctx.finished = False
    ctx.quit_requested = False
    alone = Leaving(ctx, in_fleet=False, exit=exits.append, back=said.call("back"), ask=said.ask, push=said.ask,
                    notify=said.notify, send=lambda *a, **k: True, status_refresh=said.call("status"),
                    later=lambda delay, then: later.append(delay))
    alone.quit()
    dialog, done = said.asked[-1]
    assert isinstance(dialog, QuitScreen)
    done("stop")
    assert ctx.quit_requested and later == [STOP_PATIENCE]


class Stage:
    """Stands in for the app: what is on top, a bell, a screen pushed."""

    def __init__(self) -> None:
        self.screen: Any = object()
        self.focused: Any = None
        self.screen_stack: list[Any] = []
        self.bells = 0
        self.pushed: list[tuple[Any, Any]] = []

    def bell(self) -> None:
        self.bells += 1

    def push_screen(self, screen: Any, callback: Any = None) -> None:
        self.pushed.append((screen, callback))


def test_the_restart_prompt_opens_its_dialog_once_and_sends_the_answer(tmp_path: Path) -> None:
    ctx, said, stage = context(tmp_path), Said(), Stage()
    answers: list[str] = []
    prompt = RestartPrompt(ctx, stage=lambda: stage, notify=said.notify, retract=said.call("retract"),
                           approve=lambda: answers.append("approve"), deny=lambda: answers.append("deny"),
                           alive=lambda: True)
    prompt.sync()
    assert stage.pushed == [] and stage.bells == 0  # nothing waits
    ctx.state.restart_pending = ev.RestartPending(ts=TS, seq=9, session=1, usage_pct=0.9, next_session=2)
    prompt.sync()
    prompt.sync()
    assert len(stage.pushed) == 1 and stage.bells == 1  # once, with a bell
    dialog, answered = stage.pushed[0]
    assert isinstance(dialog, RestartApprovalScreen) and prompt.approval is dialog
    answered("approve")
    assert answers == ["approve"] and prompt.approval is None
    answered(None)  # later: it still waits, and a notice says how to answer
    assert said.notices[-1][0] == NOTICE_TITLE


def test_the_panes_lay_themselves_out_for_the_size_they_are_given(tmp_path: Path) -> None:
    panes = RunPanes(ConsoleState("job"), lambda: TS, plan_path=tmp_path / "main_plan.md", max_items=50)

    class Alone(App[None]):
        def compose(self) -> ComposeResult:
            yield panes

    async def body() -> None:
        async with Alone().run_test(size=(80, 24)) as pilot:
            await look(pilot)

    async def look(pilot: Any) -> None:
        panes.ready(Size(80, 24))
        assert panes.layout_mode == "narrow" and panes.has_class("-narrow")
        panes.fit(Size(200, 50))
        assert panes.layout_mode == "wide" and not panes.has_class("-narrow")
        panes.show("conversation")
        assert panes.step(1) == "gauge" and panes.step(-1) == "todos"
        panes.show("plan").focus()
        await pilot.pause()
        assert panes.active == "plan" and panes.pane_of(pilot.app.focused) == "plan"
        panes.crowd(True)
        assert panes.has_class("-crowded")

    asyncio.run(body())
