"""An MCP tool's non-text content (images, audio, embedded resources) is saved into the job folder and referred to.

A hostile server of ours (tests/mcp_servers/hostile.py's ``content`` tool), confined as a job's commands are, answers
with an image, one past the bound of a block, one of bad base64, audio, and resources whose uri, name and mime type
would, if they made a file name, write over job.toml or ``.git/config``; the engine's port in memory answers with
what a stdio message cannot carry (past the bound of a call, more blocks than a call saves) and meets a symlinked
output folder. The files land under ``mcp-output/SERVER/`` with names of the harness's own; the agent is told each
one's path, type and size, or why it was not saved."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.supervisor import Supervisor
from console.engine.tools import mcp_content
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_content import McpBlock
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo
from console.mcp.client import StdioServer, start_servers
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.commands_support import bwrap  # noqa: F401  (the fixture)
from tests.conftest import run_settings
from tests.integration.test_mcp import HOSTILE, WORLD, results, run
from tests.mcp_servers.hostile import PNG

CONTENT = "mcp__hostile__content"
SAVED = re.compile(r"saved as (mcp-output/[^\s,]+)")


@pytest.fixture
def job(make_job) -> JobPaths:  # type: ignore[no-untyped-def]
    return make_job()


@pytest.fixture
def hostile(job: JobPaths, bwrap) -> Iterator[StdioServer]:  # type: ignore[no-untyped-def]  # noqa: F811
    (server,), problems = start_servers([HOSTILE.model_copy(update={"max_output_kb": 64})], str(job.root), WORLD)
    assert problems == []
    try:
        yield server
    finally:
        server.close()


def files(root: Path) -> dict[str, bytes]:
    """Every file of the job folder but the harness's own, by path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and ".console" not in p.relative_to(root).parts}


def call(job: JobPaths, server: Any, clock: FakeClock, tmp_path: Path, *kinds: str) -> list[ev.ToolResult]:
    script = [T(calls=[C(name=CONTENT, arguments={"kind": k})]) for k in kinds] + [T(error="end of script")]
    run(job, [server], script, clock, tmp_path)
    return results(job)


def test_an_image_is_saved_into_the_job_folder_and_the_agent_told_where(job, hostile, clock, tmp_path) -> None:
    (got,) = call(job, hostile, clock, tmp_path, "image")
    assert got.ok and got.content.startswith("a picture:")
    (rel,) = SAVED.findall(got.content)
    assert re.fullmatch(r"mcp-output/hostile/[0-9a-f]{12}-1\.png", rel)
    assert f"image (image/png, {len(PNG):,} bytes): saved as {rel}" in got.content
    assert (job.root / rel).read_bytes() == PNG
    # Its temp file was in the harness's folder, renamed into place: nothing else is left in the agent's.
    assert [p for p in files(job.root) if p.startswith("mcp-output/")] == [rel]


def test_a_huge_image_and_bad_base64_are_not_saved_and_said(job, hostile, clock, tmp_path) -> None:
    huge, garbage = call(job, hostile, clock, tmp_path, "huge", "garbage")
    assert huge.ok and "not saved: it is about 5,000,00" in huge.content
    assert f"more than the {mcp_content.MAX_BLOCK_BYTES:,} one block may be" in huge.content
    assert garbage.ok and "image (image/png): not saved: its data is not valid base64" in garbage.content
    assert not (job.root / "mcp-output").exists()


def test_audio_is_saved_with_its_type(job, hostile, clock, tmp_path) -> None:
    (got,) = call(job, hostile, clock, tmp_path, "audio")
    (rel,) = SAVED.findall(got.content)
    assert rel.endswith("-1.wav") and "audio (audio/wav, 12 bytes)" in got.content
    assert (job.root / rel).read_bytes() == b"RIFF\0\0\0\0WAVE"


def test_a_resources_uri_name_and_type_never_make_its_file_name(job, hostile, clock, tmp_path) -> None:
    (job.root / ".git").mkdir(exist_ok=True)
    (job.root / ".git" / "config").write_text("[core]\n")
    own = ("job.toml", "instructions.md", ".git/config")
    before = {rel: (job.root / rel).read_bytes() for rel in own}
    (got,) = call(job, hostile, clock, tmp_path, "resources")
    text, blob = SAVED.findall(got.content)
    assert re.fullmatch(r"mcp-output/hostile/[0-9a-f]{12}-1\.txt", text)
    assert re.fullmatch(r"mcp-output/hostile/[0-9a-f]{12}-2\.bin", blob)  # its mime type is not one we know
    assert (job.root / text).read_bytes() == b"OWNED = true\n" and (job.root / blob).read_bytes() == b"[core]\nowned\n"
    # The job's own files are as they were; the answer made no other file.
    assert {rel: (job.root / rel).read_bytes() for rel in own} == before
    assert sorted(p for p in files(job.root) if p.startswith("mcp-output/")) == sorted([text, blob])
    # The server's words are shown escaped; a link is named, never fetched.
    assert "\x1b" not in got.content and "\\x1b" in got.content
    assert "resource file:///../../job.toml (text/plain, 13 bytes): saved as" in got.content
    assert "resource link '../../job.toml' https://evil.example/" in got.content
    assert "a link, not fetched" in got.content


class Answering:
    """The engine's port in memory, answering each call with ``blocks``."""

    def __init__(self, *blocks: McpBlock) -> None:
        self.config = McpServerConfig(name="pics", command=["pics"])
        self.tools = [McpToolInfo("shot", "A picture.", {"type": "object", "properties": {}})]
        self.blocks = blocks

    def call(self, tool: str, arguments: dict[str, Any], timeout: float, should_stop: Any = None) -> McpCallResult:
        return McpCallResult(True, "here", self.blocks)

    def close(self) -> None:
        pass


def shoot(job: JobPaths, server: Answering, times: int = 1, **settings: Any) -> list[ev.ToolResult]:
    clock = FakeClock(step=0.001)
    script = [T(calls=[C(name="mcp__pics__shot", arguments={})]) for _ in range(times)] + [T(error="end of script")]
    Supervisor(job, run_settings(**settings), ScriptedProvider(clock=clock, script=script), clock=clock,
               mcp=[server]).run()
    return [e for e in ev.read_events(job.events) if isinstance(e, ev.ToolResult) and e.tool == "mcp__pics__shot"]


def test_a_call_saves_at_most_its_bound_in_bytes(make_job) -> None:
    job = make_job()
    big = McpBlock("image", "image/png", b"x" * 2_500_000, 2_500_000)
    (got,) = shoot(job, Answering(big, big, big, McpBlock("image", "image/png", b"y", 1)))
    assert len(SAVED.findall(got.content)) == 3  # two big ones and the small one: the third big one is past the bound
    assert got.content.count(f"more than the {mcp_content.MAX_CALL_BYTES:,} bytes one call may save") == 1


def test_a_call_saves_at_most_its_bound_in_blocks(make_job) -> None:
    job = make_job()
    (got,) = shoot(job, Answering(*[McpBlock("image", "image/gif", b"g", 1)] * 60))
    assert len(SAVED.findall(got.content)) == mcp_content.MAX_BLOCKS
    assert "not saved: a call saves at most 32 blocks" in got.content
    assert "12 more blocks: not saved (an answer is read up to 48)" in got.content
    assert len(list((job.root / "mcp-output" / "pics").iterdir())) == mcp_content.MAX_BLOCKS


def test_two_calls_never_share_a_file(make_job) -> None:
    first, second = shoot(make_job(), Answering(McpBlock("image", "image/png", b"one", 3)), times=2)
    assert len(SAVED.findall(first.content)) == 1 and SAVED.findall(first.content) != SAVED.findall(second.content)


def test_an_output_folder_made_a_link_is_not_followed(make_job) -> None:
    # The agent (or the server: it writes in the job folder) makes the server's folder a link to the job's own.
    job = make_job()
    (job.root / "mcp-output").mkdir()
    (job.root / "mcp-output" / "pics").symlink_to("..")  # in the job folder: the sandbox alone would follow it
    before = files(job.root)
    (got,) = shoot(job, Answering(McpBlock("image", "image/png", b"one", 3)))
    assert got.ok and not SAVED.findall(got.content)
    assert ("image (image/png, 3 bytes): not saved: mcp-output/pics is not a folder (a symbolic link), and is not "
            "followed") in got.content
    assert not [p for p in files(job.root) if p not in before and not p.startswith("tools/")]


def test_an_output_folder_made_a_link_to_the_jobs_repository_is_not_followed(make_job) -> None:
    job = make_job()
    (job.root / ".git").mkdir()
    (job.root / "mcp-output").symlink_to(".git")
    (got,) = shoot(job, Answering(McpBlock("image", "image/png", b"one", 3)))
    assert "not saved: mcp-output is not a folder (a symbolic link)" in got.content
    assert list((job.root / ".git").iterdir()) == []


def test_a_block_past_the_runs_own_write_bound_is_not_saved_and_said(make_job) -> None:
    # The sandbox's bounds hold too: the run's max_write_mb (here 1 MB) is below the block's own bound.
    job = make_job()
    (got,) = shoot(job, Answering(McpBlock("image", "image/png", b"z" * 1_500_000, 1_500_000)), max_write_mb=1)
    assert got.ok and ("image (image/png, 1,500,000 bytes): not saved: it is more than the 1,048,576 bytes the run "
                       "writes at once (max_write_mb in job.toml)") in got.content
    assert not SAVED.findall(got.content) and not list((job.root / "mcp-output").rglob("*.png"))
