"""The guardrails in the console: the fold, the feedback pane, the conversation's marks, the guardrails view (g),
and an attached console rebuilding all of it from events.jsonl."""

from __future__ import annotations

from datetime import timedelta

from console.engine import events as ev
from console.tui.app import ConsoleApp
from console.tui.commands import RecordingController
from console.tui.screens.guardrails import GuardrailsScreen, plain_text
from console.tui.screens.help import HelpScreen
from console.tui.widgets.feedback import FeedbackBlock, FeedbackPane, NoticeLine
from console.view.state import ConsoleState
from tests.tui.conftest import FROZEN_NOW, attach_app, drive, settle, wait_for
from tests.tui.guardrail_events import guarded_run, spent_run


def fold(events: list[ev.EventBase]) -> ConsoleState:
    st = ConsoleState("job")
    st.apply_all(events)
    return st


def flat(lines: list[str]) -> str:
    """The lines as one text, wrapping and gutters undone (whitespace runs become one space)."""
    return " ".join(" ".join(lines).split())


def fed_app(make_job=None, *, paths=None, **kw) -> ConsoleApp:
    """A console with no run behind it: the test pushes events into its bridge."""
    kw.setdefault("watch", False)
    kw.setdefault("now", lambda: FROZEN_NOW)
    kw.setdefault("animations", False)
    kw.setdefault("keymap", {})
    return ConsoleApp(controller=RecordingController(), paths=paths or make_job(), job_title="job", **kw)


# -- the fold ----------------------------------------------------------------------------------------------------
def test_the_fold_keeps_feedback_blocks_and_one_line_guardrail_notices_oldest_first():
    st = fold(guarded_run().events)
    kinds = [(f.kind, f.source) for f in st.feedback]
    assert kinds == [("denied", "read_before_write"), ("blocked", "plan"), ("feedback", "Deadline"),
                     ("feedback", "AGENTS.md"), ("feedback", "stuck")]
    # The denied call's error result is the denial, not another failure; the refused job_complete is a tool
    # failure the fold does report (the agent got it as an error), as it reports every failed call.
    assert not any(f.source == "tool write_file" for f in st.feedback)
    deadline = st.feedback[2]
    assert deadline.severity == "warning" and deadline.suggestions == ("Prioritize completing critical remaining "
                                                                       "work.",)
    assert deadline.block.startswith("<feedback provider='Deadline'>") and deadline.turn == 7
    g = st.guards
    assert g.status is not None and g.status.tokens_used == 612_000  # the latest status wins
    assert g.denials == {"read_before_write": 1}
    assert g.delivered["Deadline"].count == 1 and g.delivered["stuck"].last_severity == "caution"
    assert g.last_blocked is not None and g.last_blocked.blocks == 1 and g.stuck == 1


def test_a_stuck_detection_without_a_feedback_block_is_its_own_notice():
    log = guarded_run()
    log.add(ev.StuckDetected, reason="no todo completed in 10 turns")
    st = fold(log.events)
    assert st.feedback[-1].kind == "stuck" and st.feedback[-1].message == "stuck: no todo completed in 10 turns"


def test_the_guardrails_text_counts_down_on_the_console_clock():
    st = fold(guarded_run().events)
    text = plain_text(st, FROZEN_NOW)
    assert "3 min left · at 14:15:34" in text
    assert "388k left (39%) of 1.00M" in text and "612k used" in text
    assert "incomplete: 3 tasks left: Write digest.md" in text and "1 of 5 refused stops used" in text
    assert "read_before_write" in text and "denied 1" in text and "deploy <- run_tests" in text
    assert "Deadline" in text and "every 30s" in text and "next at 14:13:04" in text
    assert "once when AGENTS.md appears · fired (once only)" in text
    assert "delivered 1, last 14:07:45 (warning)" in text
    assert "run_tests, lint · sandbox bubblewrap" in text
    later = plain_text(st, FROZEN_NOW + timedelta(minutes=2, seconds=50))
    assert "10 s left" in later
    spent = plain_text(fold(spent_run().events), FROZEN_NOW + timedelta(minutes=4))
    assert "passed 1 min ago" in spent and "the agent was told to wrap up" in spent
    assert "the deadline budget is spent, job_complete accepted unchecked" in spent


def test_the_guardrails_text_before_any_status():
    text = plain_text(ConsoleState("job"), FROZEN_NOW)
    assert "no guardrails status yet" in text and "no tool policies" in text and "no command tools" in text


# -- the views ---------------------------------------------------------------------------------------------------
def test_the_feedback_pane_shows_blocks_and_notices_newest_at_the_bottom(make_job):
    app = fed_app(make_job)

    async def body(pilot):
        app.bridge.push_many(guarded_run().events)
        await settle(pilot, app)
        app.main.show_pane("feedback")
        await settle(pilot, app)
        pane = app.main.query_one(FeedbackPane)
        blocks = [i for i in pane.items if isinstance(i, FeedbackBlock)]
        notices = [i for i in pane.items if isinstance(i, NoticeLine)]
        assert [b.item.source for b in blocks] == ["Deadline", "AGENTS.md", "stuck"]
        assert len(notices) == 2
        lines = pane.plain_lines()
        text = flat(lines)  # lines wrap at 80 columns
        assert "⊗ denied write_file by read_before_write: report.md exists and was not read first" in text
        assert "↩ stop refused by plan (1 of 5): 3 tasks left" in text
        assert "14:07:45 ◆ Deadline warning turn 7, call 12" in text
        assert "-> Prioritize completing critical remaining work." in text
        assert "· AGENTS.md appeared after call 11" in text
        assert lines.index(next(ln for ln in lines if "◆ stuck" in ln)) > lines.index(
            next(ln for ln in lines if "◆ Deadline" in ln))  # newest at the bottom
        assert pane.scroll_y == pane.max_scroll_y  # following the tail
        assert pane.border_subtitle == "5 · 3 feedback · 2 warnings"
        # A click on a block shows the exact text the agent got.
        deadline = blocks[0]
        await pilot.click(FeedbackPane, offset=(4, pane.offsets[pane.items.index(deadline)] - round(pane.scroll_y)
                                                + 2))
        await settle(pilot, app)
        assert deadline.expanded and any("<feedback provider='Deadline'>" in ln for ln in pane.plain_lines())

    drive(app, body, size=(80, 24))


def test_the_conversation_marks_denials_refused_stops_and_feedback(make_job):
    app = fed_app(make_job)

    async def body(pilot):
        app.bridge.push_many(spent_run().events)
        await settle(pilot, app)
        text = flat(app.run_screen.conversation.plain_lines())
        assert "⊗ denied by read_before_write: report.md exists and was not read first" in text
        assert "✗ Denied" not in text  # not shown as an ordinary failed call
        assert ("↩ stop refused by plan (1 of 5): 3 tasks left: Write digest.md, Check digest.md, Record a note; the "
                "agent was told to continue") in text
        assert "◆ feedback from Deadline (warning): The work so far took 5 minutes." in text
        assert "◆ feedback from AGENTS.md (info)" in text
        assert "◆ feedback from stuck (caution)" in text and "⚠ Stuck" not in text  # said once
        assert "◷ deadline passed: 8 minutes since the job started, deadline 8 minutes; the agent was told" in text
        assert "↷ job_complete accepted without the completion check: the deadline passed" in text
        assert "▸ job_complete summary=done ↩ refused (1 of 5): the job is not complete" in text
        # The feedback line sits where the agent got it: after the turn's tool calls.
        assert text.index("▸ job_complete") < text.index("◆ feedback from Deadline")
        await pilot.press("E")
        await settle(pilot, app)
        text = flat(app.run_screen.conversation.plain_lines())
        assert "not run: the read_before_write policy refused it" in text

    drive(app, body, size=(120, 40))


def test_g_opens_the_guardrails_view_and_it_follows_new_status(make_job):
    app = fed_app(make_job)

    async def body(pilot):
        log = guarded_run()
        app.bridge.push_many(log.events)
        await settle(pilot, app)
        assert any(b.binding.key == "g" and b.binding.show for b in app.main.active_bindings.values())
        await pilot.press("g")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, GuardrailsScreen)
        assert "1 of 5 refused stops used" in screen.text
        log.add(ev.CompletionBlocked, reason="plan: 2 tasks left", checker="plan", feedback="2 tasks left",
                stop_reason="end_turn", blocks=2, max_blocks=5)
        app.bridge.push(log.events[-1])
        await settle(pilot, app)
        shown = str(screen.query_one("#g-completion").render())
        assert "2 of 5 refused stops used" in shown  # a refusal after the status counts at once
        await pilot.press("g")
        await pilot.pause()
        assert app.screen is app.main and app.run_screen.guardrails_view is None
        await pilot.press("g", "escape")
        await pilot.pause()
        assert app.screen is app.main

    drive(app, body, size=(80, 24))


def test_the_guardrails_view_fits_80x24_and_uses_two_columns_at_200x50(make_job):
    paths = make_job()
    for size, wide in (((80, 24), False), ((200, 50), True)):
        app = fed_app(paths=paths)

        async def body(pilot, app=app, wide=wide, size=size):
            app.bridge.push_many(guarded_run().events)
            await settle(pilot, app)
            await pilot.press("g")
            await wait_for(pilot, lambda: isinstance(app.screen, GuardrailsScreen)
                           and app.screen.query_one("#g-feedback").region.height > 0, what="the guardrails view")
            await pilot.pause(0.1)
            screen = app.screen
            assert isinstance(screen, GuardrailsScreen) and screen.has_class("-wide") is wide
            sections = [screen.query_one(f"#{sid}") for sid in ("g-budgets", "g-completion", "g-tools",
                                                                "g-policies", "g-feedback")]
            for box in sections:
                assert box.region.width >= (70 if not wide else 90), (size, box.id, box.region)
            body_box = screen.query_one("#g-body")
            if wide:  # everything at once
                assert body_box.max_scroll_y == 0
                assert all(box.region.bottom <= size[1] - 1 for box in sections)
            else:  # the first sections at once, the rest a scroll away (the keys scroll it)
                assert sections[0].region.y == 1 and 0 < body_box.max_scroll_y < 10
                await pilot.press("end")
                await wait_for(pilot, lambda: body_box.scroll_y == body_box.max_scroll_y, what="the view to scroll")

        drive(app, body, size=size)


def test_help_and_palette_list_the_guardrails_view(make_job):
    app = fed_app(make_job)

    async def body(pilot):
        await settle(pilot, app)
        names = [c.title for c in app.get_system_commands(app.main)]
        assert "Guardrails" in names
        keys = dict(app.key_help())
        assert keys["g"].startswith("guardrails:")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)

    drive(app, body)


# -- attach ------------------------------------------------------------------------------------------------------
def test_attach_rebuilds_the_guardrails_the_same_as_the_run_saw_them(make_job):
    paths = make_job()
    log = spent_run()
    log.write(paths.events)
    live = fold(log.events)
    app = attach_app(paths)

    async def body(pilot):
        await wait_for(pilot, lambda: app.state.last_seq == len(log.events) and app.bridge.pending == 0,
                       what="the replay")
        await settle(pilot, app)
        assert plain_text(app.state, FROZEN_NOW) == plain_text(live, FROZEN_NOW)
        assert [(f.kind, f.source, f.message) for f in app.state.feedback] == [
            (f.kind, f.source, f.message) for f in live.feedback]
        app.main.show_pane("feedback")
        await settle(pilot, app)
        shown = app.main.query_one(FeedbackPane).messages
        assert shown == [f.message for f in live.feedback]
        text = "\n".join(app.run_screen.conversation.plain_lines())
        assert "⊗ denied by read_before_write" in text and "◆ feedback from Deadline (warning)" in text
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, GuardrailsScreen)
        assert "passed · at 14:15:34 · the agent was told to wrap up" in app.screen.text  # the budget event says so

    drive(app, body, size=(80, 24))


# -- the view wraps what is long, and an ended run's view is still ---------------------------------------------
LONG_VERDICT = ("incomplete: 6 tasks left: " + ", ".join(f"'Check section {n} of the digest against the notes'"
                                                          for n in range(1, 6)) + ", 'Produce Deliverables END'")


def test_a_long_verdict_is_wrapped_whole_never_cut():
    from tests.tui.guardrail_events import status

    log = guarded_run()
    status(log, verdict=LONG_VERDICT)
    st = fold(log.events)
    for width in (90, 60):  # a wide screen's column, a narrow screen
        text = plain_text(st, FROZEN_NOW, width=width)
        assert "…" not in text and "'Produce Deliverables END'" in flat(text.splitlines()), text


def test_an_ended_run_shows_no_countdown_and_no_next_firing():
    log = guarded_run()
    log.add(ev.RunEnded, reason="user_shutdown", outcome="incomplete", at=60)  # a minute in: 2:00 were left
    st = fold(log.events)
    assert st.ended
    text = plain_text(st, FROZEN_NOW + timedelta(minutes=10))
    assert text == plain_text(st, FROZEN_NOW + timedelta(hours=3))  # nothing runs on with the clock
    assert "the run ended at" in text and "now " not in text.splitlines()[0]
    assert "7 min left when the run ended · at 14:15:34" in text and "passed" not in text
    assert "next at" not in text and "next after" not in text and "fires no more: the run has ended" in text
    assert "fired (once only)" in text  # what did fire is still said


def test_the_header_wraps_at_80_columns(make_job):
    from tests.tui.guardrail_events import status

    app = ConsoleApp(controller=RecordingController(), paths=make_job(), job_title="quarterly-report-digest-job",
                     watch=False, now=lambda: FROZEN_NOW, animations=False, keymap={})
    log = guarded_run()
    status(log, verdict=LONG_VERDICT)

    async def body(pilot):
        await wait_for(pilot, lambda: app.run_screen.ui_alive, what="the panes")
        app.bridge.push_many(log.events)
        await wait_for(pilot, lambda: app.state.last_seq == len(log.events) and app.bridge.pending == 0,
                       what="the events")
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GuardrailsScreen), what="the view")
        await settle(pilot, app)
        title = app.screen.query_one("#g-title")
        assert title.region.height >= 2  # "status of 14:07:34 (session 1) │ now …" is not cut at 80 columns
        verdict = app.screen.query_one("#g-completion")
        assert verdict.region.height >= 6  # the long verdict wrapped over several lines
        assert "'Produce Deliverables END'" in flat(str(verdict.render()).splitlines())

    drive(app, body, size=(80, 24))


def test_an_ended_runs_mcp_servers_are_said_to_have_ended_with_it():
    """Found trying a job of my own: a finished run's guardrails view said its servers were "ready"."""
    from tests.tui.guardrail_events import mcp_run

    log = mcp_run()
    live = plain_text(fold(log.events), FROZEN_NOW)
    assert "time ready · required · 3 calls" in flat(live.splitlines()) and "ended with the run" not in live
    log.add(ev.RunEnded, reason="user_shutdown", outcome="incomplete")
    text = flat(plain_text(fold(log.events), FROZEN_NOW).splitlines())
    assert "time ended with the run (ready) · required · 3 calls" in text
    assert "tracker ended with the run (unavailable) · 0 calls" in text and " ready ·" not in text
