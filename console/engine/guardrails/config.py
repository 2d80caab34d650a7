"""job.toml's ``[guardrails]`` table: declared by the operator on the job definition, never by the agent.

Validated strictly, like the rest of job.toml: unknown keys, wrong types and unknown ``type`` values are
errors naming the key; every number is bounded; every tool a policy names must be one of the job's (checked
by job_config.JobConfig, which knows the tools: :meth:`GuardrailsConfig.tool_problems`). Entries are
discriminated on ``type``::

    [guardrails]
    deadline = "45m"                 # from the job's first start; 90s, 45m, 1h30m, 2h, 1d or seconds
    budget_tokens = 3_000_000        # a spend limit: reached, the run pauses and asks its operator (resume
    budget_usd = 5.0                 #   grants one more slice); US dollars from the model's prices ([prices])
    max_completion_blocks = 5        # stops refused by the completion check before the run asks its operator
    stuck_escalate_after = 3         # stuck nudges without progress before the run asks its operator (0: never)
    [[guardrails.policies]]
    type = "read_before_write"       # every tool that changes a file (Tool.modifies); write_tools narrows it
    [[guardrails.policies]]
    type = "sequential"
    dependencies = { publish = ["test", "build"], build = ["lint"] }
    [[guardrails.feedback]]
    type = "static"
    feedback = "CHANGELOG.md exists: follow its format."
    on_file_created = "CHANGELOG.md"
    [[guardrails.feedback]]
    type = "deadline"                # every_n_seconds = 60 unless a trigger is set
    [[guardrails.feedback]]
    type = "stuck"                   # on by default (every_n_calls = 1); enabled = false turns it off
    [guardrails.completion]
    type = "composite"               # "plan" (default) | "files" | "composite" | "none"
    checkers = [{ type = "plan" }, { type = "files", paths = ["report.md"] }]
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StringConstraints,
    Tag,
    field_validator,
    model_validator,
)

# Checking the table needs its bounds alone (a start's check of job.toml loads no more); building the guardrails it
# declares imports their machinery where it is built (build_guardrails, each entry's build).
from console.engine.guardrails.bounds import (
    FILE_CHANGING_TOOLS,
    MAX_BUDGET_TOKENS,
    MAX_BUDGET_USD,
    MAX_DEADLINE_SECONDS,
    MAX_ESCALATE_AFTER,
    RECENT_CALLS,
    Severity,
    find_cycle,
    parse_duration,
)
from console.engine.job_files import STATE_DIR, one_line

if TYPE_CHECKING:
    from console.engine.guardrails.completion import TaskCompletionChecker
    from console.engine.guardrails.feedback import FeedbackProviderConfig, FeedbackTrigger
    from console.engine.guardrails.guardrails import Guardrails
    from console.engine.guardrails.policies import ToolPolicy

MAX_ENTRIES = 32
MAX_FEEDBACK_TEXT = 10_000

# Names are shown in <feedback provider='...'> tags, events and the TUI: a small, safe alphabet.
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
ToolName = Annotated[str, StringConstraints(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
ParamName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]


def _relative_path(value: str) -> str:
    """A path inside the job folder, as written in job.toml: relative, no "..", not the harness's folder."""
    if not value or len(value) > 512:
        raise ValueError("a path of 1 to 512 characters is expected")
    if any(not ch.isprintable() for ch in value):
        raise ValueError("a path has no control characters")
    parts = value.replace("\\", "/").split("/")
    if value.startswith(("/", "\\")) or (len(value) > 1 and value[1] == ":"):
        raise ValueError(f"'{one_line(value, 80)}' is absolute; write a path relative to the job folder")
    if ".." in parts:
        raise ValueError(f"'{one_line(value, 80)}' goes outside the job folder (..); write a path inside it")
    first = next((p for p in parts if p not in ("", ".")), None)
    if first is None or first.lower() == STATE_DIR:
        raise ValueError(f"'{one_line(value, 80)}' is not a file of the job (it is the job folder itself or "
                         f"the harness's {STATE_DIR}/)")
    return value


RelPath = Annotated[str, AfterValidator(_relative_path)]


def _on_type(*types: str) -> Discriminator:
    """Discriminate entries on ``type``, with one clear error for a missing or unknown type (pydantic's own
    message for a missing tag, "Unable to extract tag", does not tell an operator what to write)."""
    known = frozenset(types)

    def tag(value: object) -> str | None:
        found = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return found if isinstance(found, str) and found in known else None

    expected = " or ".join(f'"{t}"' for t in types)
    return Discriminator(tag, custom_error_type="unknown_type",
                         custom_error_message=f"missing or unknown type: expected type = {expected}")


class _Strict(BaseModel):
    # Like job.py's: a TOML value of the wrong type is an error, never coerced; inf and nan are refused.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# -- policies --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KnownTool:
    """What a guardrail declaration may rely on about one tool of the job (from its registry entry)."""

    params: frozenset[str] = frozenset()
    modifies: str | None = None  # the argument naming the file it changes; None: it changes no file
    # Its arguments are known only once its server has started (an MCP tool named at job.toml's check): they are
    # checked then (console.engine.tools.mcp_tools.guardrail_problem).
    pending: bool = False


# A key below [guardrails] (("policies", 1, "dependencies")) and what is wrong there.
Problem = tuple[tuple[str | int, ...], str]


def _not_a_tool(name: str, known: Mapping[str, KnownTool]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"'{one_line(name, 64)}' is not a tool of this job{hint} (tools: {', '.join(known)})"


class ReadBeforeWriteEntry(_Strict):
    type: Literal["read_before_write"] = "read_before_write"
    name: Name | None = None
    read_tools: list[ToolName] = Field(default_factory=lambda: ["read_file"], min_length=1, max_length=32)
    # None: every tool that changes a file (bind_tools fills them in from the tool registry).
    write_tools: list[ToolName] | None = Field(default=None, min_length=1, max_length=32)
    path_param: ParamName = "path"
    # Set by bound(), not a key of job.toml: the argument naming the file, for a write tool whose registry
    # entry names another than path_param.
    _tool_params: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _disjoint(self) -> ReadBeforeWriteEntry:
        both = sorted(set(self.read_tools) & set(self.write_tools or FILE_CHANGING_TOOLS))
        if both:
            raise ValueError(f"a tool cannot be both a read and a write tool: {', '.join(both)}")
        return self

    @property
    def effective_name(self) -> str:
        return self.name or self.type

    def tool_problems(self, known: Mapping[str, KnownTool]) -> list[Problem]:
        problems: list[Problem] = []
        for tool in dict.fromkeys(self.read_tools):
            if tool not in known:
                problems.append((("read_tools",), _not_a_tool(tool, known)))
            elif not known[tool].pending and self.path_param not in known[tool].params:
                problems.append((("read_tools",), f"'{tool}' has no '{self.path_param}' argument: "
                                                  "read_before_write could not tell which file it reads"))
        writers = [t for t, k in known.items() if k.modifies is not None]
        if self.write_tools is None:  # every writer: none of them may be a read tool too
            problems += [(("read_tools",), f"'{t}' changes a file: it cannot be a read tool")
                         for t in dict.fromkeys(self.read_tools) if t in writers]
        for tool in dict.fromkeys(self.write_tools or ()):
            if tool not in known:
                problems.append((("write_tools",), _not_a_tool(tool, known)))
            elif known[tool].modifies is None:
                problems.append((("write_tools",), f"'{tool}' changes no file; the tools that do: "
                                                   f"{', '.join(writers)}"))
        return problems

    def bound(self, known: Mapping[str, KnownTool]) -> ReadBeforeWriteEntry:
        """This entry governing, when it names no write tools, every tool that changes a file; each write tool
        keyed by the argument its registry entry says names that file."""
        writers = self.write_tools or [t for t, k in known.items() if k.modifies is not None]
        entry = self.model_copy(update={"write_tools": list(writers)})
        entry._tool_params = {t: m for t in writers if (m := known[t].modifies) is not None and m != self.path_param}
        return entry

    def build(self) -> ToolPolicy:
        from console.engine.guardrails.policies import ReadBeforeWritePolicy

        return ReadBeforeWritePolicy(self.effective_name, tuple(self.read_tools),
                                     tuple(self.write_tools or FILE_CHANGING_TOOLS), self.path_param,
                                     self._tool_params)


class SequentialEntry(_Strict):
    type: Literal["sequential"] = "sequential"
    name: Name | None = None
    dependencies: dict[ToolName, Annotated[list[ToolName], Field(min_length=1, max_length=64)]] = Field(
        min_length=1, max_length=256)

    @field_validator("dependencies")
    @classmethod
    def _acyclic(cls, deps: dict[str, list[str]]) -> dict[str, list[str]]:
        for tool, reqs in deps.items():
            if tool in reqs:
                raise ValueError(f"a tool cannot depend on itself ('{tool}' requires '{tool}')")
        cycle = find_cycle(deps)
        if cycle:
            raise ValueError(f"dependency cycle: {' -> '.join(cycle)}")
        return deps

    @property
    def effective_name(self) -> str:
        return self.name or self.type

    def tool_problems(self, known: Mapping[str, KnownTool]) -> list[Problem]:
        # A dependency on a tool that does not exist can never be met, and a gate on one is never asked: a
        # typo here would block a tool for ever or gate nothing.
        named = [t for tool, reqs in self.dependencies.items() for t in (tool, *reqs)]
        return [(("dependencies",), _not_a_tool(t, known)) for t in dict.fromkeys(named) if t not in known]

    def build(self) -> ToolPolicy:
        from console.engine.guardrails.policies import SequentialDependencyPolicy

        return SequentialDependencyPolicy(self.dependencies, name=self.effective_name)


PolicyEntry = Annotated[
    Annotated[ReadBeforeWriteEntry, Tag("read_before_write")] | Annotated[SequentialEntry, Tag("sequential")],
    _on_type("read_before_write", "sequential")]


# -- feedback --------------------------------------------------------------------------------------------------

class _FeedbackEntry(_Strict):
    name: Name | None = None
    every_n_calls: int | None = Field(default=None, ge=1, le=1_000_000)
    every_n_seconds: float | None = Field(default=None, ge=1, le=MAX_DEADLINE_SECONDS)
    on_file_created: RelPath | None = None

    DEFAULT_NAME: ClassVar[str] = ""

    @property
    def effective_name(self) -> str:
        return self.name or self.DEFAULT_NAME

    def _has_trigger(self) -> bool:
        return self.every_n_calls is not None or self.every_n_seconds is not None or self.on_file_created is not None

    def trigger(self, default: FeedbackTrigger | None = None) -> FeedbackTrigger:
        from console.engine.guardrails.feedback import FeedbackTrigger, FileCreatedTrigger

        if not self._has_trigger() and default is not None:
            return default
        file = FileCreatedTrigger(self.on_file_created) if self.on_file_created is not None else None
        return FeedbackTrigger(self.every_n_calls, self.every_n_seconds, file)


class StaticEntry(_FeedbackEntry):
    DEFAULT_NAME: ClassVar[str] = "Static"
    type: Literal["static"] = "static"
    feedback: str = Field(min_length=1, max_length=MAX_FEEDBACK_TEXT)
    severity: Severity = "info"

    @model_validator(mode="after")
    def _triggered(self) -> StaticEntry:
        if not self._has_trigger():
            raise ValueError("set a trigger: every_n_calls, every_n_seconds or on_file_created")
        return self

    def build(self) -> FeedbackProviderConfig:
        from console.engine.guardrails.feedback import FeedbackProviderConfig
        from console.engine.guardrails.feedback_providers import StaticFeedbackProvider

        return FeedbackProviderConfig(StaticFeedbackProvider(self.feedback, self.effective_name, self.severity),
                                      self.trigger())


class DeadlineEntry(_FeedbackEntry):
    DEFAULT_NAME: ClassVar[str] = "Deadline"
    type: Literal["deadline"] = "deadline"
    warning_threshold_seconds: float = Field(default=120, ge=0, le=MAX_DEADLINE_SECONDS)

    def build(self) -> FeedbackProviderConfig:
        from console.engine.guardrails.feedback import FeedbackProviderConfig, FeedbackTrigger
        from console.engine.guardrails.feedback_providers import DeadlineFeedback

        return FeedbackProviderConfig(DeadlineFeedback(self.warning_threshold_seconds, self.effective_name),
                                      self.trigger(FeedbackTrigger(every_n_seconds=60)))


class StuckEntry(_FeedbackEntry):
    DEFAULT_NAME: ClassVar[str] = "Stuck"
    type: Literal["stuck"] = "stuck"
    enabled: bool = True
    repeat_threshold: int = Field(default=4, ge=2, le=RECENT_CALLS)
    error_threshold: int = Field(default=3, ge=2, le=RECENT_CALLS)
    alternation_window: int = Field(default=6, ge=4, le=RECENT_CALLS)
    idle_turns: int = Field(default=30, ge=0, le=100_000)  # 0: no idle detection

    def build(self) -> FeedbackProviderConfig:
        from console.engine.guardrails.feedback import FeedbackProviderConfig, FeedbackTrigger
        from console.engine.guardrails.feedback_providers import StuckDetector

        detector = StuckDetector(self.effective_name, self.repeat_threshold, self.error_threshold,
                                 self.alternation_window, self.idle_turns)
        return FeedbackProviderConfig(detector, self.trigger(FeedbackTrigger(every_n_calls=1)))


FeedbackEntry = Annotated[
    Annotated[StaticEntry, Tag("static")] | Annotated[DeadlineEntry, Tag("deadline")]
    | Annotated[StuckEntry, Tag("stuck")],
    _on_type("static", "deadline", "stuck")]


# -- completion ------------------------------------------------------------------------------------------------

class PlanCheck(_Strict):
    type: Literal["plan"] = "plan"
    name: Name | None = None


class FilesCheck(_Strict):
    type: Literal["files"] = "files"
    name: Name | None = None
    paths: list[RelPath] = Field(min_length=1, max_length=100)


class CompositeCheck(_Strict):
    type: Literal["composite"] = "composite"
    name: Name | None = None
    all_must_pass: bool = True
    checkers: list[InnerCheck] = Field(min_length=1, max_length=16)


class NoneCheck(_Strict):
    type: Literal["none"] = "none"


InnerCheck = Annotated[
    Annotated[PlanCheck, Tag("plan")] | Annotated[FilesCheck, Tag("files")]
    | Annotated[CompositeCheck, Tag("composite")],
    _on_type("plan", "files", "composite")]
CheckEntry = Annotated[
    Annotated[PlanCheck, Tag("plan")] | Annotated[FilesCheck, Tag("files")]
    | Annotated[CompositeCheck, Tag("composite")] | Annotated[NoneCheck, Tag("none")],
    _on_type("plan", "files", "composite", "none")]
CompositeCheck.model_rebuild()


def build_checker(entry: PlanCheck | FilesCheck | CompositeCheck | NoneCheck) -> TaskCompletionChecker | None:
    """The checker of a ``[guardrails.completion]`` entry; None for type = "none" (free stop)."""
    from console.engine.guardrails.completion import CompositeChecker, FileExistsChecker, PlanBasedChecker

    if isinstance(entry, PlanCheck):
        return PlanBasedChecker(entry.name or "plan")
    if isinstance(entry, FilesCheck):
        return FileExistsChecker(tuple(entry.paths), entry.name or "files")
    if isinstance(entry, CompositeCheck):
        inner = [build_checker(c) for c in entry.checkers]
        return CompositeChecker([c for c in inner if c is not None], entry.all_must_pass, entry.name or "composite")
    return None


# -- the table -------------------------------------------------------------------------------------------------

def _unique(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"duplicate {what} name '{name}': give each entry of the same type its own `name`")
        seen.add(name)


class GuardrailsConfig(_Strict):
    """The ``[guardrails]`` table. Every key is optional; ``GuardrailsConfig()`` is the default guardrails."""

    deadline: str | int | None = None
    budget_tokens: int | None = Field(default=None, ge=1, le=MAX_BUDGET_TOKENS)
    # A whole number of dollars (budget_usd = 5) is a float too; true/false and strings are not.
    budget_usd: float | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    max_completion_blocks: int = Field(default=5, ge=1, le=1000)
    # Stuck-detector nudges in a row without progress before the run pauses and asks its operator; 0: never.
    stuck_escalate_after: int = Field(default=3, ge=0, le=MAX_ESCALATE_AFTER)
    policies: list[PolicyEntry] = Field(default_factory=list, max_length=MAX_ENTRIES)
    feedback: list[FeedbackEntry] = Field(default_factory=list, max_length=MAX_ENTRIES)
    # Nothing declared (seed 002's default): no checker, and seed 000's protocol alone decides (the harness's
    # record of the work: console.engine.record). A declared checker applies on top of it; "none": free stops.
    completion: CheckEntry | None = None
    # A job_complete below this confidence, with notes saying why, is the agent giving up (seed 000:
    # "Unrecoverable - job_complete() with low confidence and detailed notes"): accepted at any time, the run
    # ends as gave up and asks its operator.
    low_confidence: float = Field(default=0.5, ge=0, le=1)

    @field_validator("deadline")
    @classmethod
    def _duration(cls, value: str | int | None) -> str | int | None:
        if value is None:
            return None
        seconds = parse_duration(value)
        if not 1 <= seconds <= MAX_DEADLINE_SECONDS:
            raise ValueError(f"deadline: '{one_line(str(value), 40)}' must be between 1 second and 30 days")
        return value

    @field_validator("policies")
    @classmethod
    def _policy_names(cls, entries: list[ReadBeforeWriteEntry | SequentialEntry]
                      ) -> list[ReadBeforeWriteEntry | SequentialEntry]:
        _unique([e.effective_name for e in entries], "policy")
        return entries

    @field_validator("feedback")
    @classmethod
    def _feedback_names(cls, entries: list[StaticEntry | DeadlineEntry | StuckEntry]
                        ) -> list[StaticEntry | DeadlineEntry | StuckEntry]:
        names = [e.effective_name for e in entries]
        _unique(names, "feedback")
        if not any(isinstance(e, StuckEntry) for e in entries) and StuckEntry.DEFAULT_NAME in names:
            raise ValueError(f"the name '{StuckEntry.DEFAULT_NAME}' belongs to the default stuck detector: choose "
                             "another name (or add a type = \"stuck\" entry to configure the detector)")
        return entries

    def tool_problems(self, known: Mapping[str, KnownTool]) -> list[Problem]:
        """Every tool these declarations name that the job does not have (``known``: the built-in tools and its
        ``[[tools]]``), or that cannot do what the declaration needs; each with its key below [guardrails]."""
        return [(("policies", i, *loc), why) for i, entry in enumerate(self.policies)
                for loc, why in entry.tool_problems(known)]

    def tool_names(self) -> list[str]:
        """Every tool name the policies name, once each, in order."""
        names: list[str] = []
        for entry in self.policies:
            if isinstance(entry, SequentialEntry):
                names += [t for tool, reqs in entry.dependencies.items() for t in (tool, *reqs)]
            else:
                names += [*entry.read_tools, *(entry.write_tools or ())]
        return list(dict.fromkeys(names))

    def bind_tools(self, known: Mapping[str, KnownTool]) -> GuardrailsConfig:
        """These guardrails with every read_before_write entry bound to the job's tools (see
        :meth:`ReadBeforeWriteEntry.bound`); call it once :meth:`tool_problems` found none."""
        policies = [e.bound(known) if isinstance(e, ReadBeforeWriteEntry) else e for e in self.policies]
        return self.model_copy(update={"policies": policies})

    @property
    def deadline_seconds(self) -> float | None:
        return None if self.deadline is None else parse_duration(self.deadline)

    def feedback_configs(self) -> list[FeedbackProviderConfig]:
        """The providers in declared order; the stuck detector is added last unless an entry configures it."""
        configs = [e.build() for e in self.feedback if not (isinstance(e, StuckEntry) and not e.enabled)]
        if not any(isinstance(e, StuckEntry) for e in self.feedback):
            configs.append(StuckEntry().build())
        return configs


def build_guardrails(config: GuardrailsConfig) -> Guardrails:
    from console.engine.guardrails.budgets import Budgets
    from console.engine.guardrails.feedback import FeedbackRunner
    from console.engine.guardrails.guardrails import Guardrails  # the facade imports this module
    from console.engine.guardrails.policies import PolicyGate

    return Guardrails(
        gate=PolicyGate([e.build() for e in config.policies]),
        feedback=FeedbackRunner(config.feedback_configs()),
        checker=None if config.completion is None else build_checker(config.completion),
        free_stop=isinstance(config.completion, NoneCheck),
        low_confidence=config.low_confidence,
        budgets=Budgets(config.deadline_seconds, config.budget_tokens, config.budget_usd),
        max_completion_blocks=config.max_completion_blocks,
        stuck_escalate_after=config.stuck_escalate_after,
    )


def default_guardrails() -> Guardrails:
    """No ``[guardrails]`` table: seed 000's protocol decides completion, the stuck detector, no policies, no
    budgets."""
    return build_guardrails(GuardrailsConfig())
