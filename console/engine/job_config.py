"""job.toml, the job's definition: model, context, limits, guardrails and declared commands.

Kept apart from :mod:`console.engine.job` (the folder layout) because the definition composes the
guardrails' and the command tools' own config models, which use job.py's helpers.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from console.engine.guardrails.config import GuardrailsConfig, KnownTool
from console.engine.job import (
    ContextSection,
    JobError,
    JobPaths,
    LimitsSection,
    ModelPrice,
    ModelSection,
    StrictSection,
    format_validation_error,
    one_line,
    parse_config_toml,
    read_config_text,
)
from console.engine.tools.command_config import CommandToolConfig, CommandTools
from console.engine.tools.limits import SandboxSection, legacy_mode
from console.engine.tools.mcp_config import McpServers, mcp_tool_declared
from console.engine.tools.tool_names import BUILTIN_TOOL_NAMES, BUILTIN_TOOLS, INDEX_TOOLS


class JobConfig(StrictSection):
    """``job.toml``. Unknown keys are errors: a typo must not be silently ignored."""

    name: str | None = None
    description: str | None = None
    model: ModelSection = Field(default_factory=ModelSection)
    context: ContextSection = Field(default_factory=ContextSection)
    limits: LimitsSection = Field(default_factory=LimitsSection)
    # The definition owns its constraints (seed 002): policies, feedback, completion check, budgets...
    guardrails: GuardrailsConfig = Field(default_factory=GuardrailsConfig)
    # ...and the commands the agent may run (never written by the agent: job.toml is protected).
    tools: CommandTools = Field(default_factory=list)
    # What the commands may see and use beyond the defaults (extra read-only paths, the network, bounds).
    # The old string form (sandbox = "auto" / "required") is read as the default: confined, failing closed.
    sandbox: Annotated[SandboxSection, BeforeValidator(legacy_mode)] = Field(default_factory=SandboxSection)
    # Prices and windows of models the registry does not know (or knows wrongly): [prices."MODEL"].
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # Model Context Protocol servers whose tools the agent gets ([[mcp]]: console.engine.tools.mcp_config), run
    # confined as the commands are, within what the operator's [mcp] allows.
    mcp: McpServers = Field(default_factory=list)

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, tools: list[CommandToolConfig]) -> list[CommandToolConfig]:
        # Unique names and the count are CommandTools' own checks; a built-in's name is this file's concern.
        for i, t in enumerate(tools):
            if t.name in BUILTIN_TOOL_NAMES:
                raise ValueError(f"tools.{i}.name '{t.name}' is the name of a built-in tool; choose another")
        return tools

    @model_validator(mode="after")
    def _guardrails_name_its_tools(self) -> JobConfig:
        # A guardrail naming a tool the job does not have (a typo) would gate nothing: every name must be a
        # built-in tool or one of [[tools]], each error naming its key. Then read_before_write is bound to the
        # registry: it governs every tool whose entry says it changes a file (Tool.modifies).
        # The job's commands first: an error lists the tools in this order (and may be cut at its end).
        known = {t.name: KnownTool() for t in self.tools}  # commands take no arguments
        # find_files is a tool of this job only with [context] file_index = true (None: the settings decide, so
        # a guardrail may name it; with the index off it then gates a tool the agent does not have).
        index = INDEX_TOOLS if self.context.file_index is not False else ()
        # The registry's tools as plain data (tools.tool_names): checking a job does not load the tools.
        known.update({name: KnownTool(params, modifies) for name, params, modifies in (*BUILTIN_TOOLS, *index)})
        # A tool of a declared MCP server (mcp__SERVER__TOOL; one its `tools` offers, when it names them): known
        # when the server has started, so accepted here and checked against what it offers at the run's start.
        known.update({name: KnownTool(pending=True) for name in self.guardrails.tool_names()
                      if mcp_tool_declared(name, self.mcp)})
        problems = self.guardrails.tool_problems(known)
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, [
                InitErrorDetails(type=PydanticCustomError("unknown_tool", "{why}", {"why": why}),
                                 loc=("guardrails", *loc), input=None) for loc, why in problems])
        self.guardrails = self.guardrails.bind_tools(known)
        return self


# The operator's own settings (their config file's, console.settings), never a job's: a job folder, maybe handed over
# from elsewhere, does not choose where traces go, what a day may cost, who is told, which store, data dir, keys or
# endpoints. Named as such when a job.toml sets one, not as a typo ("unknown key, check the spelling" was said).
# tests/test_job_config_keys.py checks each is a key of the config file and none a job.toml's.
OPERATOR_ONLY = frozenset({"telemetry", "budgets", "notify", "store", "data_dir", "serve", "keys", "kubernetes",
                           "openai_api_key", "anthropic_api_key", "job_base_urls", "theme",
                           # The bounds the operator sets on every run: the sandbox's, and how long a model call may
                           # take or be retried (a job's own limits are its [limits]).
                           "sandbox_limits", "idle_timeout", "turn_timeout", "retry_total_wait", "retry_after_cap",
                           "unreachable_wait", "max_tokens_param"})
# The config file's run settings a job.toml sets too, under one of its tables: `max_turns = 5` at its top is told
# where it goes, not "unknown key".
IN_TABLE = {"context_window": ("context", "window")}


def _in_table(key: str) -> tuple[str, str] | None:
    """(table, key) of job.toml where a config-file key misplaced at its top belongs, if it has one."""
    if key in IN_TABLE:
        return IN_TABLE[key]
    for table, field in JobConfig.model_fields.items():
        fields = getattr(field.annotation, "model_fields", None)
        if fields is not None and key in fields:
            return table, key
    return None


def load_job_config(paths: JobPaths) -> JobConfig:
    """``job.toml`` (defaults if there is none); a :class:`JobError` of one line naming the file otherwise."""
    text = read_config_text(paths.job_toml)
    if text is None:
        return JobConfig()
    data = parse_config_toml(text, paths.job_toml)
    if mine := sorted(OPERATOR_ONLY & set(data)):
        names = ", ".join(f"'{k}'" for k in mine)
        raise JobError(f"{one_line(str(paths.job_toml), 0)}: {names} {'is' if len(mine) == 1 else 'are'} the "
                       "operator's setting, in their config file (docs/operators-guide.md), never a job's: a job "
                       "folder does not choose it; remove it from job.toml")
    # The config file's keys a job.toml takes in one of its tables, written at its top: said where they go, with
    # whatever else is wrong in the file (not "unknown key, check the spelling").
    hints = [f"key '{key}': goes under [{home[0]}] in a job.toml ([{home[0]}] {home[1]} = ...)"
             for key in sorted(set(data) - set(JobConfig.model_fields)) if (home := _in_table(key)) is not None]
    if isinstance(data.get("mcp"), dict):
        hints.append("key 'mcp': a job.toml's is its list of servers, one [[mcp]] each (name, command or url, tools: "
                     "docs/mcp.md); the [mcp] table (allow, commands, urls...) is the operator's, in their config file")
    rest = {k: v for k, v in data.items() if not (k == "mcp" and isinstance(v, dict)) and
            (k in JobConfig.model_fields or _in_table(k) is None)}
    try:
        config = JobConfig.model_validate(rest)
    except ValidationError as exc:
        said = format_validation_error(str(paths.job_toml), exc, data=rest, model=JobConfig)
        raise JobError("; ".join([said, *hints])) from None
    except RecursionError:
        raise JobError(f"{one_line(str(paths.job_toml), 0)}: values nested too deeply") from None
    if hints:
        raise JobError(f"{one_line(str(paths.job_toml), 0)}: " + "; ".join(hints))
    return config
