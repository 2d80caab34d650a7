"""A kill -9 at every durable write of a run whose MCP call answers with images, then a resume.

As tests/integration/test_mcp_kill_points.py, with an answer of two images that the call saves into the job folder
(``mcp-output/``) between the server's answer and the call's result. Whatever the point of the kill: the server was
asked at most once; the agent got exactly one result for the call; every file under ``mcp-output/`` is whole and is
named in that result (the answer's, or, for a call the kill interrupted, the files it had saved); and no temp file is
left in the agent's folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.supervisor import Supervisor
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_content import McpBlock
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import run_settings
from tests.integration.test_kill_points import KILLED, replay_from
from tests.integration.test_mcp_kill_points import kill_at, points

SHOT = "mcp__pics__shot"
SCRIPT = [T(calls=[C(name="add_note", arguments={"text": "before"})]), T(calls=[C(name=SHOT, arguments={})]),
          T(calls=[C(name="add_note", arguments={"text": "after"})]), T(error="end of script")]
IMAGES = (b"\x89PNG first" * 100, b"\x89PNG second" * 100)


class Pictures:
    """A server that writes each call it gets to ``log`` (outside the job folder), then answers with two images."""

    def __init__(self, log: Path) -> None:
        self.config = McpServerConfig(name="pics", command=["pics"])
        self.tools = [McpToolInfo("shot", "Pictures.", {"type": "object", "properties": {}})]
        self.log = log

    def call(self, tool: str, arguments: dict[str, Any], timeout: float, should_stop: Any = None) -> McpCallResult:
        with open(self.log, "a") as fh:
            fh.write(tool + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return McpCallResult(True, "two pictures", tuple(McpBlock("image", "image/png", d, len(d)) for d in IMAGES))

    def close(self) -> None:
        pass


def run(root: Path, script: list[T], log: Path) -> None:
    clock = FakeClock(step=0.001)
    Supervisor(JobPaths(root), run_settings(), ScriptedProvider(clock=clock, script=script), clock=clock,
               mcp=[Pictures(log)]).run()


def saved(root: Path) -> dict[str, bytes]:
    out = root / "mcp-output"
    return {str(p.relative_to(root)): p.read_bytes() for p in out.rglob("*") if p.is_file()} if out.exists() else {}


def test_a_kill_at_any_write_leaves_no_saved_file_the_agent_is_not_told_of(make_job, tmp_path: Path) -> None:
    base = make_job()
    probe = tmp_path / "probe"
    shutil.copytree(base.root, probe)
    found = points(lambda: run(probe, SCRIPT, tmp_path / "probe.log"))
    assert sorted(saved(probe).values()) == sorted(IMAGES)  # the uninterrupted run saves both
    saves = [n for n, (name, _) in enumerate(found, 1) if name.startswith("mcp save ")]
    assert len(saves) == 2  # each image is a point of its own
    cases = [(n, False) for n in range(1, len(found) + 1)] + [(n, True) for n, (_, t) in enumerate(found, 1) if t]
    told_of_saved = 0
    for n, tear in cases:
        root, log = tmp_path / f"k{n}{'t' if tear else ''}", tmp_path / f"k{n}{'t' if tear else ''}.log"
        shutil.copytree(base.root, root)
        assert kill_at(lambda root=root, log=log: run(root, SCRIPT, log), n, tear) == KILLED
        run(root, replay_from(root, SCRIPT), log)
        at = f"kill at {n} ({found[n - 1][0]}{', torn' if tear else ''})"
        sent = log.read_text().splitlines() if log.exists() else []
        mine = [e for e in ev.read_events(root / ".console" / "events.jsonl")
                if isinstance(e, ev.ToolResult) and e.tool == SHOT]
        assert len(sent) <= 1, f"{at}: the server was asked {len(sent)} times"
        assert len(mine) == 1, f"{at}: {len(mine)} results of the call"
        files = saved(root)
        assert all(data in IMAGES for data in files.values()), f"{at}: a file is not whole"
        assert all(rel in mine[0].content for rel in files), f"{at}: a saved file the agent is not told of"
        if mine[0].ok:
            assert sorted(files.values()) == sorted(IMAGES), at
        elif files:
            assert "Files of its answer saved before the crash" in mine[0].content, at
            told_of_saved += 1
        # A temp file is only ever in the harness's folder.
        assert not [p for p in root.rglob("*.tmp") if ".console" not in p.relative_to(root).parts], at
    assert told_of_saved  # a kill between the saving and the result was hit, and the files were named
