"""The fleet view: every run of the jobs store, live, in every state; enter attaches and q comes back; a / d
approve or deny from the list; / filters; a run of another process is followed and approved from the list."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.engine.runs import run_id
from console.tui.launch import build_fleet_app
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.fleet_bell import NEEDS_TITLES
from console.tui.screens.run import RunScreen
from console.view.fleet import COMPLETED, GONE, INTERRUPTED, PAUSED, RUNNING, STOPPED, WAITING, Fleet
from tests.conftest import REPO, SAMPLES
from tests.processes import end
from tests.tui.conftest import FROZEN_NOW, drive, wait_for
from tests.tui.fleet_runs import listed, make_fleet

SIZES = [(80, 24), (120, 40)]


def fleet_app(fx, **kw):
    kw.setdefault("watch", False)
    kw.setdefault("animations", False)
    kw.setdefault("keymap", {})
    kw.setdefault("now", lambda: FROZEN_NOW)
    kw.setdefault("dialog_delay", 0)
    return build_fleet_app(fx.store_path, holder=fx.holder, **kw)


def test_every_state_is_folded_from_the_runs_own_events(tmp_path):
    fx = make_fleet(tmp_path)
    rows = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder).poll()
    by_state = {r.state: r for r in rows}
    assert set(by_state) == {WAITING, RUNNING, PAUSED, COMPLETED, "failed", INTERRUPTED, STOPPED}
    assert rows[0].state == WAITING  # the most urgent first
    w = by_state[WAITING]
    assert (w.job, w.phase, w.cost, w.pending_seq > 0) == ("security-audit", "3/5", 1.37, True)
    assert w.ctx is not None and round(w.ctx, 2) == 0.98
    assert by_state[RUNNING].phase == "2/4" and by_state[RUNNING].last == "▸ read_file(notes/part-6.md)"
    # A run the store says is running, with nobody holding its lock, died: interrupted, never "running".
    assert by_state[INTERRUPTED].pid is None and "no process" in by_state[INTERRUPTED].detail
    assert by_state["failed"].detail.startswith("max_turns")
    # Ids are the runs' short ids, the same everywhere.
    assert {r.id for r in rows} == {run_id(p) for p in fx.runs.values()}


def test_a_poll_of_idle_runs_reads_no_log_again(tmp_path):
    fx = make_fleet(tmp_path)
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder)
    fleet.poll()
    assert all(f.catch_up() is False for f in fleet.folds.values())
    # A line appended to one log is folded by the next poll, and only that run changes.
    running = fx.runs["running"]
    with (running / ".console" / "events.jsonl").open("a") as fh:
        fh.write(ev.RestartPending(ts=FROZEN_NOW, seq=999, session=1, usage_pct=0.9, next_session=2)
                 .model_dump_json() + "\n")
    rows = {r.path: r for r in fleet.poll()}
    assert rows[running].state == WAITING


def test_a_poll_without_folding_reads_no_log(tmp_path):
    """The first paint's poll (fold=False) shows the store's rows and reads no log: with a few hundred runs,
    reading them all is what the first paint must not wait for. (The loop's RunFold once shadowed ``fold``, so
    every poll folded every log.)"""
    fx = make_fleet(tmp_path)
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder)
    first = fleet.poll(fold=False)
    assert {r.path for r in first} == set(fx.runs.values())
    assert all(f.offset == 0 for f in fleet.folds.values())
    assert all(r.phase != "2/4" for r in first)  # the phase comes from the log, not read yet
    # The next poll folds them: every log read to its end.
    rows = {r.path: r for r in fleet.poll()}
    assert all(f.catch_up() is False for f in fleet.folds.values())
    assert rows[fx.runs["running"]].phase == "2/4"


@pytest.fixture
def fixed_root() -> Iterator[Path]:
    """Run folders at a fixed path: the ids and paths shown are derived from it, and a snapshot must not
    depend on pytest's temporary folder's name."""
    root = Path("/tmp") / "agent-console-fleet-snapshot"  # not gettempdir(): TMPDIR may differ elsewhere
    shutil.rmtree(root, ignore_errors=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_fleet_view_snapshot(snap_compare, fixed_root, size):
    fx = make_fleet(fixed_root)
    app = fleet_app(fx)

    async def before(pilot):
        await wait_for(pilot, lambda: listed(app, 7), what="rows")
        await pilot.pause()
        app.clear_notifications()  # the approval toast is tested apart; the snapshot shows the list
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_a_need_there_before_the_list_opened_neither_rings_nor_covers_it_a_new_one_rings_once(tmp_path):
    """Issue 33: the fleet's "Approval needed" / "Needs you" toast opened on every start and, at 80x24, covered the
    state, phase, ctx and cost columns. A need the list finds when it opens is in its row (first, highlighted) and
    the title; a need that comes while it is open rings once; over the list no notice covers the columns."""
    fx = make_fleet(tmp_path)
    app = fleet_app(fx, poll_interval=0.05)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        await asyncio.sleep(0.3)  # several polls
        assert rings == [] and not [n for n in app._notifications if n.title in NEEDS_TITLES]
        assert app.fleet_view.selected.state == WAITING  # the cursor starts on the most urgent run
        assert "1 run needs you" in str(app.fleet_view.query_one("#fleet-title").render())
        running = fx.runs["running"]
        with (running / ".console" / "events.jsonl").open("a") as fh:  # a new need, while the list is open
            fh.write(ev.NeedsOperator(ts=FROZEN_NOW, seq=900, session=1, reason="stuck",
                                      message="no todo completed in 40 turns").model_dump_json() + "\n")
        await wait_for(pilot, lambda: bool(rings), what="the bell")
        await asyncio.sleep(0.3)  # several polls: one bell for one need
        assert len(rings) == 1 and not [n for n in app._notifications if n.title in NEEDS_TITLES]
        assert "2 runs need you" in str(app.fleet_view.query_one("#fleet-title").render())

    drive(app, body, size=(80, 24))


def test_enter_attaches_and_q_returns_to_the_list(tmp_path):
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        await pilot.press("down", "down")  # past the paused run: the running one
        await pilot.pause()
        chosen = app.fleet_view.selected
        assert chosen.state == RUNNING
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run's console")
        await wait_for(pilot, lambda: app.state.turn == 6, what="the run's events folded")
        assert app.run_screen.paths.root == chosen.path and app.run_screen.controller.attached
        assert app.main.query_one("#status").last_plain.startswith(chosen.id)
        await pilot.press("q")  # detaches: back to the list, the run goes on
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="the list")
        assert app.is_running and app.fleet_view.selected.path == chosen.path
        # Another run, then back again: each attach is a fresh fold of that run only.
        await pilot.press("up", "up", "enter")  # the run waiting for approval
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.state.restart_pending is not None)
        assert app.state.turn == 6 and app.run_screen.paths.root == fx.runs["waiting"]
        await pilot.press("escape")  # the approval dialog opens for an attached waiting run; leave it open
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, what="the app to exit")

    drive(app, body, size=(80, 24))
    assert app.return_code == 0


def test_approve_and_deny_from_the_list_go_to_the_selected_runs_inbox(tmp_path):
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)
    waiting = fx.runs["waiting"]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        await pilot.press("d")  # it ends the run: asked first
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        await pilot.press("down", "a")  # the running run has nothing to approve: not offered, nothing sent
        await pilot.pause()
        notes = [n.title for n in app._notifications]
        assert "Deny sent" in notes and "Approve sent" not in notes

    # The waiting run's process is make-believe: its inbox gets the command only if a process holds the lock.
    lock = RunLock(JobPaths(waiting))
    assert lock.acquire()
    try:
        drive(app, body, size=(80, 24))
    finally:
        lock.release()
    sent = [p.read_text() for p in (waiting / ".console" / "inbox").glob("*.json")]
    assert len(sent) == 1 and '"deny_restart"' in sent[0] and '"fleet"' in sent[0]
    assert not (fx.runs["running"] / ".console" / "inbox").exists()


def test_slash_filters_the_list(tmp_path):
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        await pilot.press("slash", *"audit")
        await pilot.pause()
        assert [r.job for r in app.fleet_view.shown] == ["security-audit"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.fleet_view.shown) == 7

    drive(app, body, size=(80, 24))


def _start_headless(job: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(job), "--in-place", "--headless",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_a_from_the_list_approves_a_headless_run_of_another_process(tmp_path):
    from console.settings import load_settings

    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "requirements-extraction", job)
    proc = _start_headless(job, "--speed", "0", "--context-window", "10000", "--no-auto-restart")
    app = build_fleet_app(load_settings().store_path, watch=False, animations=False, keymap={}, poll_interval=0.1)
    events = job / ".console" / "events.jsonl"

    async def body(pilot):
        await wait_for(pilot, lambda: app.fleet_view is not None and any(
            r.state == WAITING for r in app.fleet_view.shown), timeout=60, what="the run to wait for approval")
        assert app.fleet_view.selected.path == job
        # The restart approved is this one: taken before the key, since the run (at speed 0, in a 10,000-token
        # window) waits for its next restart within milliseconds of this one's approval, and a poll may show that
        # next wait before the approval is seen in the log (read after it, "first" was that next wait, for ever).
        first = app.fleet_view.selected.pending_seq
        assert first
        await pilot.press("a")
        await wait_for(pilot, lambda: any(e.type == "restart_approved" for e in ev.read_events(events)),
                       timeout=30, what="the approval to be applied")
        # The list follows: the run goes on into its next session (until it waits again, a later restart).
        await wait_for(pilot, lambda: app.fleet_view.rows[0].state != WAITING
                       or app.fleet_view.rows[0].pending_seq != first, timeout=30, what="the list to follow")

    try:
        drive(app, body, size=(80, 24))
        applied = [e for e in ev.read_events(events) if e.type == "operator_command" and e.source == "fleet"]
        assert [e.status for e in applied] == ["received", "applied"]
    finally:
        end(proc)


def test_garbage_missing_folders_and_a_broken_store_never_take_the_list_down(tmp_path):
    fx = make_fleet(tmp_path)
    shutil.rmtree(fx.runs["stopped"])  # a run folder deleted by hand: still listed (gone), from the store's row
    log = JobPaths(fx.runs["running"]).events
    with log.open("ab") as fh:  # garbage, a torn line, a line of the wrong shape, binary
        fh.write(b"not json\n{\"type\": \"turn_started\"\n{\"type\": 7}\n\xff\xfe\x00\n")
    failed = JobPaths(fx.runs["failed"]).events
    failed.unlink()
    os.mkfifo(failed)  # a named pipe where the log should be: never opened for a blocking read
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder)
    rows = {r.path: r for r in fleet.poll()}
    assert len(rows) == 7 and not fleet.error
    assert rows[fx.runs["running"]].phase == "2/4"  # the good lines before the garbage are folded
    assert rows[fx.runs["stopped"]].state == GONE and rows[fx.runs["failed"]].state == "failed"
    # The store itself unreadable: one line says so, the last rows stay.
    fx.store_path.write_bytes(b"this is not a database" * 100)
    again = fleet.poll()
    assert again == list(fleet.rows) and "cannot be read" in fleet.error


def test_each_attach_is_a_fresh_run_screen_whose_workers_end_when_q_pops_it(tmp_path):
    """The fleet pushes a new RunScreen per attach; q pops it, and with it go its follower (cancelled, its thread
    ends), its bridge (closed: a late event from the old run is dropped) and its fold."""
    from textual.worker import WorkerState

    from console.tui.screens.run import RunScreen

    fx = make_fleet(tmp_path)
    app = fleet_app(fx)

    def workers_of(screen):
        return [w for w in app.workers if w.node is screen]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.state.turn > 0, what="the run")
        first = app.screen
        follower = [w for w in workers_of(first) if w.name == "follow"]
        assert len(follower) == 1 and follower[0].state is WorkerState.RUNNING
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="the list")
        await wait_for(pilot, lambda: follower[0].state is WorkerState.CANCELLED, what="the follower to stop")
        assert app.run_screen is None and first not in app.screen_stack
        pushed = first.bridge.pushed
        first.bridge.push(ev.TurnStarted(ts=FROZEN_NOW, seq=10**6, session=1, turn=99))  # a late event
        assert first.bridge.pushed == pushed and first.bridge.pending == 0
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.state.turn > 0, what="again")
        assert app.screen is not first and app.state is not first.state
        assert [w.name for w in workers_of(app.screen) if w.state is WorkerState.RUNNING].count("follow") == 1
        await pilot.press("q", "q")
        await wait_for(pilot, lambda: not app.is_running, what="the app to exit")

    drive(app, body, size=(80, 24))
    assert app.return_code == 0


def test_the_needs_you_badge_comes_before_todays_spend_in_the_title(tmp_path):
    """Found trying the fleet budget at 80x24: the title said the fleet's spend and held runs first, and the line
    was cut before its "runs need you" badge. What needs the operator comes first; the spend follows it."""
    fx = make_fleet(tmp_path)
    running = fx.runs["running"]
    with (running / ".console" / "events.jsonl").open("a") as fh:  # a priced turn today: the title says the spend
        fh.write(ev.TokenUsage(ts=FROZEN_NOW, seq=901, session=1, turn=1, input_tokens=1000, output_tokens=100,
                               cost_usd=0.25).model_dump_json() + "\n")
    app = fleet_app(fx, poll_interval=0.05)

    async def body(pilot):
        title = lambda: str(app.fleet_view.query_one("#fleet-title").render())  # noqa: E731
        await wait_for(pilot, lambda: "today" in title() and "needs you" in title(), what="the spend and the badge")
        assert title().index("1 run needs you") < title().index("today $0.25")

    drive(app, body, size=(80, 24))


def test_rows_that_come_while_the_screen_is_taken_down_are_passed_over(tmp_path):
    """Found in CI: a poll's rows reached the fleet while its screen was being taken down at the app's exit
    (#fleet-empty already removed): the query raised out of the app. A redraw needs all of its widgets there."""
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7), what="rows")
        view = app.fleet_view
        rows = list(view.rows)
        await view.query_one("#fleet-empty").remove()
        view.update_rows(rows, "")  # as the poll's message would, now: nothing raised, nothing redrawn

    drive(app, body, size=(80, 24))
