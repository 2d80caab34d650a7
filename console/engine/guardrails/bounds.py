"""What job.toml's ``[guardrails]`` table is checked with: the bounds of its numbers, durations, the tools that change
a file, dependency cycles. Plain data and functions: :mod:`.config` validates the table with these alone, so that
checking a job (``run --detach``) loads none of the guardrails' machinery; the modules that run the guardrails
use the same definitions (and offer the names as before)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

from console.engine.job_files import one_line

MAX_DEADLINE_SECONDS = 30 * 24 * 3600  # 30 days: a longer deadline is a typo
MAX_BUDGET_TOKENS = 10**12
MAX_BUDGET_USD = 1_000_000.0  # US dollars: a larger budget is a typo
MAX_ESCALATE_AFTER = 1000  # the most stuck_escalate_after may be
RECENT_CALLS = 12  # the ring of recent tool calls kept for providers (the stuck detector looks at <= 12)
Severity = Literal["info", "caution", "warning"]
# The built-in tools that change a file, for a ReadBeforeWritePolicy made without naming its write tools. A
# job's policies name them from the tool registry instead (each tool declares the argument naming the file it
# changes: Tool.modifies; see GuardrailsConfig.bind_tools), and a test checks that the two agree. This package
# cannot import the tools: they import the runtime, which imports the guardrails.
FILE_CHANGING_TOOLS = ("write_file", "append_file", "edit_file")

# "1d2h30m15s" in this order, each part optional, or plain seconds. Anchored with no nested repetition:
# matching is linear in the length, which is itself capped before matching.
# ASCII digits only: \d and str.isdigit() also accept other scripts' digits ("١٢").
_DURATION = re.compile(r"(?:([0-9]{1,6})d)?(?:([0-9]{1,7})h)?(?:([0-9]{1,9})m)?(?:([0-9]{1,10})s)?")
_UNIT_SECONDS = (86400, 3600, 60, 1)


def parse_duration(value: str | int, what: str = "deadline") -> float:
    """Seconds in ``"90s"``, ``"45m"``, ``"1h30m"``, ``"2h"``, ``"1d"`` or plain integer seconds (``"2700"``,
    ``2700``). A ValueError naming ``what`` otherwise. Bounds (more than 0, at most 30 days) are the caller's."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{what}: {value} is negative; a duration is like 45m, 1h30m, 90s")
        return float(value)
    text = value.strip().lower() if isinstance(value, str) else ""
    if isinstance(value, str) and 0 < len(text) <= 40 and text.isascii():
        if text.isdigit():
            return float(int(text))
        match = _DURATION.fullmatch(text)
        if match and any(match.groups()):
            return float(sum(int(g) * unit for g, unit in zip(match.groups(), _UNIT_SECONDS, strict=True) if g))
    shown = one_line(str(value), 60)
    raise ValueError(f"{what}: '{shown}' is not a duration like 45m, 1h30m, 90s")



def ordered(tools: Iterable[str]) -> tuple[str, ...]:
    # A set's order depends on string hashing, which changes between processes: sort it so a denial reads
    # the same on every run. Any other iterable (a TOML list) keeps the operator's order.
    items = sorted(tools) if isinstance(tools, (set, frozenset)) else list(tools)
    return tuple(dict.fromkeys(items))


def find_cycle(dependencies: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A dependency cycle as a path (``["a", "b", "a"]``), or None. Iterative: no recursion limit to hit."""
    graph = {tool: ordered(reqs) for tool, reqs in dependencies.items()}
    done: set[str] = set()
    for root in graph:
        if root in done:
            continue
        path = [root]
        stack = [iter(graph[root])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                done.add(path.pop())
            elif nxt in path:  # paths are short (a handful of tools): a list scan is fine
                return [*path[path.index(nxt):], nxt]
            elif nxt not in done:
                path.append(nxt)
                stack.append(iter(graph.get(nxt, ())))
    return None
