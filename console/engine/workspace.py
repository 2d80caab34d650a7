"""workspace_summary.md, accomplishments and notes (seed 000).

The summary is the agent's memory of the workspace between phases, so it is
generated from facts only: the files on disk (seen through the sandbox, so a
symlink out of the job, a named pipe or a hard link never shows up or hangs
it), the accomplishments and notes the agent recorded, and the todo state.
The record is a component of the run's harness state; the summary file is an
effect written after the commit that produced it.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from console.engine.job_files import JobPaths
from console.engine.text import safe_text
from console.engine.todos import NullSink, StateSink, TodoState, phase_label

if TYPE_CHECKING:
    from console.engine.sandbox import FileInfo, Sandbox

KNOWN_PURPOSES = {
    "main_plan.md": "Execution plan",
    "instructions.md": "Task instructions",
    "workspace_summary.md": "Workspace summary",
    "job.toml": "Job configuration",
    "SYSTEM_PROMPT.md": "System prompt override",
    "experiences.md": "Failed approaches, lessons, patterns (kept by the harness)",
}
DOCS_PURPOSE = "Tool docs, one file per tool (kept by the harness, read-only)"
MAX_FILES_LISTED = 200
HEADING_BYTES = 4096

SUMMARY_FILE = "workspace_summary.md"


def latest_distinct(entries: list[str]) -> list[str]:
    """Each text once, where it was last recorded, with how many times it was: a phase redone after a rewind
    records its notes again, word for word (the same task done the same way), and listing both reads as the phase
    done twice."""
    last = {text: i for i, text in enumerate(entries)}
    times = Counter(entries)
    return [text + (f" (recorded {times[text]} times)" if times[text] > 1 else "")
            for i, text in enumerate(entries) if last[text] == i]


class WorkspaceRecord(BaseModel):
    accomplishments: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class Workspace:
    def __init__(self, paths: JobPaths, sandbox: Sandbox, record: WorkspaceRecord | None = None,
                 sink: StateSink | None = None) -> None:
        self.paths = paths
        self.sandbox = sandbox
        self.sink: StateSink = sink or NullSink()
        self.record = record or WorkspaceRecord()
        # The folder of the tool docs the harness keeps (console.engine.tools.docs_folder): one row, not a file each.
        self.docs_folder: str | None = None

    def add_accomplishment(self, text: str) -> int:
        self.record.accomplishments.append(text.strip())
        self.sink.changed("workspace")
        return len(self.record.accomplishments)

    def add_note(self, text: str) -> int:
        self.record.notes.append(text.strip())
        self.sink.changed("workspace")
        return len(self.record.notes)

    def files(self) -> list[FileInfo]:
        return self.sandbox.walk(".", limit=MAX_FILES_LISTED, hidden_files=False)

    def purpose(self, f: FileInfo) -> str:
        if f.rel in KNOWN_PURPOSES:
            return KNOWN_PURPOSES[f.rel]
        suffix = f.rel.rsplit(".", 1)[-1].lower() if "." in f.rel.rsplit("/", 1)[-1] else ""
        if suffix in {"md", "txt"}:
            # The first heading is the author's own statement of what the file is.
            try:
                head = self.sandbox.read_head(f.rel, HEADING_BYTES).decode("utf-8", "replace")
            except Exception:  # a file that changed under us: it is listed, just without a purpose
                return "Document"
            for line in head.splitlines()[:20]:
                if line.startswith("#"):
                    return line.lstrip("#").strip()[:60] or "Document"
            return "Document"
        return {"json": "JSON data", "csv": "CSV data", "py": "Python source", "toml": "Configuration"}.get(
            suffix, "File"
        )

    def render_summary(self, now: datetime, todos: TodoState, blockers: list[str] | None = None) -> str:
        out = ["# Workspace Summary", "", f"Generated: {now.strftime('%Y-%m-%d %H:%M:%S')}", ""]
        out += ["## Files", "", "| File | Purpose | Last Modified |", "|------|---------|---------------|"]
        docs = f"{self.docs_folder}/" if self.docs_folder else None
        docs_listed = False
        for f in self.files():
            mtime = datetime.fromtimestamp(f.mtime, tz=now.tzinfo).strftime("%H:%M")
            if docs is not None and f.rel.startswith(docs):
                if not docs_listed:
                    out.append(f"| {docs} | {DOCS_PURPOSE} | {mtime} |")
                    docs_listed = True
                continue
            # A name or heading is the job's or the agent's text: its control characters shown, never sent raw to
            # whoever cats the file in a terminal (a file named with an ESC sequence).
            out.append(f"| {_cell(f.rel)} | {_cell(self.purpose(f))} | {mtime} |")
        out += ["", "## Accomplishments"]
        out += [f"- {_line(a)}" for a in latest_distinct(self.record.accomplishments)] or ["- (none recorded yet)"]
        out += ["", "## Current State"]
        if todos.pending is not None:
            p = todos.pending
            out.append(f"- Phase transition in progress after phase {p.from_phase} '{_line(p.from_name)}' ({p.kind})")
            if p.issue:
                out.append(f"- Issue to address: {_line(p.issue)}")
        else:
            out.append(f"- Working on Phase: {_line(phase_label(todos))}")
            out.append(f"- {todos.done_count} of {len(todos.items)} tasks complete in current phase")
        if blockers:
            out += [f"- Blocked: {_line(b)}" for b in blockers]
        else:
            out.append("- No blocking issues")
        out += ["", "## Notes"]
        out += [f"- {_line(n)}" for n in latest_distinct(self.record.notes)] or ["- (none)"]
        return "\n".join(out) + "\n"

    def generate_summary(self, now: datetime, todos: TodoState, blockers: list[str] | None = None) -> str:
        """workspace_summary.md's new text; the file is written after the step's commit."""
        text = self.render_summary(now, todos, blockers)
        self.sink.effect(SUMMARY_FILE, text)
        return text


def _line(text: str) -> str:
    """Text of the agent's or the job's on one line of the summary, its control characters shown (safe_text)."""
    return safe_text(text, one_line=True, join=True)


def _cell(text: str) -> str:
    """The same in a cell of the files' table, whose separator it may not hold."""
    return _line(text).replace("|", "/")
