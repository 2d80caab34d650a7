"""A disk that takes no more writes (ENOSPC, a quota, a file system turned read-only) stops the run; nothing of it
is lost or done twice once there is room again, and the operator reads one line, never a traceback.

The kill-point sweeps end the process at a write. A full disk does not: the write fails, the process goes on with
the error in hand, and every write after it fails too. So this sweep makes every durable write from the n-th on
fail with ENOSPC (the n-th one torn: half its bytes on disk, as a short write leaves them), lets the run do what it
does with that, then frees the disk and resumes it: the end must be the uninterrupted run's, file by file and event
by event (tests/integration/test_kill_points.py's fingerprint). Then the same through the command line, as an
operator meets it."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from console.engine import failpoints
from tests.conftest import SAMPLES
from tests.integration.test_kill_points import count_points, fingerprint, in_child, run, work  # noqa: F401
from tests.processes import cli
from tests.sweeps import Sweep, points

FULL = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def fill_at(n: int, tear: bool) -> failpoints.Hook:
    """A hook that fails every durable write from the n-th on with ENOSPC (the n-th torn if ``tear``)."""
    seen = 0

    def hook(name: str, tear_fn: failpoints.Tear | None) -> None:
        nonlocal seen
        seen += 1
        if seen == n and tear and tear_fn is not None:
            tear_fn()
        if seen >= n:
            raise OSError(FULL.errno, FULL.strerror)

    return hook


def full_then_resumed(base: Path, work_dir: Path, n: int, tear: bool) -> dict[str, Any]:
    root = work_dir / f"full-{n}{'-torn' if tear else ''}"
    shutil.copytree(base, root)
    failpoints.install(fill_at(n, tear))
    try:
        run(root, None)
        first = "ended"
    except OSError as exc:
        first = f"raised {exc.strerror}"
    except Exception as exc:  # anything else than the disk's own error is a defect the caller reports
        first = f"raised {type(exc).__name__}: {exc}"
    finally:
        failpoints.install(None)
    run(root, None)  # room again: the same run, resumed
    return {"first": first, "fp": fingerprint(root)}


@pytest.mark.sweep
def test_a_disk_full_at_any_write_then_freed_resumes_to_the_same_end(work: Path, sweep: Sweep) -> None:  # noqa: F811
    base = work / "quickstart"
    shutil.copytree(SAMPLES / "quickstart", base)
    names, expected = count_points(base, None, work)
    assert expected["outcome"]["summary"]
    chosen = sweep.select(points(names))
    failures = []
    for p in chosen:
        out = work / f"full-{p.n}-{p.tear}.json"
        pid = in_child(lambda p=p: full_then_resumed(base, work, p.n, p.tear), out)
        _, status = os.waitpid(pid, 0)
        result = json.loads(out.read_text()) if out.exists() else {"crash": f"exit status {status}"}
        label = f"full from write {p.n} ({p.name}){' torn' if p.tear else ''}"
        if "crash" in result:
            failures.append(f"{label}: {result['crash']}")
            continue
        if result["first"] not in ("ended", f"raised {FULL.strerror}"):
            failures.append(f"{label}: the full disk surfaced as {result['first']}")
        diff = [k for k in expected if result["fp"][k] != expected[k]]
        if diff:
            failures.append(f"{label}: {', '.join(diff)} differ: " + "; ".join(
                f"{k}: {str(result['fp'][k])[:300]}" for k in diff[:2]))
    assert not failures, f"[{sweep.describe()}] " + "\n".join(failures)


CHILD = """
import errno, os, sys
from console.engine import failpoints
n = int(sys.argv[1]); seen = 0
def hook(name, tear):
    global seen
    seen += 1
    if seen >= n:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
failpoints.install(hook)
from console.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_the_operator_reads_one_line_and_the_resume(tmp_path: Path) -> None:
    """Through `run --headless`: no traceback, the run's id and the resume in one line, a failing exit code; once
    there is room again, `resume` finishes the run."""
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    done = subprocess.run([sys.executable, "-c", CHILD, "120", "run", str(job), "--in-place", "--headless",
                           "--speed", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 7, (done.stderr, done.stdout[-2000:])  # the run failed, not the work
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    run_id = done.stdout.split(": ", 1)[0].removeprefix("run ")
    lines = [x for x in done.stderr.splitlines() if "cannot be written" in x]
    assert len(lines) == 1, done.stderr
    assert "No space left on device" in lines[0] and f"agent-console resume {run_id}" in lines[0]
    again = subprocess.run(cli("resume", run_id, "--speed", "0"), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr  # a runner of its own, in the background
    ended = subprocess.run(cli("wait", run_id, "--timeout", "120"), capture_output=True, text=True, timeout=180)
    assert ended.returncode == 0, ended.stdout + ended.stderr  # completed
    assert (job / ".console" / "outcome.json").exists()
