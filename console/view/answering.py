"""How an operator's answer reaches a run from a view that lists runs (the console's fleet, serve's pages): one
function per way, Textual-free, so every view sends the same way and says the same lines.

- a command (approve, deny, pause, resume, stop) for a run of this machine goes into its inbox, addressed to the
  process running it (none: the line says so and names the command that starts it); for a run of another machine
  it goes through the shared store (a row and a NOTIFY: that run's link writes it into its inbox);
- a resume of a run no process runs starts it again through ``agent-console resume`` (the one path every resume
  takes: the settings it was started with, its lock, its journal), in a child process;
- an acknowledgement is recorded in the run's log, then the jobs store (console.engine.acknowledge).

Each names who sent it (``source``): the fleet, or the web client and session.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from console.engine.acknowledge import acknowledge
from console.engine.commands import AnyCommand, CommandError
from console.engine.control import write_inbox
from console.engine.job_files import JobPaths
from console.engine.run_lock import RunLock
from console.engine.store import Store, StoreError
from console.engine.text import safe_text

# `resume` returns once its runner holds the run's lock (a few seconds); past this something is wrong, and said.
RESUME_TIMEOUT = 60.0


# Of the run's log, the end read for a command's id (its ``operator_command`` events come soon after it is sent).
DELIVERED_TAIL = 4 * 1024 * 1024


def delivered(paths: JobPaths, command_id: str) -> bool:
    """Whether the command ``command_id`` reached the run: in its inbox still, or taken (its log's
    ``operator_command`` events name it). Read from the inbox's names and the end of the log, as bytes."""
    with contextlib.suppress(OSError):
        if any(name.endswith(f"-{command_id}.json") for name in os.listdir(paths.inbox)):
            return True
    try:
        with open(paths.events, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - DELIVERED_TAIL))
            return f'"command_id":"{command_id}"'.encode() in fh.read()
    except OSError:
        return False


def send_local(paths: JobPaths, command: AnyCommand, source: str, command_id: str | None = None,
               holder: Callable[[], int | None] | None = None) -> str | None:
    """``command`` into the inbox of the run at ``paths``, for the process running it; why not, or None. With
    ``command_id`` it is sent once: a command of that id that reached the run already is not sent again (a link
    spent, then a kill before its command was written: the same command, written once)."""
    if command_id is not None and delivered(paths, command_id):
        return None
    if (holder or RunLock(paths).holder)() is None:
        return ("no process is running this job (read-only); resume it with "
                f"`agent-console resume {paths.run_id}` or queue commands from the CLI")
    try:
        write_inbox(paths, command, source=source, command_id=command_id)
    except CommandError as exc:  # the envelope (its source) is refused: said, not a traceback
        return str(exc)
    except OSError as exc:  # the inbox is full or cannot be written: said, not a traceback
        return f"{command.kind} could not be sent: {exc.strerror or exc}"
    return None


def resume_in_background(folder: Path, by: str) -> str | None:
    """Start the run in ``folder`` again in the background (blocks until it runs: call it from a worker thread).
    ``by``: who resumed it (its launch_settings say so). Why it did not start, in at most three lines, or None."""
    # -I and cwd "/": the operator's working folder may be a job folder someone handed them, and `-m` would import
    # a console/ package planted there first (the runner starts the same way).
    command = [sys.executable, "-I", "-m", "console.cli", "resume", str(folder)]
    env = {**os.environ, "AGENT_CONSOLE_RUNNER_BY": by}
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                              timeout=RESUME_TIMEOUT, check=False, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return safe_text(str(exc))
    if done.returncode == 0:
        return None
    lines = [line.removeprefix("agent-console: ") for line in done.stderr.splitlines() if line.strip()]
    return safe_text("\n".join(lines[-3:]) or f"exit code {done.returncode}")


@dataclass(frozen=True)
class Said:
    """What an acknowledgement says: a title, a message and a severity."""

    title: str
    message: str
    severity: Literal["information", "warning", "error"] = "information"


def acknowledge_run(paths: JobPaths, name: str, by: str, open_store: Callable[[], Store] | None) -> Said:
    """Acknowledge the run at ``paths`` (``name``: how the line names it, ``k3f9q quickstart``); ``open_store``:
    the jobs store to tell (None, or one that cannot be opened: the run's own log holds the acknowledgement)."""
    store = None
    if open_store is not None:
        with contextlib.suppress(sqlite3.Error, OSError, StoreError):
            store = open_store()
    try:
        done = acknowledge(paths, by, store)
    except OSError as exc:
        return Said("Not acknowledged", f"{name}: {exc.strerror or exc}", "error")
    finally:
        if store is not None:
            store.close()
    if done.status == "acknowledged":
        return Said("Acknowledged", f"{name}: acknowledged; it asks for you no more. Resume still goes on with it "
                                    f"(agent-console resume {paths.run_id}).")
    if done.status == "live":
        return Said("Not acknowledged", f"{name} runs now: answer it instead.", "warning")
    if done.status == "already":
        return Said("Acknowledged", f"{name} was already acknowledged.")
    return Said("Nothing to acknowledge", f"{name}: " + ("it completed." if done.status == "completed" else
                                                         "it never ran."))
