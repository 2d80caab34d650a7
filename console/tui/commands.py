"""How the console's keys reach the engine: the job's inbox (a run of this machine), or the shared store's command
queue (another machine's: console.tui.store_follow.StoreController).

Both take the engine's typed command (console.engine.commands: ``Pause()``, ``Rewind(issue=...)``), built where the
key is pressed, so a command that is none is never sent; the engine decides what a command means (and answers with
``operator_command`` events).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from console.engine.job_files import JobPaths
from console.engine.run_lock import RunLock

# The typed commands are pydantic models: a fleet's first frame imports neither them nor pydantic (issue 37); a
# command is built where its key is pressed, which imports them.
if TYPE_CHECKING:
    from console.engine.commands import AnyCommand


class Controller(Protocol):
    """How the console reaches one run, and what the views may ask of it: each capability is declared here (a
    controller that lacks one says so with its default), never probed for."""

    # Another process runs the run (its inbox, or the shared store, takes the commands); False: this process does.
    attached: bool

    def send(self, command: AnyCommand) -> str | None:
        """Deliver a command; return why it could not be sent, or None."""
        ...

    def runner_pid(self) -> int | None: ...

    @property
    def host(self) -> str:
        """The machine that runs the run, as it is shown ("": this one)."""
        ...

    @property
    def resume_hint(self) -> str:
        """How the run is resumed, when not ``agent-console resume ID`` here ("": that)."""
        ...

    @property
    def local(self) -> bool:
        """The run's folder (its lock, its files) is on this machine."""
        ...

    @property
    def startable(self) -> bool:
        """The console can start the run again when no process runs it (``agent-console resume`` here)."""
        ...

    @property
    def problem(self) -> str | None:
        """Why the run cannot be reached now (one line; a shared store away), or None."""
        ...

    @property
    def screenshots(self) -> Path | None:
        """Where this console's screenshots of the run go when not its folder's harness state (None: there)."""
        ...

    @property
    def follower(self) -> Callable[..., None] | None:
        """What follows the run's events when the controller does it itself (another machine's run, from the shared
        store), with :func:`console.tui.follow.follow_log`'s arguments after the log's path; None: its log is
        followed from its folder."""
        ...

    @property
    def plan_source(self) -> Callable[[], str] | None:
        """What the plan pane shows when the run's plan file is not here (None: its folder's main_plan.md)."""
        ...


class InboxController:
    """A run in another process: commands go through the job's control inbox on disk."""

    attached = True
    host = resume_hint = ""
    local = startable = True  # its folder is here: started again in the background (agent-console resume)
    problem: str | None = None
    screenshots: Path | None = None
    follower: Callable[..., None] | None = None
    plan_source: Callable[[], str] | None = None

    def __init__(self, paths: JobPaths, source: str = "console") -> None:
        self.paths = paths
        self.lock = RunLock(paths)
        self.source = source

    def runner_pid(self) -> int | None:
        return self.lock.holder()

    def send(self, command: AnyCommand) -> str | None:
        # Imported at the first command: it imports the typed events, which the fleet's first frame does without.
        from console.view.answering import send_local

        return send_local(self.paths, command, self.source, holder=self.runner_pid)


class RecordingController:
    """Keeps the commands it gets; for benchmarks and tests of the view alone."""

    attached = False
    host = resume_hint = ""
    local = startable = False
    problem: str | None = None
    screenshots: Path | None = None
    follower: Callable[..., None] | None = None
    plan_source: Callable[[], str] | None = None

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
