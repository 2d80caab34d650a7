"""Keys never surprise (issue 18, point 6): a dialog acts only on its own keys, never on text typed into a field,
and not within its first moment; an approval that arrives while the operator types waits for the question open;
a rewind names its phase and a stale one is refused, said in the console; the footer follows every state change."""

from __future__ import annotations

from datetime import timedelta

from textual.widgets import Input
from textual.widgets._footer import FooterKey

from console.engine import events as ev
from console.tui.app import ConsoleApp
from console.tui.commands import RecordingController
from console.tui.screens.approval import RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.screens.run import RunScreen
from tests.tui.conftest import FROZEN_NOW, drive, events_of, make_supervisor, run_app, settle, wait_for

# Every letter a key is bound to anywhere in the console (run keys, dialogs' answers, the fleet's keys, the
# conversation's e / E), and the ones Textual names.
LETTERS = "acdegmnpqrsxyE"
NAMED = ["question_mark", "slash", "space"]


class Clock:
    """The dialogs' clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Seq:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, event_type: type[ev.EventBase], /, **fields: object) -> ev.EventBase:
        self.n += 1
        return event_type(ts=FROZEN_NOW + timedelta(seconds=self.n), seq=self.n, session=1, **fields)


def recorded_app(make_job, clock: Clock) -> tuple[ConsoleApp, RecordingController]:
    """A console over events the test hands it, whose commands are recorded (a live run's view)."""
    rec = RecordingController()
    app = ConsoleApp(controller=rec, paths=make_job("quickstart"), job_title="quickstart", watch=False,
                     animations=False, keymap={}, now=lambda: FROZEN_NOW, dialog_clock=clock)
    return app, rec


def phase(e: Seq, number: int, name: str = "Write") -> ev.EventBase:
    return e(ev.TodosChanged, phase_name=name, phase_number=number, total_phases=4, kind="phase",
             items=[ev.TodoItemRecord(text=t, done=False) for t in ("draft the digest", "check it")])


def pending(e: Seq) -> ev.EventBase:
    return e(ev.RestartPending, usage_pct=0.9, used_tokens=9_000, context_window=10_000, next_session=2,
             carryover_messages=4, carryover_tokens=800)


async def started(pilot, app: ConsoleApp, e: Seq) -> None:
    await wait_for(pilot, lambda: app.run_screen.ui_alive, what="the panes")
    app.bridge.push_many([e(ev.SessionStarted), phase(e, 2)])
    await wait_for(pilot, lambda: app.state.todos is not None, what="the todo list")


def test_letters_typed_into_the_rewind_box_are_text_even_when_a_restart_arrives(make_job):
    """The reported bug: a `d` typed into the rewind box denied the restart that popped up meanwhile."""
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()
    typed = LETTERS + " " + LETTERS

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.press("r")
        rewind = app.screen
        assert isinstance(rewind, RewindScreen) and rewind.number == 2
        field = rewind.query_one(Input)
        await pilot.press(*LETTERS, "space")
        # Mid-sentence the context fills: the restart waits for approval.
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: app.state.restart_pending is not None, what="the pending restart")
        await pilot.pause()
        # The approval does not open over the field being typed into; it is announced (once) instead, on the
        # rewind box's border: a toast would cover the box (and waits for it to close).
        assert app.screen is rewind and app.focused is field
        assert "restart awaits your approval" in str(rewind.query_one("#dialog").border_subtitle)
        assert not list(app._notifications)
        await pilot.press(*LETTERS, *NAMED)
        await pilot.pause()
        assert app.screen is rewind and app.focused is field
        assert field.value == typed + "?/ "
        assert rec.sent == []  # not one key reached the run: no deny, no stop, no pause
        clock.now += 1.0  # the dialog's first moment is long past
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        # The rewind went with the phase the dialog showed, and the approval opened only once it was answered.
        assert rec.sent == [("rewind", {"issue": (typed + "?/").strip(), "phase": 2})]
        # The approval's first moment: its keys (and Enter on its focused button) do nothing.
        await pilot.press("d", "enter", "escape", "a")
        await pilot.pause()
        assert isinstance(app.screen, RestartApprovalScreen) and len(rec.sent) == 1
        clock.now += 0.6
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the approval answered")
        assert [c for c, _ in rec.sent] == ["rewind", "approve_restart"]

    drive(app, body)


def test_a_dialog_ignores_keys_for_its_first_moment_each_time_it_is_shown(make_job):
    """An approval opens on its own: its first moment each time it is shown; a question asked for has none."""
    from textual.command import CommandPalette

    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        approval = app.screen
        for key in ("d", "a", "escape", "enter", "space"):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is approval, key
        await pilot.click("#deny")  # a click too
        await pilot.pause()
        assert app.screen is approval and rec.sent == []
        clock.now += 0.49
        await pilot.press("d")
        await pilot.pause()
        assert app.screen is approval and rec.sent == []
        clock.now += 0.02  # 0.51 s after it appeared
        # Shown again (the command palette over it closed): its moment starts again.
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is approval, what="the approval again")
        await pilot.press("d")
        await pilot.pause()
        assert app.screen is approval and rec.sent == []
        clock.now += 0.5
        await pilot.press("escape")  # later: it closes, the restart still waits
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        assert rec.sent == []
        # The stop question was asked for (s): it answers at once.
        await pilot.press("s")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        assert [c for c, _ in rec.sent] == ["stop"]

    drive(app, body)


def test_an_approval_waits_for_the_stop_question_and_never_answers_it(make_job):
    """A restart arrives while "Stop the run?" is open: the y the operator meant for the stop is not the approval's
    (it has no y), and the approval opens once the question is answered, its own moment starting then."""
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.press("s")
        stop = app.screen
        assert isinstance(stop, ConfirmScreen)
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: app.state.restart_pending is not None)
        await pilot.pause()
        assert app.screen is stop
        clock.now += 1.0
        await pilot.press("n")  # keep running
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        await pilot.press("d")  # at once: the approval's first moment
        await pilot.pause()
        assert isinstance(app.screen, RestartApprovalScreen) and rec.sent == []

    drive(app, body)


def test_a_refused_rewind_is_said_in_the_console(make_job):
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.press("r", *"wrong order")
        clock.now += 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        assert rec.sent == [("rewind", {"issue": "wrong order", "phase": 2})]
        detail = "phase 2 has already ended (the run is in phase 3 now); rewind not applied"
        app.bridge.push_many([e(ev.OperatorCommand, command="rewind", status="received", source="console"),
                              e(ev.OperatorCommand, command="rewind", status="rejected", source="console",
                                detail=detail)])
        await wait_for(pilot, lambda: "rewind" not in app.state.requested, what="the answer")
        await pilot.pause()
        notes = [(n.title, n.message) for n in app._notifications]
        kept = "\nYour text, kept (r offers it again): wrong order"
        assert ("Rewind refused", f"rewind not applied: {detail}{kept}") in notes
        # An old refusal replayed from the log (nothing this console asked for) is not a notice.
        app.clear_notifications()
        app.bridge.push(e(ev.OperatorCommand, command="pause", status="rejected", source="cli", detail="not now"))
        await wait_for(pilot, lambda: app.bridge.pending == 0)
        await pilot.pause()
        assert not list(app._notifications)

    drive(app, body)


def footer_keys(app: ConsoleApp) -> list[str]:
    return [k.description for k in app.main.query(FooterKey) if not k.has_class("-command-palette")]


async def footer_shows(pilot, app: ConsoleApp, has: set[str], lacks: set[str]) -> None:
    """The footer widget (not only the bindings) shows ``has`` and none of ``lacks`` (it redraws after a refresh)."""
    await wait_for(pilot, lambda: has <= set(footer_keys(app)) and not lacks & set(footer_keys(app)), timeout=5,
                   what=f"the footer to show {has} and not {lacks}")


def test_the_footer_follows_pause_resume_and_stop(make_job):
    """A real run: after each key and each answer of the engine the footer shows what applies now."""
    sup = make_supervisor(make_job("quickstart"), gate_at=8)
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, sup.provider.waiting.is_set, what="the gate")
        await settle(pilot, app)
        await footer_shows(pilot, app, {"Pause"}, {"Resume"})
        await pilot.press("p")
        await footer_shows(pilot, app, {"Resume"}, {"Pause"})
        sup.provider.gate.set()
        await wait_for(pilot, lambda: app.state.paused, what="the pause applied")
        await footer_shows(pilot, app, {"Resume"}, {"Pause"})
        sup.provider.gate_at = sup.provider.turns + 3  # hold the run again a little later
        sup.provider.gate.clear()
        await pilot.press("p")
        await footer_shows(pilot, app, {"Pause"}, {"Resume"})
        await wait_for(pilot, lambda: not app.state.paused and sup.provider.waiting.is_set(), what="the gate again")
        await footer_shows(pilot, app, {"Pause", "Stop"}, {"Resume"})
        await pilot.press("s", "y")  # the run waits for the model: it stops at once
        await wait_for(pilot, lambda: app.run_screen.run_finished, what="the run to stop")
        await footer_shows(pilot, app, {"Quit"}, {"Pause", "Resume", "Stop", "Stop now", "Checkpoint", "Rewind"})

    drive(app, body)


def test_stop_now_is_the_same_key_and_asks_to_abandon_the_turn(make_job):
    """Stop asked (the run finishes its turn): the footer reads Stop now at once, and nothing else the run
    could no longer do (pause, checkpoint, rewind)."""
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await footer_shows(pilot, app, {"Checkpoint", "Rewind", "Pause", "Stop"}, {"Stop now"})
        clock.now += 1
        await pilot.press("s")
        clock.now += 1
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await footer_shows(pilot, app, {"Stop now"}, {"Stop", "Pause", "Resume", "Checkpoint", "Rewind"})
        # The engine says the stop applies after the turn: still Stop now.
        app.bridge.push(e(ev.OperatorCommand, command="stop", status="applied", source="console",
                          detail="stopping after the current turn"))
        await wait_for(pilot, lambda: app.state.stopping)
        await footer_shows(pilot, app, {"Stop now"}, {"Stop"})
        await pilot.press("s")
        assert isinstance(app.screen, ConfirmScreen) and "Stop now" in str(app.screen.title_text)
        clock.now += 1
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        assert [c for c, _ in rec.sent] == ["stop", "stop"]

    drive(app, body)


def test_a_stale_rewind_from_the_console_is_refused_by_the_engine(make_job):
    """End to end: the dialog names phase N; the run moves on to phase N+1 while the operator types; the rewind
    lands, is refused with a message, and the todo list is untouched."""
    sup = make_supervisor(make_job("quickstart"), gate_at=16)
    app = run_app(sup)
    moved: list[int] = []
    named: list[int] = []

    async def body(pilot):
        await wait_for(pilot, sup.provider.waiting.is_set, what="the gate")
        await pilot.press("p")
        sup.provider.gate.set()
        await wait_for(pilot, lambda: app.state.paused, what="the pause")
        await settle(pilot, app)
        first = app.state.todos.phase_number
        assert app.state.todos.kind == "phase" and first >= 1
        await pilot.press("r", *"the notes were read out of order")
        assert isinstance(app.screen, RewindScreen) and app.screen.number == first
        named.append(first)

        def hold_in_next_phase(event: ev.EventBase) -> None:
            if isinstance(event, ev.TodosChanged) and event.kind == "phase" and event.phase_number > first \
                    and not moved:
                moved.append(event.phase_number)
                sup.pause()

        sup.subscribe(hold_in_next_phase)
        sup.resume()  # the run goes on behind the dialog, into the next phase, and pauses there
        await wait_for(pilot, lambda: bool(moved) and app.state.paused and app.state.todos.phase_number > first,
                       timeout=30, what="the next phase")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(x.command == "rewind" and x.status != "received"
                                          for x in events_of(app, ev.OperatorCommand)), what="the answer")
        await settle(pilot, app)
        notes = [n.title for n in app._notifications]
        assert "Rewind refused" in notes
        sup.stop()
        sup.stop()
        await wait_for(pilot, lambda: app.run_screen.run_finished, what="the run to stop")

    drive(app, body)
    (answer,) = [x for x in events_of(app, ev.OperatorCommand) if x.command == "rewind" and x.status != "received"]
    assert answer.status == "rejected" and answer.args["phase"] == named[0]
    assert answer.detail == (f"phase {named[0]} has already ended (the run is in phase {moved[0]} now); "
                             "rewind not applied")
    assert not [x for x in events_of(app, ev.PhaseTransition) if x.kind == "rewind"]


def test_an_approval_waits_for_the_command_palette_too(make_job):
    """Any field being typed into holds the approval back (the palette's search box), and it opens when the field
    is gone, even when it was closed without the console knowing (within a tick)."""
    from textual.command import CommandPalette

    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: app.state.restart_pending is not None)
        await pilot.press(*"deny")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette) and rec.sent == []
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), timeout=5, what="the approval")
        assert rec.sent == []

    drive(app, body)


def test_the_footer_changes_with_the_key_before_the_run_answers(make_job):
    """Nothing answers here (commands are only recorded): the footer's Resume / Pause come from the key itself,
    and the run's answer later keeps them right."""
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await footer_shows(pilot, app, {"Pause"}, {"Resume"})
        await pilot.press("p")
        await footer_shows(pilot, app, {"Resume"}, {"Pause"})
        app.bridge.push(e(ev.OperatorCommand, command="pause", status="applied", source="console", detail="paused"))
        await wait_for(pilot, lambda: app.state.paused)
        await footer_shows(pilot, app, {"Resume"}, {"Pause"})
        await pilot.press("p")
        await footer_shows(pilot, app, {"Pause"}, {"Resume"})
        app.bridge.push(e(ev.OperatorCommand, command="resume", status="applied", source="console", detail="resumed"))
        await wait_for(pilot, lambda: not app.state.paused)
        await footer_shows(pilot, app, {"Pause"}, {"Resume"})
        # A restart waiting: Approve and Deny join the footer; answered elsewhere, they leave it.
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen))
        clock.now += 1
        await pilot.press("escape")
        await footer_shows(pilot, app, {"Approve", "Deny"}, set())
        app.bridge.push(e(ev.RestartApproved, by="cli"))
        await footer_shows(pilot, app, set(), {"Approve", "Deny"})
        assert [c for c, _ in rec.sent] == ["pause", "resume"]

    drive(app, body)
