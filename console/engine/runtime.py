"""Runtime: the engine services one job run shares (paths, state managers, events, clock).

Tools receive a Runtime and act through its methods, so every side effect of a
tool (a plan written, a summary generated, a job completed) also produces its
event in one place.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from console.engine import events as ev
from console.engine.atomic import atomic_write_text
from console.engine.clock import Clock
from console.engine.job import JobPaths
from console.engine.memory import WorkingMemory
from console.engine.messages import Message
from console.engine.phases import PhaseTransitionManager
from console.engine.plan import Plan, PlanError, load_plan
from console.engine.store import JobStore
from console.engine.todos import TodoManager
from console.engine.workspace import Workspace


@dataclass
class JobOutcome:
    summary: str
    deliverables: list[str]
    confidence: float
    notes: str


@dataclass
class Runtime:
    paths: JobPaths
    clock: Clock
    events: ev.EventStream
    store: JobStore | None = None
    todos: TodoManager = field(init=False)
    workspace: Workspace = field(init=False)
    memory: WorkingMemory = field(init=False)
    phases: PhaseTransitionManager = field(init=False)
    # Messages to add to the conversation after this turn's tool results (transition prompts).
    notices: list[Message] = field(default_factory=list)
    compaction_reason: str | None = None
    outcome: JobOutcome | None = None
    # The most one tool result may put into the context (set from the window by the loop): a single
    # observation larger than the window would otherwise force restart after restart.
    observation_chars: int = 60_000

    def __post_init__(self) -> None:
        self.paths.state.mkdir(parents=True, exist_ok=True)
        if self.paths.outcome.exists():
            data = json.loads(self.paths.outcome.read_text(encoding="utf-8"))
            self.outcome = JobOutcome(data["summary"], data["deliverables"], data["confidence"], data["notes"])
        self.todos = TodoManager(self.paths.todos, self.paths.archive)
        self.workspace = Workspace(self.paths)
        self.memory = WorkingMemory(self.paths.memory, self.events)
        self.phases = PhaseTransitionManager(self)

    @property
    def job_done(self) -> bool:
        return self.outcome is not None

    # -- hooks used by tools and the phase manager ---------------------------------
    def inject_notice(self, text: str, kind: str) -> None:
        self.notices.append(Message.user(text, kind=kind))

    def take_notices(self) -> list[Message]:
        out, self.notices = self.notices, []
        return out

    def request_compaction(self, reason: str) -> None:
        self.compaction_reason = reason

    def generate_workspace_summary(self) -> Path:
        return self.workspace.generate_summary(self.clock.now(), self.todos.state, self.blockers())

    def blockers(self) -> list[str]:
        return [f"{b.task}: {b.reason}" for b in self.memory.active_blockers]

    def add_blocker(self, issue: str) -> None:
        """A rewind: the current task failed for ``issue`` and stays a blocker until a phase completes."""
        current = self.todos.current
        now = self.clock.now()
        if current is not None:
            self.memory.record(current.text, now, success=False, reason=issue)
        task = current.text if current is not None else f"phase '{self.todos.state.phase_name or 'transition'}'"
        self.memory.block(task, issue, now)
        self.workspace.add_note(f"Rewind: {issue}")

    def on_task_completed(self, text: str) -> None:
        self.memory.record(text, self.clock.now())

    def on_phase_completed(self) -> None:
        self.memory.resolve_blockers(self.clock.now())

    def write_plan(self, plan: Plan, reason: str) -> None:
        atomic_write_text(self.paths.main_plan, plan.render())
        self._plan_changed(reason)

    def after_file_write(self, path: Path) -> str:
        """Called by the file tools after a write; returns text to add to the tool result."""
        if path.resolve() != self.paths.main_plan.resolve():
            return ""
        problem = self._plan_changed("agent edit")
        if problem:
            return f" Warning: {problem}"
        return ""

    def _plan_changed(self, reason: str) -> str | None:
        try:
            plan = load_plan(self.paths.main_plan)
        except PlanError as exc:
            self.events.emit(ev.PlanChanged, error=str(exc))
            self.events.emit(ev.ErrorEvent, message=f"main_plan.md: {exc}", where="plan", recoverable=True)
            return str(exc)
        cur = plan.current_phase()
        self.events.emit(
            ev.PlanChanged,
            phases=len(plan.phases),
            complete=sum(1 for p in plan.phases if p.complete),
            current=cur.name if cur else None,
        )
        return None

    def complete_job(self, summary: str, deliverables: list[str], confidence: float, notes: str) -> None:
        st = self.todos.state
        # job_complete is itself the last todo: mark it rather than expect a todo_complete after the end.
        for item in st.items:
            if not item.done and "job_complete" in item.text.lower():
                item.done = True
                item.completed_at = self.clock.now()
                self.todos.save()
                self.phases.publish_todos("job_complete")
                break
        self.outcome = JobOutcome(summary, deliverables, confidence, notes)
        now = self.clock.now()
        # The commit point of the whole job, written before anything announces it.
        atomic_write_text(self.paths.outcome, json.dumps({**asdict(self.outcome), "completed_at": now.isoformat()}))
        self.events.emit(ev.JobCompleted, summary=summary, deliverables=deliverables, confidence=confidence,
                         notes=notes)
        if self.store is not None:
            self.store.completed(self.paths.root, now, confidence, summary)
