"""A kill -9 at every durable write of a run that calls an MCP tool, then a resume: the server is never asked twice.

The server is the engine's port in memory (a fake that writes each call it gets to a file outside the job folder, so
the count survives the killed process). For every failpoint n, a forked process runs the job and dies at n with
os._exit (and, for the journal, the log and appends, with half the write on disk); then a new Supervisor resumes it
(as `run --in-place` does). Whatever n is: the server got the call at most once; the agent got exactly one result for
it, either the server's answer or, for a call in flight at the kill, that its outcome is unknown."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine import failpoints
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.supervisor import Supervisor
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import run_settings
from tests.integration.test_kill_points import KILLED, replay_from

NOW = "mcp__clock__now"
SCRIPT = [T(calls=[C(name="add_note", arguments={"text": "before"})]), T(calls=[C(name=NOW, arguments={})]),
          T(calls=[C(name="add_note", arguments={"text": "after"})]), T(error="end of script")]
ANSWER = "it is noon"


class Counting:
    """A server that writes each call it gets to ``log`` (outside the job folder) before answering."""

    def __init__(self, log: Path) -> None:
        self.config = McpServerConfig(name="clock", command=["clock"])
        self.tools = [McpToolInfo("now", "The time.", {"type": "object", "properties": {}})]
        self.log = log

    def call(self, tool: str, arguments: dict[str, Any], timeout: float, should_stop: Any = None) -> McpCallResult:
        with open(self.log, "a") as fh:
            fh.write(tool + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return McpCallResult(True, ANSWER)

    def close(self) -> None:
        pass


def run(root: Path, script: list[T], log: Path) -> None:
    clock = FakeClock(step=0.001)
    Supervisor(JobPaths(root), run_settings(), ScriptedProvider(clock=clock, script=script), clock=clock,
               mcp=[Counting(log)]).run()


def points(go: Callable[[], None], into: list[tuple[str, bool]] | None = None) -> list[tuple[str, bool]]:
    """Every failpoint ``go`` (a whole run) passes, in order, and whether it can tear its write (``into``: the list
    they are added to as they come, for a run that wants to know how many came before something)."""
    seen: list[tuple[str, bool]] = [] if into is None else into
    failpoints.install(lambda name, tear: seen.append((name, tear is not None)))
    try:
        go()
    finally:
        failpoints.install(None)
    return seen


def kill_at(go: Callable[[], None], n: int, tear: bool) -> int:
    """``go`` in a forked child killed (os._exit) at its ``n``th failpoint, its write torn first if ``tear``; the
    child's exit code."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        seen = 0

        def hook(name: str, tear_fn: Callable[[], object] | None) -> None:
            nonlocal seen
            seen += 1
            if seen == n:
                if tear and tear_fn is not None:
                    tear_fn()
                os._exit(KILLED)

        failpoints.install(hook)
        try:
            go()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_kill_at_any_write_never_sends_an_mcp_call_twice(make_job, tmp_path: Path) -> None:
    base = make_job()
    probe = tmp_path / "probe"
    shutil.copytree(base.root, probe)
    found = points(lambda: run(probe, SCRIPT, tmp_path / "probe.log"))
    assert (tmp_path / "probe.log").read_text() == "now\n"  # the uninterrupted run asks once
    cases = [(n, False) for n in range(1, len(found) + 1)] + [(n, True) for n, (_, t) in enumerate(found, 1) if t]
    unknown = answered = 0
    for n, tear in cases:
        root, log = tmp_path / f"k{n}{'t' if tear else ''}", tmp_path / f"k{n}{'t' if tear else ''}.log"
        shutil.copytree(base.root, root)
        assert kill_at(lambda root=root, log=log: run(root, SCRIPT, log), n, tear) == KILLED
        run(root, replay_from(root, SCRIPT), log)
        sent = log.read_text().splitlines() if log.exists() else []
        mine = [e for e in ev.read_events(root / ".console" / "events.jsonl")
                if isinstance(e, ev.ToolResult) and e.tool == NOW]
        assert len(sent) <= 1, f"kill at {n} ({found[n - 1][0]}): the server was asked {len(sent)} times"
        assert len(mine) == 1, f"kill at {n} ({found[n - 1][0]}): {len(mine)} results of the call"
        if mine[0].ok:
            assert mine[0].content == ANSWER and sent == ["now"]
            answered += 1
        else:
            assert "interrupted by a crash of the harness" in mine[0].content and "unknown" in mine[0].content
            unknown += 1
    assert answered and unknown  # both sides of the call's record were hit
