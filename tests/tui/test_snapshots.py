"""Snapshots of the console at 80x24 and 120x40: deterministic (scripted model, fake clock, frozen
elapsed time, no cursor blink, no watchers, job name instead of tmp paths).

Regenerate after an intended change with ``pytest tests/tui --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

import pytest

from console.tui.screens.approval import RestartApprovalScreen
from tests.tui.conftest import make_supervisor, run_app, settle, wait_for


@pytest.fixture
def make_job(fixed_make_job):
    return fixed_make_job  # the run id on the status line comes from the job's path

SIZES = [(80, 24), (120, 40)]
GATE = 30  # quickstart, held before turn 30: mid-way through phase 1 with a plan, todos and notices


def size_id(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


def gated_app(make_job, theme: str | None = None):
    sup = make_supervisor(make_job("quickstart"), gate_at=GATE)
    return sup, run_app(sup, theme=theme)


async def frozen(pilot, sup) -> None:
    app = pilot.app
    await wait_for(pilot, sup.provider.waiting.is_set, what="the gate")
    await wait_for(pilot, lambda: app.state.turn == GATE and app.bridge.pending == 0, what="the last events")
    plan = app.main.query_one("#plan")
    await wait_for(pilot, lambda: plan.text == plan.read(), what="main_plan.md")
    await settle(pilot, app)


@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_running_console(snap_compare, make_job, size):
    sup, app = gated_app(make_job)
    assert snap_compare(app, terminal_size=size, run_before=lambda pilot: frozen(pilot, sup))


@pytest.mark.parametrize("theme", ["agent-light", "agent-ansi"])
@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_theme(snap_compare, make_job, size, theme):
    sup, app = gated_app(make_job, theme=theme)
    assert snap_compare(app, terminal_size=size, run_before=lambda pilot: frozen(pilot, sup))


@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_rewind_modal(snap_compare, make_job, size):
    sup, app = gated_app(make_job)

    async def before(pilot):
        await frozen(pilot, sup)
        await pilot.press("r", *"the digest misses the risks")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_help_screen(snap_compare, make_job, size):
    sup, app = gated_app(make_job)

    async def before(pilot):
        await frozen(pilot, sup)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_restart_approval_modal(snap_compare, make_job, size):
    sup = make_supervisor(make_job("requirements-extraction"), context_window=10_000, auto_restart=False)
    app = run_app(sup)

    async def before(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval modal")
        await settle(pilot, app)

    assert snap_compare(app, terminal_size=size, run_before=before)


# -- guardrails: an attached console rebuilt from a log written by hand (the engine's events, fixed times) -------
def guarded_app(make_job, log):
    from tests.tui.conftest import attach_app

    paths = make_job()
    log.write(paths.events)
    return attach_app(paths)


async def replayed(pilot, count: int) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.state.last_seq == count and app.bridge.pending == 0, what="the replay")
    await settle(pilot, app)


def test_feedback_pane_with_two_feedback_blocks(snap_compare, make_job):
    """80x24, the Feedback tab: a denial and a refused stop (one line each), then Deadline and AGENTS.md blocks."""
    from console.engine import events as ev
    from tests.tui.guardrail_events import Log, guarded_run

    full = guarded_run().events
    log = Log()
    log.events = full[: next(n for n, e in enumerate(full) if isinstance(e, ev.TokenUsage)) + 1]
    app = guarded_app(make_job, log)

    async def before(pilot):
        await replayed(pilot, len(log.events))
        app.main.show_pane("feedback")
        await settle(pilot, app)

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=size_id)
def test_guardrails_view(snap_compare, make_job, size):
    from tests.tui.guardrail_events import guarded_run

    log = guarded_run()
    app = guarded_app(make_job, log)

    async def before(pilot):
        await replayed(pilot, len(log.events))
        await pilot.press("g")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_guardrails_view_with_two_mcp_servers(snap_compare, make_job):
    """200x50: the MCP servers section, one server ready (its calls and failures) and one unavailable (why)."""
    from tests.tui.guardrail_events import mcp_run

    log = mcp_run()
    app = guarded_app(make_job, log)

    async def before(pilot):
        await replayed(pilot, len(log.events))
        await pilot.press("g")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(200, 50), run_before=before)
