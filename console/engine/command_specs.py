"""The operator's commands as the surfaces offer them: one spec table, from which the command line's subcommands and
help, the console's keys and its command palette are built (console.engine.commands holds the typed union the
inbox and the engine take; each row here is one of its kinds, or that module does not import).

Per command: its kind (the union's discriminator), its command-line name and help, its arguments, its key in the
console (if any), its command-palette entry, and whether it needs a live run. Plain data: the command line reads it
at every start, before it knows whether it needs pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CommandName = Literal["checkpoint", "rewind", "approve_restart", "deny_restart", "pause", "resume", "stop", "answer"]


@dataclass(frozen=True)
class Arg:
    """One argument of a command as the command line takes it (the model's field of the same name)."""

    name: str
    help: str
    positional: bool = False
    type: type = str
    metavar: str | None = None
    # Given any number of times (a list: --set A=1 --set B=2), or a flag (--decline: true when given).
    many: bool = False
    flag: bool = False
    # A valid value, for the tests' round trips ("" : any text is).
    example: str = ""


@dataclass(frozen=True)
class Key:
    """The console's key for a command: ``id`` is its binding id (the config file's ``[keys]`` remaps it),
    ``default`` the key, ``label`` the footer's word; ``help`` its line on the help screen ("" when another
    command on the same key says it: pause and resume share p, the footer shows whichever applies)."""

    id: str
    default: str
    label: str
    help: str


@dataclass(frozen=True)
class CommandSpec:
    name: CommandName  # its kind in the typed union
    cli: str  # the command line's subcommand (agent-console CLI JOB)
    help: str  # the command line's help and description
    title: str  # the command palette's entry
    palette_help: str
    # The run must be live: with no process running the job, the command line refuses it (left in the inbox it
    # would act on the next run); the others may be queued on purpose.
    live: bool
    key: Key | None = None
    args: tuple[Arg, ...] = ()


    @property
    def action(self) -> str:
        """The console's action for it (RunScreen's ``action_<name>``): the command line's name."""
        return self.cli


# When a pause takes hold (console.engine.operator: Pause is acted on at once while the model is asked, deferred
# to the turn's end while its tools run): every text that says when (the CLI's help, the keys, the fleet, the web
# page, the docs) says this.
PAUSE_WHEN = "at once while the model is asked (its reply is asked again on resume), else after the current turn"

SPECS: tuple[CommandSpec, ...] = (
    CommandSpec("checkpoint", "checkpoint",
                "force a checkpoint: the agent re-reads plan and instructions, unfinished todos carried over",
                "Force checkpoint", "The agent re-orients; unfinished todos carry over", live=False,
                key=Key("checkpoint", "c", "Checkpoint", "force a checkpoint: the agent re-reads plan and "
                    "instructions, unfinished todos carry over"),
                args=(Arg("note", "a note for the agent with the checkpoint"),)),
    CommandSpec("rewind", "rewind", "rewind the current phase with an issue text: the agent re-plans",
                "Rewind phase", "Re-plan the current phase around an issue", live=False,
                key=Key("rewind", "r", "Rewind", "rewind the current phase with an issue text (asks for it)"),
                args=(Arg("issue", "what is wrong, for the agent to re-plan around", positional=True),
                      Arg("phase", "the phase to rewind (its number): refused if the run is no longer in it",
                          type=int, metavar="N"))),
    CommandSpec("approve_restart", "approve", "approve a pending context restart of a running job",
                "Approve restart", "Approve a pending context restart", live=True,
                key=Key("approve", "a", "Approve", "approve a pending context restart")),
    CommandSpec("deny_restart", "deny",
                "deny a pending context restart (the run ends cleanly, exit code 3; resume ID goes on with it "
                "later)",
                "Deny restart", "Deny a pending context restart (the run ends)", live=True,
                key=Key("deny", "d", "Deny", "deny a pending context restart (the run ends cleanly)")),
    CommandSpec("pause", "pause", f"pause a running job: {PAUSE_WHEN}; resume ID unpauses it",
                "Pause run", "Pause (at once while the model is asked, else after the turn)", live=False,
                key=Key("pause", "p", "Pause",
                        "pause (at once while the model is asked, else after the turn); while paused: resume")),
    CommandSpec("resume", "resume",
                "resume a paused run; or go on with a stopped, interrupted or out-of-budget one (in the background, "
                "with the settings it was started with; --console to watch it)",
                "Resume run", "Resume a paused run", live=False,
                key=Key("pause", "p", "Resume", "")),
    CommandSpec("stop", "stop", "stop a running job after its current turn, at once while the model is asked, the "
                "run is paused or a restart waits for approval (a second stop stops at once; the run exits with 3)",
                "Stop run", "Stop after the current turn (asks first)", live=True,
                key=Key("stop", "s", "Stop", "stop after the current turn (asks first; again: stop now)")),
    CommandSpec("answer", "answer",
                "answer the question an MCP server asks during a tool call (its need names it and its fields): "
                "--set NAME=VALUE for each field, or --decline, or --cancel",
                "Answer question", "Answer an MCP server's question (its fields, or decline)", live=True,
                args=(Arg("question", "the id of the question answered (its need says it): refused if another "
                                      "waits by then; none: the one waiting", metavar="ID", example="q1a2b3c"),
                      Arg("set", "a field's value (again for each field)", metavar="NAME=VALUE", many=True,
                          example="name=value"),
                      Arg("decline", "decline to answer (the server is told; the call goes on)", flag=True),
                      Arg("cancel", "cancel the question (the server is told; the call goes on)", flag=True))),
)
BY_NAME: dict[str, CommandSpec] = {s.name: s for s in SPECS}
BY_CLI: dict[str, CommandSpec] = {s.cli: s for s in SPECS}
COMMANDS: tuple[str, ...] = tuple(BY_NAME)
LIVE_ONLY = frozenset(s.name for s in SPECS if s.live)
