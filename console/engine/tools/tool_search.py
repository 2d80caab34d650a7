"""Many MCP tools stay cheap: past a share of the window, they are found and loaded, not all offered at once.

Every tool's schema is resent with every request (layer 3 is always in context). A job with a few MCP servers can
list hundreds of tools, whose schemas would take a large part of the window before the agent did anything. When
the run's MCP tools' schemas would take more than ``share`` of the context window (the operator's ``[mcp]
tool_search_share``, :data:`DEFAULT_SHARE` by default), they are *deferred*, as Anthropic's tool search does:

- the agent gets one built-in tool, :data:`SEARCH_TOOL` (``query``, and ``load``: names to load), which answers the
  best matching deferred tools (at most :data:`MAX_RESULTS`, each a name and a short, escaped description) and
  loads those named in ``load``, whose full schemas are then offered from the next turn on;
- the tool guide of the system prompt names the search tool and how many tools it finds, never each deferred tool
  (the system prompt stays the same while tools are loaded: a resumed session's recorded prompt is still true);
- a call of a deferred tool not loaded is refused with one line naming the search tool; once loaded, the call
  passes the one gate like any tool's.

What is loaded is part of the phase's record of its calls (the todo state's ``evidence``, console.engine.evidence):
recorded with the search call's own journal step, so it survives a kill -9, a resume and a context restart, and
emptied with that record when a phase transition archives the todo list (tools are loaded "for the phase"). At
most :data:`MAX_LOADED` tools are loaded in a phase. Search is plain word matching over names and descriptions,
deterministic (no model, no randomness, ties broken by the servers' order).

Jobs without MCP tools, or whose MCP tools fit the share, are unchanged: the registry then has no search part and
builds its tool list and guide exactly as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field

from console.engine.context.tokens import estimate_text
from console.engine.messages import ToolSpec
from console.engine.text import safe_text
from console.engine.tools.registry import Example, Failure, Tool, ToolArgs, ToolOutcome, ToolRegistry

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

SEARCH_TOOL = "mcp_tool_search"
# The share of the context window the MCP tools' schemas may take before they are deferred.
DEFAULT_SHARE = 0.10
MAX_RESULTS = 10
MAX_LOADED = 32  # tools loaded in one phase: a bound on what the loaded schemas can take
MAX_LOAD = 8  # tools one call may load
MAX_QUERY = 200
SHORT = 120  # characters of a description a search result shows
# The phase record's key for a loaded tool (console.engine.evidence's record: other keys are "call:..."/"read:...").
LOADED_KEY = "mcp_loaded:"
_WORD = re.compile(r"[a-z0-9]+")
# Terminal escape sequences (CSI, OSC) and other control characters: separators, never part of a word ("\x1b[31m"
# before "issues" must not make "31missues"). Linear: bounded repetitions, no nesting.
_CONTROL = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]?"
                      r"|\x1b\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)?|[\x00-\x1f\x7f-\x9f]")


def schema_tokens(tools: Sequence[Tool[Any]]) -> int:
    """The tokens the tools' definitions take in a request (name, description, schema), as the window counts."""
    return sum(estimate_text(json.dumps(t.spec().model_dump(), ensure_ascii=False)) for t in tools)


def should_defer(tools: Sequence[Tool[Any]], window: int, share: float) -> bool:
    """Whether these MCP tools' schemas would take more than ``share`` of the window."""
    return bool(tools) and schema_tokens(tools) > share * window


def _words(text: str) -> list[str]:
    """Plain lowercase words: escape sequences, markup and punctuation only separate them. Linear."""
    return _WORD.findall(_CONTROL.sub(" ", text[: 4 * MAX_QUERY]).lower())


class SearchArgs(ToolArgs):
    query: str = Field(default="", max_length=4 * MAX_QUERY,
                       description="words to look for in the MCP tools' names and descriptions (e.g. 'git commit')")
    load: list[str] = Field(default_factory=list, max_length=MAX_LOAD,
                            description=f"names of tools to load (at most {MAX_LOAD}), as the search listed them; "
                                        "their schemas are offered from your next turn on")


class ToolSearch:
    """The deferred MCP tools of a run, the search tool that loads them, and what the registry offers each turn."""

    def __init__(self, tools: Sequence[Tool[Any]]) -> None:
        self.catalog: dict[str, Tool[Any]] = {t.name: t for t in tools}
        self._words = {t.name: (set(_words(t.name.replace("_", " "))), set(_words(t.summary + " " + t.description)))
                       for t in tools}
        # Where the phase's record is read: bound to the run's todo state when the runtime exists.
        self._record: Callable[[], Collection[str]] = lambda: ()
        self._specs: tuple[tuple[str, ...], list[ToolSpec]] | None = None
        servers = sorted({n.split("__")[1] for n in self.catalog if n.count("__") >= 2})
        self.tool = Tool(
            SEARCH_TOOL,
            f"Find tools of the MCP servers ({', '.join(servers)}): {len(self.catalog)} tools are available but not "
            "offered until loaded. Give query words to list the best matches (name and short description); give "
            "load=[names] to load them: their full schemas are offered from your next turn on, for this phase.",
            SearchArgs, self._handle,
            summary=f"find and load the {len(self.catalog)} tools of the MCP servers ({', '.join(servers)})",
            examples=(Example({"query": "current time zone"}, "lists the best matching tools"),
                      Example({"load": ["mcp__time__get_current_time"]}, "loads it: offered from the next turn")),
            errors=(Failure("a name in load is not a tool of the MCP servers", "search again and use a listed name"),
                    Failure(f"{MAX_LOADED} tools are already loaded in this phase",
                            "use the loaded ones; more can be loaded after the next phase transition")),
            details="The MCP servers' tools are too many to offer all at once; this tool finds them. A tool that is "
                    "not loaded is refused when called. Loaded tools stay loaded until the phase ends.",
        )

    # -- the record -------------------------------------------------------------------------------------------
    def bind(self, record: Callable[[], Collection[str]]) -> None:
        """Read what is loaded from the run's phase record (the todo state's evidence, journaled)."""
        self._record = record
        self._specs = None

    def loaded(self) -> list[str]:
        """The loaded tools, in the order they were loaded (a stable prefix: earlier turns' caches stay valid)."""
        return [k[len(LOADED_KEY):] for k in self._record()
                if k.startswith(LOADED_KEY) and k[len(LOADED_KEY):] in self.catalog]

    def offered(self, name: str) -> bool:
        return name not in self.catalog or name in self.loaded()

    def specs(self, base: Sequence[Tool[Any]]) -> list[ToolSpec]:
        """The tools offered this turn: every tool that is not deferred, the search tool, and the loaded ones."""
        loaded = tuple(self.loaded())
        if self._specs is None or self._specs[0] != loaded:
            self._specs = (loaded, [*(t.spec() for t in base if t.name not in self.catalog),
                                    *(self.catalog[n].spec() for n in loaded)])
        return self._specs[1]

    def refusal(self, name: str) -> ToolOutcome:
        return ToolOutcome(False, f"{name} is not loaded: call {SEARCH_TOOL}(load=[\"{name}\"]) first (or "
                                  f"{SEARCH_TOOL}(query=...) to find tools); it is offered from the turn after.")

    # -- the search tool --------------------------------------------------------------------------------------
    def search(self, query: str) -> list[Tool[Any]]:
        """The best matches: a word of the query in a tool's name counts 3, in its description 1; ties keep the
        servers' order. An exact tool name is first. Deterministic."""
        words = set(_words(query))
        exact = query.strip()
        scored = []
        for i, (name, (in_name, in_text)) in enumerate(self._words.items()):
            score = 100 if name == exact else 0
            score += sum(3 for w in words if w in in_name) + sum(1 for w in words if w in in_text)
            if score:
                scored.append((-score, i, name))
        return [self.catalog[n] for _s, _i, n in sorted(scored)[:MAX_RESULTS]]

    def _line(self, tool: Tool[Any], loaded: Collection[str]) -> str:
        text = safe_text(tool.summary or tool.description, one_line=True, join=True, limit=SHORT)
        return f"- {tool.name}: {text}" + (" (loaded)" if tool.name in loaded else "")

    def _handle(self, rt: Runtime, args: SearchArgs) -> ToolOutcome:
        loaded = self.loaded()
        out: list[str] = []
        if args.load:
            unknown = [n for n in args.load if n not in self.catalog]
            new = list(dict.fromkeys(n for n in args.load if n in self.catalog and n not in loaded))
            if unknown:
                shown = safe_text(", ".join(unknown), one_line=True, limit=200)
                return ToolOutcome(False, f"Not tools of the MCP servers: {shown}. Nothing was loaded; call "
                                          f"{SEARCH_TOOL}(query=...) and load names it lists.")
            if len(loaded) + len(new) > MAX_LOADED:
                return ToolOutcome(False, f"{len(loaded)} tools are loaded and {len(new)} more would pass the "
                                          f"{MAX_LOADED} a phase may load; nothing was loaded. Use the loaded ones "
                                          f"({', '.join(loaded)}).")
            if new:
                # Recorded in the phase's record with this call's step (journaled): a resume finds them loaded.
                rt.todos.add_evidence([LOADED_KEY + n for n in new])
                self._specs = None
            out.append(f"Loaded: {', '.join(new) or '(already loaded)'}. Their schemas are offered from your next "
                       "turn on; call them then.")
        if args.query.strip() or not args.load:
            found = self.search(args.query)
            now = self.loaded()
            if found:
                out.append(f"Best matches ({len(found)} of {len(self.catalog)} MCP tools):")
                out += [self._line(t, now) for t in found]
                out.append(f"Load tools with {SEARCH_TOOL}(load=[names]).")
            else:
                out.append(f"No MCP tool matches those words ({len(self.catalog)} tools). Try other words: what the "
                           "tool does, or its server's name.")
        return ToolOutcome(True, "\n".join(out))


def offer_mcp_tools(base: Sequence[Tool[Any]], tools: Sequence[Tool[Any]], window: int,
                    share: float | None) -> ToolRegistry:
    """The run's registry: ``base`` and the MCP ``tools``, all offered when their schemas fit ``share`` of the
    window (exactly as without this module), else deferred behind :data:`SEARCH_TOOL`. ValueError (one line) when
    a tool of ``base`` is already named so."""
    registry = ToolRegistry([*base, *tools])
    if not should_defer(tools, window, DEFAULT_SHARE if share is None else share):
        return registry
    if SEARCH_TOOL in registry:
        raise ValueError(f"a tool of the job is named {SEARCH_TOOL}, the name of the tool that finds MCP tools when "
                         "they are too many to offer at once; rename it in job.toml")
    search = ToolSearch(tools)
    registry.register(search.tool)
    registry.search = search
    return registry
