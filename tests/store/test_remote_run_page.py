"""A run of another machine sharing the store, as serve's page of it shows it: its story's tail comes from the
store's events (its log is on its own machine), in the one presentation, agent text made safe."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.engine.runs import run_id
from console.view.fleet import Fleet
from console.view.run_snapshot import look
from tests.store.test_remote_commands import RunOnA


def test_another_machines_run_page_tells_its_story_from_the_store(pg_url: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    run = RunOnA(pg_url, tmp_path)
    try:
        run.ship(*(("assistant_message", {"turn": n, "text": f"reading notes-{n}.md next"}) for n in range(50)),
                 ("assistant_message", {"turn": 50, "text": "done \x1b[2J<script>evil</script>\nsecond line"}))
        fleet = Fleet(tmp_path / "machine-b" / "jobs.db", now=lambda: datetime.now(UTC), url=pg_url)
        try:
            fleet.poll()
            rows = fleet.poll()
            (row,) = [r for r in rows if r.id == run_id(run.folder)]
            assert row.host == "machine-a"
            snap = look(list(rows), list(fleet.folds.values()), row.id)
        finally:
            fleet.close()
        assert snap is not None
        lines = [line for _, line in snap.tail]
        assert len(lines) == 40  # the page's tail: the last 40 of the story, not its first
        assert any("notes-49.md" in line for line in lines) and not any("notes-5.md" in line for line in lines)
        last = lines[-1]
        assert "evil" in last and "\x1b" not in last and "\n" not in last  # made safe (and the page escapes it)
        assert "folder is on machine-a" in snap.plan  # its plan file is there, not in the store
    finally:
        run.store.close()


def test_another_machines_run_starting_is_offered_no_rewind(pg_url: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a new operator's trial: a run of another machine, its runner's lease current and no todo list yet
    (starting), was offered the rewind's form, which names no phase and which its engine refuses."""
    from console.engine import events as ev
    from console.web import pages
    from tests.store.test_attach_remote import T0, fake_remote_run

    folder = fake_remote_run(pg_url, [ev.SessionStarted(ts=T0, seq=1, session=1, reason="new", provider="openai",
                                                        model="gpt-x", context_window=32_000)])
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    fleet = Fleet(tmp_path / "machine-b" / "jobs.db", now=lambda: datetime.now(UTC), url=pg_url)
    try:
        (row,) = [r for r in fleet.poll() if r.path == folder]
        snap = look(list(fleet.rows), list(fleet.folds.values()), row.id)
    finally:
        fleet.close()
    assert row.has_runner and snap is not None
    assert "no todo list yet" in snap.rewind_refused and 'class="rewind"' not in pages.run_page(snap, row, "c")
