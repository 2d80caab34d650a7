"""The tactical tier: the active todo list (Layer 2) and its archive.

The todo state is one component of the run's harness state: every mutation is
reported to the run (``sink.changed``) and recorded by the step's journal
commit, so marking the last task done, opening the transition and archiving
the list land in one atomic record. The archive file itself is an effect of
that record (``sink.effect``), written after it under a name chosen from the
state, never from what happens to be on disk, so a redo writes the same file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from console.engine import evidence

TodoKind = Literal["bootstrap", "phase", "completion", "empty"]
TransitionKind = Literal["bootstrap", "phase", "rewind", "reset", "checkpoint"]

WIDTH = 67
HEAVY = "═" * WIDTH
LIGHT = "─" * WIDTH
LAYER2_TITLE = "ACTIVE TODO LIST"
CURRENT_MARKER = "      ← CURRENT"


class TodoItem(BaseModel):
    text: str
    done: bool = False
    completed_at: datetime | None = None
    # The evidence keys (console.engine.evidence) the record held for it when todo_complete completed it ([]: it
    # needed none, or it was kept done from a list the harness archived, or what it lacked is owed). None on a
    # done task: marked done by something other than todo_complete (a state from before the rule, an edit).
    proof: list[str] | None = None


class OwedTask(BaseModel):
    """A task marked done without the evidence its text names (a run from before the evidence rule, or a state
    edited by hand): the job is not complete until the record holds ``keys`` (each settled as it arrives)."""

    text: str
    keys: list[str] = Field(default_factory=list)


class ClosedPhase(BaseModel):
    """A plan phase the harness closed (seed 000's record of the work, never the agent's checkboxes): its todo
    list completed task by task through todo_complete, then a phase transition the harness ran, or the final
    phase's "Call job_complete()" done by job_complete itself."""

    name: str
    number: int = 0
    tasks: int = 0  # the tasks of its list, each completed through the harness's tools
    closed_at: datetime
    by: Literal["transition", "job_complete", "archive"] = "transition"  # archive: read back from an older run


class PendingTransition(BaseModel):
    """A phase transition that has started and waits for the agent's new todo list."""

    kind: TransitionKind
    from_phase: int
    from_name: str
    # The kind of the list this transition archived (a checkpoint during bootstrap is refused).
    from_kind: str = "phase"
    archive: str
    issue: str | None = None
    started_at: datetime
    # Unfinished todos carried into the next list (forced checkpoints keep them).
    carried: list[str] = Field(default_factory=list)
    # The archived list's tasks completed through todo_complete: the next list may say they are done (a
    # checkpoint's or a rewind's list keeps what was done); any other task it marks done stays open.
    done_before: list[str] = Field(default_factory=list)


class TodoState(BaseModel):
    kind: TodoKind = "empty"
    phase_name: str = ""
    phase_number: int = 0
    total_phases: int = 0
    items: list[TodoItem] = Field(default_factory=list)
    pending: PendingTransition | None = None
    # Archive written but items not yet cleared (crash window); see TodoManager.recover.
    archived: bool = False
    # Counts todo lists installed so far; lets the display and archives stay unique.
    generation: int = 0
    # Archive base name -> how many archives have used it (names come from the state, not the disk).
    archive_counts: dict[str, int] = Field(default_factory=dict)
    # The plan phases the harness closed, in order (console.engine.record). None: a state written before this
    # record was kept; it is read back from the harness's archives when the run resumes.
    closed: list[ClosedPhase] | None = None
    # The evidence keys of this phase's successful tool calls (console.engine.evidence): emptied when a
    # transition archives a list, so the calls of a transition count for the list it installs.
    evidence: list[str] = Field(default_factory=list)
    # Tasks marked done without their evidence, still owed. None: a state from before the evidence rule, judged
    # when the run resumes (console.engine.evidence.judge).
    owed: list[OwedTask] | None = None

    @property
    def current_index(self) -> int | None:
        for i, item in enumerate(self.items):
            if not item.done:
                return i
        return None

    @property
    def done_count(self) -> int:
        return sum(1 for i in self.items if i.done)


class StateSink(Protocol):
    """Where the state managers report a change of their component, and files to write after the commit."""

    def changed(self, component: str) -> None: ...

    def effect(self, path: str, content: str) -> None: ...


class NullSink:
    """For a manager used on its own (tests, tools that only render)."""

    def changed(self, component: str) -> None:
        pass

    def effect(self, path: str, content: str) -> None:
        pass


def slug(text: str, limit: int = 40) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text[:400].lower()).strip("-")
    return (s[:limit].rstrip("-")) or "phase"


def phase_label(state: TodoState) -> str:
    if state.kind == "bootstrap":
        return "Bootstrap (before phase 1)"
    if state.kind == "completion":
        return f"{state.phase_name} (after phase {state.total_phases} of {state.total_phases})"
    if state.phase_number and state.total_phases:
        return f"{state.phase_name} ({state.phase_number} of {state.total_phases})"
    return state.phase_name or "(no phase yet)"


def render_layer2(state: TodoState) -> str:
    """The Layer 2 display, in exactly the format of seed 000."""
    out = [HEAVY, f"{LAYER2_TITLE:^{WIDTH}}".rstrip(), HEAVY, ""]
    if state.pending is not None:
        p = state.pending
        what = {
            "rewind": f"Rewind of phase {p.from_phase} '{p.from_name}'",
            "checkpoint": f"Checkpoint of phase {p.from_phase} '{p.from_name}'",
            "reset": f"Reset of phase {p.from_phase} '{p.from_name}'",
            "bootstrap": "Bootstrap complete",
        }.get(p.kind, f"Phase {p.from_phase} '{p.from_name}' complete")
        out += [f"Phase: {what} - transition in progress", ""]
        out += ["(no active todos: the next todo list has not been written yet)", ""]
        out += [LIGHT]
        out += [
            "INSTRUCTION: Read main_plan.md, instructions.md and workspace_summary.md,",
            "update main_plan.md, then call todo_write with the next phase's steps",
        ]
        out += [HEAVY]
        return "\n".join(out)
    out += [f"Phase: {phase_label(state)}", ""]
    cur = state.current_index
    if not state.items:
        out += ["(no todos)", ""]
    for i, item in enumerate(state.items):
        line = f"[{'x' if item.done else ' '}] {i + 1}. {item.text}"
        if i == cur:
            line += CURRENT_MARKER
        out.append(line)
    out += ["", f"Progress: {state.done_count}/{len(state.items)} tasks complete", "", LIGHT]
    if cur is None and state.kind == "completion":
        out.append("INSTRUCTION: All tasks are complete. Call job_complete() to finish the job")
    elif cur is None:
        out.append("INSTRUCTION: All tasks are complete. Call todo_write to add the next tasks")
    else:
        out.append(f"INSTRUCTION: Complete task {cur + 1}, then call todo_complete()")
    out.append(HEAVY)
    return "\n".join(out)


ARCHIVE_DIR = ".console/archive"


def _items(texts: list[str], done: list[bool]) -> list[TodoItem]:
    # A task kept done was completed through todo_complete (with its evidence) in a list the harness archived.
    return [TodoItem(text=t, done=d, proof=[] if d else None) for t, d in zip(texts, done, strict=True)]


class TodoManager:
    """Owns the todo state. Every mutation is reported to the sink before it returns."""

    def __init__(self, state: TodoState | None = None, sink: StateSink | None = None) -> None:
        self.sink: StateSink = sink or NullSink()
        self._rendered: str | None = None
        self.state = state or TodoState()
        self.recover()

    @property
    def exists(self) -> bool:
        """A todo list was ever installed (a job past its very start)."""
        return self.state.generation > 0 or self.state.kind != "empty" or self.state.pending is not None

    def save(self) -> None:
        self._rendered = None
        self.sink.changed("todos")

    # -- reading ---------------------------------------------------------------
    def render(self) -> str:
        # Rendered every turn, changed a few times per phase: every mutation goes through save().
        if self._rendered is None:
            self._rendered = render_layer2(self.state)
        return self._rendered

    @property
    def current(self) -> TodoItem | None:
        i = self.state.current_index
        return None if i is None else self.state.items[i]

    @property
    def remaining(self) -> int:
        return len(self.state.items) - self.state.done_count

    # -- writing ---------------------------------------------------------------
    def install(
        self,
        texts: list[str],
        *,
        kind: TodoKind,
        phase_name: str,
        phase_number: int,
        total_phases: int,
        done: list[bool] | None = None,
    ) -> None:
        done = done or [False] * len(texts)
        self.state = TodoState(
            kind=kind,
            phase_name=phase_name,
            phase_number=phase_number,
            total_phases=total_phases,
            # Done only where the caller verified it was completed through todo_complete (PhaseTransitionManager).
            items=_items(texts, done),
            generation=self.state.generation + 1,
            archive_counts=self.state.archive_counts,
            # A new run's record starts empty; an older run's (None) waits for its archives to be read back.
            closed=self.state.closed if self.state.generation else [],
            # The phase's evidence so far (the transition's calls), and what older ticks still owe.
            evidence=self.state.evidence,
            owed=self.state.owed if self.state.generation else [],
        )
        self.save()

    def replace_items(self, texts: list[str], done: list[bool]) -> None:
        self.state.items = _items(texts, done)
        self.save()

    def complete_current(self, now: datetime, proof: list[str] | None = None) -> tuple[int, TodoItem] | None:
        i = self.state.current_index
        if i is None:
            return None
        item = self.state.items[i]
        item.done = True
        item.completed_at = now
        item.proof = list(proof or [])
        self.save()
        return i, item

    def add_evidence(self, keys: list[str]) -> None:
        """A successful tool call's evidence keys, recorded with the call's step; settles what older ticks owe."""
        st = self.state
        changed = evidence.add(st.evidence, keys)
        if st.owed:
            settled = [o.model_copy(update={"keys": [k for k in o.keys if k not in keys]}) for o in st.owed]
            if [o.keys for o in settled] != [o.keys for o in st.owed]:
                st.owed = [o for o in settled if o.keys]
                changed = True
        if changed:
            self.save()

    def judge(self, needs_of: Callable[[str], list[evidence.Need]], archived_done: Iterable[str]) -> list[OwedTask]:
        """What the record owes for tasks marked done without todo_complete's evidence check: on a state from
        before the rule (``owed`` None), every done task of the archived lists (``archived_done``, their texts)
        and of the current one; on any state, a current task marked done by something other than todo_complete.
        Each becomes owed (the job is not complete until the calls it names are made). Returns the new ones."""
        st = self.state
        new: list[OwedTask] = []
        owed = list(st.owed or [])
        known = {o.text for o in owed}
        texts = list(archived_done) if st.owed is None else []
        changed = st.owed is None
        for item in st.items:
            if item.done and item.proof is None:
                texts.append(item.text)
                item.proof = []
                changed = True
        for text in texts:
            gaps = evidence.missing(needs_of(text), st.evidence)
            if gaps and text not in known:
                known.add(text)
                new.append(OwedTask(text=text, keys=[n.key for n in gaps]))
        if changed:
            st.owed = owed + new
            self.save()
        return new

    def begin_transition(
        self,
        kind: TransitionKind,
        now: datetime,
        *,
        issue: str | None = None,
        mark_current_done: bool = False,
        proof: list[str] | None = None,
    ) -> tuple[PendingTransition, TodoState]:
        """Open a transition and archive the list: one state change, the archive file its effect.

        Returns the transition and the list as it was archived.
        """
        st = self.state
        if mark_current_done and (i := st.current_index) is not None:
            st.items[i].done = True
            st.items[i].completed_at = now
            st.items[i].proof = list(proof or [])
        carried = [it.text for it in st.items if not it.done] if kind == "checkpoint" else []
        archived = st.model_copy(update={"pending": None, "items": [i.model_copy() for i in st.items]})
        if kind == "phase" and st.kind == "phase":
            # The list was completed task by task (todo_write never marks a new task done): the phase is closed,
            # in the same change as the transition it opens (saved once, below).
            st.closed = [*(st.closed or []), ClosedPhase(name=st.phase_name, number=st.phase_number,
                                                         tasks=len(st.items), closed_at=now, by="transition")]
        st.pending = PendingTransition(
            kind=kind,
            from_phase=st.phase_number,
            from_name=st.phase_name or st.kind,
            from_kind=st.kind,
            archive=self._archive_name(kind),
            issue=issue,
            started_at=now,
            carried=carried,
            done_before=[it.text for it in st.items if it.done],
        )
        st.archived = False
        if kind != "checkpoint":
            # A new phase's evidence starts here (a checkpoint re-orients inside the same phase).
            st.evidence = []
        self.recover()
        return st.pending, archived

    def recover(self) -> None:
        """Archive the list of an open transition that has not been archived yet (an older state's crash)."""
        st = self.state
        if st.pending is None or st.archived:
            return
        record = {
            "phase_name": st.phase_name,
            "phase_number": st.phase_number,
            "total_phases": st.total_phases,
            "kind": st.kind,
            "transition": st.pending.kind,
            "archived_at": st.pending.started_at.isoformat(),
            # Nothing is named between this list's name and this record (the transition stays open until then).
            "archive_seq": self._archive_seq(),
            "note": (f"FAILED - rewind: {st.pending.issue}" if st.pending.kind == "rewind" else
                     st.pending.issue or ""),
            "items": [json.loads(i.model_dump_json()) for i in st.items],
            "display": render_layer2(st.model_copy(update={"pending": None})),
        }
        self.sink.effect(f"{ARCHIVE_DIR}/{st.pending.archive}", json.dumps(record, ensure_ascii=False, indent=1))
        st.items = []
        st.archived = True
        self.save()

    def turn_into_rewind(self, issue: str, now: datetime) -> PendingTransition:
        """The open transition becomes a rewind of the phase it leaves: one state change, its archive an effect.

        A phase transition closed that phase when it opened (begin_transition); a rewind redoes it, so the
        closing is taken back in the same change, and the next list the agent writes is that phase again,
        never the one after it (whose work was not done)."""
        st = self.state
        p = st.pending
        if p is None:
            raise ValueError("no transition is open")
        # The list was archived when the transition opened, without a failure note; seed 000's rewind archives
        # it with one, so it is archived again under a rewind's name, which the rewind's prompt names. Its
        # tasks are those the pending transition knows (every one for a phase, bootstrap or checkpoint
        # transition); the first archive, named in it, keeps the list as it was.
        items = [TodoItem(text=t, done=True) for t in p.done_before] + [TodoItem(text=t) for t in p.carried]
        name = self._archive_name("rewind")
        record = {
            "phase_name": st.phase_name,
            "phase_number": st.phase_number,
            "total_phases": st.total_phases,
            "kind": st.kind,
            "transition": "rewind",
            "archived_at": now.isoformat(),
            "archive_seq": self._archive_seq(),
            "note": f"FAILED - rewind: {issue}",
            "list_archived_as": p.archive,
            "items": [json.loads(i.model_dump_json()) for i in items],
            "display": render_layer2(st.model_copy(update={"pending": None, "items": items})),
        }
        self.sink.effect(f"{ARCHIVE_DIR}/{name}", json.dumps(record, ensure_ascii=False, indent=1))
        p.archive = name
        if p.kind == "phase" and p.from_kind == "phase" and st.closed:
            closed = list(st.closed)
            for i in range(len(closed) - 1, -1, -1):
                c = closed[i]
                # The last one of its name: the transition appended it (or, for a run from before the record
                # was kept, its archive was read back as the record), and nothing closes a phase while a
                # transition is open.
                if c.by != "job_complete" and c.name == p.from_name and c.number == p.from_phase:
                    del closed[i]
                    break
            st.closed = closed
        p.kind = "rewind"
        p.issue = issue
        self.save()
        return p

    def close_phase(self, name: str, number: int, tasks: int, now: datetime,
                    by: Literal["transition", "job_complete", "archive"]) -> None:
        """Record a plan phase as closed by the harness (see :class:`ClosedPhase`)."""
        closed = [*(self.state.closed or [])]
        closed.append(ClosedPhase(name=name, number=number, tasks=tasks, closed_at=now, by=by))
        self.state.closed = closed
        self.save()

    def finish_transition(self) -> PendingTransition | None:
        pending = self.state.pending
        self.state.pending = None
        self.state.archived = False
        self.save()
        return pending

    def _archive_seq(self) -> int:
        """The last archive name's place among all the run's archives (1 = the first): their order from the
        recorded state, which a resumed run redoes the same, where a clock may not (another process's, another
        machine's)."""
        return sum(self.state.archive_counts.values())

    def _archive_name(self, kind: TransitionKind) -> str:
        st = self.state
        base = f"phase-{min(st.phase_number, 999_999):02d}-{slug(st.phase_name or st.kind)}"
        if kind in ("rewind", "reset", "checkpoint"):
            base += f"-{kind}"
        n = st.archive_counts.get(base, 0) + 1
        st.archive_counts[base] = n
        return f"{base}.json" if n == 1 else f"{base}-{n}.json"
