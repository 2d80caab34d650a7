"""`jobs` shows a run whose folder is gone as gone, `jobs --prune` forgets those runs (and only those), and
`rewind --phase N` sends the phase with the rewind (issue 18, point 6)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from console.cli import main
from console.engine.runs import run_id
from console.engine.store import JobStore, folder_gone
from console.settings import load_settings
from tests.conftest import SAMPLES

NOW = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)


def runs(tmp_path: Path, n: int = 3) -> list[Path]:
    store = JobStore(load_settings().store_path)
    out = []
    for i in range(n):
        folder = tmp_path / f"job{i}-20261122-13000{i}"
        folder.mkdir()
        store.started(folder, f"job{i}", "scripted", "scripted-agent", NOW.replace(second=i))
        store.ended(folder, "stopped", NOW, "stopped by the operator")
        out.append(folder)
    return out


def test_jobs_shows_gone_and_prune_forgets_only_those(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    kept, gone, moved = runs(tmp_path)
    shutil.rmtree(gone)
    moved.rename(tmp_path / "moved-away")
    assert main(["jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_id = {line.split()[0]: line for line in lines[1:4]}
    assert by_id[run_id(kept)].split()[1] == "stopped"
    for folder in (gone, moved):
        assert by_id[run_id(folder)].split()[1] == "gone" and "jobs --prune" in by_id[run_id(folder)]
    assert main(["jobs", "--json"]) == 0
    states = {json.loads(line)["path"]: json.loads(line)["status"] for line in capsys.readouterr().out.splitlines()}
    assert states == {str(kept): "stopped", str(gone): "gone", str(moved): "gone"}

    assert main(["jobs", "--prune"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "forgot 2 runs whose folder is gone"
    assert {line.split()[1] for line in out[:-1]} == {run_id(gone), run_id(moved)}
    assert [r.path for r in JobStore(load_settings().store_path).list()] == [str(kept)]
    assert main(["jobs", "--prune"]) == 0  # again: nothing left to forget
    assert capsys.readouterr().out.strip() == "no run's folder is gone: nothing to forget"


def test_a_folder_that_cannot_be_looked_at_is_not_gone(tmp_path, monkeypatch) -> None:
    import errno

    loop = tmp_path / "loop"
    loop.symlink_to(loop)  # ELOOP: an error, not an absence
    assert folder_gone(loop / "run") is False
    for code in (errno.EACCES, errno.EIO, errno.ESTALE):
        def refuse(path, code=code):
            raise OSError(code, os.strerror(code), str(path))

        monkeypatch.setattr("console.engine.store.os.stat", refuse)
        assert folder_gone(tmp_path) is False, code


def test_gone_means_nothing_there_or_not_a_folder(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    assert folder_gone(tmp_path / "nothing") and folder_gone(tmp_path / "file") and folder_gone(tmp_path / "file" / "x")
    assert not folder_gone(tmp_path)
    assert not folder_gone("bad\0path")  # an error of another kind: not said to be gone


def test_forget_removes_the_rows_named_and_counts_them(tmp_path, fast_path, monkeypatch) -> None:
    # 1,200 rows, each committed (and synced) on its own as runs start: the store on tmpfs when there is one
    # (on a busy disk they took 3-18 s).
    monkeypatch.setenv("AGENT_CONSOLE_DATA_DIR", str(fast_path / "data"))
    store = JobStore(load_settings().store_path)
    folders = [tmp_path / f"r{i}" for i in range(1200)]  # more than one statement's parameters
    for f in folders:
        store.started(f, f.name, "scripted", "m", NOW)
    assert store.forget([*folders[:1100], tmp_path / "never-listed"]) == 1100
    assert len(store.list(5000)) == 100
    assert store.forget([]) == 0


def test_prune_on_a_broken_database_says_so(tmp_path, capsys) -> None:
    path = load_settings().store_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not a database" * 100)
    assert main(["jobs", "--prune"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "nothing was forgotten" in err


def test_rewind_phase_is_sent_with_the_rewind(tmp_path, capsys) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    (job / ".console").mkdir()
    assert main(["rewind", str(job), "the digest misses the risks", "--phase", "2", "--wait", "0"]) == 0
    (queued,) = (job / ".console" / "inbox").glob("*.json")
    assert json.loads(queued.read_text())["args"] == {"issue": "the digest misses the risks", "phase": 2}
    capsys.readouterr()
    assert main(["rewind", str(job), "x", "--phase", "0"]) == 2
    assert "--phase 0" in capsys.readouterr().err
