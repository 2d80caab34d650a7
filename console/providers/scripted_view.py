"""What the scripted demo model sees in one request, and the small vocabulary of its decisions.

The model keeps no hidden state: everything it knows comes from the request (the ACTIVE TODO LIST block,
the plan, the conversation). :class:`View` reads that once per turn: the current task, the tool calls made
for it so far (everything after the last todo tool result) and the file contents still visible.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from console.engine.messages import Message, ModelRequest

# How the model names itself wherever it reports on its own work: it is a fixed script, not an AI.
DEMO_LABEL = "scripted demo model: deterministic, no AI"
DEMO_NAME = "scripted demo model (deterministic, no AI)"

TODO_TOOLS = {"todo_complete", "todo_write", "todo_rewind", "archive_and_reset"}
BUILTIN_TOOLS = {*TODO_TOOLS, "read_file", "write_file", "append_file", "edit_file", "list_files", "search_files",
                 "generate_workspace_summary", "add_accomplishment", "add_note", "job_complete"}
LOOKUP_TOOLS = {"read_file", "list_files", "search_files"}
# Files of the harness and of the job's definition: never a deliverable, never an input to write from.
BOOKKEEPING = {"instructions.md", "main_plan.md", "workspace_summary.md", "job.toml", "SYSTEM_PROMPT.md",
               "summary_report.md"}

# These run on text the agent wrote or read (tools/registry results, todo text): none may backtrack badly
# (tests/unit/test_regex_safety.py), and numbers are captured with at most 12-15 digits, so int() never
# meets a 5,000-digit run (ValueError).
PHASE_RX = re.compile(r"^Phase: (.*)$", re.MULTILINE)
PATH_RX = re.compile(r"`([^`\s]+)`|(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:md|txt|json|csv|toml|py|yaml|yml))(?![\w/])")
MORE_LINES_RX = re.compile(r"\n\[\.\.\. \d+ more lines:.*\]$")
LISTING_RX = re.compile(r"^(.*) \((\d{1,15}) bytes\)$")
# A read_file result's header: "[path: lines A-B of N]".
RANGE_RX = re.compile(r"^\[[^\]]*: lines (\d{1,12})-(\d{1,12}) of (\d{1,12})\]")

CURRENT_MARK = "← CURRENT"
# How the harness answers a call a tool policy denied.
DENIED = "Denied by the "
MAX_TASK_DIGITS = 6


@dataclass
class Call:
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Decision:
    text: str
    calls: list[Call]


@dataclass
class Done:
    """A tool call made for the current task, with its result."""

    name: str
    args: dict[str, Any]
    result: str
    ok: bool


def args_of(raw: str) -> dict[str, Any]:
    try:
        data = json.loads(raw or "{}")
        return data if isinstance(data, dict) else {}
    except json.JSONDecodeError:
        return {}


def current_task(text: str) -> tuple[int, str] | None:
    """(number, text) of the first Layer 2 line "[ ] N. task      ← CURRENT", found with string methods:
    the todo text is the agent's, and a pattern with adjacent quantifiers backtracks on long space runs."""
    if CURRENT_MARK not in text:
        return None
    for line in text.split("\n"):
        if not (line.startswith("[ ] ") and line.endswith(CURRENT_MARK)):
            continue
        rest = line[4:]
        digits = 0
        while digits < len(rest) and digits <= MAX_TASK_DIGITS and rest[digits].isdecimal():
            digits += 1
        if not 1 <= digits <= MAX_TASK_DIGITS or rest[digits: digits + 2] != ". ":
            continue
        body = rest[digits + 2: len(rest) - len(CURRENT_MARK)]
        if body[-1:].isspace():  # the marker is set off by spaces
            return int(rest[:digits]), body.strip()
    return None


def paths_in(text: str) -> list[str]:
    out: list[str] = []
    for m in PATH_RX.finditer(text):
        p = (m.group(1) or m.group(2) or "").strip(".,:;()'\"")
        if p and p not in out and not p.startswith(("http", "-")) and "(" not in p:
            out.append(p)
    return out


def body(tool_result: str) -> str:
    """A read_file result without its header line and continuation hint."""
    if tool_result.startswith("[") and "\n" in tool_result:
        tool_result = tool_result.split("\n", 1)[1]
    return MORE_LINES_RX.sub("", tool_result)


def section(md: str, title: str) -> list[str]:
    """The lines of the '## title' section of a markdown text."""
    out, on = [], False
    for ln in md.splitlines():
        if ln.startswith("## "):
            on = ln[3:].strip().lower() == title.lower()
            continue
        if on:
            out.append(ln)
    return out


def listing(result: str) -> dict[str, int]:
    """A list_files result as {path: size}."""
    files = {}
    for ln in result.splitlines():
        m = LISTING_RX.match(ln.strip())
        if m:
            files[m.group(1)] = int(m.group(2))
    return files


class View:
    """What the agent can see in one request."""

    def __init__(self, request: ModelRequest) -> None:
        self.request = request
        self.protected = request.protected
        current = current_task(self.protected)
        self.task_no = current[0] if current else None
        self.task = current[1] if current else None
        pm = PHASE_RX.search(self.protected)
        self.phase = pm.group(1).strip() if pm else ""
        self.transition = "transition in progress" in self.protected
        self.masked: set[tuple[str, str]] = set()  # (tool, path) of lookups for this task since masked
        self.done = self._done_since_anchor(request.messages, self.masked)
        self.reads = self._visible_reads(request.messages)
        self.tools = {t.name for t in request.tools}

    @staticmethod
    def _done_since_anchor(messages: list[Message], masked: set[tuple[str, str]]) -> list[Done]:
        results: dict[str, Message] = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
        done: list[Done] = []
        for m in messages:
            if m.role == "user" and m.meta.get("kind") in {"transition_prompt", "summary", "kickoff"}:
                done = []
                masked.clear()
            if m.role != "assistant":
                continue
            for c in m.tool_calls:
                res = results.get(c.id)
                if res is None:
                    continue
                if c.name in TODO_TOOLS:
                    done = []
                    masked.clear()
                    continue
                if res.meta.get("masked") and c.name in LOOKUP_TOOLS:
                    # A masked lookup is as good as not done: look again (where looking again cannot loop).
                    masked.add((c.name, str(args_of(c.arguments).get("path", ""))))
                    continue
                if res.content.startswith(DENIED):
                    continue  # a call a policy denied never ran
                done.append(Done(c.name, args_of(c.arguments), res.content, bool(res.meta.get("ok", True))))
        return done

    @staticmethod
    def _visible_reads(messages: list[Message]) -> dict[str, str]:
        """File contents still visible in the conversation, keyed by path (chunks in line order)."""
        calls = {c.id: c for m in messages if m.role == "assistant" for c in m.tool_calls}
        reads: dict[str, dict[int, str]] = {}
        for m in messages:
            if m.role != "tool" or m.name != "read_file" or not m.meta.get("ok", True):
                continue
            call = calls.get(m.tool_call_id or "")
            if call is None or m.meta.get("masked"):
                continue
            args = args_of(call.arguments)
            # A re-read of the same range replaces the earlier one instead of doubling it.
            start = args.get("start_line", 1)
            reads.setdefault(str(args.get("path", "")), {})[start if type(start) is int else 1] = body(m.content)
        return {k: "\n".join(v[i] for i in sorted(v)) for k, v in reads.items()}

    def did(self, name: str, **match: object) -> Done | None:
        for d in self.done:
            if d.name == name and all(d.args.get(k) == v for k, v in match.items()):
                return d
        return None

    def read_result(self, path: str) -> str | None:
        d = self.did("read_file", path=path)
        return d.result if d else None

    def instructions(self) -> str | None:
        return self.reads.get("instructions.md") or (body(self.read_result("instructions.md") or "") or None)

    def files(self) -> dict[str, int]:
        """The job's files as the last list_files for this task showed them (empty if none was made)."""
        d = self.did("list_files")
        return listing(d.result) if d else {}

    def written(self) -> list[str]:
        """Files written or appended to for the current task."""
        out: list[str] = []
        for d in self.done:
            p = d.args.get("path")
            if d.name in ("write_file", "append_file", "edit_file") and d.ok and isinstance(p, str) and p not in out:
                out.append(p)
        return out


# -- the shapes of a decision ----------------------------------------------------------
def complete(text: str, *calls: Call) -> Decision:
    """Do ``calls`` (if any) and mark the task complete in the same turn."""
    return Decision(text, [*calls, Call("todo_complete")])


def once(v: View, call: Call, text: str) -> Decision:
    """Make ``call`` unless this task already made it; then complete the task."""
    if v.did(call.name):
        return complete("Done with this task.")
    return Decision(text, [call])


def read(v: View, paths: list[str], verb: str = "Reading") -> Decision:
    todo = [p for p in paths if not v.did("read_file", path=p)]
    if not todo:
        return complete(f"Read {', '.join(paths)}.")
    return Decision(f"{verb} {', '.join(todo)}.", [Call("read_file", {"path": p}) for p in todo])
