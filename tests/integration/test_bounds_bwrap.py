"""Which bubblewrap holds the agent's commands: never one the agent wrote.

Found: with a relative entry on the operator's PATH (an empty one, as ``PATH=$PATH:$EXTRA`` leaves with EXTRA
unset, or ``.``) and ``run . --in-place`` from inside the job folder, the agent's command wrote ``./bwrap``; the
next run's probe ran it on the host, and so did every call after: its "sandbox" ran the commands bare, and the
header said "confined by bubblewrap 0.11.0 (system)". The same with an absolute PATH entry inside the job folder
(direnv's ``PATH_add bin``).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.tools import confine
from console.engine.tools.confine import Bwrap, find_bwrap, system_bwrap
from tests.commands_support import CONFINED, call
from tests.integration.test_command_attacks import JOB_TOML

pytestmark = pytest.mark.usefixtures("bwrap")



def fake_bwrap(marker: Path) -> str:
    """A "bwrap" that answers like one, notes on the host that it ran, and runs the command bare."""
    return ("#!/bin/sh\n"
            'if [ "$1" = --version ]; then echo "bubblewrap 0.11.0"; exit 0; fi\n'
            f'echo "ran on the host in $(pwd)" >> "{marker}"\n'
            'while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done; shift\n'
            'exec "$@"\n')


def play(paths: JobPaths, tmp_path: Path, calls: list[tuple[str, dict[str, Any]]]) -> int:
    script = [{"text": "", "calls": [{"name": n, "arguments": a}]} for n, a in calls] + [{"text": "done"}]
    file = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    file.write_text(json.dumps(script))
    return main(["run", str(paths.root), "--headless", "--in-place", "--script", str(file)])


def results(paths: JobPaths) -> list[ev.ToolResult]:
    return [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult) and e.tool == "run"]


def test_a_bwrap_the_agent_wrote_in_the_working_folder_is_never_run(make_job, tmp_path, monkeypatch, capsys,
                                                                   bwrap: Bwrap) -> None:
    marker = tmp_path / "escaped"
    paths = make_job()
    (paths.root / "job.toml").write_text(JOB_TOML.format(timeout=30, extra=""))
    # The operator runs the job in place from inside it, with an empty entry (the working folder) on PATH.
    monkeypatch.chdir(paths.root)
    monkeypatch.setenv("PATH", os.environ.get("PATH", "/usr/bin:/bin") + ":")
    monkeypatch.setattr(confine, "_found", {})
    plant = f"cat > bwrap <<'EOF'\n{fake_bwrap(marker)}EOF\nchmod +x bwrap\necho planted\n"
    play(paths, tmp_path, [("write_file", {"path": "evil.sh", "content": plant}), ("run", {})])
    assert (paths.root / "bwrap").stat().st_mode & 0o111, results(paths)[-1].content
    # The next run (a resume) looks for bubblewrap again.
    monkeypatch.setattr(confine, "_found", {})
    probe = "echo pid=$$; ls /root 2>&1 | head -1\n"
    play(paths, tmp_path, [("write_file", {"path": "evil.sh", "content": probe}), ("run", {})])
    assert not marker.exists(), marker.read_text()
    last = results(paths)[-1]
    assert last.ok and last.content.startswith("exit code 0\npid=2\n"), last.content  # pid 2: its own pid namespace
    head = [e for e in ev.read_events(paths.events) if isinstance(e, ev.CommandSandbox)][-1]
    assert head.mode == "confined" and head.tool == bwrap.label


def test_relative_path_entries_are_not_searched(tmp_path, monkeypatch) -> None:
    (tmp_path / "bin").mkdir()
    for folder in (tmp_path, tmp_path / "bin"):
        (folder / "bwrap").write_text("#!/bin/sh\n")
        (folder / "bwrap").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert system_bwrap(":.:bin:./bin") is None
    assert system_bwrap(f"::{tmp_path / 'bin'}") == str(tmp_path / "bin" / "bwrap")


def test_a_bwrap_in_the_job_folder_is_not_run_even_from_an_absolute_path_entry(make_rt, tmp_path, monkeypatch,
                                                                               bwrap: Bwrap) -> None:
    marker = tmp_path / "escaped"
    rt = make_rt()
    tools = Path(rt.paths.root) / "bin"
    tools.mkdir()
    (tools / "bwrap").write_text(fake_bwrap(marker))
    (tools / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.setattr(confine, "_found", {})
    out = call(rt, ["sh", "-c", "echo pid=$$"], CONFINED)
    assert not marker.exists(), marker.read_text()
    assert out.ok and out.content == "exit code 0\npid=2", out.content


def test_when_only_a_planted_bwrap_is_found_the_call_is_refused(tmp_path) -> None:
    marker = tmp_path / "escaped"
    job = tmp_path / "job"
    job.mkdir()
    (job / "bwrap").write_text(fake_bwrap(marker))
    (job / "bwrap").chmod(0o755)
    why = find_bwrap([(str(job / "bwrap"), "system")], writable=(str(job),))
    assert isinstance(why, str) and "in the job folder" in why
    assert not marker.exists()
