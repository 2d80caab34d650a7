"""Every operator key reaches the engine, and its effect shows in the console."""

from __future__ import annotations

from console.engine import events as ev
from console.tui.commands import RecordingController
from console.tui.screens.approval import RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.widgets.feedback import FeedbackPane
from console.tui.widgets.status import StatusLine
from console.tui.widgets.todo_pane import TodoPane
from tests.tui.conftest import FROZEN_NOW, attach_app, drive, events_of, make_supervisor, run_app, settle, wait_for


async def pause_at_gate(pilot, app, sup) -> None:
    """Hold the run at its gate and press p: the engine pauses at the next turn boundary."""
    await wait_for(pilot, sup.provider.waiting.is_set, what="the run to reach its gate")
    await pilot.press("p")
    sup.provider.gate.set()
    await wait_for(pilot, lambda: app.state.paused, what="the pause to apply")


def test_pause_then_resume(make_job):
    sup = make_supervisor(make_job("quickstart"), gate_at=8)
    app = run_app(sup)

    async def body(pilot):
        await pause_at_gate(pilot, app, sup)
        await settle(pilot, app)
        status = app.main.query_one(StatusLine).last_plain
        assert " paused " in status and "p resumes" in status
        # The footer reads Resume while paused (the same key, the binding that applies).
        assert app.run_screen.check_action("resume", ()) is True and app.run_screen.check_action("pause", ()) is False
        footer = " ".join(str(b.binding.description) for b in app.active_bindings.values() if b.binding.show
                          and b.enabled)
        assert "Resume" in footer and "Pause" not in footer
        turn = app.state.turn
        await pilot.press("p")
        await wait_for(pilot, lambda: app.state.ended, what="the run to finish after resume")
        assert app.state.outcome == "completed" and app.state.turn > turn

    drive(app, body)
    applied = [e.command for e in events_of(app, ev.OperatorCommand) if e.status == "applied"]
    assert applied == ["pause", "resume"]


def test_checkpoint_key_starts_a_checkpoint_transition(make_job):
    sup = make_supervisor(make_job("quickstart"), gate_at=16)
    app = run_app(sup)

    async def body(pilot):
        await pause_at_gate(pilot, app, sup)
        await pilot.press("c")
        await wait_for(pilot, lambda: any(e.kind == "checkpoint" for e in events_of(app, ev.PhaseTransition)),
                       what="a checkpoint phase_transition")
        await settle(pilot, app)
        assert app.state.todos is not None and app.state.todos.kind == "transition"
        assert "Checkpoint of phase" in app.state.todos.display
        shown = app.main.query_one(FeedbackPane).messages
        assert any(m.startswith("checkpoint applied") for m in shown)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.state.ended, what="the run to finish")
        assert app.state.outcome == "completed"

    drive(app, body)
    stages = [(e.kind, e.stage) for e in events_of(app, ev.PhaseTransition) if e.kind == "checkpoint"]
    assert stages == [("checkpoint", "started"), ("checkpoint", "completed")]


def test_rewind_key_asks_for_the_issue_and_replaces_the_todo_list(make_job):
    sup = make_supervisor(make_job("quickstart"), gate_at=16)
    app = run_app(sup)

    async def body(pilot):
        await pause_at_gate(pilot, app, sup)
        await settle(pilot, app)
        before = app.state.todos
        assert before is not None and before.kind == "phase"
        await pilot.press("r")
        assert isinstance(app.screen, RewindScreen)
        await pilot.press("enter")  # empty: refused, the modal stays
        assert isinstance(app.screen, RewindScreen)
        await pilot.press(*"the notes were read out of order")
        await pilot.press("enter")
        assert not isinstance(app.screen, RewindScreen)
        await wait_for(pilot, lambda: app.state.todos is not before and app.state.todos.kind == "transition",
                       what="the rewind to replace the todo list")
        await settle(pilot, app)
        assert "Rewind of phase" in app.main.query_one(TodoPane).todos.display
        await pilot.press("p")
        await wait_for(pilot, lambda: any(e.kind == "rewind" and e.stage == "completed"
                                          for e in events_of(app, ev.PhaseTransition)), what="the re-plan")
        await settle(pilot, app)
        assert app.state.todos.generation > before.generation

    drive(app, body)
    rewinds = [e for e in events_of(app, ev.PhaseTransition) if e.kind == "rewind"]
    assert rewinds[0].issue == "(operator) the notes were read out of order"


def restart_job(make_job):
    return make_supervisor(make_job("requirements-extraction"), context_window=10_000, auto_restart=False)


def test_approve_key_starts_a_new_session(make_job):
    sup = restart_job(make_job)
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval modal")
        assert app.state.restart_pending is not None and app.state.session == 1
        # The dialog says it all: no notice beside it (one would cover its buttons at 80x24).
        assert not list(app._notifications)
        await pilot.press("escape")  # later: the restart still waits, and a notice says how to answer
        # Waited for, not looked at after one pause: beside busy helpers the modal was still closing.
        await wait_for(pilot, lambda: [n.title for n in app._notifications] == ["Restart pending"],
                       what="the Restart pending notice")
        await pilot.press("a")  # answered: the notice goes
        await wait_for(pilot, lambda: not list(app._notifications), what="the notice to go")
        await wait_for(pilot, lambda: app.state.session == 2, what="session 2")
        await settle(pilot, app)
        texts = [getattr(i, "text", "") for i in app.run_screen.conversation.items]
        assert any(t.startswith("session 2 started after a context restart") for t in texts)

    drive(app, body)
    started = [e for e in events_of(app, ev.SessionStarted)]
    assert [e.reason for e in started[:2]] == ["new", "restart"]
    assert any(e.by == "operator" for e in events_of(app, ev.RestartApproved))


def test_deny_from_the_main_screen_ends_the_run(make_job):
    sup = restart_job(make_job)
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval modal")
        await pilot.press("escape")  # later: the modal goes, the restart still waits
        # Waited for, not looked at once: beside a CPU hog the modal was still up right after the key.
        await wait_for(pilot, lambda: not isinstance(app.screen, RestartApprovalScreen), what="the modal to go")
        assert app.run_screen.check_action("deny", ())
        await pilot.press("d")  # it ends the run: asked first, as the fleet's d (no: nothing sent)
        assert isinstance(app.screen, ConfirmScreen) and "Deny the restart" in app.screen.title_text
        await pilot.press("n")
        await pilot.pause()
        assert not app.state.requested and app.state.restart_pending is not None
        await pilot.press("d", "y")
        await wait_for(pilot, lambda: app.run_screen.run_finished, what="the run to end")
        assert app.state.outcome == "stopped" and app.exit_code == 3

    drive(app, body)
    assert events_of(app, ev.RestartDenied)


def test_stop_asks_then_stops(make_job):
    sup = make_supervisor(make_job("quickstart"), gate_at=6)
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, sup.provider.waiting.is_set)
        await pilot.press("s")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert not app.state.requested
        await pilot.press("s", "y")  # the stop opens the gate: the engine stops after this turn
        sup.provider.gate.set()
        await wait_for(pilot, lambda: app.run_screen.run_finished, what="the run to stop")
        assert app.state.outcome == "stopped" and app.exit_code == 3
        # Nothing left to stop, pause or checkpoint: the footer no longer offers those keys.
        run = app.run_screen
        assert all(run.check_action(a, ()) is False for a in ("stop", "pause", "resume", "checkpoint", "rewind"))

    drive(app, body)
    assert [e.status for e in events_of(app, ev.OperatorCommand) if e.command == "stop"] == ["received", "applied"]


def test_quit_on_an_in_process_run_asks_first(make_job):
    sup = make_supervisor(make_job("quickstart"), gate_at=6)
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, sup.provider.waiting.is_set)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert app.is_running and not app.run_screen.quit_requested
        await pilot.press("q", "y")
        await wait_for(pilot, lambda: not app.is_running, what="the app to exit after the run stops")

    drive(app, body)
    assert app.return_code == 3 and app.state.outcome == "stopped"  # the operator's stop, not an interrupt


def test_quit_after_completion_exits_at_once_with_the_run_code(make_job):
    sup = make_supervisor(make_job("quickstart"))
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, lambda: app.run_screen.run_finished)
        await pilot.pause()
        # Completion is said by the status line and the conversation, not a toast over the last lines.
        assert not list(app._notifications)
        assert "completed" in app.main.query_one("#status").last_plain
        # The run's commands are gone from the footer; given anyway (the palette), each says why.
        assert all(app.run_screen.check_action(a, ()) is False for a in ("checkpoint", "rewind", "pause", "stop"))
        app.run_screen.action_checkpoint()
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["The job is complete: there is nothing to checkpoint."]
        assert not events_of(app, ev.OperatorCommand)  # nothing was queued
        await pilot.press("c")  # the key does nothing at all now
        await pilot.pause()
        assert len(list(app._notifications)) == 1
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running)

    drive(app, body)
    assert app.return_code == 0


def test_answering_the_quit_dialog_after_the_run_ended_behind_it_exits(make_job):
    """The job completed while the operator read the dialog: 'yes' quits at once (it used to wait forever)."""
    sup = make_supervisor(make_job("quickstart"), gate_at=6)
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, sup.provider.waiting.is_set)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        sup.provider.gate.set()
        await wait_for(pilot, lambda: app.run_screen.run_finished, what="the run to end behind the dialog")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, what="the app to exit")

    drive(app, body)
    assert app.return_code == 0 and app.state.outcome == "completed"


def test_panes_tab_maximize_and_help(make_job):
    app = attach_app(make_job("quickstart"))

    async def body(pilot):
        main = app.main
        assert main.active == "conversation" and app.focused is main.pane("conversation")
        await pilot.press("tab")  # screen order: todos, conversation, context, feedback, plan
        assert main.active == "gauge" and app.focused is main.pane("gauge")
        await pilot.press("shift+tab", "shift+tab")
        assert main.active == "todos" and app.focused is main.pane("todos")
        await pilot.press("tab")
        assert main.active == "conversation"
        await pilot.press("m")
        assert main.maximized is main.pane("conversation")
        await pilot.press("m")
        assert main.maximized is None
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert app.screen is main

    drive(app, body)


def test_narrow_terminal_shows_one_pane_and_tab_switches_it(make_job):
    app = attach_app(make_job("quickstart"))

    async def body(pilot):
        main = app.main
        assert main.layout_mode == "narrow"
        visible = [n for n in ("conversation", "todos", "plan", "gauge", "feedback") if main.pane(n).display
                   and main.pane(n).region.height > 0]
        assert visible == ["conversation"]
        await pilot.press("shift+tab")
        await pilot.pause()
        assert main.pane("todos").region.height > 0 and main.pane("conversation").region.height == 0

    drive(app, body, size=(80, 24))


def test_keys_can_be_remapped_by_binding_id(make_job):
    from console.tui.app import ConsoleApp

    rec = RecordingController()
    app = ConsoleApp(controller=rec, paths=make_job("quickstart"), keymap={"checkpoint": "x", "pause": "ctrl+k"},
                     watch=False, animations=False)

    async def body(pilot):
        # In its first phase: a run with no todo list yet offers no checkpoint (tests/unit/test_run_offers.py).
        app.state.todos = ev.TodosChanged(ts=FROZEN_NOW, seq=1, session=1, phase_name="Alpha", phase_number=1,
                                          total_phases=2, kind="phase", items=[])
        await pilot.press("c")
        assert rec.sent == []
        await pilot.press("x", "ctrl+k")
        assert [c for c, _ in rec.sent] == ["checkpoint", "pause"]
        keys = dict((what, key) for key, what in app.key_help())
        assert keys[next(w for w in keys if w.startswith("force a checkpoint"))] == "x"

    drive(app, body)


def test_every_operator_action_is_in_the_command_palette(make_job):
    app = attach_app(make_job("quickstart"))

    async def body(pilot):
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for title in ("Force checkpoint", "Rewind phase", "Approve restart", "Deny restart", "Pause run",
                      "Resume run", "Stop run", "Next pane", "Maximize pane", "Help", "Theme", "Screenshot",
                      "Quit"):
            assert title in titles
        listed = [c.title for c in app.get_system_commands(app.screen)]
        assert len(listed) == len(set(listed))  # each action once
        assert "Keys" not in titles and "Maximize" not in titles and "Minimize" not in titles  # Textual's own
        # Screenshot works: an SVG in the run's harness folder (never among the agent's files), its path said.
        app.action_save_screenshot()
        shots = list((app.run_screen.paths.state / "screenshots").glob("*.svg"))
        assert len(shots) == 1 and "<svg" in shots[0].read_text()[:2000]
        # Ctrl+Q and Ctrl+C are the console's quit (asks first for a run in this process, as README says), not
        # Textual's instant quit.
        assert {b.action for b in app._bindings.key_to_bindings["ctrl+q"]} == {"quit_console"}
        assert {b.action for b in app._bindings.key_to_bindings["ctrl+c"]} == {"quit_console"}

    drive(app, body)


def test_sigterm_stops_the_run_and_closes_the_console(make_job):
    """Nobody may be watching (a kill, the SSH session closed): the run stops at once, the console closes, and the
    signal is named so the command line exits 130 (an interrupt), not 3."""
    import asyncio
    import signal

    from console.engine.loop import ShutdownReason
    from tests.tui.inprocess import run_console

    sup = make_supervisor(make_job("quickstart"), gate_at=8)
    got: list[str] = []

    async def pilot_body(pilot):
        await wait_for(pilot, sup.provider.waiting.is_set, what="the gate")
        signal.raise_signal(signal.SIGTERM)
        for _ in range(500):  # the app exits under us (within 10 s, or the test fails below)
            if pilot.app.return_code is not None or not pilot.app.is_running:
                return
            await asyncio.sleep(0.02)

    before = signal.getsignal(signal.SIGTERM)
    code = run_console(sup, keymap={}, headless=True, auto_pilot=pilot_body, signals=got)
    # The signal's stop: the run ends interrupted (its log and the jobs table say so), the exit code 130.
    assert got == ["SIGTERM"] and sup.result is not None and sup.result.reason is ShutdownReason.INTERRUPTED
    assert sup.result.detail == "interrupted by SIGTERM" and code == 130
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back


def test_the_palette_and_the_keys_offer_every_command_of_the_engine_s_specs(make_job):
    """Derived, not listed: each spec is a palette entry calling the console's action for it, and each spec with
    a key is a binding of the run's screen with that action (console.engine.command_specs.SPECS)."""
    from console.engine.command_specs import SPECS

    app = attach_app(make_job("quickstart"))

    async def body(pilot):
        entries = {c.title: c for c in app.get_system_commands(app.screen)}
        bindings = {b.action: b for b in type(app.main).BINDINGS}
        for spec in SPECS:
            entry = entries[spec.title]
            assert entry.help == spec.palette_help
            assert entry.callback == getattr(app.main, f"action_{spec.action}")  # the run's screen acts
            if spec.key is not None:
                bound = bindings[spec.action]
                assert (bound.key, bound.id) == (spec.key.default, spec.key.id)

    drive(app, body)
