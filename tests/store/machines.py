"""Two "machines" sharing one store, as processes: each its own data dir, config and host name."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "sample_jobs" / "quickstart"


def endless(base: Path, turns: int = 20000) -> list[str]:
    """The arguments of a run that never ends by itself (a job of its own under ``base``): the scripted model
    writes one new note a turn, for more turns than any test lasts, and nothing asks the operator about it (no
    stuck detection). A command sent to it finds it running however slow the machine: only a stop ends it. A test
    that needs the run alive when its command arrives runs this, not the quickstart, which ends after a number of
    seconds that a loaded machine can outlast."""
    job = base / "endless"
    if not job.exists():
        shutil.copytree(QUICKSTART, job)
        with (job / "job.toml").open("a") as fh:
            fh.write('\n[[guardrails.feedback]]\ntype = "stuck"\nenabled = false\n')
        lines = (json.dumps({"text": f"Noting item {i}.", "calls": [
            {"name": "write_file", "arguments": {"path": f"loop/n{i}.md", "content": f"item {i}\n"}}]})
            for i in range(turns))
        (base / "endless.jsonl").write_text("\n".join(lines) + "\n")
    return [str(job), "--script", str(base / "endless.jsonl"), "--max-turns", str(10 * turns)]


class Machine:
    def __init__(self, name: str, base: Path, url: str) -> None:
        self.name = name
        self.base = base / name
        (self.base / "cfg").mkdir(parents=True, exist_ok=True)
        (self.base / "cfg" / "config.toml").write_text("")
        self.env = {**os.environ, "AGENT_CONSOLE_DATA_DIR": str(self.base / "data"), "AGENT_CONSOLE_HOST": name,
                    "AGENT_CONSOLE_STORE": url, "AGENT_CONSOLE_CONFIG": str(self.base / "cfg" / "config.toml"),
                    "HOME": str(self.base)}

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "console.cli", *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout, cwd=REPO)

    def start(self, *args: str) -> Runner:
        out = self.base / f"runner-{time.monotonic_ns()}.log"
        with out.open("wb") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "console.cli", "run", *args, "--headless"], env=self.env,
                                    stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        return Runner(proc, out)

    def jobs(self) -> list[dict[str, Any]]:
        done = self.cli("jobs", "--json")
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]


class Runner:
    def __init__(self, proc: subprocess.Popen[bytes], out: Path) -> None:
        self.proc = proc
        self.out = out
        STARTED.append(self)

    def folder(self, timeout: float = 60) -> Path:
        """The run folder the runner printed (`run ID: FOLDER`)."""
        got = wait_until(lambda: re.search(r"^run \w+: (/\S+)$", self.out.read_text(errors="replace"), re.M),
                         timeout, "the runner's first line")
        return Path(got.group(1))

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def wait(self, timeout: float = 120) -> int:
        return self.proc.wait(timeout)


STARTED: list[Runner] = []  # every runner a test started: those still alive at its end are killed (conftest)


def kill_leftovers() -> None:
    while STARTED:
        runner = STARTED.pop()
        if runner.proc.poll() is None:
            runner.kill()


def wait_until(what: Callable[[], Any], timeout: float, name: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := what():
            return got
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {name}")


def file_events(folder: Path) -> list[dict[str, Any]]:
    """The run's log as its whole lines: a live run appends as this reads, and a last line without its newline is
    still being written (a write the reader meets halfway: read next time)."""
    text = (folder / ".console" / "events.jsonl").read_text(errors="replace")
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]


def file_seqs(folder: Path) -> list[int]:
    return [e["seq"] for e in file_events(folder)]


def store_seqs(url: str, folder: Path) -> list[int]:
    with psycopg.connect(url) as conn:
        return [s for (s,) in conn.execute("SELECT e.seq FROM events e JOIN runs r ON r.key = e.run_key "
                                           "WHERE r.path = %s ORDER BY e.seq", (str(folder),))]


def sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def in_store(url: str, query: str, *params: Any) -> bool:
    """Whether ``query`` finds a row in the store now (one not up, or not made yet, finds none): what a test waits on
    before it asks `agent-console jobs` once. Polled, each `jobs` is a process of its own (~0.5 s of CPU), back to
    back: a core taken from the run the test waits for, and from the suite's other tests."""
    try:
        return bool(sql(url, query, *params))
    except psycopg.Error:
        return False


def missing(url: str, folder: Path) -> list[int]:
    return sorted(set(file_seqs(folder)) - set(store_seqs(url, folder)))
