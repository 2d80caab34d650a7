"""PhaseTransitionManager: bootstrap, phase transitions, rewind and job completion (seed 000).

The agent's mental model stays "complete tasks, call todo_complete(), repeat".
This module does the rest: when the last todo of a list is completed it
archives the list, regenerates workspace_summary.md and injects the transition
prompt; when the agent writes the next list it checks the plan, installs the
todos in Layer 2 and only then asks for compaction, so the agent never wakes
up to an empty list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from console.engine import events as ev
from console.engine import evidence, record
from console.engine.clock import Clock
from console.engine.plan import MAX_PHASE_STEPS, MIN_PHASE_STEPS, Plan, PlanError, PlanPhase
from console.engine.todos import PendingTransition, TodoManager, TodoState, TransitionKind, render_layer2


class PhaseContext(Protocol):
    """What the PhaseTransitionManager may read and ask for: the todo list, the plan, the log, and the
    run's hooks (notices, compaction, working memory). The Runtime implements it; nothing else of it leaks in."""

    clock: Clock
    events: ev.EventStream
    todos: TodoManager

    @property
    def job_done(self) -> bool: ...
    def load_plan(self) -> Plan: ...
    def write_plan(self, plan: Plan, reason: str) -> None: ...
    def inject_notice(self, text: str, kind: str) -> None: ...
    def request_compaction(self, reason: str) -> None: ...
    def generate_workspace_summary(self) -> str: ...
    def add_blocker(self, issue: str) -> None: ...
    def on_task_completed(self, text: str) -> None: ...
    def on_phase_completed(self) -> None: ...
    def evidence_needs(self, text: str) -> list[evidence.Need]: ...

BOOTSTRAP_TODOS = [
    "Generate workspace summary using generate_workspace_summary()",
    "Read workspace_summary.md",
    "Read instructions.md",
    "Create comprehensive execution plan in main_plan.md",
    "Divide plan into executable phases (5-20 steps each)",
]
COMPLETION_TODOS = ["Verify all deliverables", "Generate summary report", "Call job_complete()"]
COMPLETION_PHASE_NAME = "Job Completion"
JOB_COMPLETE_TODO = "Call job_complete()"

PHASE_TRANSITION_PROMPT = """\
PHASE TRANSITION: {finished}. Its todo list was archived as .console/archive/{archive} \
and workspace_summary.md was regenerated.

Do these steps now, in order:
1. Read main_plan.md, instructions.md and workspace_summary.md.
2. Update main_plan.md: mark {mark_done}, adjust the remaining phases if what you learned requires it, \
and mark the next phase '← CURRENT'.
3. Call todo_write with the next phase's steps as the new todo list (5-20 tasks).
{extra}
Then work through the new todo list."""

BOOTSTRAP_TRANSITION_PROMPT = """\
PLANNING COMPLETE: the bootstrap todo list was archived as .console/archive/{archive} \
and workspace_summary.md was regenerated.

Do these steps now, in order:
1. Read main_plan.md and check that every phase has 5-20 steps.
2. Mark Phase 1 '← CURRENT' in main_plan.md.
3. Call todo_write with Phase 1's steps as the new todo list.
{extra}
Then work through the new todo list."""

REWIND_TRANSITION_PROMPT = """\
REWIND: the current approach is not working. Issue: {issue}

The todo list of phase {phase} '{name}' was archived with this failure note as .console/archive/{archive}, \
and workspace_summary.md was regenerated.

Do these steps now, in order:
1. Read main_plan.md, instructions.md and workspace_summary.md.
2. Reconsider the phases in the light of the issue: keep what is done, change the approach \
where it failed, split or add phases if needed.
3. Update main_plan.md with the adjusted approach and mark the revised phase '← CURRENT'.
4. Call todo_write with the revised phase's steps as the new todo list (5-20 tasks).
{extra}
Then work through the new todo list."""

CHECKPOINT_PROMPT = """\
CHECKPOINT requested by the operator: stop and re-orient. The todo list of phase {phase} '{name}' \
was archived as .console/archive/{archive} and workspace_summary.md was regenerated.
{carried}
Do these steps now, in order:
1. Read main_plan.md, instructions.md and workspace_summary.md.
2. Update main_plan.md with what is done and what remains; keep the current phase '← CURRENT' \
unless it is finished.
3. Call todo_write with the todo list to continue with (the unfinished tasks above, revised if needed).
{extra}
Then work through the new todo list."""

JOB_COMPLETE_PROMPT = """\
ALL PHASES COMPLETE: {finished}, and main_plan.md has no phase left. The final todo list is in place: \
verify the deliverables, write a short summary report, then call job_complete(summary, deliverables, \
confidence, notes)."""


@dataclass
class TransitionResult:
    message: str
    ok: bool = True


def _size_advice(n: int) -> str:
    if n < MIN_PHASE_STEPS:
        return (f" Note: {n} task{'s' if n != 1 else ''} is a small phase; phases work best with "
                f"{MIN_PHASE_STEPS}-{MAX_PHASE_STEPS} steps (combine small phases in main_plan.md next time).")
    if n > MAX_PHASE_STEPS:
        return (f" Note: {n} tasks is a large phase; phases work best with {MIN_PHASE_STEPS}-{MAX_PHASE_STEPS} "
                "steps (break large phases up in main_plan.md).")
    return ""


class PhaseTransitionManager:
    def __init__(self, rt: PhaseContext) -> None:
        self.rt = rt

    @property
    def state(self) -> TodoState:
        return self.rt.todos.state

    # -- events ------------------------------------------------------------------
    def publish_todos(self, reason: str, state: TodoState | None = None) -> None:
        st = state or self.state
        self.rt.events.emit(
            ev.TodosChanged,
            phase_name=st.phase_name,
            phase_number=st.phase_number,
            total_phases=st.total_phases,
            kind=st.kind if st.pending is None else "transition",
            items=[ev.TodoItemRecord(text=i.text, done=i.done) for i in st.items],
            reason=reason,
            display=self.rt.todos.render() if state is None else render_layer2(st),
            generation=st.generation,
        )

    def load_plan(self) -> Plan | None:
        try:
            return self.rt.load_plan()
        except PlanError:
            return None

    def plan_problem(self) -> str | None:
        try:
            self.rt.load_plan()
        except PlanError as exc:
            return str(exc)
        return None

    # -- bootstrap ---------------------------------------------------------------
    def ensure_bootstrap(self) -> bool:
        """Install the bootstrap todos on a brand-new job. Returns True if it did."""
        if self.rt.todos.exists:
            return False
        self.rt.todos.install(BOOTSTRAP_TODOS, kind="bootstrap", phase_name="Bootstrap", phase_number=0,
                              total_phases=0)
        self.publish_todos("bootstrap")
        return True

    # -- todo_complete -------------------------------------------------------------
    def complete_current(self) -> TransitionResult:
        st = self.state
        if st.pending is not None:
            return TransitionResult(
                "There is no active todo list yet: a phase transition is in progress. Follow the transition "
                "steps and call todo_write with the next phase's tasks.", ok=False)
        index = st.current_index
        if index is None:
            if st.kind == "completion":
                return TransitionResult("All final tasks are complete. Call job_complete(summary, deliverables, "
                                        "confidence, notes) to finish the job.", ok=False)
            return TransitionResult("There is no incomplete task. Call todo_write to set the next tasks.", ok=False)
        text = st.items[index].text
        if record.is_job_complete_task(text):
            # Seed 000's last todo is done by the call it names: ticking it would end the list without ending the
            # job (and a phase list ended that way would bring a second, system-made final list).
            return TransitionResult(f"Task {index + 1} '{text}' is done by calling job_complete(summary, "
                                    "deliverables, confidence, notes) itself, not todo_complete.", ok=False)
        needs = self.rt.evidence_needs(text)
        gaps = evidence.missing(needs, st.evidence)
        if gaps:
            # The harness's record of this phase's calls must show what the task names (console.engine.evidence).
            why = evidence.refusal(index, text, gaps)
            self.rt.events.emit(ev.TodoRefused, index=index + 1, task=text, missing=[n.how() for n in gaps],
                                reason=why)
            return TransitionResult(why, ok=False)
        proof = [n.key for n in needs]
        remaining = len(st.items) - st.done_count - 1
        msg = (f"Task {index + 1} '{text}' marked complete. "
               f"{remaining} task{'s' if remaining != 1 else ''} remaining.")
        if remaining == 0 and st.kind in ("bootstrap", "phase"):
            # The last task and the transition it starts are one atomic write: a crash between
            # them would leave a finished list that nothing ever moves past.
            kind: TransitionKind = "bootstrap" if st.kind == "bootstrap" else "phase"
            return TransitionResult(msg + " " + self.begin(kind, complete_current=True, proof=proof))
        self.rt.todos.complete_current(self.rt.clock.now(), proof)
        self.rt.on_task_completed(text)
        self.publish_todos("todo_complete")
        if remaining == 0 and st.kind == "completion" and not self.rt.job_done:
            msg += " Call job_complete(summary, deliverables, confidence, notes) to finish the job."
        return TransitionResult(msg)

    def recover(self) -> None:
        """On start-up: a finished list with no transition open (an older crash) moves on now."""
        st = self.state
        if st.pending is None and st.items and st.current_index is None and st.kind in ("bootstrap", "phase"):
            self.begin("bootstrap" if st.kind == "bootstrap" else "phase")

    # -- transitions ---------------------------------------------------------------
    def begin(self, kind: TransitionKind, issue: str | None = None, *, complete_current: bool = False,
              proof: list[str] | None = None) -> str:
        """Archive the list, regenerate the summary and inject the prompt for the agent.

        Returns the text for the tool result that started it; the instructions themselves
        arrive as the injected transition message right after the tool results.
        """
        st = self.state
        if st.pending is not None:
            if kind == "rewind" and issue:
                # A rewind while a transition is open turns it into a rewind of the phase that transition
                # leaves (the phase the operator saw, and the one its log line names), with its own prompt;
                # a phase transition's closing of that phase is taken back with it.
                self.rt.todos.turn_into_rewind(issue, self.rt.clock.now())
                self.rt.events.emit(ev.PhaseTransition, kind="rewind", stage="started",
                                    from_phase=st.pending.from_phase, archive=st.pending.archive, issue=issue)
                self.publish_todos("transition:rewind")
                self.rt.inject_notice(self._prompt(st.pending), kind="transition_prompt")
                return "The transition in progress is now a rewind; its instructions follow."
            return "A phase transition is already in progress; follow its steps."
        finished_phase = st.phase_number
        current_text = st.items[st.current_index].text if complete_current and st.current_index is not None else None
        pending, archived = self.rt.todos.begin_transition(kind, self.rt.clock.now(), issue=issue,
                                                           mark_current_done=complete_current, proof=proof)
        if current_text is not None:
            # Views and the log see the finished list once, in the same record as the transition.
            self.publish_todos("todo_complete", archived)
            self.rt.on_task_completed(current_text)
        if kind == "phase":
            self.rt.on_phase_completed()
        self.rt.generate_workspace_summary()
        self.rt.events.emit(ev.PhaseTransition, kind=kind, stage="started", from_phase=finished_phase,
                            archive=pending.archive, issue=issue)
        if kind == "phase":
            plan = self.load_plan()
            if plan is not None and not self._phases_left(plan, pending):
                return self._enter_completion(plan, pending)
        self.publish_todos(f"transition:{kind}")
        self.rt.inject_notice(self._prompt(pending), kind="transition_prompt")
        return "The phase transition instructions follow."

    def _finished_phase(self, plan: Plan, p: PendingTransition) -> PlanPhase | None:
        """The plan phase the archived list belonged to: by name (the plan may have been edited), else position."""
        return plan.find(p.from_name) or plan.phase(p.from_phase)

    def _phases_left(self, plan: Plan, pending: PendingTransition) -> bool:
        # The harness's record, not the plan's checkboxes: the phase just finished is closed in it already.
        return bool(record.open_phases(plan, self.state))

    def _enter_completion(self, plan: Plan, pending: PendingTransition) -> str:
        finished = self._finished_phase(plan, pending)
        if finished is not None and not finished.complete:
            plan.mark_complete(finished)
            self.rt.write_plan(plan, reason="system marked the last phase complete")
        total = len(plan.phases)
        self.rt.todos.install(COMPLETION_TODOS, kind="completion", phase_name=COMPLETION_PHASE_NAME,
                              phase_number=total, total_phases=total)
        self.publish_todos("job_completion")
        self.rt.events.emit(ev.PhaseTransition, kind="completion", stage="completed",
                            from_phase=pending.from_phase, to_phase=None, to_name=COMPLETION_PHASE_NAME,
                            archive=pending.archive)
        self.rt.request_compaction("phase transition to job completion")
        label = f"Phase {pending.from_phase} '{pending.from_name}' is complete"
        self.rt.inject_notice(JOB_COMPLETE_PROMPT.format(finished=label), kind="transition_prompt")
        return "All phases of main_plan.md are complete; the final todo list is in place."

    def _prompt(self, p: PendingTransition) -> str:
        problem = self.plan_problem()
        extra = ""
        if problem:
            extra = f"\nmain_plan.md needs fixing first: {problem}\n"
            self.rt.events.emit(ev.ErrorEvent, message=f"main_plan.md: {problem}", where="plan", recoverable=True)
        else:
            plan = self.load_plan()
            advice = plan.size_advice() if plan else []
            if advice:
                extra = "\nPhase size advice:\n" + "\n".join(f"- {a}" for a in advice) + "\n"
        if p.kind == "bootstrap":
            return BOOTSTRAP_TRANSITION_PROMPT.format(archive=p.archive, extra=extra)
        if p.kind == "rewind":
            return REWIND_TRANSITION_PROMPT.format(issue=p.issue or "(none given)", phase=p.from_phase,
                                                   name=p.from_name, archive=p.archive, extra=extra)
        if p.kind == "checkpoint":
            carried = ""
            if p.carried:
                carried = "\nUnfinished tasks carried over:\n" + "\n".join(f"- {t}" for t in p.carried) + "\n"
            if p.issue:
                carried += f"\nOperator's note: {p.issue}\n"
            return CHECKPOINT_PROMPT.format(phase=p.from_phase, name=p.from_name, archive=p.archive,
                                            carried=carried, extra=extra)
        finished = f"Phase {p.from_phase} '{p.from_name}' is complete"
        mark = f"Phase {p.from_phase} '✓ COMPLETE'"
        if p.kind == "reset":
            finished = f"The todo list of phase {p.from_phase} '{p.from_name}' was reset"
            mark = "finished phases '✓ COMPLETE'"
        return PHASE_TRANSITION_PROMPT.format(finished=finished, archive=p.archive, mark_done=mark, extra=extra)

    def rewind(self, issue: str) -> str:
        self.rt.add_blocker(issue)
        return self.begin("rewind", issue=issue)

    def operator_refusal(self) -> str | None:
        """Why an operator checkpoint or rewind cannot apply now (None if it can)."""
        st = self.state
        if st.kind == "bootstrap" or (st.pending is not None and st.pending.from_kind == "bootstrap"):
            return "the job is still bootstrapping: there is no plan to re-orient to yet"
        if st.kind == "completion":
            return "the job is in its final review"
        return None

    def checkpoint(self, note: str | None = None) -> str:
        if self.state.pending is not None:
            return "A phase transition is already in progress."
        return self.begin("checkpoint", issue=note)

    # -- todo_write ----------------------------------------------------------------
    def write_todos(self, texts: list[str], done: list[bool]) -> TransitionResult:
        st = self.state
        if not texts:
            return TransitionResult("todo_write needs at least one task.", ok=False)
        if st.pending is None:
            if st.kind in ("empty",):
                return self._install_from_plan(texts, done, None)
            if st.kind == "bootstrap" and (dropped := self._dropped_bootstrap(texts)):
                # The bootstrap is the harness's list: rewriting it must not be a way around the work its tasks
                # name (console.engine.evidence); tasks may be added, not dropped before they are done.
                return TransitionResult(
                    f"todo_write refused: the bootstrap's tasks stay on the list until todo_complete completes them "
                    f"({record.titles(dropped)} would be dropped). Keep them (add tasks if you need to), work "
                    "through them, and write Phase 1's list at the transition that follows.", ok=False)
            kept: list[str] = []
            done = self._verified(texts, done, [i.text for i in st.items if i.done], kept)
            self.rt.todos.replace_items(texts, done)
            self.publish_todos("todo_write")
            msg = " ".join([f"Todo list updated: {len(texts)} tasks, {sum(done)} done." + _size_advice(len(texts)),
                            *kept])
            if all(done) and st.kind in ("bootstrap", "phase"):
                msg += " " + self.begin("bootstrap" if st.kind == "bootstrap" else "phase")
            return TransitionResult(msg)
        return self._install_from_plan(texts, done, st.pending)

    def _dropped_bootstrap(self, texts: list[str]) -> list[str]:
        kept = {record.key(t) for t in texts}
        return [i.text for i in self.state.items if not i.done and record.key(i.text) not in kept]

    @staticmethod
    def _verified(texts: list[str], done: list[bool], done_before: list[str], notes: list[str]) -> list[bool]:
        """The done flags of a written list that the record bears out: a task is done when todo_complete completed
        it (in this list or the one a transition archived), never because todo_write says so."""
        known = {record.key(t) for t in done_before}
        kept = [t for t, d in zip(texts, done, strict=True) if d and record.key(t) not in known]
        if kept:
            n = len(kept)
            notes.append(f"{n} task{'s' if n != 1 else ''} marked done {'were' if n != 1 else 'was'} kept open "
                         f"({record.titles(kept)}): a task is done only through todo_complete, once it is "
                         "really done.")
        return [d and record.key(t) in known for t, d in zip(texts, done, strict=True)]

    def _closed_names(self) -> str:
        names = [c.name for c in self.state.closed or []]
        return f" Phases closed so far: {record.titles(names)}." if names else ""

    def _install_from_plan(self, texts: list[str], done: list[bool], pending: PendingTransition | None
                           ) -> TransitionResult:
        try:
            plan = self.rt.load_plan()
        except PlanError as exc:
            self.rt.events.emit(ev.ErrorEvent, message=f"main_plan.md: {exc}", where="plan", recoverable=True)
            return TransitionResult(f"todo_write refused: {exc} Fix main_plan.md, then call todo_write again.",
                                    ok=False)
        notes: list[str] = []
        changed = False
        if pending is not None and pending.kind == "phase":
            finished = self._finished_phase(plan, pending)
            if finished is not None and not finished.complete:
                # Forgiving on purpose: refusing here would loop a model that forgot one marker.
                plan.mark_complete(finished)
                changed = True
                notes.append(f"main_plan.md did not mark phase '{finished.name}' complete; the system marked it.")
        # The next phase is the first one the harness has not closed (the one marked current, if it is open):
        # the plan's own checkboxes are never evidence that a phase was done (console.engine.record).
        left = record.open_phases(plan, self.state)
        rewind = pending is not None and pending.kind == "rewind"
        if rewind:
            # A rewind redoes the phase where the work stands (or the agent's revision of it): the first phase
            # the record has not closed. A later phase marked current would skip work that was never done.
            target = left[0] if left else None
            ahead = next((p for p in left[1:] if p.marked_current), None)
            if target is not None and ahead is not None:
                notes.append(f"main_plan.md marked phase '{ahead.name}' current, but a rewind redoes phase "
                             f"'{target.name}' (the first phase not yet done); the system moved the mark.")
        else:
            target = next((p for p in left if p.marked_current), left[0] if left else None)
        if target is not None and target.complete:
            if rewind:
                notes.append(f"main_plan.md marked phase '{target.name}' complete, but the rewind redoes it; "
                             "the system cleared its marks.")
            else:
                notes.append(f"main_plan.md marked phase '{target.name}' complete, but its todo list was never "
                             "worked through todo_complete, so it is the next phase; the system cleared its marks."
                             + self._closed_names())
            plan.reopen(target)
            changed = True
        if target is not None and not target.marked_current:
            plan.mark_current(target)
            changed = True
        if changed:
            # The plan first, the todos second: after a crash in between, the transition is still
            # open and redoing it finds the plan already right.
            self.rt.write_plan(plan, reason="transition bookkeeping")
        done = self._verified(texts, done, pending.done_before if pending is not None else [], notes)
        if target is None:
            total = len(plan.phases)
            if JOB_COMPLETE_TODO not in texts:
                texts, done = [*texts, JOB_COMPLETE_TODO], [*done, False]
            self.rt.todos.install(texts, kind="completion", phase_name=COMPLETION_PHASE_NAME,
                                  phase_number=total, total_phases=total, done=done)
            name, number = COMPLETION_PHASE_NAME, None
        else:
            number = plan.position(target)
            name = target.name
            self.rt.todos.install(texts, kind="phase", phase_name=name, phase_number=number,
                                  total_phases=len(plan.phases), done=done)
        self.publish_todos("todo_write")
        if pending is not None:
            self.rt.events.emit(ev.PhaseTransition, kind=pending.kind, stage="completed",
                                from_phase=pending.from_phase, to_phase=number, to_name=name,
                                archive=pending.archive, issue=pending.issue)
            self.rt.request_compaction(f"phase transition ({pending.kind})")
        label = f"Phase {number} '{name}' ({number} of {len(plan.phases)})" if number else f"'{name}'"
        msg = f"Todo list for {label} written: {len(texts)} tasks. Start with task 1: {texts[0]}"
        return TransitionResult(" ".join([msg + _size_advice(len(texts)), *notes]))
