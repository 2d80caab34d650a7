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


def test_a_content_made_from_the_state_is_made_after_the_release_on_the_thread(tmp_path: Path) -> None:
    """The run lends its state while it asks its model: the file is made from the state as it is then, on the
    writer's thread, and serialized() (the run taking its state back) returns only once it is made."""
    w = ProjectionWriter()
    state = {"todo": "first"}
    made_on: list[str] = []
    gate = threading.Event()

    def make() -> bytes:
        made_on.append(threading.current_thread().name)
        gate.wait(5)
        return state["todo"].encode()

    w.submit(tmp_path / "todos.json", make, tmp_path / "tmp", hold=True)
    state["todo"] = "second"  # changed and committed before the run asks its model: the file shows it
    w.serialized()  # held: nothing is lent yet, so nothing to wait for
    assert made_on == [] and w._thread is None
    w.release()
    taken_back = threading.Event()
    threading.Thread(target=lambda: (w.serialized(), taken_back.set()), daemon=True).start()
    assert not taken_back.wait(0.1)  # the content is being made: the state is not the run's yet
    gate.set()
    assert taken_back.wait(5)
    state["todo"] = "third"  # the run's again: what it changes now is not in the file being written
    w.flush()
    assert (tmp_path / "todos.json").read_bytes() == b"second" and made_on == ["state-files"]


def test_contents_made_from_the_state_keep_their_order_and_a_newer_one_wins(tmp_path: Path) -> None:
    w = ProjectionWriter()
    order: list[str] = []
    real = w._write

    def write(path: Path, data: bytes, tmp_dir: Path) -> None:
        order.append(path.name)
        real(path, data, tmp_dir)

    w._write = write  # type: ignore[method-assign]
    w.submit(tmp_path / "a.json", lambda: b"old", tmp_path / "tmp", hold=True)
    w.submit(tmp_path / "b.json", b"b", tmp_path / "tmp", hold=True)
    w.submit(tmp_path / "c.json", lambda: None, tmp_path / "tmp", hold=True)  # nothing to write (no such state)
    w.submit(tmp_path / "a.json", lambda: b"new", tmp_path / "tmp", hold=True)  # the newest, queued last
    w.flush()
    assert order == ["b.json", "a.json"] and (tmp_path / "a.json").read_bytes() == b"new"
    assert not (tmp_path / "c.json").exists() and w.take_errors() == []


def test_a_content_that_cannot_be_made_is_reported_and_the_run_is_not_held(tmp_path: Path) -> None:
    w = ProjectionWriter()

    def broken() -> bytes:
        raise ValueError("surrogates not allowed")

    w.submit(tmp_path / "memory.json", broken, tmp_path / "tmp", hold=True)
    w.submit(tmp_path / "todos.json", lambda: b"t", tmp_path / "tmp", hold=True)
    w.release()
    w.serialized()  # returns: a failure is a content made (none)
    w.flush()
    assert [(p.name, why) for p, why in w.take_errors()] == [("memory.json", "surrogates not allowed")]
    assert (tmp_path / "todos.json").read_bytes() == b"t" and not (tmp_path / "memory.json").exists()


def test_while_the_kill_point_tests_count_writes_a_content_is_made_at_once(tmp_path: Path) -> None:
    failpoints.install(lambda name, tear: None)
    try:
        w = ProjectionWriter()
        w.submit(tmp_path / "todos.json", lambda: b"x", tmp_path / "tmp", hold=True)
        assert (tmp_path / "todos.json").read_bytes() == b"x" and w._thread is None
    finally:
        failpoints.install(None)


def test_a_flush_of_one_file_also_takes_the_state_back(tmp_path: Path) -> None:
    """settle() flushes experiences.md before a tool runs: a content made from the state must not still be in the
    making when the run goes on changing the state."""
    w = ProjectionWriter()
    gate = threading.Event()
    made: list[bool] = []

    def make() -> bytes:
        gate.wait(5)
        made.append(True)
        return b"t"

    w.submit(tmp_path / "experiences.md", b"e", tmp_path / "tmp")
    w.flush(tmp_path / "experiences.md")  # written already: nothing of it left to wait for
    w.submit(tmp_path / "todos.json", make, tmp_path / "tmp", hold=True)
    threading.Timer(0.05, gate.set).start()
    w.flush(tmp_path / "experiences.md")
    assert made == [True] and (tmp_path / "experiences.md").read_bytes() == b"e"
    w.flush()
    assert (tmp_path / "todos.json").read_bytes() == b"t"


def test_a_state_files_write_makes_no_new_path(tmp_path: Path) -> None:
    """A run writes a state file every turn (issue 37: instructions a turn): the writer and the atomic write work on
    the paths they were given, as strs, without pathlib making a new Path (a parent, a join) at every write."""
    (tmp_path / "tmp").mkdir()
    target, tmp = tmp_path / "guardrails.json", tmp_path / "tmp"
    made: list[str] = []
    counting = False

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if counting and event == "call" and frame.f_code.co_filename.endswith("pathlib.py") and (
                frame.f_code.co_name in ("_from_parsed_parts", "_from_parts", "with_segments", "__truediv__",
                                         "joinpath", "parent")):
            made.append(frame.f_code.co_name)

    threading.setprofile(profile)  # before the writer's thread starts: it is the thread profiled
    try:
        w = ProjectionWriter()
        w.submit(target, b"1", tmp)
        w.flush()  # the first write may look its folders up once
        counting = True
        for i in range(3):
            w.submit(target, f"{i}".encode(), tmp)
            w.flush()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    assert target.read_bytes() == b"2" and w.take_errors() == []
    assert made == []
