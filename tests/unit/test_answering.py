"""console.view.answering: a command with an id reaches a run once, however often it is sent; a run no process runs
is said, naming the command that resumes it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console.engine.commands import ApproveRestart
from console.engine.job import JobPaths
from console.view import answering


class Held:
    def __init__(self, pid: int | None) -> None:
        self.pid = pid

    def holder(self) -> int | None:
        return self.pid


def test_a_command_with_an_id_is_written_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = JobPaths(tmp_path / "run")
    paths.inbox.mkdir(parents=True)
    mod_lock = Held(os.getpid())
    monkeypatch.setattr(answering, "RunLock", lambda p: mod_lock)  # a process holds the run (this one stands for it)
    assert answering.send_local(paths, ApproveRestart(), "web", "link0123") is None
    assert answering.send_local(paths, ApproveRestart(), "web", "link0123") is None  # in the inbox still
    assert len([n for n in os.listdir(paths.inbox) if n.endswith("-link0123.json")]) == 1
    for name in os.listdir(paths.inbox):  # the run took it: its log names it now
        os.unlink(paths.inbox / name)
    paths.events.write_text('{"type":"operator_command","command_id":"link0123","status":"received"}\n')
    assert answering.send_local(paths, ApproveRestart(), "web", "link0123") is None
    assert not [n for n in os.listdir(paths.inbox) if n.endswith(".json")]
    mod_lock.pid = None
    said = answering.send_local(paths, ApproveRestart(), "web", "other")
    assert said is not None and f"agent-console resume {paths.run_id}" in said
