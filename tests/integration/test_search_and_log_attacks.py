"""Issue 17, point 10: search_files bounds time and memory for any pattern, and a resumed run keeps a whole
last event whose newline is missing.

Played through the whole CLI (``run --headless --in-place --script``) as a hostile agent would. The search
attacks run in a child process with its address space capped, whose peak memory is measured: before the fix
``a{12000000}`` compiled into about 3 GB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from console.cli import main
from console.engine import events as ev
from console.engine.job import JobPaths
from console.outcome import EXIT_RUN_FAILED
from tests.conftest import REPO

# The peak is this process's own VmHWM: ru_maxrss survives fork and exec, so under a long pytest process (the
# whole suite, 400 MB by its end) it reported the parent's size, not the attack's.
CHILD = """
import json, resource, sys
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from console.cli import main
code = main(sys.argv[3:])
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) * 1024
with open(sys.argv[1], "w") as fh:
    json.dump({"code": code, "peak": peak}, fh)
"""
ADDRESS_SPACE = 3 * 2**30  # the child's cap: an attack that allocates gigabytes fails instead of swapping
PEAK_BOUND = 400 * 2**20  # generous: this run peaks near 75 MB; RE2 takes 16 MB per pattern at most


def script_file(tmp_path: Path, script: list[dict[str, Any]]) -> Path:
    file = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    file.write_text(json.dumps(script))
    return file


def turn(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"text": "", "calls": [{"name": n, "arguments": a} for n, a in calls]}


def results(paths: JobPaths, tool: str) -> list[ev.ToolResult]:
    return [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult) and e.tool == tool]


def test_hostile_search_patterns_are_refused_or_bounded(make_job, tmp_path) -> None:
    paths = make_job(files={"long.txt": "a" * 3_000_000 + "\nshort line\n"})
    (paths.root / "job.toml").write_text('[guardrails.completion]\ntype = "none"\n')
    attacks = [
        ("a{12000000}", "a repetition count is at most 1000"),
        (r"(a*)*b", None),  # catastrophic for a backtracking engine; linear for RE2
        (r"(a|aa)+$", None),
        ("(?=x)", "lookahead (?=...) is not supported"),
        (r"(a)\1", r"backreferences (\1) are not supported"),
        (r"\w{1000}\w{1000}", "instructions, more than the 10000 a search allows"),
        ("x" * 100_000, "String should have at most 1000 characters"),
    ]
    script = [turn(("search_files", {"pattern": p, "path": "long.txt"})) for p, _ in attacks] + [{"text": "done"}]
    out = tmp_path / "child.json"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), str(ADDRESS_SPACE), "run", str(paths.root),
                           "--headless", "--in-place", "--script", str(script_file(tmp_path, script))],
                          cwd=REPO, env=os.environ.copy(), capture_output=True, text=True, timeout=600)
    assert out.exists(), proc.stderr[-3000:]
    child = json.loads(out.read_text())
    assert child["code"] == 1, proc.stderr[-3000:]  # a free stop of an unfinished job: incomplete
    got = results(paths, "search_files")
    assert len(got) == len(attacks)
    for (pattern, expected), result in zip(attacks, got, strict=True):
        if expected is None:
            assert result.ok and result.content.startswith("No lines match"), (pattern, result.content)
            # The 3 MB line is searched in its first MB: a search is bounded, and says where it looked.
            assert "[1 line(s) longer than 1024 KB were searched in their first 1024 KB only]" in result.content
        else:
            assert not result.ok and expected in result.content, (pattern, result.content)
            assert len(result.content) < 1000  # one clear paragraph, never the 100 KB pattern echoed back
    assert "RE2 syntax" in got[0].content and "Traceback" not in proc.stderr
    # RE2's own error log would go to the operator's terminal (under the console's screen): it is off.
    assert "re2.cc" not in proc.stderr
    assert child["peak"] < PEAK_BOUND, f"peak {child['peak'] / 2**20:.0f} MB"


def _lines(paths: JobPaths) -> list[bytes]:
    return paths.events.read_bytes().split(b"\n")


def test_a_whole_last_event_without_its_newline_is_kept_at_resume(make_job, tmp_path) -> None:
    paths = make_job()
    first = [turn(("read_file", {"path": "instructions.md"})), {"error": "the model went away"}]
    assert main(["run", str(paths.root), "--headless", "--in-place", "--script",
                 str(script_file(tmp_path, first))]) == EXIT_RUN_FAILED
    data = paths.events.read_bytes()
    assert data.endswith(b"\n")
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    paths.events.write_bytes(data[:-1])  # a whole event, its newline lost
    second = [turn(("list_files", {})), {"error": "gone again"}]
    assert main(["run", str(paths.root), "--headless", "--in-place", "--script",
                 str(script_file(tmp_path, second))]) == EXIT_RUN_FAILED
    lines = _lines(paths)
    assert lines[-1] == b""  # the file ends with a newline
    parsed = [json.loads(line) for line in lines[:-1]]  # jq: every line is JSON
    assert lines.count(last) == 1, "the last event of the first run was lost"
    seqs = [e["seq"] for e in parsed]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert any(e["type"] == "tool_result" and e["tool"] == "list_files" for e in parsed)


def test_a_half_written_last_line_is_still_cut_at_resume(make_job, tmp_path) -> None:
    paths = make_job()
    first = [turn(("read_file", {"path": "instructions.md"})), {"error": "the model went away"}]
    assert main(["run", str(paths.root), "--headless", "--in-place", "--script",
                 str(script_file(tmp_path, first))]) == EXIT_RUN_FAILED
    before = _lines(paths)[:-1]
    torn = b'{"type":"turn_started","ts":"2026-01-01T00:00:00Z","seq":'
    with paths.events.open("ab") as fh:
        fh.write(torn)
    second = [turn(("list_files", {})), {"error": "gone again"}]
    assert main(["run", str(paths.root), "--headless", "--in-place", "--script",
                 str(script_file(tmp_path, second))]) == EXIT_RUN_FAILED
    lines = _lines(paths)
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])
    assert lines[: len(before)] == before and not any(torn in line for line in lines)
