"""The run's doorbell (console.engine.doorbell): a command's sender wakes the run's loop, so a headless run looks at
its inbox by itself only every few seconds (LOOK, CALL_LOOK) and still acts on a command at once; and the pipe is
input like the
inbox: whatever else lies at its path is left alone, and a sender never waits or fails for it.

The looks are made 60 s apart here (LOOK and CALL_LOOK patched): a command acted on within the test's bound was
rung, not found by a look. The bound is room for a loaded machine, not a figure of speed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine import control, doorbell, model_call
from console.engine import events as ev
from console.engine.control import ControlChannel, write_inbox
from console.engine.job_files import JobPaths
from console.engine.loop import ShutdownReason
from console.engine.model import Stop, StreamEvent
from console.engine.supervisor import Supervisor
from tests.conftest import run_settings

BOUND = 20.0  # seconds: far below the 60 s looks, far above any wake on a busy machine


@pytest.fixture
def slow_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_call, "CALL_LOOK", 60.0)
    monkeypatch.setattr(control, "LOOK", 60.0)


class Silent:
    """A provider whose server never answers, on a worker thread (released at the test's end)."""

    name, model = "silent", "m"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked = threading.Event()

    def stream(self, request) -> Iterator[StreamEvent]:
        self.asked.set()
        self.release.wait(60)
        yield Stop("end_turn")


def _stop_from_outside(paths: JobPaths, provider: Silent, sent: list[float]) -> None:
    provider.asked.wait(BOUND)
    time.sleep(0.3)  # the loop is waiting on its doorbell by now (a command sent earlier is acted on as well)
    sent.append(time.monotonic())
    write_inbox(paths, "stop")  # as `agent-console stop` does, from another process


def _stopped_from_outside(paths: JobPaths) -> None:
    """A headless run of a silent model, stopped from another process once it asks: it ends by that stop, within
    BOUND of it."""
    provider = Silent()
    sup = Supervisor(paths, run_settings(), provider)
    sup.subscribe(lambda e: None, text=False)  # a view that takes no streamed text: the call is not shown
    sent: list[float] = []
    threading.Thread(target=_stop_from_outside, args=(paths, provider, sent), daemon=True).start()
    result = sup.run()
    ended = time.monotonic()
    provider.release.set()
    assert result.reason is ShutdownReason.USER_SHUTDOWN
    assert ended - sent[0] < BOUND


def test_a_headless_call_waits_on_its_doorbell_and_a_sent_stop_wakes_it(make_job, slow_looks) -> None:
    paths = make_job("quickstart")
    _stopped_from_outside(paths)  # rung: the next look was 60 s away
    applied = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand) and e.status == "applied"]
    assert [(e.command, e.source) for e in applied] == [("stop", "cli")]
    assert not os.path.lexists(paths.state / doorbell.NAME)  # removed as the run ended (a copy of it stays simple)


def test_without_a_doorbell_the_run_looks_every_tick_as_before(make_job, slow_looks, monkeypatch) -> None:
    # A file system that makes no FIFO: the run falls back to its looks every TICK, whatever LOOK says.
    monkeypatch.setattr(doorbell.Doorbell, "open", classmethod(lambda cls, path: None))
    paths = make_job("quickstart")
    _stopped_from_outside(paths)
    assert not (paths.state / doorbell.NAME).exists()


def test_a_paused_wait_wakes_when_a_command_is_rung(tmp_path: Path, slow_looks) -> None:
    paths = JobPaths(tmp_path)
    paths.inbox.mkdir(parents=True)
    channel = ControlChannel(paths.inbox)
    channel.listen()
    try:
        assert channel.look_every == 60.0
        channel.poll()  # just looked: a look by the clock is POLL_INTERVAL away
        threading.Timer(0.3, write_inbox, args=(paths, "resume")).start()
        began = time.monotonic()
        channel.wait(channel.look_every)
        assert time.monotonic() - began < BOUND
        # The ring makes the next poll look at the inbox now, even while streaming (force=False).
        assert [c.command for c in channel.poll(force=False)] == ["resume"]
        assert channel.doorbell is not None and not channel.doorbell.operator_rang
    finally:
        channel.close()
    channel.close()  # twice: nothing left to close


def test_a_ring_from_another_process(tmp_path: Path) -> None:
    door = doorbell.Doorbell.open(tmp_path / doorbell.NAME)
    assert door is not None
    try:
        assert stat.S_IMODE(os.stat(tmp_path / doorbell.NAME).st_mode) == 0o600
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from console.engine.doorbell import ring; ring(Path(sys.argv[1]))",
                        str(tmp_path / doorbell.NAME)], check=True, timeout=60)
        door.wait(BOUND)
        assert door.operator_rang
        door.operator_rang = False
        door.ring()  # the run's own ring: taken, not the operator's
        door.wait(BOUND)
        assert not door.operator_rang
    finally:
        door.close()


def test_a_sender_never_waits_for_a_pipe_nobody_reads(tmp_path: Path) -> None:
    # A killed run's doorbell: opening a FIFO to write would wait for a reader for ever without O_NONBLOCK.
    paths = JobPaths(tmp_path)
    paths.inbox.mkdir(parents=True)
    os.mkfifo(paths.state / doorbell.NAME, 0o600)
    sender = threading.Thread(target=write_inbox, args=(paths, "stop"), daemon=True)
    sender.start()
    sender.join(BOUND)
    assert not sender.is_alive()
    assert len(os.listdir(paths.inbox)) == 1  # the command is written all the same
    # The next run reuses the leftover pipe, and removes it when it ends; not what another put there meanwhile.
    door = doorbell.Doorbell.open(paths.state / doorbell.NAME)
    assert door is not None
    door.close()
    assert not os.path.lexists(paths.state / doorbell.NAME)
    door = doorbell.Doorbell.open(paths.state / doorbell.NAME)
    assert door is not None
    os.unlink(paths.state / doorbell.NAME)
    (paths.state / doorbell.NAME).write_text("another's")
    door.close()
    assert (paths.state / doorbell.NAME).read_text() == "another's"


@pytest.mark.parametrize("kind", ["file", "link to a file", "link to a pipe", "folder", "another user's pipe"])
def test_what_else_lies_at_its_path_is_left_alone(tmp_path: Path, kind: str, monkeypatch) -> None:
    path = tmp_path / doorbell.NAME
    target = tmp_path / "target"
    if kind == "file":
        path.write_text("keep me")
    elif kind == "link to a file":
        target.write_text("keep me")
        path.symlink_to(target)
    elif kind == "link to a pipe":
        os.mkfifo(target, 0o600)
        path.symlink_to(target)
    elif kind == "folder":
        path.mkdir()
    else:
        os.mkfifo(path, 0o600)
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    before = os.lstat(path)
    assert doorbell.Doorbell.open(path) is None  # the run looks every TICK instead
    doorbell.ring(path)  # a sender writes nothing to it, and does not fail
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode, after.st_size, after.st_mtime_ns) == \
           (before.st_ino, before.st_mode, before.st_size, before.st_mtime_ns)
    if kind in ("file", "link to a file"):
        assert (tmp_path / ("target" if kind != "file" else doorbell.NAME)).read_text() == "keep me"


def test_a_ring_after_the_close_writes_to_no_file_that_took_its_number(tmp_path: Path) -> None:
    door = doorbell.Doorbell.open(tmp_path / doorbell.NAME)
    assert door is not None
    door.close()
    with open(tmp_path / "other", "wb") as f:  # likely the writer's number, freed by the close
        door.ring()
        f.flush()
    assert (tmp_path / "other").read_bytes() == b""
    door.wait(0.01)  # a wait after the close sleeps; it touches no descriptor


def test_a_stop_sent_as_the_run_stops_is_answered_all_the_same(make_job) -> None:
    # The first stop wakes the loop at once (its doorbell) and ends the call; a second, sent right behind it, came
    # after the look that took the first: the run answers it as it ends, not never.
    paths = make_job("quickstart")
    provider = Silent()
    sup = Supervisor(paths, run_settings(), provider)
    sent: list[str] = []

    def on(e: ev.EventBase) -> None:
        if isinstance(e, ev.TurnStarted) and not sent:
            sent.append("first")
            threading.Timer(0.3, sup.stop).start()
        elif isinstance(e, ev.OperatorCommand) and e.status == "applied" and len(sent) == 1:
            sent.append("second")
            sup.stop()  # queued after the look that applied the first

    sup.subscribe(on, text=False)
    result = sup.run()
    provider.release.set()
    assert result.reason is ShutdownReason.USER_SHUTDOWN
    answers: dict[str, list[str]] = {}
    for e in ev.read_events(paths.events):
        if isinstance(e, ev.OperatorCommand) and e.command == "stop":
            answers.setdefault(e.command_id, []).append(e.status)
    assert sorted(answers.values()) == [["received", "applied"], ["received", "rejected"]]


def test_a_doorbell_numbered_past_1024_still_wakes(tmp_path: Path) -> None:
    # A runner with many files open (MCP servers, commands' pipes): select() refuses a number past FD_SETSIZE.
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1100
    if hard != resource.RLIM_INFINITY and hard < wanted + 50:
        pytest.skip(f"this machine allows {hard} open files: no number past 1,024 to test")  # not a failure
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted + 50), hard))
    filler: list[int] = []
    try:
        while not filler or filler[-1] < wanted:
            filler.append(os.open(os.devnull, os.O_RDONLY))
        door = doorbell.Doorbell.open(tmp_path / doorbell.NAME)
        assert door is not None and door._reader > 1024
        try:
            doorbell.ring(tmp_path / doorbell.NAME)
            door.wait(BOUND)
            assert door.operator_rang
        finally:
            door.close()
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
