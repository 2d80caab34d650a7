"""workspace_summary.md, accomplishments and notes (seed 000).

The summary is the agent's memory of the workspace between phases, so it is
generated from facts only: the files on disk, the accomplishments and notes
the agent recorded, and the todo state.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from console.engine.atomic import atomic_write_json, atomic_write_text
from console.engine.job import STATE_DIR, JobPaths, within
from console.engine.todos import TodoState, phase_label

KNOWN_PURPOSES = {
    "main_plan.md": "Execution plan",
    "instructions.md": "Task instructions",
    "workspace_summary.md": "Workspace summary",
    "job.toml": "Job configuration",
    "SYSTEM_PROMPT.md": "System prompt override",
    "experiences.md": "Lessons learned",
}
MAX_FILES_LISTED = 200


class WorkspaceRecord(BaseModel):
    accomplishments: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class Workspace:
    def __init__(self, paths: JobPaths) -> None:
        self.paths = paths
        self.record = WorkspaceRecord()
        if paths.workspace.exists():
            self.record = WorkspaceRecord.model_validate_json(paths.workspace.read_text(encoding="utf-8"))

    def _save(self) -> None:
        atomic_write_json(self.paths.workspace, json.loads(self.record.model_dump_json()))

    def add_accomplishment(self, text: str) -> int:
        self.record.accomplishments.append(text.strip())
        self._save()
        return len(self.record.accomplishments)

    def add_note(self, text: str) -> int:
        self.record.notes.append(text.strip())
        self._save()
        return len(self.record.notes)

    def files(self) -> list[Path]:
        root_real = self.paths.root.resolve()
        found: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(self.paths.root):
            dirnames[:] = sorted(d for d in dirnames if d.lower() != STATE_DIR and not d.startswith("."))
            for f in sorted(filenames):
                p = Path(dirpath) / f
                if f.startswith(".") or (p.is_symlink() and not within(root_real, p)):
                    continue
                found.append(p)
                if len(found) >= MAX_FILES_LISTED:
                    return found
        return found

    def purpose(self, path: Path) -> str:
        rel = path.relative_to(self.paths.root).as_posix()
        if rel in KNOWN_PURPOSES:
            return KNOWN_PURPOSES[rel]
        if path.suffix.lower() in {".md", ".txt"}:
            # The first heading is the author's own statement of what the file is.
            try:
                with path.open("r", encoding="utf-8", errors="replace") as fh:
                    for _ in range(20):
                        line = fh.readline()
                        if not line:
                            break
                        if line.startswith("#"):
                            return line.lstrip("#").strip()[:60] or "Document"
            except OSError:
                pass
            return "Document"
        return {".json": "JSON data", ".csv": "CSV data", ".py": "Python source", ".toml": "Configuration"}.get(
            path.suffix.lower(), "File"
        )

    def render_summary(self, now: datetime, todos: TodoState, blockers: list[str] | None = None) -> str:
        out = ["# Workspace Summary", "", f"Generated: {now.strftime('%Y-%m-%d %H:%M:%S')}", ""]
        out += ["## Files", "", "| File | Purpose | Last Modified |", "|------|---------|---------------|"]
        for f in self.files():
            rel = f.relative_to(self.paths.root).as_posix()
            try:
                mtime = datetime.fromtimestamp(f.stat().st_mtime, tz=now.tzinfo).strftime("%H:%M")
            except OSError:
                continue
            out.append(f"| {rel} | {self.purpose(f).replace('|', '/')} | {mtime} |")
        out += ["", "## Accomplishments"]
        out += [f"- {a}" for a in self.record.accomplishments] or ["- (none recorded yet)"]
        out += ["", "## Current State"]
        if todos.pending is not None:
            p = todos.pending
            out.append(f"- Phase transition in progress after phase {p.from_phase} '{p.from_name}' ({p.kind})")
            if p.issue:
                out.append(f"- Issue to address: {p.issue}")
        else:
            out.append(f"- Working on Phase: {phase_label(todos)}")
            out.append(f"- {todos.done_count} of {len(todos.items)} tasks complete in current phase")
        if blockers:
            out += [f"- Blocked: {b}" for b in blockers]
        else:
            out.append("- No blocking issues")
        out += ["", "## Notes"]
        out += [f"- {n}" for n in self.record.notes] or ["- (none)"]
        return "\n".join(out) + "\n"

    def generate_summary(self, now: datetime, todos: TodoState, blockers: list[str] | None = None) -> Path:
        atomic_write_text(self.paths.workspace_summary, self.render_summary(now, todos, blockers))
        return self.paths.workspace_summary
