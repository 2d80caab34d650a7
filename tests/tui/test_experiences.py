"""experiences.md in the console: the fold, the pane (a tab at 80x24, the plan's place wider), hostile text."""

from __future__ import annotations

import pytest

from console.engine import events as ev
from console.view.state import EXPERIENCES, ConsoleState
from tests.tui.conftest import attach_app, drive, settle, wait_for
from tests.tui.guardrail_events import Log

HOSTILE = "\x1b]0;pwned\x07\x1b[2J [bold red]markup[/] \u202egnp.exe"


def experience_log() -> Log:
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent")
    log.add(ev.ExperienceRecorded, entry_id=1, section="lesson", text="Check API limits before batch operations",
            source="agent", where="task: Collect sources")
    log.add(ev.ExperienceRecorded, entry_id=2, section="failed", text="Batch API refuses more than 100 items",
            source="rewind", where="task: Collect sources")
    log.add(ev.ExperienceRecorded, entry_id=3, section="pattern", text="Process documents in 10-page chunks",
            source="agent", where="task: Write digest.md")
    log.add(ev.ExperienceRecorded, entry_id=4, section="failed", text="stuck: error: read_file failed 6 times",
            source="stuck", where="task: Write digest.md", times=2)
    log.add(ev.ExperienceRecorded, entry_id=5, section="lesson", text=HOSTILE, source="agent", where=HOSTILE)
    return log


def test_the_fold_keeps_entries_by_id_newest_last_and_safe() -> None:
    state = ConsoleState()
    changed = state.apply_all(experience_log().events)
    assert EXPERIENCES in changed
    assert list(state.experiences) == [1, 2, 3, 4, 5]
    again = ev.ExperienceRecorded(ts=experience_log().events[0].ts, seq=99, session=1, entry_id=1, section="lesson",
                                  text="Check API limits before batch operations", source="agent", times=2)
    assert state.apply(again) == {EXPERIENCES}
    assert list(state.experiences) == [2, 3, 4, 5, 1] and state.experiences[1].times == 2
    hostile = state.experiences[5]
    for text in (hostile.text, hostile.where):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and text.isprintable()


def test_the_fold_is_bounded() -> None:
    from console.view.state import EXPERIENCES_KEEP

    state = ConsoleState()
    log = Log()
    for i in range(1, EXPERIENCES_KEEP + 51):
        log.add(ev.ExperienceRecorded, entry_id=i, section="lesson", text=f"l{i}", source="agent")
    state.apply_all(log.events)
    assert len(state.experiences) == EXPERIENCES_KEEP and next(iter(state.experiences)) == 51


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_the_pane_shows_the_three_sections(make_job, size) -> None:
    paths = make_job()
    log = experience_log()
    log.write(paths.events)
    app = attach_app(paths)

    async def body(pilot) -> None:
        await wait_for(pilot, lambda: app.state.last_seq == len(log.events) and app.bridge.pending == 0,
                       what="the replay")
        await settle(pilot, app)
        from console.tui.widgets.tabs import PaneTabs

        assert app.main.query_one(PaneTabs).badges["experiences"] == " 5"
        app.main.show_pane("experiences")
        await settle(pilot, app)
        pane = app.main.query_one("#experiences")
        assert pane.display and pane.region.height > 3
        if size != (80, 24):  # in the plan's place: the plan is hidden while it shows, and back after
            assert not app.main.query_one("#plan").display
        text = "\n".join(pane.plain_lines())
        assert text.index("Failed Approaches (2)") < text.index("Lessons Learned (2)") \
            < text.index("Patterns That Work (1)")
        assert "stuck ×2" in text and "Batch API refuses more than 100 items" in text
        assert "[bold red]markup[/]" in text and "\x1b" not in text  # drawn as text, never parsed or sent
        assert "2 failed · 2 lessons · 1 pattern" in str(pane.border_subtitle)
        app.main.show_pane("plan")
        await settle(pilot, app)
        assert app.main.query_one("#plan").display and not app.main.query_one("#experiences").display

    drive(app, body, size=size)


def test_the_wide_layout_draws_the_pane_beside_the_plan_and_tab_reaches_it(make_job) -> None:
    paths = make_job()
    log = experience_log()
    log.write(paths.events)
    app = attach_app(paths)

    async def body(pilot) -> None:
        await wait_for(pilot, lambda: app.state.last_seq == len(log.events) and app.bridge.pending == 0,
                       what="the replay")
        await settle(pilot, app)
        main = app.main
        pane, plan, screen = main.query_one("#experiences"), main.query_one("#plan"), main.region
        # Drawn without being asked for, inside the screen, beside the plan (not over it, not below the grid).
        assert pane.display and plan.display and pane.region.height > 3 and screen.contains_region(pane.region)
        assert not pane.region.overlaps(plan.region)
        assert "Failed Approaches (2)" in "\n".join(pane.plain_lines())
        main.pane("plan").focus()
        await settle(pilot, app)
        await pilot.press("tab")  # the plan's next pane in screen order
        await settle(pilot, app)
        assert main.active == "experiences" and main.pane_of(app.focused) == "experiences"
        assert pane.region.height > 3 and plan.display  # still where it was: nothing moved
        await pilot.press("tab")
        await settle(pilot, app)
        assert main.active == "todos"

    drive(app, body, size=(200, 50))


def test_help_names_the_experiences_pane(make_job) -> None:
    from console.tui.screens.help import PANES

    assert any(name == "Experiences" and "experiences.md" in text for name, text in PANES)


def test_an_empty_pane_says_what_will_land_there(make_job) -> None:
    paths = make_job()
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent")
    log.write(paths.events)
    app = attach_app(paths)

    async def body(pilot) -> None:
        await wait_for(pilot, lambda: app.state.last_seq == 1 and app.bridge.pending == 0, what="the replay")
        app.main.show_pane("experiences")
        await settle(pilot, app)
        text = "\n".join(app.main.query_one("#experiences").plain_lines())
        assert "No experiences yet" in text

    drive(app, body, size=(80, 24))


def test_experiences_pane_snapshot(snap_compare, fixed_make_job) -> None:
    """80x24, the Experiences tab: the three sections, newest first, who recorded each entry and where."""
    paths = fixed_make_job()
    log = experience_log()
    log.write(paths.events)
    app = attach_app(paths)

    async def before(pilot) -> None:
        await wait_for(pilot, lambda: app.state.last_seq == len(log.events) and app.bridge.pending == 0,
                       what="the replay")
        app.main.show_pane("experiences")
        await settle(pilot, app)

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)
