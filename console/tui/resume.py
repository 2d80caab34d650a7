"""Starting a run no process runs again, from a console: through ``agent-console resume`` (the one path every resume
takes: the settings the run was started with, its lock, its journal), in a child process. The fleet's ``r`` and an
attached console's resume key both come here; the console never imports the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from console.engine.text import safe_text

# `resume` returns once its runner holds the run's lock (a few seconds); past this something is wrong, and said.
RESUME_TIMEOUT = 60.0


def resume_in_background(folder: Path, by: str) -> str | None:
    """Start the run in ``folder`` again in the background (blocks until it runs: call it from a worker thread).
    ``by``: who resumed it (its launch_settings say so). Why it did not start, in at most three lines, or None."""
    command = [sys.executable, "-m", "console.cli", "resume", str(folder)]
    env = {**os.environ, "AGENT_CONSOLE_RUNNER_BY": by}
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                              timeout=RESUME_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return safe_text(str(exc))
    if done.returncode == 0:
        return None
    lines = [line.removeprefix("agent-console: ") for line in done.stderr.splitlines() if line.strip()]
    return safe_text("\n".join(lines[-3:]) or f"exit code {done.returncode}")
