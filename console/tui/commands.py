"""How the console's keys reach the engine: the supervisor in this process, or the job's inbox.

Both take a command's name and arguments (console.engine.commands); each checks them against the engine's typed
commands before anything is sent (a command that is none is said, never sent), and the engine decides what a
command means (and answers with ``operator_command`` events).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from console.engine.commands import CommandError, parse_command
from console.engine.control import RunLock, write_inbox
from console.engine.job import JobPaths

if TYPE_CHECKING:
    from console.engine.supervisor import Supervisor


class Controller(Protocol):
    attached: bool

    def send(self, command: str, **args: Any) -> str | None:
        """Deliver a command; return why it could not be sent, or None."""
        ...

    def runner_pid(self) -> int | None: ...


class SupervisorController:
    """A run in this process: the supervisor's thread-safe control methods."""

    attached = False

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.finished = False

    def send(self, command: str, **args: Any) -> str | None:
        if self.finished:
            return "the run has ended"
        try:
            self.supervisor.command(command, **{k: v for k, v in args.items() if v is not None})
        except CommandError as exc:
            return str(exc)
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

    def send(self, command: str, **args: Any) -> str | None:
        if self.runner_pid() is None:
            return ("no process is running this job (review only); resume it with "
                    f"`agent-console run --in-place {self.paths.root}` or queue commands from the CLI")
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


class StoreController:
    """A run of another machine sharing the store: commands are rows of the store's queue, which the run's link
    delivers to its inbox there (what ``agent-console pause ID`` does from here); a lease stands in for the run
    lock. The follower (:mod:`console.tui.store_follow`) keeps :attr:`owner` and :attr:`problem` current, so the
    view never waits on the store to ask them."""

    attached = True

    def __init__(self, url: str, key: str, host: str, run_id: str, source: str = "console") -> None:
        self.url = url
        self.key = key
        self.host = host  # the machine whose folder (plan, files) it is
        self.run_id = run_id
        self.source = source
        self.owner: str | None = None  # the current lease's owner ("host:pid:run"); None: no runner holds it
        self.problem: str | None = None  # the store cannot be read now (one line, no password)
        self.plan: Any = None  # the run's last plan_changed event (its plan file is on its machine)
        self._store: Any = None
        import threading

        self._lock = threading.Lock()

    def store(self) -> Any:
        """The store (opened at the first use, on the caller's thread); StoreError when it cannot be reached."""
        with self._lock:
            if self._store is None:
                from console.engine.store.postgres import PgStore

                self._store = PgStore(self.url)
            return self._store

    def runner_pid(self) -> int | None:
        """The pid of the runner holding the lease (on its machine); None: no runner holds it now."""
        if self.owner is None:
            return None
        parts = self.owner.split(":")
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() and int(parts[1]) > 0 else 1

    def send(self, command: str, **args: Any) -> str | None:
        import uuid

        from console.engine.control import make_command
        from console.engine.store import StoreError

        if self.problem is not None:
            return f"{command} could not be sent: {self.problem}"
        if self.owner is None:
            return (f"no runner holds {self.run_id} on {self.host} now (review only); resume it there "
                    f"(agent-console resume {self.run_id}) or queue commands from the CLI")
        try:
            cmd = make_command(command, {k: v for k, v in args.items() if v is not None}, source=self.source,
                               id=uuid.uuid4().hex)
            self.store().send_command(self.key, cmd.model_dump(mode="json",
                                                               include={"id", "command", "args", "source"}))
        except CommandError as exc:
            return str(exc)
        except StoreError as exc:
            return f"{command} could not be sent: {exc}"
        return None

    def plan_text(self) -> str:
        """What the plan pane shows: main_plan.md is in the run's folder, on its machine, and the store carries
        events, not files; what the events say of the plan (its last ``plan_changed``) is shown."""
        from console.engine.text import safe_text

        said = (f"*main_plan.md is not shown: this run's folder is on {safe_text(self.host, one_line=True)}, and "
                "the shared store carries its events, not its files. Read it there, or `agent-console logs "
                f"{self.run_id}` for the plan's changes.*")
        plan = self.plan
        if plan is None:
            return said + "\n\nNo plan_changed event yet: the agent writes its plan during bootstrap."
        lines = [said, "", "## What the run's events say of its plan", ""]
        if plan.error:
            lines.append(f"- the plan does not parse: {safe_text(plan.error, one_line=True)}")
        lines.append(f"- {plan.complete} of {plan.phases} phases complete")
        if plan.current:
            lines.append(f"- current: {safe_text(plan.current, one_line=True)}")
        lines.append(f"- as of event {plan.seq} ({plan.ts:%Y-%m-%d %H:%M:%S})")
        return "\n".join(lines)

    def close(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()
