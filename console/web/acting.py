"""What serve's pages and action links do to a run: the same ways the console's fleet acts (console.view.answering),
each command named by its sender (the web client and session, or the link)."""

from __future__ import annotations

from pathlib import Path

from console.engine.commands import AnyCommand, ApproveRestart, DenyRestart, Pause, Resume, Stop
from console.engine.job_files import JobPaths
from console.engine.store import Store, open_store
from console.view.answering import acknowledge_run, delivered, resume_in_background, send_local
from console.view.fleet import FleetRow

COMMANDS: dict[str, AnyCommand] = {"approve": ApproveRestart(), "deny": DenyRestart(), "pause": Pause(),
                                   "resume": Resume(), "stop": Stop()}


def command_of(action: str) -> AnyCommand:
    return COMMANDS[action]


class Acting:
    """Acts on the fleet's runs for serve (the store its fleet lists: the embedded one at ``path``, or a shared
    one at ``url``)."""

    def __init__(self, path: Path, url: str | None) -> None:
        self.path = path
        self.url = url

    def open(self) -> Store:
        return open_store(self.url, self.path)

    def __call__(self, row: FleetRow, action: str, command_id: str | None, source: str,
                 command: AnyCommand | None = None) -> str | None:
        """A page's action (see console.web.server.Act)."""
        return self.answer(row, action, command_id, source, command)

    def delivered(self, row: FleetRow, command_id: str) -> bool:
        """Whether the command ``command_id`` reached the run of ``row`` (a run of this machine: its inbox or its
        log; an acknowledgement or a resume is no command, and its link's request says whether it was answered)."""
        return not row.host and delivered(JobPaths(row.path), command_id)

    def answer(self, row: FleetRow, action: str, command_id: str | None, source: str,
               command: AnyCommand | None = None) -> str | None:
        """``action`` on ``row`` (``command``: the one built from the operator's text, a rewind's), as the command
        ``command_id`` where one is given (a link's: the same id again after a crash); why it was not done, or
        None."""
        if action == "acknowledge":
            if row.host:
                return f"run {row.id} is {row.host}'s: acknowledge it there (agent-console ack {row.id})"
            said = acknowledge_run(JobPaths(row.path), f"{row.id} {row.job}", source, self.open)
            return None if said.title == "Acknowledged" else said.message
        if action == "resume" and row.resume == "start":
            if row.host:
                return f"run {row.id} is {row.host}'s: resume it there (agent-console resume {row.id})"
            return resume_in_background(row.path, source)
        command = command if command is not None else command_of(action)
        if row.host and self.url:
            from console.view.jobs import send_remote

            return send_remote(self.url, self.path, row.key, command, source, command_id)
        return send_local(JobPaths(row.path), command, source, command_id)
