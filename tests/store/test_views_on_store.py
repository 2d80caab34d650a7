"""What a machine sharing the store shows of another machine's runs: the fleet folds them from the store's events,
and a lease stands in for the run lock (current: it lives; expired: interrupted)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.engine.runs import liveness
from console.engine.store import JobRow
from console.view.fleet import Fleet
from console.view.jobs import as_now
from tests.store.machines import QUICKSTART, Machine, endless, sql, store_seqs, wait_until


def row(**kw: object) -> JobRow:
    base = {"path": "/elsewhere/runs/q-1", "name": "q-1", "status": "running", "provider": "scripted", "model": "m",
            "started_at": "2026-11-26T09:00:00", "updated_at": "2026-11-26T09:00:00", "completed_at": None,
            "confidence": None, "summary": None, "detail": None, "host": "machine-a"}
    return JobRow(**{**base, **kw})  # type: ignore[arg-type]


def test_a_lease_stands_in_for_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    assert liveness("running", None, leased=True).state == "running"
    assert liveness("running", None, leased=False).state == "interrupted"
    assert liveness("completed", None, leased=False).state == "completed"
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    # Another machine's run: its folder is not looked for here (never "gone"), its lease decides.
    assert as_now(row(leased=True)).status == "running"
    live = as_now(row(leased=False))
    assert live.status == "interrupted" and "resume" in (live.detail or "")
    assert as_now(row(status="needs you", detail="stuck: x", leased=True)).status == "needs you"
    # This machine's own run in the shared store: its folder and lock decide, as with the embedded store.
    assert as_now(row(host="machine-b", leased=True)).status == "gone"


def test_the_fleet_folds_another_machines_runs_from_the_store(pg_url: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    a = Machine("machine-a", tmp_path, pg_url)
    done = a.start(str(QUICKSTART), "--speed", "0")
    assert done.wait() == 0
    slow = a.start(*endless(tmp_path), "--speed", "0.3")  # still running at the kill, however late
    folder = slow.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 20, 60, "the slow run's events in the store")
    slow.kill()
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    fleet = Fleet(tmp_path / "b-data" / "jobs.db", now=lambda: datetime.now(UTC), url=pg_url)
    try:
        rows = {r.path: r for r in fleet.poll()}
        assert len(rows) == 2 and {r.host for r in rows.values()} == {"machine-a"}
        finished = rows[done.folder()]
        assert finished.state == "completed" and finished.last and finished.resume == ""
        # A poll with no time left for folding says so; the next goes on (the view's slices).
        late = Fleet(tmp_path / "b-data" / "jobs.db", now=lambda: datetime.now(UTC), url=pg_url)
        assert late.poll(budget=0.0).folded is False and late.poll().folded is True
        assert {r.path: r.last for r in late.poll()}[done.folder()] == finished.last
        late.close()
        assert rows[folder].state == "running"  # its lease is current for up to 25 s after the kill
        sql(pg_url, "UPDATE runs SET lease_expires = now() - interval '1 second' WHERE path = %s", str(folder))
        rows = {r.path: r for r in fleet.poll()}
        assert rows[folder].state == "interrupted" and rows[folder].last
        assert not rows[folder].has_runner and rows[folder].resume == ""  # resumed on its machine, not from here
    finally:
        fleet.close()


def test_the_fleets_keys_reach_another_machines_run(pg_url: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet's stop (and approve, deny) of another machine's run: a row of the store, taken by its link."""
    from console.engine.commands import Pause, Resume, Stop
    from console.view.jobs import send_remote

    a = Machine("machine-a", tmp_path, pg_url)
    runner = a.start(*endless(tmp_path), "--speed", "0.3")  # only the stop ends it: still running when it comes
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 5, 60, "the run in the store")
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    fleet = Fleet(tmp_path / "b" / "jobs.db", now=lambda: datetime.now(UTC), url=pg_url)
    try:
        (row,) = fleet.poll()
        assert row.host == "machine-a" and row.state in ("running", "starting")
        assert row.has_runner and row.pid is None  # its runner is machine-a's: a lease, no pid of this machine
        # r unpauses a paused run of another machine too (through the store, as its stop)
        assert row.key and send_remote(pg_url, fleet.store_path, row.key, Pause(), "fleet") is None
        wait_until(lambda: fleet.poll()[0].state == "paused", 60, "the run shown paused")
        assert fleet.poll()[0].resume == "unpause"
        assert send_remote(pg_url, fleet.store_path, row.key, Resume(), "fleet") is None
        wait_until(lambda: fleet.poll()[0].state == "running", 60, "the run shown running again")
        assert fleet.poll()[0].resume == ""
        assert send_remote(pg_url, fleet.store_path, row.key, Stop(), "fleet") is None
        runner.wait(120)  # the runner's process ends: its stop applied
        wait_until(lambda: fleet.poll()[0].state == "stopped", 30, "the run shown stopped")
    finally:
        fleet.close()
    assert send_remote(pg_url, tmp_path / "b" / "jobs.db", "0" * 32, Stop(), "fleet") is not None  # no such run
