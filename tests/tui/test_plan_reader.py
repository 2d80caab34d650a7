"""The plan pane reads main_plan.md, which the agent writes, as any hostile file: through the engine's sandbox.

A named pipe there used to hang the console for ever (a blocking open on the pane's reader thread, and the app
could not even exit); a symlink to /dev/zero was read until memory ran out; a 50 MB plan was read whole and laid
out as Markdown. Now each is a line in the pane saying why the plan is not shown, at once, and the reader holds
no file descriptor once it returns."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult

from console.engine import events as ev
from console.tui.widgets.plan_pane import PLACEHOLDER, PlanPane, read_plan
from tests.conftest import time_limit
from tests.hostile import ATTACK, SHOWN, raw_controls
from tests.tui.conftest import attach_app, drive, wait_for
from tests.tui.guardrail_events import Log

HANG_GUARD = 60  # seconds: only a hang comes near it (each case takes well under a second)


def _fifo(plan: Path, outside: Path) -> None:
    os.mkfifo(plan)


def _dev_zero(plan: Path, outside: Path) -> None:
    plan.symlink_to("/dev/zero")


def _link_out(plan: Path, outside: Path) -> None:
    plan.symlink_to(outside)


def _hard_link(plan: Path, outside: Path) -> None:
    os.link(outside, plan)


def _huge(plan: Path, outside: Path) -> None:
    with plan.open("wb") as fh:  # 50 MB, sparse: nothing written to the disk
        fh.truncate(50 * 2**20)


def _folder(plan: Path, outside: Path) -> None:
    plan.mkdir()


CASES = {  # how main_plan.md is made, and what the pane says about it
    "fifo": (_fifo, "is a named pipe"),
    "dev-zero": (_dev_zero, "leads outside the job folder"),
    "link-out": (_link_out, "leads outside the job folder"),
    "hard-link": (_hard_link, "several hard links"),
    "50MB": (_huge, "it is 50.0 MB, over the 64 KB this pane shows"),
    "folder": (_folder, "is a folder"),
}


class PlanApp(App[None]):
    def __init__(self, plan: Path) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        yield PlanPane(self.plan, id="plan")

    def on_mount(self) -> None:
        self.query_one(PlanPane).reload_soon()  # as the console does at start


@contextlib.contextmanager
def unblocking(plan: Path) -> Iterator[None]:
    """Should a reader be stuck opening the pipe (the bug), open its other end once the test is over, so the stuck
    thread ends and the test run can exit (a failure, not a hung suite)."""
    try:
        yield
    finally:
        if plan.is_fifo():
            with contextlib.suppress(OSError):
                os.close(os.open(plan, os.O_WRONLY | os.O_NONBLOCK))


def show(plan: Path) -> list[str]:
    """The pane's lines once it has shown something (AssertionError if it does not within the guard)."""

    async def main() -> list[str]:
        app = PlanApp(plan)
        async with app.run_test(size=(100, 30)) as pilot:
            pane = app.query_one(PlanPane)
            await wait_for(pilot, lambda: pane.text is not None, timeout=HANG_GUARD / 2, what="the plan pane")
            await pilot.pause()
            return pane.plain_lines()

    with unblocking(plan), time_limit(HANG_GUARD):
        return asyncio.run(main())


@pytest.mark.parametrize("case", list(CASES))
def test_a_plan_that_is_not_a_plain_file_of_the_job_is_a_line_in_the_pane(tmp_path: Path, case: str) -> None:
    job = tmp_path / "job"
    job.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("the operator's secret\n", encoding="utf-8")
    make, said = CASES[case]
    plan = job / "main_plan.md"
    make(plan, outside)
    text = " ".join(show(plan))
    assert "main_plan.md is not shown" in text and said in text
    assert "secret" not in text


def test_the_reader_holds_no_descriptor_and_shows_the_plan_safely(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    plan = job / "main_plan.md"
    outside = tmp_path / "secret.txt"
    outside.write_text("x", encoding="utf-8")

    def open_in_job() -> list[str]:
        out = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith(str(job.resolve())):
                    out.append(target)
        return out

    assert read_plan(plan) == PLACEHOLDER
    before = len(os.listdir("/proc/self/fd"))
    for case, (make, said) in CASES.items():
        make(plan, outside)
        for _ in range(20):
            assert said in read_plan(plan), case
        assert not open_in_job(), case
        if plan.is_dir() and not plan.is_symlink():
            plan.rmdir()
        else:
            plan.unlink()
    assert len(os.listdir("/proc/self/fd")) <= before
    # A plain plan is shown, its escape sequences made visible and its lines kept.
    plan.write_text(f"# Execution Plan\n\n## Phase 1: Evil {ATTACK}\n- [ ] step\n", encoding="utf-8")
    shown = read_plan(plan)
    assert not raw_controls(shown) and f"## Phase 1: Evil {SHOWN}\n- [ ] step" in shown


def test_the_console_shows_a_pipe_for_a_plan_and_stays_usable(make_job) -> None:
    paths = make_job()
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-6.2-sol", context_window=32_000)
    log.write(paths.events)
    os.mkfifo(paths.main_plan)
    app = attach_app(paths)

    async def body(pilot: Any) -> None:
        plan = app.main.query_one(PlanPane)
        await wait_for(pilot, lambda: plan.text is not None, timeout=HANG_GUARD / 2, what="the plan pane")
        assert "main_plan.md is not shown" in plan.text and "named pipe" in plan.text
        await pilot.press("q")  # attached: q detaches at once
        await wait_for(pilot, lambda: not app.is_running, what="the console to close")

    with unblocking(paths.main_plan), time_limit(HANG_GUARD):
        drive(app, body)
    assert app.return_code == 0


def test_a_reload_cut_short_by_a_newer_one_leaves_the_pane_whole_and_the_app_closes(tmp_path: Path) -> None:
    """The pane reloads in an exclusive worker: a newer reload cancels an older one. One cancelled in the middle of
    its Markdown update (its old blocks removed, the new ones being mounted) left a block that never handled a
    message again, and the app's exit waited on it for ever (seen under load in the console's tests)."""
    from console.tui.widgets.plan_pane import PlanFileChanged
    from tests.tui.conftest import drained

    plan = tmp_path / "main_plan.md"

    def text(k: int) -> str:
        return "# Plan\n\n" + "".join(f"## Phase {p}: P{p} v{k}\n" + "".join(f"- [ ] step {p}.{i}\n" for i in range(4))
                                      for p in range(1, 25))

    async def main() -> list[str]:
        plan.write_text(text(0), encoding="utf-8")
        app = PlanApp(plan)
        async with app.run_test(size=(100, 30)) as pilot:
            pane = app.query_one(PlanPane)
            await wait_for(pilot, lambda: pane.text is not None, timeout=HANG_GUARD / 2, what="the plan pane")
            for k in range(1, 5):
                plan.write_text(text(k), encoding="utf-8")
                pane.post_message(PlanFileChanged())
                # The next reload comes while this one is mounting its blocks (the document's lock is held then).
                await wait_for(pilot, lambda: pane.document.lock.is_locked, timeout=HANG_GUARD / 2, what="the update")
                await asyncio.sleep(0.01)
            await wait_for(pilot, lambda: pane.text == text(4), timeout=HANG_GUARD / 2, what="the last plan")
            await drained(app, ceiling=HANG_GUARD / 2)
            return pane.plain_lines()

    with time_limit(HANG_GUARD):
        lines = asyncio.run(main())  # and the app closed
    assert "P24 v4" in " ".join(lines)
