"""An operator command on a live run is confirmed from what follows it in the log, at any log size (issue 37 point
6: it read ``events.jsonl`` from the start, 1.8 s past 100k events), and :func:`line_end`'s edges."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from console.cli import main
from console.engine import events as ev
from console.engine import log_file
from console.engine.events import log


def test_line_end_is_past_the_last_whole_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    assert log_file.line_end(path) == 0  # no log
    path.write_bytes(b"")
    assert log_file.line_end(path) == 0
    path.write_bytes(b'{"a":1}\n{"b":2}\n')
    assert log_file.line_end(path) == 16
    path.write_bytes(b'{"a":1}\n{"b":2}\n{"c":')  # a line being written: not past it
    assert log_file.line_end(path) == 16
    path.write_bytes(b"x" * 200_000)  # no newline at all, longer than a step back
    assert log_file.line_end(path) == 0
    path.write_bytes(b"a\n" + b"y" * 150_000)  # the last newline more than two steps back
    assert log_file.line_end(path) == 2
    os.mkfifo(tmp_path / "pipe")
    assert log_file.line_end(tmp_path / "pipe") == 0  # never blocks on a pipe


def test_a_command_on_a_live_run_reads_only_what_follows_it(make_job, capsys, monkeypatch) -> None:
    from console.engine.control import RunLock

    job = make_job("quickstart")
    assert main(["run", str(job.root), "--in-place", "--headless", "--speed", "0", "--max-turns", "1"]) == 1
    capsys.readouterr()
    # A long run's log: 20,000 more events before the command.
    last = ev.last_seq(job.events)
    with job.events.open("a") as fh:
        for i in range(20_000):
            fh.write(json.dumps({"v": 1, "ts": "2026-11-30T05:00:00Z", "seq": last + 1 + i, "session": 1,
                                 "type": "error", "where": "bench", "message": "padding"}) + "\n")
    monkeypatch.setattr(RunLock, "holder", lambda self: os.getpid())  # a process holds the run

    def answer() -> None:  # the run: reads the inbox, applies the command, says so in its log
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            files = [p for p in job.inbox.glob("*.json")] if job.inbox.is_dir() else []
            if files:
                cmd = json.loads(files[0].read_text())
                with job.events.open("a") as fh:
                    fh.write(json.dumps({"v": 1, "ts": "2026-11-30T05:00:01Z", "seq": last + 20_001, "session": 1,
                                         "type": "operator_command", "command": "pause", "source": "cli",
                                         "status": "applied", "detail": "paused", "command_id": cmd["id"]}) + "\n")
                return
            time.sleep(0.02)

    parsed = 0
    real = log.parse_event

    def counting(raw: str) -> ev.EventBase:
        nonlocal parsed
        parsed += 1
        return real(raw)

    monkeypatch.setattr(log, "parse_event", counting)
    runner = threading.Thread(target=answer)
    runner.start()
    try:
        assert main(["pause", str(job.root), "--wait", "60"]) == 0
    finally:
        runner.join()
    assert capsys.readouterr().out == "pause: applied: paused\n"
    assert parsed <= 5, parsed  # its answer, not the 20,000 events before it
