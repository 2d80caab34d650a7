"""The harness's state is the operator's alone: the data folder, runs/, jobs.db (and its -wal and -shm), every
run's ``.console/`` and all in it are 0700 folders and 0600 files, with the usual umask (022) too; a run made by
an older version (0755 / 0644) is tightened at the next start, and what cannot be (another user's file) is named
once; ``run.lock`` is never followed through a link nor trusted when another user owns it.

Real permission bits throughout. "Another user" is uid 65534 (root can chown to it; a test that needs it skips,
saying why, where this user cannot).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import main
from console.engine.atomic import make_private
from console.engine.control import RunLock, write_inbox
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import SAMPLES, run_settings

NOBODY = 65534


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The umask most operators have (022): private modes must not depend on a strict umask."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def loose(top: Path) -> list[str]:
    """Every folder under ``top`` (itself included) that is not 0700 and every file that is not 0600."""
    bad = [] if mode(top) == 0o700 else [f"{top} {mode(top):o}"]
    for dirpath, dirs, files in os.walk(top):
        for name in dirs:
            p = Path(dirpath) / name
            if not p.is_symlink() and mode(p) != 0o700:
                bad.append(f"{p} {mode(p):o}")
        for name in files:
            p = Path(dirpath) / name
            if not p.is_symlink() and mode(p) != 0o600:
                bad.append(f"{p} {mode(p):o}")
    return bad


def give_away(path: Path) -> None:
    try:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    except PermissionError:
        pytest.skip("this test needs a file of another user: not root, and os.chown to uid 65534 is refused")


def test_a_run_leaves_the_data_folder_the_database_and_the_harness_state_private(capsys) -> None:
    data = Path(os.environ["AGENT_CONSOLE_DATA_DIR"])
    assert main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"]) == 0
    run_dir = Path(capsys.readouterr().out.splitlines()[0].split(": ", 1)[1])
    assert mode(data) == 0o700 and mode(data / "runs") == 0o700
    for name in ("jobs.db", "jobs.db-wal", "jobs.db-shm"):
        if (data / name).exists():
            assert mode(data / name) == 0o600, name
    assert mode(data / "jobs.db") == 0o600
    state = JobPaths(run_dir).state
    # The run wrote its journal, log, lock, state files, archives and blobs: every one private.
    for name in ("checkpoint.jsonl", "events.jsonl", "run.lock", "todos.json", "outcome.json", "archive", "tmp"):
        assert (state / name).exists(), name
    assert loose(state) == []


def test_a_run_of_an_older_version_is_tightened_at_start(make_job, clock, tmp_path: Path) -> None:
    paths = make_job("quickstart")
    state = paths.state
    # Links in it are never followed: what they point at is the operator's, and stays as it is.
    outside, shared = tmp_path / "operator-notes.md", tmp_path / "shared"
    outside.write_text("mine")
    shared.mkdir()
    os.chmod(outside, 0o644)
    os.chmod(shared, 0o755)
    state.mkdir()
    os.symlink(outside, state / "notes-link.md")
    os.symlink(shared, state / "shared-link")
    # What an older version left: world-readable folders and files, a queued command, a damaged state file.
    for folder in ("archive", "blobs", "inbox", "corrupt", "screenshots", "tmp"):
        (state / folder).mkdir(parents=True, mode=0o755)
    os.chmod(state, 0o755)
    (state / "archive" / "phase-01-old.json").write_text("{}")
    (state / "screenshots" / "old.svg").write_text("<svg/>")
    (state / "run.lock").write_text("")
    (state / "todos.json").write_text("{damaged")
    for p in [*state.rglob("*"), state]:
        if p.is_file():
            os.chmod(p, 0o644)
    write_inbox(paths, "checkpoint", run=None)
    os.chmod(next(paths.inbox.glob("*.json")), 0o644)
    assert loose(state)
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    assert sup.not_private == []
    assert sup.run().ok
    assert (state / "corrupt").is_dir() and list((state / "corrupt").iterdir())  # the damaged file, moved aside
    assert loose(state) == []
    assert mode(outside) == 0o644 and mode(shared) == 0o755


def test_a_file_of_another_user_is_named_once_and_left_as_it_is(make_job) -> None:
    paths = make_job("quickstart")
    (paths.state / "archive").mkdir(parents=True)
    theirs = paths.state / "archive" / "theirs.json"
    theirs.write_text("{}")
    os.chmod(theirs, 0o644)
    give_away(theirs)
    problems = make_private(paths.state)
    assert len(problems) == 1 and str(theirs) in problems[0] and f"uid {NOBODY}" in problems[0]
    assert mode(theirs) == 0o644 and os.stat(theirs).st_uid == NOBODY  # not ours to change


def test_the_run_lock_is_never_followed_through_a_link(make_job, tmp_path: Path) -> None:
    paths = make_job("quickstart")
    outside = tmp_path / "precious.txt"
    outside.write_text("do not truncate me")
    os.chmod(outside, 0o644)
    paths.state.mkdir()
    lock_path = paths.state / "run.lock"
    os.symlink(outside, lock_path)
    lock = RunLock(paths)
    assert lock.acquire()
    try:
        assert outside.read_text() == "do not truncate me" and mode(outside) == 0o644
        assert not lock_path.is_symlink() and mode(lock_path) == 0o600
        assert json.loads(lock_path.read_text())["pid"] == os.getpid()
    finally:
        lock.release()


def test_a_run_lock_of_another_user_is_replaced_not_trusted(make_job) -> None:
    paths = make_job("quickstart")
    paths.state.mkdir()
    lock_path = paths.state / "run.lock"
    lock_path.write_text(json.dumps({"pid": 1, "run": "theirs"}))
    give_away(lock_path)
    # Held by another user's open file: not a run of this job's user (no pid, no run id to address commands to).
    fd = os.open(lock_path, os.O_RDONLY)
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_SH)
        assert RunLock(paths).holder() is None and RunLock(paths).run_id_of_holder() is None
    finally:
        os.close(fd)
    # Not held: replaced by a lock of ours, 0600.
    lock = RunLock(paths)
    assert lock.acquire()
    try:
        st = os.stat(lock_path)
        assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o600
    finally:
        lock.release()


def test_a_loose_run_lock_of_ours_is_made_private(make_job) -> None:
    paths = make_job("quickstart")
    paths.state.mkdir()
    (paths.state / "run.lock").write_text("")
    os.chmod(paths.state / "run.lock", 0o644)
    lock = RunLock(paths)
    assert lock.acquire()
    lock.release()
    assert mode(paths.state / "run.lock") == 0o600


def test_the_jobs_database_and_the_data_folder_are_private(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    store = JobStore(data / "jobs.db")
    store.started(tmp_path / "run", "run", "scripted", "scripted-agent", __import__("datetime").datetime.now())
    assert mode(data) == 0o700
    assert [(n, mode(data / n)) for n in sorted(os.listdir(data))] == \
        [(n, 0o600) for n in sorted(os.listdir(data))]
    assert store.not_private == []
    # An older version's: 0755 and 0644, tightened when the store is opened.
    os.chmod(data, 0o755)
    for n in os.listdir(data):
        os.chmod(data / n, 0o644)
    assert JobStore(data / "jobs.db").not_private == []
    assert mode(data) == 0o700 and all(mode(data / n) == 0o600 for n in os.listdir(data))


def test_a_data_folder_that_cannot_be_made_private_is_said_once(tmp_path: Path, monkeypatch, capsys) -> None:
    data = tmp_path / "shared-data"
    data.mkdir(mode=0o755)
    give_away(data)
    monkeypatch.setenv("AGENT_CONSOLE_DATA_DIR", str(data))
    assert main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "not private" in line]
    assert len(warnings) == 1 and str(data) in warnings[0] and f"uid {NOBODY}" in warnings[0]
