"""`attach ID` and the fleet's enter on a run of another machine: the same console (RunScreen), its events from the
shared store (history, then LISTEN/NOTIFY), its keys through the store's command queue; and `wait ID` on one.

Two "machines" are two data dirs and AGENT_CONSOLE_HOST values on one real PostgreSQL server (tests/pg_server.py).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from console.engine import events as ev
from console.engine.runs import run_id
from console.engine.store.postgres import PgStore
from console.tui.launch import build_fleet_app, build_remote_app
from console.tui.screens.approval import RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.store_follow import StoreController
from console.tui.widgets.lines import ItemView
from console.tui.widgets.plan_pane import PlanPane
from console.tui.widgets.status import StatusLine
from tests.hostile import ATTACK, SHOWN, raw_controls
from tests.pg_server import PgServer
from tests.store.machines import (
    QUICKSTART,
    Machine,
    Runner,
    endless,
    file_events,
    in_store,
    sql,
    store_seqs,
    wait_until,
)
from tests.tui.conftest import FROZEN_NOW, drive, record_notices, settle, wait_for
from tests.tui.test_terminal_safety import hostile_log, screen_text, words

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")


def remote_row(url: str, folder: Path) -> Any:
    store = PgStore(url)
    try:
        row = next(r for r in store.list(100) if r.path == str(folder))
    finally:
        store.close()
    assert row.remote, "the run must be another machine's"
    return row


def remote_app(url: str, row: Any, **kw: Any) -> Any:
    return build_remote_app(url, row, keymap={}, watch=False, animations=False, now=lambda: FROZEN_NOW,
                            dialog_delay=0, **kw)


def status_text(app: Any) -> str:
    return " ".join(line.last_plain for line in app.main.query(StatusLine))


def slow_run(tmp_path: Path, url: str) -> tuple[Machine, Runner, Path]:
    a = Machine("machine-a", tmp_path, url)
    runner = a.start(*endless(tmp_path), "--speed", "0.1")  # only a stop (or a kill) ends it
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(url, folder)) >= 5, 60, "the run's first events in the store")
    return a, runner, folder


def test_attach_shows_a_remote_run_live_and_its_pause_is_applied_there(pg_url: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _a, runner, folder = slow_run(tmp_path, pg_url)
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    app = remote_app(pg_url, remote_row(pg_url, folder), data_dir=tmp_path / "b-data")

    async def body(pilot: Any) -> None:
        screen = app.main
        assert isinstance(screen.controller, StoreController)
        await wait_for(pilot, lambda: screen.events_seen >= 5 and screen.controller.owner is not None,
                       what="the history from the store")
        await settle(pilot, app)
        assert app.state.session == 1 and app.state.todos is not None
        assert "on machine-a" in status_text(app) and "not running" not in status_text(app)
        seen = app.state.last_seq
        await wait_for(pilot, lambda: app.state.last_seq > seen + 3, what="live events through NOTIFY")
        # The plan pane says where the plan is, never reads a local file of that path.
        plan = app.main.query_one(PlanPane)
        await wait_for(pilot, lambda: plan.text is not None and "machine-a" in plan.text, what="the plan pane")
        assert "not shown" in (plan.text or "")
        await pilot.press("p")
        await pilot.pause()
        # On its way, said in the status line at 80 columns (or already applied by the runner).
        assert ("pause" in app.state.requested and "pausing" in status_text(app)) or app.state.paused
        await wait_for(pilot, lambda: app.state.paused, timeout=30, what="the pause applied by the runner")
        assert not app.state.requested
        applied = [e for e in file_events(folder) if e["type"] == "operator_command" and e["command"] == "pause"
                   and e["status"] == "applied"]
        assert applied and applied[-1]["source"] == "console"  # the runner on machine-a applied this console's
        await pilot.press("s")  # stop, asked first: through the store too
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the stop's question")
        # How to resume it: on its machine, not from a folder of that path here.
        assert f"agent-console resume {app.main.run_id} on machine-a" in app.screen.message
        await pilot.press("y")
        await wait_for(pilot, lambda: app.state.ended, timeout=60, what="the stop applied")
        notices = record_notices(app)
        app.main.action_checkpoint()  # nothing to checkpoint: how to resume it is said, on its machine
        rid = app.main.run_id
        assert any(f"agent-console resume {rid} on machine-a" in text for _title, text in notices), notices
        # A screenshot of it goes to this machine's data dir, never to a folder of the other machine's path.
        assert app.screenshots_dir() == tmp_path / "b-data" / "screenshots"
        await pilot.press("q")  # a run that ended: q leaves at once

    drive(app, body, size=(80, 24))
    assert runner.wait(60) == 3  # stopped by the operator


def test_the_fleets_enter_opens_a_remote_run_and_q_comes_back(pg_url: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _a, runner, folder = slow_run(tmp_path, pg_url)
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    app = build_fleet_app(tmp_path / "b" / "jobs.db", url=pg_url, keymap={}, watch=False, animations=False,
                          now=lambda: FROZEN_NOW, dialog_delay=0)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.fleet_view is not None and len(app.fleet.rows) == 1, what="the list")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.run_screen is not None, what="the run's console")
        run = app.run_screen
        assert isinstance(run.controller, StoreController) and run.in_fleet
        await wait_for(pilot, lambda: run.events_seen >= 5, what="its history from the store")
        assert run.paths.root == folder
        assert app.screenshots_dir() == tmp_path / "b" / "screenshots"
        await pilot.press("q")
        await wait_for(pilot, lambda: app.screen is app.fleet_view, what="back to the list")
        assert app.run_screen is None
        await wait_for(pilot, lambda: run.controller._store is None, what="the run's store connections closed")

    drive(app, body, size=(80, 24))
    runner.kill()


def test_a_store_away_is_said_and_the_view_resumes_when_it_is_back(pg_server: PgServer, pg_url: str,
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _a, runner, folder = slow_run(tmp_path, pg_url)
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    app = remote_app(pg_url, remote_row(pg_url, folder))

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.main.events_seen >= 5, what="the history")
        pg_server.stop()
        try:
            await wait_for(pilot, lambda: "STORE AWAY" in status_text(app), timeout=30, what="the store away said")
            await pilot.press("p")  # refused at once, said: never a wait on a store that is away
            await pilot.pause()
            assert "pause" not in app.state.requested
        finally:
            pg_server.start()
        seen = app.state.last_seq
        await wait_for(pilot, lambda: "STORE AWAY" not in status_text(app), timeout=60, what="the store back")
        await wait_for(pilot, lambda: app.state.last_seq > seen, timeout=60, what="events again")
        assert app.is_running

    drive(app, body, size=(80, 24))
    runner.kill()


def fake_remote_run(url: str, events: list[ev.EventBase], host: str = "machine-a", leased: bool = True,
                    extra: list[tuple[int, str, Any]] = ()) -> Path:
    """A run of ``host`` in the store, written as its link would (rows only: no runner)."""
    key = uuid.uuid4().hex
    folder = Path(f"/nowhere/{host}/runs/job-{key[:6]}")
    PgStore(url).close()  # the schema
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO runs (key, id, host, path, name, status, started_at, updated_at, last_seq, "
                     "lease_owner, lease_expires) VALUES (%s, %s, %s, %s, %s, 'running', %s, %s, %s, %s, "
                     "now() + interval '1 hour')", (key, key[:5], host, str(folder), folder.name, T0.isoformat(),
                                                     T0.isoformat(), max(e.seq for e in events),
                                                     f"{host}:4242:r" if leased else None))
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO events (run_key, seq, ts, type, body) VALUES (%s, %s, %s, %s, %s)",
                            [(key, e.seq, e.ts, e.type, e.model_dump_json()) for e in events]
                            + [(key, seq, T0, kind, json.dumps(body)) for seq, kind, body in extra])
    return folder


def test_hostile_text_from_the_store_is_shown_as_text(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    log = hostile_log()
    log.add(ev.PlanChanged, phases=3, complete=1, current=f"Phase 2: {ATTACK}", error=None)
    # A row that is no event (a damaged or forged body) is passed over, not a crash.
    folder = fake_remote_run(pg_url, log.events, extra=[(len(log.events) + 1, "assistant_message",
                                                         {"type": "assistant_message", "text": 5})])
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    row = remote_row(pg_url, folder)
    app = remote_app(pg_url, row)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.state.restart_pending is not None, what="the history")
        await settle(pilot, app)
        # The run has a runner (its lease): the restart's approval dialog is open over its panes. Its resume command
        # names the run by its id, on its machine: the folder is a path of that machine, not of this one.
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval dialog")
        said = words(str(app.screen.query_one("#message").render()))
        assert words(f"resumed later on machine-a with `agent-console resume {run_id(row.path)}`") in said
        assert str(folder) not in said
        await pilot.press("escape")
        shown = "\n".join(line for view in app.main.query(ItemView) for line in view.plain_lines())
        assert not raw_controls(screen_text(app)) and not raw_controls(shown)
        assert words(f"msg {SHOWN}") in words(shown)
        plan = app.main.query_one(PlanPane)
        await wait_for(pilot, lambda: plan.text is not None and "1 of 3 phases" in plan.text, what="the plan")
        assert not raw_controls(plan.text or "") and not raw_controls(" ".join(plan.plain_lines()))
        assert "machine-a" in (plan.text or "")

    drive(app, body, size=(200, 50))


def test_a_long_remote_history_is_shown_newest_first_then_folded_whole(pg_url: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from console.tui import store_follow

    monkeypatch.setattr(store_follow, "QUICK_EVENTS", 200)
    monkeypatch.setattr(store_follow, "TAIL", 100)
    monkeypatch.setattr(store_follow, "DRAW_FIRST", 0)
    events: list[ev.EventBase] = []

    def add(kind: type[ev.EventBase], **kw: Any) -> None:
        events.append(kind(ts=T0 + timedelta(seconds=len(events)), seq=len(events) + 1, session=1, **kw))

    add(ev.SessionStarted, reason="new", provider="scripted", model="m", context_window=32_000)
    for turn in range(1, 400):
        add(ev.TurnStarted, turn=turn)
        if turn == 7:
            add(ev.PlanChanged, phases=4, complete=0, current="Phase 1: early")
        add(ev.AssistantMessage, turn=turn, text=f"message {turn}")
    folder = fake_remote_run(pg_url, events)
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    app = remote_app(pg_url, remote_row(pg_url, folder))

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.state.turn == 399 and app.main.events_seen == len(events),
                       what="the whole history counted")
        await settle(pilot, app)
        assert app.main.intake.folded_upto > 0  # the newest-first path was taken
        assert "message 399" in "\n".join(app.main.conversation.plain_lines())
        # The plan's only plan_changed is older than the tail read first: the seed brings it.
        plan = app.main.query_one(PlanPane)
        await wait_for(pilot, lambda: plan.text is not None and "0 of 4 phases" in plan.text, what="the plan")

    drive(app, body, size=(80, 24))


def test_wait_gives_a_remote_runs_verdict(pg_url: str, tmp_path: Path) -> None:
    a = Machine("machine-a", tmp_path, pg_url)
    b = Machine("machine-b", tmp_path, pg_url)
    done = a.start(str(QUICKSTART), "--speed", "0")
    folder = done.folder()
    # The runner prints its folder before its link to the store makes the run's row (console/cli/run.py, then
    # StoreLink.start's ensure_run): wait for the row.
    wait_until(lambda: in_store(pg_url, "SELECT 1 FROM runs WHERE path = %s", str(folder)), 60, "the run's row")
    rid = wait_until(lambda: next((r["id"] for r in b.jobs() if r["path"] == str(folder)), None), 60,
                     "the run's row in the store")
    finished = b.cli("wait", rid)
    assert (finished.returncode, finished.stdout.split(":")[0]) == (0, f"run {rid} completed"), finished.stderr
    assert done.wait() == 0

    _a, stopped, folder = slow_run(tmp_path, pg_url)
    rid = next(r["id"] for r in b.jobs() if r["path"] == str(folder))
    assert b.cli("stop", rid).returncode == 0
    got = b.cli("wait", rid)
    assert got.returncode == 3 and got.stdout.startswith(f"run {rid} stopped"), (got.stdout, got.stderr)
    assert stopped.wait() == 3

    _a, killed, folder = slow_run(tmp_path, pg_url)
    rid = next(r["id"] for r in b.jobs() if r["path"] == str(folder))
    # Past the 3 s after which an unanswered look says the store is away: the look made as the timeout came is
    # not one (it said "the store cannot be reached" while it answered every look).
    timed = b.cli("wait", rid, "--timeout", "4")
    assert timed.returncode == 5 and "still running after 4s" in timed.stdout, (timed.stdout, timed.stderr)
    assert "has not answered" not in timed.stderr
    killed.kill()  # kill -9: its lease stays until it expires (25 s); expired here, as the server's clock would
    sql(pg_url, "UPDATE runs SET lease_expires = now() - interval '1 second' WHERE path = %s", str(folder))
    got = b.cli("wait", rid)
    assert got.returncode == 6 and "interrupted" in got.stdout and "machine-a" in got.stdout, got.stdout


def test_leaving_while_the_store_is_away_does_not_hang(pg_server: PgServer, pg_url: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    log = hostile_log()
    folder = fake_remote_run(pg_url, log.events[:3])
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    app = remote_app(pg_url, remote_row(pg_url, folder))
    left = 0.0

    async def body(pilot: Any) -> None:
        nonlocal left
        await wait_for(pilot, lambda: app.main.events_seen >= 3, what="the history")
        pg_server.stop()
        await wait_for(pilot, lambda: "STORE AWAY" in status_text(app), timeout=30, what="the store away said")
        left = time.monotonic()
        await pilot.press("q")  # the lease was current when last read: asked whether to detach or stop
        await pilot.pause()
        await pilot.press("d")

    try:
        drive(app, body, size=(80, 24))
        # A ceiling, not a pace: a follower blocked on the store must not hold the console (its wait is 5 s).
        assert time.monotonic() - left < 20
        assert app.return_code in (None, 0)
    finally:
        pg_server.start()


def signal_all(pids: list[int], sig: int) -> None:
    import contextlib
    import os

    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # a backend whose session ended meanwhile
            os.kill(pid, sig)


def server_processes(postmaster: int) -> list[int]:
    """The server's processes: its postmaster and every backend (each of which is a process group of its own)."""
    out = [postmaster]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            out.append(int(stat.parent.name))
    return out


def test_a_store_that_does_not_answer_is_said_and_keys_never_wait_on_it(pg_server: PgServer, pg_url: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A server stopped (SIGSTOP: a network cut looks the same) refuses nothing: every query just waits. The view
    says so after STALL seconds, a key is refused within SEND_WAIT, and all goes on once it answers again."""
    import signal
    import time

    from console.tui import store_follow

    monkeypatch.setattr(store_follow, "STALL", 0.5)
    folder = fake_remote_run(pg_url, hostile_log().events[:3])
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    app = remote_app(pg_url, remote_row(pg_url, folder))
    assert pg_server.proc is not None
    postmaster = pg_server.proc.pid

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.main.events_seen >= 3, what="the history")
        server = server_processes(postmaster)  # the console's connections' backends among them
        signal_all(server, signal.SIGSTOP)
        try:
            await wait_for(pilot, lambda: "STORE AWAY" in status_text(app), timeout=30, what="the stall said")
            asked = time.monotonic()
            await pilot.press("c")  # a checkpoint: refused at once, the store being away
            await pilot.pause()
            assert time.monotonic() - asked < store_follow.SEND_WAIT + 5 and not app.state.requested
        finally:
            signal_all(server, signal.SIGCONT)
        await wait_for(pilot, lambda: "STORE AWAY" not in status_text(app), timeout=60, what="the store back")
        sql(pg_url, "INSERT INTO events (run_key, seq, ts, type, body) SELECT key, 4, now(), 'error', %s "
                    "FROM runs WHERE path = %s", json.dumps({"type": "error", "ts": T0.isoformat(), "seq": 4,
                                                             "session": 1, "message": "after the stall"}),
            str(folder))
        await wait_for(pilot, lambda: app.state.last_seq == 4, timeout=30, what="an event after the stall")

    drive(app, body, size=(80, 24))


def test_wait_with_a_timeout_ends_even_when_the_store_does_not_answer(pg_server: PgServer, pg_url: str,
                                                                      tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    folder = fake_remote_run(pg_url, hostile_log().events[:3])
    b = Machine("machine-b", tmp_path, pg_url)
    rid = next(r["id"] for r in b.jobs() if r["path"] == str(folder))
    assert pg_server.proc is not None
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "wait", rid, "--timeout", "8"], env=b.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    # Stopped once it has found the run and listens (before, it could not tell the run from a name: usage error).
    wait_until(lambda: sql(pg_url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                   "AND query LIKE 'LISTEN%%'")[0][0] >= 1, 30, "wait listening")
    server = server_processes(pg_server.proc.pid)
    signal_all(server, signal.SIGSTOP)
    try:
        out, errs = proc.communicate(timeout=60)  # a ceiling, not a pace: --timeout is 8 s
    finally:
        signal_all(server, signal.SIGCONT)
    assert proc.returncode == 5 and "timeout" in out, (out, errs)
    assert "has not answered" in errs
