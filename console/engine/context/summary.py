"""Layer 4: the deterministic previous-summary built at compaction.

Built only from recorded facts (archived todo lists, accomplishments, notes),
never from free text the model wrote in conversation, so the same state always
yields the same summary and nothing the agent must not forget can be
paraphrased away: what it must not forget lives in layer 2 anyway.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from console.engine.job_files import JobPaths
from console.engine.memory import WorkingMemory
from console.engine.messages import Message, ModelRequest
from console.engine.state import FileProblem, StateFileError, parse_model, quarantine, read_state_file
from console.engine.workspace import Workspace, latest_distinct

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
    # Its place among the run's archives (console.engine.todos); 0 in an archive from before it was recorded.
    archive_seq: int = 0
    note: str = ""
    # A rewind's archive of a list a transition had archived already (console.engine.todos.turn_into_rewind).
    list_archived_as: str = ""
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


def archived_phases(paths: JobPaths) -> list[dict[str, Any]]:
    """The archived todo lists, oldest first; a damaged archive is skipped (the summary is facts only)."""
    out: list[dict[str, Any]] = []
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


def _archived_at(a: dict[str, Any]) -> datetime | None:
    try:
        at = datetime.fromisoformat(str(a.get("archived_at")))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _phase_key(a: dict[str, Any]) -> tuple[str, str]:
    return str(a.get("phase_number", "?")), " ".join(str(a.get("phase_name") or a.get("kind", "")).lower().split())


def phase_history(archives: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[str]]]:
    """Each phase's todo lists as one entry, in the order the phases were first worked: the phase's latest archived
    list (its latest outcome) and the issues of the rewinds that sent it back before that list.

    A phase redone after a rewind has several archives (the list the rewind failed, the rewind's copy with its
    failure note, the redo); listed one by one they read as the phase done twice. The archives' names are chosen
    for uniqueness, not order (``-2`` sorts before ``-rewind``): the order is the one the state recorded as it named
    them, else (archives from before that was recorded) their times when every one says it, else their names'.
    """
    if all(isinstance(a.get("archive_seq"), int) and a["archive_seq"] > 0 for a in archives):
        archives = sorted(archives, key=lambda a: int(a["archive_seq"]))
    else:
        stamped = [(t, i, a) for i, a in enumerate(archives) if (t := _archived_at(a)) is not None]
        if len(stamped) == len(archives):
            archives = [a for _, _, a in sorted(stamped, key=lambda x: (x[0], x[1]))]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for a in archives:
        groups.setdefault(_phase_key(a), []).append(a)
    out = []
    for lists in groups.values():
        latest = lists[-1]
        rewinds = [str(a.get("note", "")).removeprefix("FAILED - rewind: ") for a in lists[:-1]
                   if a.get("transition") == "rewind"]
        out.append((latest, rewinds))
    return out


def build_summary(paths: JobPaths, workspace: Workspace, now: datetime, extra: list[str] | None = None,
                  memory: WorkingMemory | None = None) -> str:
    lines = [f"PREVIOUS SUMMARY (conversation compacted at {now.strftime('%Y-%m-%d %H:%M:%S')})", ""]
    phases = phase_history(archived_phases(paths))[-MAX_ARCHIVES:]
    if phases:
        lines.append("Completed todo lists (oldest first):")
        for a, rewinds in phases:
            items = a.get("items", [])
            done = sum(1 for i in items if i.get("done"))
            label = a.get("phase_name") or a.get("kind", "")
            note = f" - {a['note']}" if a.get("note") else ""
            if rewinds:
                again = "a rewind" if len(rewinds) == 1 else f"{len(rewinds)} rewinds"
                note += f" (redone after {again}: {rewinds[-1]})"
            lines.append(f"- Phase {a.get('phase_number', '?')} '{label}': {done}/{len(items)} tasks done{note}")
        lines.append("")
    rec = workspace.record
    if rec.accomplishments:
        lines.append("Accomplishments:")
        lines += [f"- {x}" for x in latest_distinct(rec.accomplishments)[-MAX_ITEMS:]]
        lines.append("")
    if rec.notes:
        lines.append("Notes:")
        lines += [f"- {x}" for x in latest_distinct(rec.notes)[-MAX_ITEMS:]]
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
