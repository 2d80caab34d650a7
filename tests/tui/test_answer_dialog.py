"""The palette's "Answer question" (an MCP server's question to the operator: console.tui.screens.answer): the
server's message and a field for each of its form's fields; the answer goes with the question's id; with no
question waiting it is said, and nothing is sent."""

from __future__ import annotations

from textual.command import CommandPalette
from textual.widgets import Input

from console.engine import events as ev
from console.tui.screens.answer import AnswerScreen
from console.tui.screens.run import RunScreen
from tests.tui.conftest import drive, wait_for
from tests.tui.test_dialog_keys import Clock, Seq, recorded_app, started

MESSAGE = "MCP server asker asks (question q1a2b3c, during ask): Who are you? \x1b[2J[bold]x[/]"
EVIDENCE = ["name (string, 0..40 characters, required): Your name", "count (integer, 1..10)"]


def question(e: Seq) -> ev.EventBase:
    return e(ev.NeedsOperator, reason="mcp_question", message=MESSAGE, evidence=EVIDENCE, paused=False)


async def palette(pilot, app, words: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
    await pilot.press(*words)
    await pilot.pause()
    await pilot.press("enter")


async def asked_and_opened(pilot, app, e: Seq) -> AnswerScreen:  # type: ignore[no-untyped-def]
    """The run asks its question; the palette's Answer question opens the box over it."""
    app.bridge.push(question(e))
    await wait_for(pilot, lambda: app.state.needs is not None, what="the question")
    await palette(pilot, app, "answer question")
    await wait_for(pilot, lambda: isinstance(app.screen, AnswerScreen), what="the answer box")
    box: AnswerScreen = app.screen
    return box


def test_the_palette_answers_the_question_waiting_with_its_id(make_job) -> None:
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):  # type: ignore[no-untyped-def]
        await started(pilot, app, e)
        box = await asked_and_opened(pilot, app, e)
        shown = str(box.query_one("#message").render())
        assert "Who are you?" in shown and "\x1b" not in shown
        fields = list(box.query(Input))
        assert [f.placeholder for f in fields] == ["name", "count"] and app.focused is fields[0]
        await pilot.press(*"Ada d", "tab")  # letters are text, whatever key they are elsewhere
        await pilot.press("3", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the box closed")
        assert rec.sent == [("answer", {"question": "q1a2b3c", "set": ("name=Ada d", "count=3")})]

    drive(app, body)


def test_decline_is_a_button_and_with_no_question_nothing_is_sent(make_job) -> None:
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):  # type: ignore[no-untyped-def]
        await started(pilot, app, e)
        await palette(pilot, app, "answer question")
        await pilot.pause()
        assert isinstance(app.screen, RunScreen) and rec.sent == []
        assert any("no question of an MCP server waits" in str(n.message) for n in app._notifications)
        await asked_and_opened(pilot, app, e)
        await pilot.click("#decline")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the box closed")
        assert rec.sent == [("answer", {"question": "q1a2b3c", "decline": True})]

    drive(app, body)


def test_a_refused_answer_is_said_and_its_values_are_offered_again(make_job) -> None:
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):  # type: ignore[no-untyped-def]
        await started(pilot, app, e)
        await asked_and_opened(pilot, app, e)
        await pilot.press(*"Ada", "tab", "3", "0", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the box closed")
        assert rec.sent == [("answer", {"question": "q1a2b3c", "set": ("name=Ada", "count=30")})]
        app.bridge.push(e(ev.OperatorCommand, command="answer", status="rejected", source="console",
                          detail="not answered: count: out of its bounds (1..10); question q1a2b3c still "
                                 "waits"))
        await wait_for(pilot, lambda: any("out of its bounds" in str(n.message) for n in app._notifications),
                       what="the refusal said")
        await palette(pilot, app, "answer question")
        await wait_for(pilot, lambda: isinstance(app.screen, AnswerScreen), what="the answer box again")
        assert [f.value for f in app.screen.query(Input)] == ["Ada", "30"]

    drive(app, body)


def test_a_form_of_sixteen_long_fields_has_a_field_each_and_the_last_is_answered(make_job) -> None:
    """The largest form a server may ask (16 fields, each line as long as a form allows): a field each in the box
    (it scrolls), and a value typed in the last one goes with the answer."""
    from console.engine.questions import MAX_FIELDS, MAX_LINE

    evidence = [f"f{i} (string, required): " + "d" * (MAX_LINE - 30) for i in range(MAX_FIELDS)]
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):  # type: ignore[no-untyped-def]
        await started(pilot, app, e)
        app.bridge.push(e(ev.NeedsOperator, reason="mcp_question", message=MESSAGE, evidence=evidence,
                          paused=False))
        await wait_for(pilot, lambda: app.state.needs is not None, what="the question")
        await palette(pilot, app, "answer question")
        await wait_for(pilot, lambda: isinstance(app.screen, AnswerScreen), what="the answer box")
        fields = list(app.screen.query(Input))
        assert [f.placeholder for f in fields] == [f"f{i}" for i in range(MAX_FIELDS)]
        fields[-1].focus()
        await pilot.pause()
        await pilot.press(*"last", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the box closed")
        assert rec.sent == [("answer", {"question": "q1a2b3c", "set": ("f15=last",)})]

    drive(app, body)
