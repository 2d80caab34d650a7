"""Working memory (seed 003): recent tasks by intent, and active blockers.

The last five completed tasks and every active blocker are rendered into the
protected part of each prompt, so an agent always knows where it came from,
even right after a compaction or a restart. The in-memory list is capped at
100 records; events.jsonl keeps the full history. Like the todo list, the
memory is a component of the run's harness state, recorded by the journal
commit of the step that changed it (so a todo completion and its memory record
are one atomic record).

Seed 003's goal and queue stay conditional, as its buildMinimalState keeps them ("Include goal if relevant",
"Include queue if temporal references"): the job's goal (instructions.md, the start of it) only when the current
task speaks of the goal, and the previous task only when the current one refers back (previous, last task,
earlier). Each blocker says when it was blocked (seed 003's ``blocked_at``).

Seed 003's ``requires_context`` toggle (job.toml ``[context]``, on by default here,
off in the seed) only decides whether the prompts carry the block (the protected
layer and the compaction summary). Records are captured either way, unlike the
seed (which captures only when on), because the harness relies on them whatever
the prompts show: the task counter (``next_id``) is how a restart loop and a turn
without progress are told apart from work, the blockers go into
workspace_summary.md, and a run resumed with the toggle on finds its history.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from console.engine.todos import NullSink, StateSink

if TYPE_CHECKING:
    from console.engine.events import EventStream

MAX_RECENT_TASKS = 100
INTENT_CHARS = 200  # of an intent, in the prompt's block
REASON_CHARS = 300  # of a blocker's reason (a rewind's issue may be 4,000)
RECENT_IN_PROMPT = 5
SUMMARY_CHARS = 60
GOAL_CHARS = 600  # of instructions.md, in the goal line: the start says what the job is; the file has the rest
# Seed 003's buildMinimalState: the goal "if relevant" (the task mentions it), the queue "if temporal references".
GOAL_WORDS = ("goal",)
QUEUE_WORDS = ("previous", "last task", "earlier")


def mentions_goal(task: str) -> bool:
    low = task.lower()
    return any(w in low for w in GOAL_WORDS)


def refers_back(task: str) -> bool:
    low = task.lower()
    return any(w in low for w in QUEUE_WORDS)


class CompletedTask(BaseModel):
    task_id: str
    completed_at: datetime
    # Optional so that records written before intents existed still load (backfilled on load).
    intent: str | None = None
    summary: str | None = None
    success: bool = True


class Blocker(BaseModel):
    task_id: str
    task: str
    reason: str
    # When it was blocked (seed 003's active_blockers carry it); None in a record written without it.
    blocked_at: datetime | None = None
    resolved_at: datetime | None = None


class MemoryState(BaseModel):
    completed_tasks: list[CompletedTask] = Field(default_factory=list)
    blockers: list[Blocker] = Field(default_factory=list)
    next_id: int = 1


def task_summary(intent: str, success: bool, reason: str | None = None) -> str:
    """Deterministic: no model, only the first sentence of the intent (or the failure reason)."""
    if not success:
        return f"Failed: {reason or 'Unknown reason'}"
    # A sentence ends at a period followed by a space or the end: "docs/spec.md" is not a sentence end.
    first = re.split(r"\.(?:\s|$)", intent.strip()[:2000], maxsplit=1)[0].strip()
    if len(first) > SUMMARY_CHARS:
        first = first[:SUMMARY_CHARS] + "..."
    return f"Completed: {first}"


class WorkingMemory:
    def __init__(self, state: MemoryState | None = None, events: EventStream | None = None,
                 sink: StateSink | None = None) -> None:
        self.events = events
        self.sink: StateSink = sink or NullSink()
        self._rendered: str | None = None
        self._block: tuple[str, str | None, str] | None = None  # (task, goal, block): prompt_block's last
        self.state = state or MemoryState()
        self._backfill()

    def _backfill(self) -> None:
        changed = 0
        for t in self.state.completed_tasks:
            if not t.intent:
                t.intent = f"[Legacy] {t.task_id}"
                changed += 1
        if changed:
            self._log("memory_backfilled", count=changed)
            self.save()

    def _log(self, what: str, **fields: object) -> None:
        if self.events is not None:
            from console.engine import events as ev

            self.events.emit(ev.MemoryUpdated, what=what, detail=fields)

    def save(self) -> None:
        self._rendered = None
        self._block = None
        self.sink.changed("memory")

    def _new_id(self) -> str:
        n = self.state.next_id
        self.state.next_id += 1
        return f"task-{n:04d}"

    def record(self, intent: str, now: datetime, success: bool = True, reason: str | None = None) -> CompletedTask:
        rec = CompletedTask(task_id=self._new_id(), completed_at=now, intent=intent,
                            summary=task_summary(intent, success, reason), success=success)
        self.state.completed_tasks.append(rec)
        self._prune()
        self.save()
        self._log("task_recorded", task_id=rec.task_id, intent=intent, summary=rec.summary, success=success)
        return rec

    def _prune(self) -> None:
        tasks = self.state.completed_tasks
        if len(tasks) <= MAX_RECENT_TASKS:
            return
        removed = len(tasks) - MAX_RECENT_TASKS
        self.state.completed_tasks = tasks[-MAX_RECENT_TASKS:]
        self._log("pruned", total=len(tasks), kept=MAX_RECENT_TASKS, removed=removed, max_cap=MAX_RECENT_TASKS)

    def block(self, task: str, reason: str, now: datetime) -> Blocker:
        b = Blocker(task_id=self._new_id(), task=task, reason=reason, blocked_at=now)
        self.state.blockers.append(b)
        self.save()
        self._log("blocker_added", task_id=b.task_id, task=task, reason=reason)
        return b

    def resolve_blockers(self, now: datetime) -> int:
        n = 0
        for b in self.state.blockers:
            if b.resolved_at is None:
                b.resolved_at = now
                n += 1
        if n:
            self.save()
            self._log("blockers_resolved", count=n)
        return n

    @property
    def active_blockers(self) -> list[Blocker]:
        return [b for b in self.state.blockers if b.resolved_at is None]

    def recent(self, n: int = RECENT_IN_PROMPT) -> list[CompletedTask]:
        return self.state.completed_tasks[-n:]

    def render(self) -> str:
        if self._rendered is None:
            self._rendered = self._render()
        return self._rendered

    def prompt_block(self, task: str | None, goal: Callable[[], str | None]) -> str:
        """The block a prompt carries while ``task`` is the current todo: the recent tasks and the active blockers
        always; the job's goal (``goal()``: instructions.md's text, asked only then) when the task mentions the
        goal, and the previous task when it refers back (seed 003's conditional goal and queue)."""
        if not task:
            return self.render()
        wants_goal = mentions_goal(task)
        wants_queue = refers_back(task) and bool(self.state.completed_tasks)
        if not (wants_goal or wants_queue):
            return self.render()
        text = goal() if wants_goal else None
        if self._block is not None and self._block[:2] == (task, text):
            return self._block[2]
        lines = []
        if text is not None and (said := " ".join(text.split())):
            lines.append(f"Goal (instructions.md): {_cut(said, GOAL_CHARS)}"
                         + (" [the rest is in instructions.md]" if len(said) > GOAL_CHARS else ""))
        if wants_queue:
            last = self.state.completed_tasks[-1]
            lines.append(f"Previous task: {last.task_id} \"{_cut(last.intent or '')}\" - {_cut(last.summary or '')}")
        base = self.render()
        if not lines:
            return base
        _, _, rest = base.partition("\n")
        block = "\n".join(["WORKING MEMORY", *lines, *([rest] if rest else [])])
        self._block = (task, text, block)
        return block

    def _render(self) -> str:
        recent = self.recent()
        blockers = self.active_blockers
        if not recent and not blockers:
            return ""
        # Seed 003's content (task, intent, when, success; blockers, when and why) in as few tokens as it can be
        # said: the block is in every prompt (seed 003's gate: the prompt grows under 5%). An intent or a reason
        # longer than a line is cut here; the state and the log keep it whole.
        out = ["WORKING MEMORY"]
        if recent:
            out.append("Recent Task History (newest last):")
            for i, t in enumerate(recent, 1):
                mark = "✓" if t.success else f"✗ failed: {_cut(t.summary or '', REASON_CHARS)}"
                out.append(f"{i}. {t.task_id} {t.completed_at.strftime('%H:%M')} {mark} \"{_cut(t.intent or '')}\"")
        if blockers:
            out.append("Active Blockers:")
            out += [f"- {b.task_id}{_blocked_at(b)}: \"{_cut(b.task)}\" - Reason: {_cut(b.reason, REASON_CHARS)}"
                    for b in blockers]
        return "\n".join(out)


def _blocked_at(b: Blocker) -> str:
    return "" if b.blocked_at is None else f" blocked {b.blocked_at.strftime('%H:%M')}"


def _cut(text: str, limit: int = INTENT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."
