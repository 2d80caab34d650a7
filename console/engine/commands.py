"""The operator's commands as one typed union: what the inbox, the controllers and the engine's dispatch take.

A command is a pydantic model (``kind`` is its discriminator); :data:`AnyCommand` is their union, and
:func:`parse_command` the one way a command name and its arguments become one (an unknown name, an argument
no command has, a wrong type or an oversized text is refused: fail closed). What the surfaces offer of each
(command line, keys, palette) is its row in :data:`console.engine.command_specs.SPECS`, kept apart so that the
command line's grammar is built without pydantic. Adding a command: a model here, a row there (this module
refuses to import while the two differ), its meaning in :mod:`console.engine.operator` (the type checker and
tests/unit/test_commands.py say where one is missing), and a key if it has one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from console.engine.command_specs import BY_NAME, COMMANDS, CommandName

__all__ = ["MODELS", "AnyCommand", "CommandError", "CommandModel", "CommandName", "parse_command"]

# The most characters an operator's text (a rewind's issue, a checkpoint's note) may have: the agent's own
# todo_rewind takes as much (console.engine.tools.todo), and it goes into the agent's prompt.
MAX_TEXT = 4000
MAX_PHASE = 10**6
MAX_ANSWER_FIELDS = 16  # as many values as a question may have fields (console.engine.questions.MAX_FIELDS)


class CommandModel(BaseModel):
    # Nothing a command does not declare, and no number where a text is expected (the inbox is written by hand
    # sometimes, and by other programs: what it holds is checked, never guessed at).
    # Validators built at first use (as the events': console.engine.events.base), not at every process's import.
    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=MAX_TEXT, defer_build=True)
    kind: str  # each command's own Literal: the union's discriminator

    def args(self) -> dict[str, Any]:
        """The arguments as the inbox file and the ``operator_command`` event carry them (unset ones left out)."""
        return self.model_dump(exclude={"kind"}, exclude_none=True)

    def logged(self) -> dict[str, Any]:
        """The arguments as the run's log records them (``operator_command`` events): :meth:`args`, but for what
        is the operator's to give and not the log's to keep (an answer's values)."""
        return self.args()

    @classmethod
    def build(cls, **args: Any) -> Self:
        """The command with ``args`` (None ones left unset), built where the operator gave them (a rewind's text in
        the console): :class:`CommandError` with the line :func:`parse_command` says for the same arguments."""
        kind = cls.model_fields["kind"].default
        try:
            return cls(**{k: v for k, v in args.items() if v is not None})
        except ValidationError as exc:
            raise CommandError(f"{kind}: {describe(exc)}") from None
        except RecursionError:
            raise CommandError(f"{kind}: arguments nested too deeply") from None


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


class Answer(CommandModel):
    """The operator's answer to the question an MCP server asks during a call (console.engine.questions): its
    values (``NAME=VALUE`` each: checked against the question's form when applied), or a decline or a cancel.
    ``question``: the id of the question it answers (refused if another one waits by then); none: the one waiting."""

    kind: Literal["answer"] = "answer"
    question: str | None = Field(default=None, min_length=1, max_length=64)
    set: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=MAX_ANSWER_FIELDS)
    decline: bool | None = None
    cancel: bool | None = None

    @field_validator("decline", "cancel", mode="before")
    @classmethod
    def _flag(cls, value: object) -> object:
        return None if value is False else value  # the command line's unset flag: no argument

    @model_validator(mode="after")
    def _one(self) -> Answer:
        if sum(x is not None for x in (self.set, self.decline, self.cancel)) > 1:
            raise ValueError("give values (--set), --decline or --cancel: one of them")
        for pair in self.set or ():
            if "=" not in pair or not pair.partition("=")[0].strip():
                raise ValueError(f"'{pair[:60]}' is not NAME=VALUE")
        return self

    def logged(self) -> dict[str, Any]:
        # The values are for the server that asked: the log keeps the names of the fields answered only.
        out = self.args()
        if self.set is not None:
            out["set"] = [pair.partition("=")[0] + "=..." for pair in self.set]
        return out

    @property
    def action(self) -> Literal["accept", "decline", "cancel"]:
        return "decline" if self.decline else "cancel" if self.cancel else "accept"


AnyCommand = Annotated[Checkpoint | Rewind | ApproveRestart | DenyRestart | Pause | Resume | Stop | Answer,
                       Field(discriminator="kind")]
_ADAPTER: TypeAdapter[AnyCommand] = TypeAdapter(AnyCommand, config=ConfigDict(defer_build=True))
# By kind: the spec table's names and the union's kinds are the same set, or nothing imports (a command with a spec
# and no model, or a model no surface offers, is a bug to see at once).
MODELS: dict[str, type[CommandModel]] = {m.model_fields["kind"].default: m for m in get_args(get_args(AnyCommand)[0])}
if set(MODELS) != set(BY_NAME) or set(get_args(CommandName)) != set(MODELS):
    raise ImportError(f"the command specs ({sorted(BY_NAME)}) and the typed commands ({sorted(MODELS)}) differ")


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
