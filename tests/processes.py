"""Helpers of the tests that drive real agent-console processes (a runner, its watcher, a console on a terminal)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


def cli(*args: str) -> list[str]:
    """The command line of ``agent-console ARGS`` in this interpreter."""
    return [sys.executable, "-m", "console.cli", *args]


def wait_for(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    """``pred()``'s first true value within ``timeout`` seconds (generous: the machine may be loaded)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    """Whether the process ``pid`` runs (a zombie, exited and not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(") ", 1)[1][0] != "Z"
    return True


def end(proc: subprocess.Popen[str], patience: float = 30) -> None:
    """Stop a process a test started: SIGTERM (its graceful stop), then SIGKILL if it is still there after
    ``patience`` seconds; its pipes read to the end."""
    proc.terminate()
    try:
        proc.communicate(timeout=patience)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
