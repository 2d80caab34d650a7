"""The state files written off the run's loop: the newest content wins, flush waits, failures are reported."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from console.engine import failpoints
from console.engine.state import ProjectionWriter


def test_the_newest_content_of_a_file_wins_and_flush_waits_for_it(tmp_path: Path) -> None:
    w = ProjectionWriter()
    target, tmp = tmp_path / "todos.json", tmp_path / "tmp"
    for i in range(200):
        w.submit(target, f"{i}".encode(), tmp)
    w.submit(tmp_path / "memory.json", b"m", tmp)
    w.flush()
    assert target.read_bytes() == b"199" and (tmp_path / "memory.json").read_bytes() == b"m"
    assert w.take_errors() == [] and list(tmp.iterdir()) == []  # no temp file left behind


def test_flush_of_one_file_waits_for_that_file(tmp_path: Path) -> None:
    w = ProjectionWriter()
    gate = threading.Event()
    real = w._write

    def slow(path: Path, data: bytes, tmp_dir: Path) -> None:
        if path.name == "slow.json":
            gate.wait(5)
        real(path, data, tmp_dir)

    w._write = slow  # type: ignore[method-assign]
    w.submit(tmp_path / "slow.json", b"s", tmp_path / "tmp")
    w.submit(tmp_path / "experiences.md", b"e", tmp_path / "tmp")
    threading.Timer(0.05, gate.set).start()
    w.flush(tmp_path / "experiences.md")
    assert (tmp_path / "experiences.md").read_bytes() == b"e"
    w.flush()
    assert (tmp_path / "slow.json").read_bytes() == b"s"


def test_a_failed_write_is_reported_and_the_writer_goes_on(tmp_path: Path) -> None:
    w = ProjectionWriter()
    (tmp_path / "afile").write_text("not a folder")
    w.submit(tmp_path / "afile" / "todos.json", b"x", tmp_path / "tmp")
    w.submit(tmp_path / "ok.json", b"y", tmp_path / "tmp")
    w.flush()
    errors = w.take_errors()
    assert [p.name for p, _ in errors] == ["todos.json"] and errors[0][1]
    assert (tmp_path / "ok.json").read_bytes() == b"y" and w.take_errors() == []


def test_while_the_kill_point_tests_count_writes_it_writes_at_once(tmp_path: Path) -> None:
    seen: list[str] = []
    failpoints.install(lambda name, tear: seen.append(name))
    try:
        w = ProjectionWriter()
        w.submit(tmp_path / "todos.json", b"x", tmp_path / "tmp")
        # Written on the caller's thread before submit returned: the points come in the run's own order.
        assert (tmp_path / "todos.json").read_bytes() == b"x" and w._thread is None
        assert seen == ["write todos.json", "rename todos.json"]
    finally:
        failpoints.install(None)


def test_a_runs_state_files_follow_its_commits_and_are_all_written_at_its_end(make_job) -> None:
    from console.engine import events as ev
    from console.engine.clock import FakeClock
    from console.engine.journal import Checkpoint, Conversation, Journal
    from console.engine.messages import Message
    from console.engine.runtime import PROJECTION_INTERVAL, Runtime

    paths = make_job()
    clock = FakeClock()
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock), journal=Journal(paths))
    conv = Conversation([Message.user("a")])
    gate = threading.Event()
    real = rt.projections._write

    def held(path: Path, data: bytes, tmp_dir: Path) -> None:
        gate.wait(5)  # the thread is slow: the run's end must still find every file written
        real(path, data, tmp_dir)

    rt.projections._write = held  # type: ignore[method-assign]
    for turn in range(1, 4):
        rt.todos.install([f"task {turn}"], kind="phase", phase_name="P", phase_number=1, total_phases=1)
        clock.advance(PROJECTION_INTERVAL)
        rt.commit(Checkpoint(session=1, turn=turn), conv)  # a turn's end ("boundary"): written in the background
    # Queued, held until the run asks its model, then written on the thread (not the run's).
    assert rt.projections._queue and rt.projections._thread is None
    rt.projections.release()
    assert rt.projections._thread is not None
    threading.Timer(0.05, gate.set).start()
    rt.refresh_projections()  # the run's end
    assert '"task 3"' in (paths.state / "todos.json").read_text()


def test_held_files_wait_for_release_or_a_flush(tmp_path: Path) -> None:
    w = ProjectionWriter()
    w.submit(tmp_path / "todos.json", b"1", tmp_path / "tmp", hold=True)
    w.submit(tmp_path / "experiences.md", b"e", tmp_path / "tmp")  # not held itself, but behind a held one
    assert w._thread is None and not (tmp_path / "todos.json").exists()
    w.flush(tmp_path / "experiences.md")  # a flush writes what is held too
    assert (tmp_path / "todos.json").read_bytes() == b"1" and (tmp_path / "experiences.md").read_bytes() == b"e"


def test_the_writer_thread_is_background_work_to_the_scheduler_and_the_loop_thread_is_not(tmp_path: Path) -> None:
    if not hasattr(os, "SCHED_BATCH"):
        pytest.skip("SCHED_BATCH is Linux's")
    w = ProjectionWriter()
    seen: list[int] = []
    real = w._write

    def write(path: Path, data: bytes, tmp_dir: Path) -> None:
        seen.append(os.sched_getscheduler(0))  # in the writer's thread
        real(path, data, tmp_dir)

    w._write = write  # type: ignore[method-assign]
    w.submit(tmp_path / "todos.json", b"t", tmp_path / "tmp")
    w.flush()
    assert seen == [os.SCHED_BATCH]
    assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the test's (the loop's) thread is left as it was
