"""The operator's commands: one typed union, and one spec table every surface derives from.

A command is a pydantic model (``kind`` is its discriminator); :data:`AnyCommand` is their union, and
:func:`parse_command` the one way a command name and its arguments become one (an unknown name, an argument
no command has, a wrong type or an oversized text is refused: fail closed). :data:`SPECS` holds, per command,
what the surfaces need: its command-line name and help, its arguments, its key in the console (if any), its
command-palette entry, and whether it needs a live run. The command line's subcommands, the console's keys and
palette, the inbox's validation and the supervisor's dispatch are all built from these two things, so adding a
command is: a model here, a row in :data:`SPECS`, its meaning in :mod:`console.engine.operator` (the type
checker and tests/unit/test_commands.py say where one is missing), and a key if it has one.

This module is imported by the command line's start: it imports pydantic and nothing of the engine's runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

# The most characters an operator's text (a rewind's issue, a checkpoint's note) may have: the agent's own
# todo_rewind takes as much (console.engine.tools.todo), and it goes into the agent's prompt.
MAX_TEXT = 4000
MAX_PHASE = 10**6


class CommandModel(BaseModel):
    # Nothing a command does not declare, and no number where a text is expected (the inbox is written by hand
    # sometimes, and by other programs: what it holds is checked, never guessed at).
    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=MAX_TEXT)
    kind: str  # each command's own Literal: the union's discriminator

    def args(self) -> dict[str, Any]:
        """The arguments as the inbox file and the ``operator_command`` event carry them (unset ones left out)."""
        return self.model_dump(exclude={"kind"}, exclude_none=True)


class Checkpoint(CommandModel):
    kind: Literal["checkpoint"] = "checkpoint"
    note: str | None = None


class Rewind(CommandModel):
    kind: Literal["rewind"] = "rewind"
    issue: str
    # The phase the operator saw (the console's dialog, rewind --phase): refused if the run is in another by then.
    phase: int | None = Field(default=None, ge=1, le=MAX_PHASE)

    @field_validator("issue")
    @classmethod
    def _issue(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the issue text is empty")
        return value

    @field_validator("phase", mode="before")
    @classmethod
    def _phase(cls, value: object) -> object:
        if isinstance(value, bool):  # True is an int to Python, never a phase number
            raise ValueError("not a phase number")
        return value


class ApproveRestart(CommandModel):
    kind: Literal["approve_restart"] = "approve_restart"


class DenyRestart(CommandModel):
    kind: Literal["deny_restart"] = "deny_restart"


class Pause(CommandModel):
    kind: Literal["pause"] = "pause"


class Resume(CommandModel):
    kind: Literal["resume"] = "resume"


class Stop(CommandModel):
    kind: Literal["stop"] = "stop"


AnyCommand = Annotated[Checkpoint | Rewind | ApproveRestart | DenyRestart | Pause | Resume | Stop,
                       Field(discriminator="kind")]
CommandName = Literal["checkpoint", "rewind", "approve_restart", "deny_restart", "pause", "resume", "stop"]
_ADAPTER: TypeAdapter[AnyCommand] = TypeAdapter(AnyCommand)


@dataclass(frozen=True)
class Arg:
    """One argument of a command as the command line takes it (the model's field of the same name)."""

    name: str
    help: str
    positional: bool = False
    type: type = str
    metavar: str | None = None


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
    model: type[CommandModel]
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
    def name(self) -> CommandName:
        return self.model.model_fields["kind"].default  # type: ignore[no-any-return]

    @property
    def action(self) -> str:
        """The console's action for it (``app.<action>``): the command line's name."""
        return self.cli


SPECS: tuple[CommandSpec, ...] = (
    CommandSpec(Checkpoint, "checkpoint",
                "force a checkpoint: the agent re-reads plan and instructions, unfinished todos carried over",
                "Force checkpoint", "The agent re-orients; unfinished todos carry over", live=False,
                key=Key("checkpoint", "c", "Checkpoint", "force a checkpoint: the agent re-reads plan and "
                    "instructions, unfinished todos carry over"),
                args=(Arg("note", "a note for the agent with the checkpoint"),)),
    CommandSpec(Rewind, "rewind", "rewind the current phase with an issue text: the agent re-plans",
                "Rewind phase", "Re-plan the current phase around an issue", live=False,
                key=Key("rewind", "r", "Rewind", "rewind the current phase with an issue text (asks for it)"),
                args=(Arg("issue", "what is wrong, for the agent to re-plan around", positional=True),
                      Arg("phase", "the phase to rewind (its number): refused if the run is no longer in it",
                          type=int, metavar="N"))),
    CommandSpec(ApproveRestart, "approve", "approve a pending context restart of a running job",
                "Approve restart", "Approve a pending context restart", live=True,
                key=Key("approve", "a", "Approve", "approve a pending context restart")),
    CommandSpec(DenyRestart, "deny",
                "deny a pending context restart (the run ends cleanly, exit code 3; resume later with run "
                "--in-place)",
                "Deny restart", "Deny a pending context restart (the run ends)", live=True,
                key=Key("deny", "d", "Deny", "deny a pending context restart (the run ends cleanly)")),
    CommandSpec(Pause, "pause", "pause a running job after its current turn",
                "Pause run", "Pause (at once while the model is asked, else after the turn)", live=False,
                key=Key("pause", "p", "Pause",
                        "pause (at once while the model is asked, else after the turn); while paused: resume")),
    CommandSpec(Resume, "resume",
                "resume a paused run; or go on with a stopped, interrupted or out-of-budget one (in the background, "
                "with the settings it was started with; --console to watch it)",
                "Resume run", "Resume a paused run", live=False,
                key=Key("pause", "p", "Resume", "")),
    CommandSpec(Stop, "stop", "stop a running job after its current turn (a second stop stops at once; the run "
                "exits with 3)",
                "Stop run", "Stop after the current turn (asks first)", live=True,
                key=Key("stop", "s", "Stop", "stop after the current turn (asks first; again: stop now)")),
)
BY_NAME: dict[str, CommandSpec] = {s.name: s for s in SPECS}
BY_CLI: dict[str, CommandSpec] = {s.cli: s for s in SPECS}
COMMANDS: tuple[str, ...] = tuple(BY_NAME)
LIVE_ONLY = frozenset(s.name for s in SPECS if s.live)


class CommandError(ValueError):
    """A command name and arguments that are no command: the message says why, in one short line."""


def parse_command(name: object, args: object = None) -> AnyCommand:
    """The typed command ``name`` with ``args``; :class:`CommandError` for anything else (fail closed)."""
    if not isinstance(name, str) or name not in BY_NAME:
        shown = name[:40] if isinstance(name, str) else type(name).__name__
        raise CommandError(f"unknown command {shown!r} (commands: {', '.join(COMMANDS)})")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise CommandError(f"{name}: its arguments must be an object, not {type(args).__name__}")
    if "kind" in args:
        raise CommandError(f"{name}: 'kind' is not an argument")
    try:
        return _ADAPTER.validate_python({**args, "kind": name})
    except ValidationError as exc:
        raise CommandError(f"{name}: {describe(exc, tagged=True)}") from None
    except RecursionError:
        raise CommandError(f"{name}: arguments nested too deeply") from None


def describe(exc: ValidationError, tagged: bool = False) -> str:
    """The first problem of a validation error, in one line of at most ~300 characters (``tagged``: of the
    union, whose first location is the command's kind)."""
    err = exc.errors(include_url=False, include_input=False)[0]
    at = ".".join(str(p) for p in err["loc"][1 if tagged else 0:])
    msg = err["msg"].removeprefix("Value error, ")
    return f"{msg[:200]}{f' ({at[:60]})' if at else ''}"
