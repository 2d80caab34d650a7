"""The event log's appends on a thread of their own: in order, all of them by a flush, a failed write raised on the
caller's thread, and a run's log whole (every committed event once, in order) whether or not a kill came first."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.events.appender import LogAppender


def test_appends_in_order_and_flush_waits_for_all(tmp_path: Path) -> None:
    path = tmp_path / "log"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        appender = LogAppender(fd)
        for i in range(5_000):
            appender.put(f"{i}\n".encode())
        appender.flush()
        assert path.read_text().splitlines() == [str(i) for i in range(5_000)]
        # The thread ends when idle and a later put starts another: nothing is lost across it.
        appender.IDLE_SECONDS = 0.01
        appender.put(b"a\n")
        appender.flush()
        threading.Event().wait(0.1)
        appender.put(b"b\n")
        appender.flush()
        assert path.read_text().splitlines()[-2:] == ["a", "b"]
    finally:
        os.close(fd)


def test_a_failed_write_is_raised_on_the_callers_thread(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "log", os.O_RDONLY | os.O_CREAT, 0o600)  # not writable: EBADF on the thread
    try:
        appender = LogAppender(fd)
        appender.put(b"x\n")
        with pytest.raises(OSError):
            appender.flush()
        appender.flush()  # raised once
    finally:
        os.close(fd)


def test_a_stepping_streams_log_is_whole_once_flushed_and_at_close(tmp_path: Path) -> None:
    log = tmp_path / ".console" / "events.jsonl"
    stream = ev.EventStream(log, FakeClock())
    stream.holding = True
    for turn in range(1, 201):
        stream.emit(ev.TurnStarted, turn=turn)
        stream.observe()
        stream.emit(ev.AssistantMessage, turn=turn, text="x" * 50, stop_reason="end_turn")
        stream.write_lines(stream.take_held())
    stream.flush()
    assert [e.seq for e in ev.read_events(log)] == list(range(1, 401))
    stream.emit(ev.TurnStarted, turn=201)
    stream.close()  # what is held and what is queued both reach the log
    assert [e.seq for e in ev.read_events(log)] == list(range(1, 402))
