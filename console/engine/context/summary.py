"""Layer 4: the deterministic previous-summary built at compaction.

Built only from recorded facts (archived todo lists, accomplishments, notes),
never from free text the model wrote in conversation, so the same state always
yields the same summary and nothing the agent must not forget can be
paraphrased away: what it must not forget lives in layer 2 anyway.
"""

from __future__ import annotations

import os
from datetime import datetime

from pydantic import BaseModel, Field

from console.engine.job import JobPaths
from console.engine.memory import WorkingMemory
from console.engine.messages import Message, ModelRequest
from console.engine.state import FileProblem, StateFileError, parse_model, quarantine, read_state_file
from console.engine.workspace import Workspace

MAX_ARCHIVES = 12
MAX_ITEMS = 40


class ArchivedItem(BaseModel):
    text: str = ""
    done: bool = False


class ArchivedList(BaseModel):
    """An archive file as the summary reads it back: anything else in it is ignored."""

    phase_name: str = ""
    phase_number: int | str = "?"
    kind: str = ""
    transition: str = ""
    archived_at: str = ""
    note: str = ""
    items: list[ArchivedItem] = Field(default_factory=list)


def check_archives(paths: JobPaths, now: datetime) -> list[FileProblem]:
    """Move aside archives that cannot be read back (at start-up): the summary must not lose one silently."""
    problems: list[FileProblem] = []
    try:
        entries = sorted(os.scandir(paths.archive), key=lambda e: e.name)
    except OSError:
        return problems
    for e in entries:
        if not e.name.endswith(".json"):
            continue
        path = paths.archive / e.name
        try:
            data = read_state_file(path, max_bytes=4 * 2**20)
            if data is None:
                continue
            parse_model(ArchivedList, data)
        except StateFileError as exc:
            moved = quarantine(paths, path, now)
            problems.append(FileProblem(str(path.relative_to(paths.root)), str(exc),
                                        str(moved.relative_to(paths.root)) if moved else None))
    return problems


def archived_phases(paths: JobPaths) -> list[dict]:
    """The archived todo lists, oldest first; a damaged archive is skipped (the summary is facts only)."""
    out: list[dict] = []
    try:
        names = sorted(e.name for e in os.scandir(paths.archive) if e.name.endswith(".json"))
    except OSError:
        return out
    for name in names:
        try:
            data = read_state_file(paths.archive / name, max_bytes=4 * 2**20)
            if data is None:
                continue
            rec = parse_model(ArchivedList, data)
        except StateFileError:
            continue
        out.append({"file": name, **rec.model_dump()})
    return out


def build_summary(paths: JobPaths, workspace: Workspace, now: datetime, extra: list[str] | None = None,
                  memory: WorkingMemory | None = None) -> str:
    lines = [f"PREVIOUS SUMMARY (conversation compacted at {now.strftime('%Y-%m-%d %H:%M:%S')})", ""]
    archives = archived_phases(paths)[-MAX_ARCHIVES:]
    if archives:
        lines.append("Completed todo lists (oldest first):")
        for a in archives:
            items = a.get("items", [])
            done = sum(1 for i in items if i.get("done"))
            label = a.get("phase_name") or a.get("kind", "")
            note = f" - {a['note']}" if a.get("note") else ""
            lines.append(f"- Phase {a.get('phase_number', '?')} '{label}': {done}/{len(items)} tasks done{note}")
        lines.append("")
    rec = workspace.record
    if rec.accomplishments:
        lines.append("Accomplishments:")
        lines += [f"- {x}" for x in rec.accomplishments[-MAX_ITEMS:]]
        lines.append("")
    if rec.notes:
        lines.append("Notes:")
        lines += [f"- {x}" for x in rec.notes[-MAX_ITEMS:]]
        lines.append("")
    if memory is not None and memory.state.completed_tasks:
        tasks = memory.state.completed_tasks
        failed = [t for t in tasks if not t.success]
        lines.append(f"Tasks recorded in working memory: {len(tasks)} ({len(failed)} failed).")
        lines += [f"- {t.task_id}: {t.summary}" for t in failed[-5:]]
        lines.append("")
    lines += extra or []
    lines.append("Your results are in the workspace files; workspace_summary.md lists them. "
                 "Continue with the ACTIVE TODO LIST.")
    return "\n".join(lines).rstrip() + "\n"


def summary_message(text: str) -> Message:
    return Message.user(text, kind="summary")


LLM_SUMMARY_SYSTEM = """\
SUMMARIZE: you compress the working conversation of an autonomous agent so it can continue after its \
context is cleared. Write a compact summary (at most 300 words) of what was done, what was found, decisions \
and open problems, with file names. Do not restate the todo list or the plan: the agent keeps those."""

LLM_SUMMARY_REQUEST = "Summarize the conversation above for the agent's previous-summary layer."


def llm_summary_request(conversation: list[Message], max_tokens: int = 800) -> ModelRequest:
    return ModelRequest(system=LLM_SUMMARY_SYSTEM, messages=[*conversation, Message.user(LLM_SUMMARY_REQUEST)],
                        tools=[], protected="", max_output_tokens=max_tokens)
