"""How the console's keys reach the engine: the job's inbox (a run of this machine), or the shared store's command
queue (another machine's: console.tui.store_follow.StoreController).

Each takes a command's name and arguments (console.engine.commands); each checks them against the engine's typed
commands before anything is sent (a command that is none is said, never sent), and the engine decides what a
command means (and answers with ``operator_command`` events).
"""

from __future__ import annotations

from typing import Any, Protocol

from console.engine.commands import CommandError, parse_command
from console.engine.control import RunLock, write_inbox
from console.engine.job import JobPaths


class Controller(Protocol):
    attached: bool  # another process runs the run (else this one does, or nothing: a view tested alone)
    local: bool  # the run's folder is this machine's (its end can be acknowledged here)

    def send(self, command: str, **args: Any) -> str | None:
        """Deliver a command; return why it could not be sent, or None."""
        ...

    def runner_pid(self) -> int | None: ...


class InboxController:
    """A run in another process: commands go through the job's control inbox on disk."""

    attached = True
    local = True

    def __init__(self, paths: JobPaths, source: str = "console") -> None:
        self.paths = paths
        self.lock = RunLock(paths)
        self.source = source

    def runner_pid(self) -> int | None:
        return self.lock.holder()

    def send(self, command: str, **args: Any) -> str | None:
        if self.runner_pid() is None:
            return ("no process is running this job (read-only); resume it with "
                    f"`agent-console resume {self.paths.run_id}` or queue commands from the CLI")
        try:
            write_inbox(self.paths, parse_command(command, {k: v for k, v in args.items() if v is not None}),
                        source=self.source)
        except CommandError as exc:
            return str(exc)
        except OSError as exc:  # the inbox is full or cannot be written: said, not a traceback
            return f"{command} could not be sent: {exc.strerror or exc}"
        return None


class RecordingController:
    """Keeps the commands it gets; for benchmarks and tests of the view alone."""

    attached = False
    local = False

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send(self, command: str, **args: Any) -> str | None:
        try:  # what a real controller would refuse is refused here too
            parse_command(command, {k: v for k, v in args.items() if v is not None})
        except CommandError as exc:
            return str(exc)
        self.sent.append((command, args))
        return None

    def runner_pid(self) -> int | None:
        return 1
