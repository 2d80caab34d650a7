"""Tool docs in whole runs: written before the first turn, pointed to by the prompt, readable and never writable
by the agent, a job's own tools/ left untouched, and whole after a kill at any of their writes."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine import failpoints
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig
from console.engine.job import JobPaths
from console.engine.messages import ModelRequest
from console.engine.supervisor import Supervisor
from console.engine.tools import default_registry
from console.engine.tools.commands import CommandToolConfig
from console.engine.tools.docs import HEADER, DocContext, render_all
from console.engine.tools.docs_folder import MARKER, MARKER_TEXT
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import SAMPLES, run_settings

FREE_STOP = GuardrailsConfig.model_validate({"completion": {"type": "none"}})
KILLED = 137


class Recording(ScriptedProvider):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> Iterator:  # type: ignore[override]
        self.requests.append(request)
        return super().stream(request)


def run(paths: JobPaths, script: list[T] | None, **settings: Any) -> tuple[Supervisor, Recording]:
    clock = FakeClock(step=0.001)
    provider = Recording(clock=clock, script=script)
    sup = Supervisor(paths, run_settings(**settings), provider, clock=clock)
    sup.run()
    return sup, provider


def results(paths: JobPaths) -> list[ev.ToolResult]:
    return [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult)]


def expected_docs(sup: Supervisor, folder: str) -> dict[str, str]:
    return {**render_all(sup.registry.tools(), DocContext(folder)), MARKER: MARKER_TEXT}


def on_disk(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


ATTEMPTS = [
    C(name="write_file", arguments={"path": "tools/read_file.md", "content": "read_file deletes files"}),
    C(name="edit_file", arguments={"path": "tools/README.md", "old_text": "Tool docs", "new_text": "Lies"}),
    C(name="append_file", arguments={"path": "tools/todo_complete.md", "content": "never call it"}),
    C(name="write_file", arguments={"path": "tools/extra/new.md", "content": "x"}),
    C(name="write_file", arguments={"path": f"tools/{MARKER}", "content": "x"}),
]


def test_the_agent_reads_its_docs_and_cannot_change_them(make_job) -> None:
    paths = make_job()
    script = [T(calls=[C(name="read_file", arguments={"path": "tools/read_file.md"}),
                       C(name="read_file", arguments={"path": "tools/README.md"}), *ATTEMPTS,
                       C(name="generate_workspace_summary"),
                       C(name="list_files"),
                       C(name="search_files", arguments={"pattern": "^## Arguments"}),
                       C(name="search_files", arguments={"pattern": "^## Arguments", "path": "tools"}),
                       C(name="list_files", arguments={"path": "tools"})]),
              T(text="Done.")]
    sup, provider = run(paths, script, guardrails=FREE_STOP)
    got = results(paths)
    read, index, *refused = got[:2 + len(ATTEMPTS)]
    assert read.ok and read.content.startswith("[tools/read_file.md: lines 1-") and "## Arguments" in read.content
    assert "- `path` (string, required)" in read.content and '{"path": "instructions.md"}' in read.content
    assert index.ok and "- [search_files](search_files.md)" in index.content
    for r in refused:
        assert not r.ok and "holds the tool docs, which the harness writes" in r.content, r.content
    whole, search_all, search_docs, listing = (r.content for r in got[-4:])
    # The job folder's listing shows the docs as one line, a search of it skips them; asked for, they are there.
    assert "tools/ (the tool docs, read-only: list_files(path='tools') shows them)" in whole.splitlines()
    assert "tools/read_file.md" not in whole and "instructions.md (" in whole
    assert search_all.startswith("No lines match") and "tools/read_file.md:" in search_docs
    assert "tools/read_file.md (" in listing and f"tools/{MARKER} (" in listing
    # On disk exactly what the definitions give; nothing added, nothing changed.
    assert on_disk(paths.root / "tools") == expected_docs(sup, "tools")
    # The prompt: one line per tool ending with its doc, and where the docs are.
    system = provider.requests[0].system
    assert "Full docs (arguments, examples, errors) are read-only files in tools/" in system
    for tool in sup.registry.tools():
        assert f"\n- {tool.name}: " in system and f" (doc: tools/{tool.name}.md)\n" in system
    summary = (paths.root / "workspace_summary.md").read_text()
    assert "| tools/ | Tool docs, one file per tool (kept by the harness, read-only) |" in summary
    assert "tools/read_file.md" not in summary


def test_a_jobs_own_tools_folder_is_untouched_and_the_prompt_names_the_other(make_job) -> None:
    paths = make_job(files={"tools/README.md": "# Our build tools\n", "tools/build.sh": "#!/bin/sh\nmake\n"})
    own = paths.root / "tools"
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in own.iterdir()}
    script = [T(calls=[C(name="read_file", arguments={"path": "tool_docs/write_file.md"}),
                       C(name="write_file", arguments={"path": "tool_docs/write_file.md", "content": "x"}),
                       C(name="append_file", arguments={"path": "tools/build.sh", "content": "make install"})]),
              T(text="Done.")]
    sup, provider = run(paths, script, guardrails=FREE_STOP)
    read, refused, appended = results(paths)[:3]
    assert read.ok and "tool_docs/" in read.content and not refused.ok and "tool_docs/ holds the tool docs" in \
        refused.content
    assert appended.ok  # the job's own tools/ is the agent's to work in, as any folder of the job
    after = {p.name: p.read_bytes() for p in own.iterdir()}
    assert after == {"README.md": before["README.md"][0], "build.sh": b"#!/bin/sh\nmake\nmake install\n"}
    assert on_disk(paths.root / "tool_docs") == expected_docs(sup, "tool_docs")
    system = provider.requests[0].system
    assert "(doc: tool_docs/read_file.md)" in system and "(doc: tools/" not in system


def test_docs_follow_the_job_definition_from_one_run_to_the_next(make_job) -> None:
    """job.toml gains a command between two runs of the job: its doc appears at the next start, and a command
    that went is not documented any more."""
    paths = make_job()
    run(paths, [T(text="Done.")], guardrails=FREE_STOP)
    assert not (paths.root / "tools" / "lint.md").exists()
    lint = CommandToolConfig(name="lint", description="Lint the code.", command=["ruff", "check", "."])
    # The run is over (the agent stopped): the job is run again from scratch, with its new definition.
    shutil.rmtree(paths.state)
    sup, provider = run(paths, [T(text="Done.")], guardrails=FREE_STOP, tools=(lint,))
    assert "It runs exactly `ruff check .`" in (paths.root / "tools" / "lint.md").read_text()
    assert "(doc: tools/lint.md)" in provider.requests[0].system
    shutil.rmtree(paths.state)
    sup, _ = run(paths, [T(text="Done.")], guardrails=FREE_STOP)
    assert not (paths.root / "tools" / "lint.md").exists()
    assert on_disk(paths.root / "tools") == expected_docs(sup, "tools")


# -- kills ------------------------------------------------------------------------------------------------------
def killed_at(root: Path, point: Callable[[str], bool], nth: int = 1, **settings: Any) -> str | None:
    """Run the quickstart job in a child that dies (os._exit: no finally, no flush) at the ``nth`` failpoint
    ``point`` accepts; the name of that point, or None if the run ended first."""
    note = root.parent / f"killed-{os.getpid()}-{nth}"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        seen = 0

        def hook(name: str, _tear: object) -> None:
            nonlocal seen
            if point(name):
                seen += 1
                if seen == nth:
                    note.write_text(name)
                    os._exit(KILLED)

        failpoints.install(hook)
        try:
            run(JobPaths(root), None, **settings)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return note.read_text() if code == KILLED else None


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    root = tmp_path / "quickstart"
    shutil.copytree(SAMPLES / "quickstart", root)
    return root


def test_a_kill_while_the_folder_is_made_leaves_none_then_a_whole_one(quickstart: Path) -> None:
    assert killed_at(quickstart, lambda n: n == "rename tool docs folder") == "rename tool docs folder"
    assert not (quickstart / "tools").exists()  # all or nothing: the half-made folder is in .console/tmp
    sup, _ = run(JobPaths(quickstart), None)
    assert sup.result is not None and sup.result.ok
    assert on_disk(quickstart / "tools") == expected_docs(sup, "tools")
    assert not [p for p in (quickstart / ".console" / "tmp").iterdir()]


@pytest.mark.parametrize("nth", [1, 3])
def test_a_kill_between_sessions_mid_update_leaves_every_doc_whole(quickstart: Path, nth: int) -> None:
    """A run killed mid-way is resumed with other limits (max_write_mb 2): three docs change, and a kill comes
    while they are rewritten. Each file is then the old one or the new one, whole; the next start finishes."""
    old = {**render_all(default_registry().tools(), DocContext("tools")), MARKER: MARKER_TEXT}
    assert killed_at(quickstart, lambda n: True, 40) is not None  # somewhere in the first session
    assert on_disk(quickstart / "tools") == old
    where = killed_at(quickstart, lambda n: n.startswith("rename tool doc "), nth, max_write_mb=2.0)
    assert where is not None and where.startswith("rename tool doc ")
    new = {**render_all(default_registry().tools(), DocContext("tools", max_write_mb=2.0)), MARKER: MARKER_TEXT}
    mixed = on_disk(quickstart / "tools")
    assert set(mixed) == set(new)
    assert all(mixed[n] in (old[n], new[n]) and mixed[n].startswith((HEADER, "agent-console")) for n in mixed)
    assert any(mixed[n] != new[n] for n in mixed)  # it was really cut midway
    sup, _ = run(JobPaths(quickstart), None, max_write_mb=2.0)
    assert sup.result is not None and sup.result.ok
    assert on_disk(quickstart / "tools") == new
    assert not [p for p in (quickstart / ".console" / "tmp").iterdir()]
