"""How the console's keys reach the engine: the supervisor in this process, or the job's inbox.

Both take the engine's typed command (console.engine.commands: ``Pause()``, ``Rewind(issue=...)``), built where the
key is pressed, so a command that is none is never sent; the engine decides what a command means (and answers with
``operator_command`` events).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from console.engine.commands import AnyCommand, CommandError
from console.engine.control import RunLock, write_inbox
from console.engine.job import JobPaths

if TYPE_CHECKING:
    from console.engine.supervisor import Supervisor


class Controller(Protocol):
    attached: bool

    def send(self, command: AnyCommand) -> str | None:
        """Deliver a command; return why it could not be sent, or None."""
        ...

    def runner_pid(self) -> int | None: ...


class SupervisorController:
    """A run in this process: the supervisor's thread-safe control methods."""

    attached = False

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.finished = False

    def send(self, command: AnyCommand) -> str | None:
        if self.finished:
            return "the run has ended"
        self.supervisor.submit(command)
        return None

    def runner_pid(self) -> int | None:
        import os

        return None if self.finished else os.getpid()


class InboxController:
    """A run in another process: commands go through the job's control inbox on disk."""

    attached = True

    def __init__(self, paths: JobPaths, source: str = "console") -> None:
        self.paths = paths
        self.lock = RunLock(paths)
        self.source = source

    def runner_pid(self) -> int | None:
        return self.lock.holder()

    def send(self, command: AnyCommand) -> str | None:
        if self.runner_pid() is None:
            return ("no process is running this job (read-only); resume it with "
                    f"`agent-console resume {self.paths.run_id}` or queue commands from the CLI")
        try:
            write_inbox(self.paths, command, source=self.source)
        except CommandError as exc:  # the envelope (its source) is refused: said, not a traceback
            return str(exc)
        except OSError as exc:  # the inbox is full or cannot be written: said, not a traceback
            return f"{command.kind} could not be sent: {exc.strerror or exc}"
        return None


class RecordingController:
    """Keeps the commands it gets; for benchmarks and tests of the view alone."""

    attached = False

    def __init__(self) -> None:
        self.commands: list[AnyCommand] = []

    @property
    def sent(self) -> list[tuple[str, dict[str, Any]]]:
        """Each command as its kind and arguments (as the inbox carries them)."""
        return [(c.kind, c.args()) for c in self.commands]

    def send(self, command: AnyCommand) -> str | None:
        self.commands.append(command)
        return None

    def runner_pid(self) -> int | None:
        return 1
