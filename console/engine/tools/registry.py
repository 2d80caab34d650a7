"""Typed tools: pydantic argument models, generated JSON schemas, readable errors.

A model that sends malformed or mistyped arguments gets a tool result that
says exactly which parameter was wrong and what the tool expects, so it can
correct itself on the next turn; nothing it sends can crash the engine.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from console.engine.messages import ToolCall, ToolSpec
from console.engine.model_json import model_data
from console.engine.sandbox import SandboxError

if TYPE_CHECKING:
    from console.engine.runtime import Runtime


class ToolArgs(BaseModel):
    """Base for argument models: unknown arguments are errors, so typos are caught."""

    model_config = ConfigDict(extra="forbid")


class NoArgs(ToolArgs):
    pass


@dataclass
class ToolOutcome:
    ok: bool
    content: str
    # The session ends after this turn (job_complete).
    end_session: bool = False


class ToolFailure(Exception):
    """Raised by a handler for an expected, agent-fixable failure (bad path, missing file)."""


# Bigger arguments are refused before parsing (a write is limited far below this by the sandbox).
MAX_ARGUMENT_CHARS = 16 * 2**20
# The arguments a call was recorded with when they were too big to keep: the call is refused, not run.
REFUSED = "__refused__"


def refused_arguments(arguments: str) -> str | None:
    """Stand-in arguments for a call whose arguments cannot be recorded as they are, or None if they are fine.

    Too big: they would be resent every turn. Not a JSON object (a stream cut inside the arguments, a model
    that wrote prose): servers that parse the history's arguments (vLLM, SGLang, Anthropic's tool_use input)
    reject every later request that replays them. The stand-in is a valid object that says why; the call is
    refused with that reason, and the operator's log keeps what the model actually sent."""
    if len(arguments) > MAX_ARGUMENT_CHARS:
        return json.dumps({REFUSED: f"its arguments were {len(arguments)} characters, more than the "
                                    f"{MAX_ARGUMENT_CHARS} one tool call may carry; nothing was run. "
                                    "Split the work into smaller calls."})
    text = arguments.strip()
    if not text:
        return "{}"  # no arguments: the empty object every server accepts
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        cut = exc.pos >= len(text) - 1 or exc.msg.startswith("Unterminated string")
        why = f"not valid JSON ({exc.msg}: position {exc.pos} of {len(text)} characters{'; cut off?' if cut else ''})"
    except (RecursionError, ValueError):
        why = "not a JSON object this harness can read (nested too deeply, or a number too long)"
    else:
        if isinstance(value, dict):
            return None
        why = f"a JSON {type(value).__name__}, not an object"
    return json.dumps({REFUSED: f"its arguments were {why}; nothing was run, and they were replaced by this "
                                "note in the history. Send the call again with a complete JSON object."})


def cut_by_output_limit(arguments: str) -> str | None:
    """Stand-in arguments for the last call of a reply that hit its output limit (max_tokens), when its own
    arguments are not a complete JSON object: such a call is never run (a todo_complete cut before its
    arguments would otherwise run with {}). None when the call is complete."""
    try:
        if isinstance(json.loads(arguments), dict):
            return None
    except (ValueError, RecursionError):
        pass
    return json.dumps({REFUSED: f"the reply reached its output limit (max_tokens) after {len(arguments)} characters "
                                "of this call's arguments, before they were complete; nothing was run. Send the "
                                "call again, smaller (split a big file into several writes)."})


def clean_strings(value: Any) -> Any:
    """Arguments with every lone surrogate ('\\ud800' is valid JSON) replaced: they cannot be stored as UTF-8."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {clean_strings(k): clean_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_strings(v) for v in value]
    return value


A = TypeVar("A", bound=ToolArgs)


@dataclass(frozen=True)
class Example:
    """One call of a tool, for its doc (:mod:`.docs`): the arguments, validated against the tool's argument
    model when the tool is defined (an example that does not validate is an error at import), and what it does."""

    args: dict[str, Any]
    says: str


@dataclass(frozen=True)
class Failure:
    """An error a tool can return, for its doc: when it happens, and what the agent should do about it."""

    when: str
    then: str


@dataclass
class Tool(Generic[A]):
    name: str
    description: str
    args: type[A]
    handler: Callable[[Runtime, A], ToolOutcome | str]
    # One line for the system prompt's tool guide (layer 3); the schema carries the rest.
    summary: str = ""
    # The argument naming the file this tool changes, None if it changes none. Declared here, beside the
    # handler, so a new tool that writes files cannot be forgotten by the guardrails: read_before_write
    # governs every tool that declares it (guardrails/config.py).
    modifies: str | None = None
    # Its full doc (tools/<name>.md, written by .docs_folder), declared beside the handler so that a tool cannot
    # ship without one (tests/unit/test_tool_docs.py): examples of calls, the errors it returns and what to do
    # about each, the harness's rules that apply to it (read-only paths, size limits; "{max_write_mb}" and the
    # other fields of docs.DocContext are filled in), and what the one-line description leaves out.
    examples: tuple[Example, ...] = ()
    errors: tuple[Failure, ...] = ()
    rules: tuple[str, ...] = ()
    details: str = ""
    # The JSON schema offered to the model when it is not the argument model's own: a tool whose arguments are
    # described by someone else (an MCP server's, checked and bounded by .mcp_tools); its ``args`` then accepts any
    # object, and its handler checks it against this schema.
    schema: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.modifies is not None and self.modifies not in self.args.model_fields:
            raise ValueError(f"tool {self.name}: modifies={self.modifies!r} is not one of its arguments")
        for i, example in enumerate(self.examples):
            try:
                self.args.model_validate(example.args)
            except ValidationError as exc:
                raise ValueError(f"tool {self.name}: example {i + 1} does not validate: {exc}") from None

    @property
    def doc_name(self) -> str:
        """Its doc's file name in the docs folder ("read_file.md"); a tool named like the folder's index (README)
        gets "README.tool.md" (a tool name has no dot, so no other tool's doc can be named so)."""
        return f"{self.name}.tool.md" if self.name.casefold() == "readme" else f"{self.name}.md"

    @property
    def params(self) -> frozenset[str]:
        """The names of its arguments."""
        if self.schema is not None:
            return frozenset(self.schema.get("properties", {}))
        return frozenset(self.args.model_fields)

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of its arguments, as the providers are sent it (and its doc lists it)."""
        return self.schema if self.schema is not None else clean_schema(self.args)

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters())


class ToolOffer(Protocol):
    """A part that offers some tools only once they are loaded (console.engine.tools.tool_search's ToolSearch)."""

    @property
    def catalog(self) -> Mapping[str, Tool[Any]]:
        """The tools it defers (offered only once loaded)."""
        ...

    def bind(self, record: Callable[[], Collection[str]]) -> None:
        """Read what is loaded from the run's record (bound once the run's state is read)."""
        ...

    def offered(self, name: str) -> bool: ...

    def specs(self, base: Sequence[Tool[Any]]) -> list[ToolSpec]: ...

    def refusal(self, name: str) -> ToolOutcome: ...


@functools.lru_cache(maxsize=256)
def _schema(model: type[BaseModel]) -> str:
    return json.dumps(_clean_schema(model))


def clean_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A JSON schema without titles or $refs (generated once per argument model)."""
    schema: dict[str, Any] = json.loads(_schema(model))
    return schema


def _clean_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A JSON schema without titles or $refs: smaller, and accepted by every provider."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    schema: dict[str, Any] = walk(raw)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def describe_params(model: type[BaseModel]) -> str:
    schema = clean_schema(model)
    required = set(schema.get("required", []))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        typ = prop.get("type") or "/".join(p.get("type", "?") for p in prop.get("anyOf", [])) or "value"
        parts.append(f"{name} ({typ}{', required' if name in required else ''})")
    return ", ".join(parts) or "no arguments"


def format_args_error(tool: Tool[Any], exc: ValidationError) -> str:
    problems = []
    errors = exc.errors()
    for err in errors[:5]:
        loc = (".".join(str(p) for p in err["loc"]) or "arguments")[:100]
        msg = "unknown argument" if err["type"] == "extra_forbidden" else err["msg"][:200]
        problems.append(f"'{loc}': {msg}")
    if len(errors) > 5:
        problems.append(f"and {len(errors) - 5} more")
    return (
        f"Invalid arguments for {tool.name}: {'; '.join(problems)}. "
        f"Expected: {describe_params(tool.args)}. Call {tool.name} again with corrected arguments."
    )


class ToolRegistry:
    def __init__(self, tools: list[Tool[Any]] | None = None) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for t in tools or []:
            self.register(t)
        self._specs: list[ToolSpec] | None = None
        # The job folder's folder of the tools' full docs (tools/<name>.md), once the harness wrote them for this
        # session (console.engine.tools.docs_folder); None: no docs, and the guide points to none.
        self.docs_folder: str | None = None
        # Many MCP tools: the part that offers them through a search-and-load step (.tool_search); None offers
        # every tool, every turn.
        self.search: ToolOffer | None = None

    def register(self, tool: Tool[Any]) -> None:
        self._tools[tool.name] = tool
        self._specs = None

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def get(self, name: str) -> Tool[Any] | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool[Any]]:
        return list(self._tools.values())

    def specs(self) -> list[ToolSpec]:
        if self.search is not None:
            return self.search.specs(self.tools())
        # Built once: identical tool definitions every turn keep the prompt prefix cacheable.
        if self._specs is None:
            self._specs = [t.spec() for t in self._tools.values()]
        return self._specs

    def guide(self) -> str:
        """Layer 3 in the system prompt: one short line per tool, ending with the path of its full doc."""
        docs = self.docs_folder
        deferred = self.search.catalog if self.search is not None else {}
        return "\n".join(f"- {t.name}: {t.summary or t.description.split('.')[0]}"
                         + (f" (doc: {docs}/{t.doc_name})" if docs else "") for t in self._tools.values()
                         if t.name not in deferred)

    def parse(self, call: ToolCall) -> tuple[Tool[Any], ToolArgs] | ToolOutcome:
        tool = self._tools.get(call.name)
        if tool is None:
            offered = [n for n in self._tools if self.search is None or n not in self.search.catalog]
            return ToolOutcome(
                False, f"Unknown tool '{call.name}'. Available tools: {', '.join(offered)}."
            )
        if self.search is not None and not self.search.offered(tool.name):
            return self.search.refusal(tool.name)
        text = (call.arguments or "").strip() or "{}"
        if len(text) > MAX_ARGUMENT_CHARS:
            return ToolOutcome(False, f"Invalid arguments for {tool.name}: {len(text)} characters, more than the "
                                      f"{MAX_ARGUMENT_CHARS} a tool call may carry. Split the work into smaller calls.")
        try:
            data = clean_strings(json.loads(text))
        except json.JSONDecodeError as exc:
            return ToolOutcome(
                False,
                f"Invalid arguments for {tool.name}: not valid JSON ({exc.msg} at position {exc.pos}). "
                f"Expected a JSON object with: {describe_params(tool.args)}.",
            )
        except RecursionError:
            return ToolOutcome(False, f"Invalid arguments for {tool.name}: nested too deeply. "
                                      f"Expected a flat JSON object with: {describe_params(tool.args)}.")
        except ValueError as exc:  # e.g. an integer of thousands of digits
            return ToolOutcome(False, f"Invalid arguments for {tool.name}: {str(exc)[:200]}. "
                                      f"Expected: {describe_params(tool.args)}.")
        if isinstance(data, dict) and list(data) == [REFUSED]:
            return ToolOutcome(False, f"Invalid arguments for {tool.name}: {data[REFUSED]} "
                                      f"Expected a JSON object with: {describe_params(tool.args)}.")
        if not isinstance(data, dict):
            return ToolOutcome(
                False,
                f"Invalid arguments for {tool.name}: expected a JSON object, got {type(data).__name__}. "
                f"Expected: {describe_params(tool.args)}.",
            )
        try:
            return tool, tool.args.model_validate(data)
        except ValidationError as exc:
            return ToolOutcome(False, format_args_error(tool, exc))
        except RecursionError:
            return ToolOutcome(False, f"Invalid arguments for {tool.name}: nested too deeply.")

    def run(self, runtime: Runtime, tool: Tool[Any], args: ToolArgs) -> ToolOutcome:
        try:
            out = tool.handler(runtime, args)
        except (ToolFailure, SandboxError) as exc:
            return ToolOutcome(False, f"{tool.name} failed: {exc}")
        except OSError as exc:
            # The file system said no (a name too long, a file where a folder should be...):
            # the model can fix that, so it is a tool error, not a crash.
            return ToolOutcome(False, f"{tool.name} failed: {exc.strerror or type(exc).__name__}. "
                                      "Check the path and try again.")
        outcome = ToolOutcome(True, out) if isinstance(out, str) else out
        if outcome.ok:
            # The harness's record of the run's calls: the evidence a todo may name (console.engine.evidence),
            # part of the todo state, so committed with this call's own step.
            runtime.note_call(tool.name, model_data(args))
        return outcome
