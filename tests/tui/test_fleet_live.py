"""The fleet lists every run that lives or needs its operator, however many runs the store holds: a run waiting
for approval that started before 600 finished ones is listed first and highlighted; older
finished runs beyond the list are counted in the title."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.tui.launch import build_fleet_app
from console.view.fleet import FLEET_LIMIT, INTERRUPTED, WAITING, Fleet
from tests.tui.conftest import FROZEN_NOW, drive, wait_for
from tests.tui.fleet_runs import listed
from tests.tui.guardrail_events import Log

FINISHED_RUNS = FLEET_LIMIT + 100


def crowded_store(root: Path) -> tuple[Path, Path, Path]:
    """600 finished runs, all newer than an old run waiting for approval (its process alive) and an old run
    whose process died (the store still says running). Returns (store, the waiting run, the dead run)."""
    store_path = root / "data" / "jobs.db"
    store = JobStore(store_path)
    old = FROZEN_NOW - timedelta(days=3)
    waiting = root / "runs" / "security-audit-old"
    waiting.mkdir(parents=True)
    store.started(waiting, "security-audit", "openai", "gpt-6.2-sol", old)
    store.ended(waiting, "awaiting approval", old + timedelta(hours=2), "restart pending")
    log = Log(start=old)
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-6.2-sol", context_window=32_000)
    log.add(ev.RestartPending, usage_pct=0.97, used_tokens=27_000, context_window=32_000, prompt_budget=28_000,
            carryover_messages=4, carryover_tokens=2_000, next_session=2)
    log.write(JobPaths(waiting).events)
    dead = root / "runs" / "nightly-etl-old"
    dead.mkdir()  # its folder is there (a run whose folder is gone is shown as gone)
    store.started(dead, "nightly-etl", "openai", "gpt-6.2-sol", old - timedelta(hours=1))
    # The finished runs in one transaction (what 600 runs' store.started + store.completed leave, without 1,200
    # commits of setup).
    rows = []
    for n in range(FINISHED_RUNS):
        at = FROZEN_NOW - timedelta(hours=48) + timedelta(minutes=n)
        ts, done = at.isoformat(timespec="seconds"), (at + timedelta(minutes=1)).isoformat(timespec="seconds")
        rows.append((str(root / "runs" / f"done-{n:04d}"), "done", "openai", "gpt-6.2-sol", ts, done, done, 0.9, "ok"))
    with closing(sqlite3.connect(store_path)) as db, db:
        db.executemany("INSERT INTO jobs (path, name, status, provider, model, started_at, updated_at, completed_at, "
                       "confidence, summary) VALUES (?, ?, 'completed', ?, ?, ?, ?, ?, ?, ?)", rows)
    return store_path, waiting, dead


def test_an_old_run_waiting_for_approval_is_listed_first_whatever_its_age(tmp_path: Path) -> None:
    store_path, waiting, dead = crowded_store(tmp_path)
    fleet = Fleet(store_path, now=lambda: FROZEN_NOW, holder=lambda fold: 4242 if fold.paths.root == waiting else None)
    rows = fleet.poll()
    assert rows[0].path == waiting and rows[0].state == WAITING and rows[0].pending_seq > 0
    # The run whose process died needs its operator too (resume it): listed, as interrupted.
    assert next(r for r in rows if r.path == dead).state == INTERRUPTED
    # The newest finished runs, the rest counted.
    assert len(rows) == FLEET_LIMIT + 2 and rows.older == FINISHED_RUNS - FLEET_LIMIT


def test_the_fleet_view_lists_an_old_waiting_run_first_and_highlighted(tmp_path: Path) -> None:
    store_path, waiting, _dead = crowded_store(tmp_path)
    app = build_fleet_app(store_path, holder=lambda fold: 4242 if fold.paths.root == waiting else None,
                          watch=False, animations=False, keymap={}, now=lambda: FROZEN_NOW, poll_interval=0.05)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]

    async def body(pilot) -> None:
        await wait_for(pilot, lambda: listed(app, FLEET_LIMIT + 2))
        await asyncio.sleep(0.2)  # more polls: a restart waiting when the list opened is no news (no bell, no
        view = app.fleet_view  # notice over the columns): its row is first and highlighted, the title counts it
        assert rings == [] and not any(n.title == "Approval needed" for n in app._notifications)
        assert view.selected is not None and view.selected.path == waiting  # the cursor on the most urgent run
        state_cell = view.table.get_cell(str(waiting), "state")
        # The highlighted badge: a restart waiting for approval is one kind of "needs you".
        assert state_cell.plain == f"{WAITING}: approval" and state_cell.style.bgcolor is not None
        title = str(view.query_one("#fleet-title").render())
        assert f"{FLEET_LIMIT + 2} of {FINISHED_RUNS + 2:,} runs" in title and "1 run needs you" in title

    drive(app, body, size=(120, 40))


def test_a_cost_that_is_no_amount_reads_unknown_in_its_column(tmp_path: Path) -> None:
    """Found by a new operator's trial: a run whose log (anyone's, in a folder someone handed over) says its job cost
    $1e300 showed "cost un" in the fleet's cost column: "cost unknown" is wider than the column. It says "unknown"
    under the column's heading, a real amount as before."""
    store_path = tmp_path / "data" / "jobs.db"
    store = JobStore(store_path)
    for name, usd in (("forged", 1e300), ("honest", 0.42)):
        root = tmp_path / "runs" / name
        root.mkdir(parents=True)
        store.started(root, name, "openai", "gpt-6.2-sol", FROZEN_NOW - timedelta(minutes=5))
        store.ended(root, "completed", FROZEN_NOW, "done")
        log = Log(start=FROZEN_NOW - timedelta(minutes=5))
        log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-6.2-sol", context_window=32_000)
        log.add(ev.TokenUsage, turn=1, input_tokens=100, output_tokens=10, cost_usd=0.01, job_cost_usd=usd)
        log.write(JobPaths(root).events)
    app = build_fleet_app(store_path, holder=lambda fold: None, watch=False, animations=False, keymap={},
                          now=lambda: FROZEN_NOW, poll_interval=0.05)

    async def body(pilot) -> None:
        await wait_for(pilot, lambda: listed(app, 2))
        table = app.fleet_view.table
        assert table.get_cell(str(tmp_path / "runs" / "forged"), "cost").plain == "unknown"
        assert table.get_cell(str(tmp_path / "runs" / "honest"), "cost").plain == "$0.42"

    drive(app, body, size=(120, 40))


def test_a_run_of_this_machine_costs_what_its_log_says_not_its_store_row(tmp_path: Path) -> None:
    """Found trying forged store rows: a row (anyone's, in a shared store) saying a run of this machine that has no
    log cost $2.00 was shown so in the fleet's column, while `costs` and the title's "today" (the runs' own logs)
    never counted it. The store's figure stands in only while a log is being read, or for another machine's run."""
    import sqlite3
    from contextlib import closing

    store_path = tmp_path / "data" / "jobs.db"
    store = JobStore(store_path)
    silent = tmp_path / "runs" / "silent"
    (silent / ".console").mkdir(parents=True)
    store.started(silent, "silent", "openai", "gpt-6.2-sol", FROZEN_NOW - timedelta(minutes=5))
    with closing(sqlite3.connect(store_path)) as db, db:
        db.execute("UPDATE jobs SET cost_usd = 2.0, status = 'completed' WHERE path = ?", (str(silent),))
    logged = tmp_path / "runs" / "logged"
    logged.mkdir(parents=True)
    store.started(logged, "logged", "openai", "gpt-6.2-sol", FROZEN_NOW - timedelta(minutes=5))
    log = Log(start=FROZEN_NOW - timedelta(minutes=5))
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-6.2-sol", context_window=32_000)
    log.add(ev.TokenUsage, turn=1, input_tokens=100, output_tokens=10, cost_usd=0.42, job_cost_usd=0.42)
    log.write(JobPaths(logged).events)
    with closing(sqlite3.connect(store_path)) as db, db:
        db.execute("UPDATE jobs SET cost_usd = 9.0 WHERE path = ?", (str(logged),))  # the log says otherwise
    fleet = Fleet(store_path, now=lambda: FROZEN_NOW, holder=lambda fold: None)
    rows = {r.path.name: r for r in fleet.poll()}
    assert rows["silent"].cost is None and rows["logged"].cost == 0.42


def test_the_phase_column_says_done_of_a_completed_run_and_final_of_one_that_gave_up_there(tmp_path: Path) -> None:
    """A run that gave up in its final review read "done" in the phase column beside "needs you: gave up"."""
    store_path = tmp_path / "data" / "jobs.db"
    store = JobStore(store_path)
    for name, outcome in (("finished", "completed"), ("quitter", "gave_up")):
        root = tmp_path / "runs" / name
        root.mkdir(parents=True)
        store.started(root, name, "openai", "gpt-6.2-sol", FROZEN_NOW - timedelta(minutes=5))
        store.ended(root, outcome.replace("_", " "), FROZEN_NOW, "done")
        log = Log(start=FROZEN_NOW - timedelta(minutes=5))
        log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-6.2-sol", context_window=32_000)
        log.events.append(ev.TodosChanged(ts=FROZEN_NOW - timedelta(minutes=4), seq=len(log.events) + 1, session=1,
                                          phase_name="Job Completion", phase_number=0, total_phases=2,
                                          kind="completion", items=[]))
        log.add(ev.RunEnded, reason="job_complete" if outcome == "completed" else "gave_up", outcome=outcome,
                sessions=1)
        log.write(JobPaths(root).events)
    rows = {r.path.name: r for r in Fleet(store_path, now=lambda: FROZEN_NOW, holder=lambda fold: None).poll()}
    assert (rows["finished"].phase, rows["quitter"].phase) == ("done", "final"), rows
