"""While the job bootstraps (no plan yet) the console does not offer a checkpoint or a rewind the engine would
refuse; a rewind refused anyway keeps the operator's words."""

from __future__ import annotations

from console.engine import events as ev
from console.tui.screens.rewind import RewindScreen
from console.tui.screens.run import RunScreen
from tests.tui.conftest import drive, pause, record_notices, wait_for
from tests.tui.test_dialog_keys import Clock, Seq, phase, recorded_app


def bootstrap(e: Seq) -> ev.EventBase:
    return e(ev.TodosChanged, phase_name="Bootstrap", phase_number=0, total_phases=0, kind="bootstrap",
             items=[ev.TodoItemRecord(text="write main_plan.md", done=False)])


def footer(app) -> set[str]:
    return {b.action for _n, b, enabled, _t in app.main.active_bindings.values() if enabled and b.show}


def test_checkpoint_and_rewind_are_not_offered_while_the_job_bootstraps(make_job):
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        notices = record_notices(app)
        await wait_for(pilot, lambda: app.run_screen.ui_alive, what="the panes")
        app.bridge.push_many([e(ev.SessionStarted), bootstrap(e)])
        await wait_for(pilot, lambda: app.state.todos is not None, what="the bootstrap's todo list")
        await pause(pilot)
        shown = footer(app)
        assert "checkpoint" not in shown and "rewind" not in shown and {"pause", "stop"} <= shown, shown
        await pilot.press("c", "r")  # not offered: nothing is sent, no dialog opens
        await pause(pilot)
        assert isinstance(app.screen, RunScreen) and rec.sent == []
        palette = {c.title: c for c in app.get_system_commands(app.screen)}
        palette["Rewind phase"].callback()  # the palette's entry says why rather than ask for text to lose
        await pause(pilot)
        assert isinstance(app.screen, RunScreen) and rec.sent == []
        assert any("bootstrapping" in m for _t, m in notices), notices
        # The transition out of the bootstrap (its list phase 0) is refused by the engine too: not offered.
        app.bridge.push(e(ev.TodosChanged, phase_name="Bootstrap", phase_number=0, total_phases=0,
                          kind="transition", items=[], reason="transition:bootstrap"))
        await wait_for(pilot, lambda: app.state.todos.kind == "transition", what="the transition")
        await pause(pilot)
        assert not {"checkpoint", "rewind"} & footer(app)
        # Once the plan's first phase runs they are offered again.
        app.bridge.push(phase(e, 1))
        await wait_for(pilot, lambda: app.state.todos.kind == "phase", what="the first phase")
        await pause(pilot)
        assert {"checkpoint", "rewind"} <= footer(app)
        await pilot.press("c")
        await wait_for(pilot, lambda: rec.sent, what="the checkpoint")
        assert rec.sent[0][0] == "checkpoint"

    drive(app, body, size=(80, 24))


def test_a_refused_rewind_keeps_the_text_and_r_offers_it_again(make_job):
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await wait_for(pilot, lambda: app.run_screen.ui_alive, what="the panes")
        app.bridge.push_many([e(ev.SessionStarted), phase(e, 1)])
        await wait_for(pilot, lambda: app.state.todos is not None, what="the todo list")
        await pilot.press("r", *"the digest misses the risks")
        clock.now += 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        detail = "the job is still bootstrapping: there is no plan to re-orient to yet"  # a race: it restarted
        app.bridge.push(e(ev.OperatorCommand, command="rewind", status="rejected", source="console", detail=detail))
        await wait_for(pilot, lambda: "rewind" not in app.state.requested, what="the refusal")
        await pause(pilot)
        said = [n.message for n in app._notifications if n.title == "Rewind refused"]
        assert said and "the digest misses the risks" in said[0], said
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind box")
        assert app.screen.query_one("#issue").value == "the digest misses the risks"
        await pilot.press("escape")
        # Applied, the text is not offered again.
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind box")
        await pilot.press(*" (again)")
        clock.now += 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen))
        assert rec.sent[-1] == ("rewind", {"issue": "the digest misses the risks (again)", "phase": 1})
        app.bridge.push(e(ev.OperatorCommand, command="rewind", status="applied", source="console"))
        await wait_for(pilot, lambda: "rewind" not in app.state.requested, what="the rewind applied")
        await pause(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind box")
        assert app.screen.query_one("#issue").value == ""

    drive(app, body, size=(80, 24))
