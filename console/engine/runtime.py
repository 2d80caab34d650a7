"""Runtime: the engine services one job run shares (paths, state, sandbox, journal, events, clock).

Tools receive a Runtime and act through its methods, so every side effect of a
tool (a plan written, a summary generated, a job completed) also produces its
event in one place.

It is also where a step of the run becomes durable. The state managers report
what they change (:meth:`changed`) and the files to write once that change is
recorded (:meth:`effect`); :meth:`commit` then writes the step as one journal
record (conversation ops, checkpoint, changed state, events, effects), relays
the events to the log, applies the effects and refreshes the state files. A
tool that changes the world itself (the agent's file tools) first records what
it saw with :meth:`intent`, so that a redo after a kill acts as the first
attempt did.

Why one module of ~590 lines: a step's commit, the state it records and the files that mirror it (written
now, or made on the state-file thread while the model is asked) share the same dirty set, effects and lent
state; split, each half would reach into the other's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from console.engine import events as ev
from console.engine import evidence, failpoints, record
from console.engine.atomic import atomic_write_text
from console.engine.clock import Clock
from console.engine.cost import Prices
from console.engine.enforcement import Enforcer, SandboxWorld
from console.engine.events.stream import LOGGED_EARLY
from console.engine.experiences import FILE_NAME as EXPERIENCES_FILE
from console.engine.experiences import ExperienceLog, Section
from console.engine.guardrails import Guardrails, default_guardrails
from console.engine.guardrails.fleet import FleetBudget, FleetHold, Telling
from console.engine.job_files import STATE_DIR, JobPaths
from console.engine.journal import Checkpoint, Conversation, Effect, Journal
from console.engine.memory import WorkingMemory
from console.engine.messages import Message
from console.engine.model import Usage
from console.engine.model_json import model_json
from console.engine.phases import PhaseTransitionManager
from console.engine.plan import Plan, PlanError, parse_plan, validate_plan
from console.engine.sandbox import Sandbox, SandboxError
from console.engine.state import (
    COMPONENTS,
    GUARDRAIL_PARTS,
    PART_JSON,
    PROJECTION_FILES,
    FeedbackJson,
    GuardrailParts,
    JobOutcome,
    ProjectionWriter,
    StateSnapshot,
    constructed,
    guardrails_file,
    projection_bytes,
    write_projection,
)
from console.engine.store import Store
from console.engine.text import safe_text
from console.engine.todos import TodoManager
from console.engine.workspace import SUMMARY_FILE, Workspace

# How console.engine.operator marks the issue of the operator's rewind.
OPERATOR_ISSUE = "(operator) "
# The most of SYSTEM_PROMPT.md and main_plan.md the engine reads (the agent writes them).
JOB_TEXT_LIMIT = 1 * 2**20
# The state files are refreshed at most this often (and at every durable commit and at the end of a
# run): each is a file replace, which costs milliseconds on ext4, while the journal only appends.
PROJECTION_INTERVAL = 2.0


_SNAPSHOT_FIELDS = tuple(StateSnapshot.model_fields)
_NO_PARTS: dict[str, Any] = dict.fromkeys(GuardrailParts.model_fields)


@dataclass
class Runtime:
    paths: JobPaths
    clock: Clock
    events: ev.EventStream
    store: Store | None = None
    sandbox: Sandbox | None = None
    journal: Journal | None = None
    state: StateSnapshot = field(default_factory=StateSnapshot)
    todos: TodoManager = field(init=False)
    workspace: Workspace = field(init=False)
    memory: WorkingMemory = field(init=False)
    experiences: ExperienceLog = field(init=False)
    phases: PhaseTransitionManager = field(init=False)
    # Messages to add to the conversation after this turn's tool results (transition prompts).
    notices: list[Message] = field(default_factory=list)
    compaction_reason: str | None = None
    outcome: JobOutcome | None = None
    # The most one tool result may put into the context (set from the window by the loop): a single
    # observation larger than the window would otherwise force restart after restart.
    observation_chars: int = 60_000
    # The tool call being dispatched, and the intents a killed process recorded (call id -> facts).
    current_call: str | None = None
    redo: dict[str, dict[str, Any]] = field(default_factory=dict)
    # True once the operator asked the run to stop: a long tool (a job-declared command) polls it and
    # ends early, so `stop` acts within a second even in the middle of a two-minute test suite.
    should_stop: Callable[[], bool] = field(default=lambda: False)
    # The job's guardrails (job.toml's [guardrails]), and the enforcer that applies them to this run.
    guardrails: Guardrails = field(default_factory=default_guardrails)
    guards: Enforcer = field(init=False)
    # The state files and experiences.md are written on a thread of its own between durable commits.
    projections: ProjectionWriter = field(default_factory=ProjectionWriter)
    _dirty: set[str] = field(default_factory=set)
    _effects: list[Effect] = field(default_factory=list)
    _ready: bool = False
    _stale: set[str] = field(default_factory=set)
    _projected_at: float = 0.0
    _experiences_written: str | None = None  # experiences.md as this process last wrote it
    # Each part of the guardrails' state as the journal last recorded it (its JSON), and as the step being
    # committed records it: a step records the parts that changed (state.GuardrailParts).
    _guards_recorded: dict[str, bytes] = field(default_factory=dict)
    _guards_recording: dict[str, bytes] = field(default_factory=dict)
    _feedback_json: FeedbackJson = field(default_factory=FeedbackJson)
    # main_plan.md as last parsed for the guardrails, which only read it: (its text, the plan or its problem).
    _plan_parsed: tuple[str, Plan | PlanError] | None = None
    # The run's tool registry's names (set by the supervisor): a todo that names one as a call needs that call's
    # evidence (console.engine.evidence). Empty: only the file-read rule applies.
    tool_names: frozenset[str] = frozenset()
    # The fleet's daily budget (console.engine.guardrails.fleet; None: none is set), and the hold this run waits on.
    fleet: FleetBudget | None = None
    fleet_hold: FleetHold | None = None
    # The hold this run tells, marked told once the operator's channels took it (the supervisor's, which the
    # runner's notifier reaches from its thread).
    fleet_telling: Telling = field(default_factory=Telling)
    # The operator's prices where job.toml's differ (RunSettings.fleet_prices): the fleet counts the higher cost.
    fleet_prices: Prices | None = None

    def fleet_spent(self, usage: Usage, cost: float | None) -> None:
        """A turn's (or a sampling's) ``cost`` in the fleet's spend of the day: at the operator's prices if they
        make it dearer than the job's (a job.toml cannot make its runs cheaper to the fleet)."""
        if self.fleet is None:
            return
        usd = max(cost or 0.0, 0.0 if self.fleet_prices is None else self.fleet_prices.cost(usage))
        if usd:
            self.fleet.spent(self.clock.now(), usd)

    def __post_init__(self) -> None:
        self.paths.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._experiences_path = self.paths.root / EXPERIENCES_FILE  # settled before every tool call
        # The state files and the folder of their temp files, joined once (a join is ~15 calls; a turn writes one).
        self._projection_paths = {c: self.paths.state / name for c, name in PROJECTION_FILES.items()}
        self._tmp_dir = self.paths.state / "tmp"
        if self.sandbox is None:
            self.sandbox = Sandbox(self.paths.root)
        self.outcome = self.state.outcome
        self.todos = TodoManager(self.state.todos, sink=self)
        self.workspace = Workspace(self.paths, self.sandbox, self.state.workspace, sink=self)
        self.memory = WorkingMemory(self.state.memory, self.events, sink=self)
        self.experiences = ExperienceLog(self.state.experiences, self.events, sink=self)
        self.phases = PhaseTransitionManager(self)
        if self.state.guardrails is not None:
            self.guardrails.restore(self.state.guardrails)
        self.guards = Enforcer(self.guardrails, events=self.events, clock=self.clock,
                               world=SandboxWorld(self.sandbox), changed=lambda: self.changed("guardrails"),
                               record_intent=self._record_intent, redo=lambda key: self.redo.pop(key, None),
                               todos=lambda: self.todos.state, load_plan=self._plan_to_read, on_stuck=self.on_stuck)
        self._ready = True
        if self.journal is None:
            for comp in self._dirty:
                self.project(comp)
            self._dirty.clear()

    @property
    def job_done(self) -> bool:
        return self.outcome is not None

    # -- the sink of the state managers ---------------------------------------------------------
    # Without a journal (a Runtime used on its own, outside a run) there is nothing to record a step
    # in, so changes and effects are written through at once.
    def changed(self, component: str) -> None:
        if self.journal is None and self._ready:
            self.project(component)
            return
        self._dirty.add(component)

    def effect(self, path: str, content: str) -> None:
        if self.journal is None:
            self.apply_effects([Effect(path=path, content=content)])
            return
        self._effects.append(Effect(path=path, content=content))

    def component(self, name: str) -> BaseModel | None:
        """One component of the state: the manager's own model (the guardrails' a view of theirs)."""
        if name == "todos":
            return self.todos.state
        if name == "memory":
            return self.memory.state
        if name == "workspace":
            return self.workspace.record
        if name == "outcome":
            return self.outcome
        if name == "guardrails":
            return self.guardrails.snapshot()
        if name == "experiences":
            return self.experiences.state
        raise KeyError(name)

    def snapshot(self, components: tuple[str, ...] | set[str] = COMPONENTS) -> StateSnapshot:
        # The managers' own models, for immediate serialisation: nothing to validate again. Every field is given
        # (None: not in this snapshot), with the same fields set as if only ``components`` were: model_construct
        # would otherwise build each missing field's default, at every commit.
        values: dict[str, Any] = dict.fromkeys(_SNAPSHOT_FIELDS)
        for c in components:
            values[c] = self.component(c)
        return constructed(StateSnapshot, set(components), values)

    # -- committing a step -----------------------------------------------------------------------
    def commit(self, cp: Checkpoint, conversation: Conversation, *, system: str | None = None,
               durable: bool = False) -> None:
        """Record the step as one journal line, then let the world catch up with it."""
        dirty, self._dirty = self._dirty, set()
        effects, self._effects = self._effects, []
        lines = self.events.take_held()
        if self.journal is not None:
            state, state_json = self._step_state(dirty) if dirty else (None, None)
            self.journal.commit(cp, conversation, state=state, state_json=state_json, events=lines, effects=effects,
                                full_state=self.snapshot, system=system, durable=durable)
            self._guards_recorded.update(self._guards_recording)  # a rewrite recorded them all: the same values
            self._guards_recording = {}
        self.events.write_lines(lines)
        self.apply_effects(effects)
        self._report_projection_errors()
        if "experiences" in dirty:
            # Now, not with the lagging projections (the agent may read it next: settle() before a tool runs).
            self.write_experiences(background=not durable)
        self._stale |= dirty
        if durable and self._stale:
            self.refresh_projections()
        elif (self._stale and cp.stage == "boundary"
              and self.clock.monotonic() - self._projected_at >= PROJECTION_INTERVAL):
            # At a turn's end: written while the model is asked for the next one.
            self.refresh_projections(background=True)

    def _step_state(self, dirty: set[str]) -> tuple[StateSnapshot, str]:
        """What a step records of the state: the components it changed, of the guardrails only the parts that
        differ from what the journal holds; and its JSON as the journal records it."""
        snap = self.snapshot(dirty - {"guardrails"})
        self._guards_recording = {}  # a step that failed to commit recorded nothing
        changed: dict[str, Any] = {}
        if "guardrails" in dirty:
            for name, value in zip(GUARDRAIL_PARTS, self.guardrails.parts(), strict=True):
                # Compared with the last recorded dump: each part's own serializer, not a GuardrailParts built and
                # dumped per part (~6x the time, at every commit of a turn). Whole, its null fields kept (a reader
                # of the journal takes a null as the field's default, None, as an older record's missing field):
                # the dump of a changed part is the journal's bytes and guardrails.json's too, so the feedback's
                # record of the recent calls, a few KB, is serialised once a turn, not twice.
                # dump_json, without its keywords; the feedback's, its recent calls' dumps kept (state.FeedbackJson)
                dumped = self._feedback_json(value) if name == "feedback" else PART_JSON[name].serializer.to_json(value)
                if self._guards_recorded.get(name) != dumped:
                    changed[name] = value
                    self._guards_recording[name] = dumped
        text = model_json(snap, exclude_none=True).decode()
        if changed:
            # Every field given (None: unchanged), as in snapshot(): no default is built. Set as pydantic's assignment
            # sets a field of a model without validate_assignment (the value, and the field counted as set), without
            # its four calls.
            snap.__dict__["guardrails_parts"] = constructed(GuardrailParts, set(changed), {**_NO_PARTS, **changed})
            snap.__pydantic_fields_set__.add("guardrails_parts")
            # guardrails_parts is the snapshot's last field, and GUARDRAIL_PARTS its fields' order: the JSON of
            # snap.model_dump_json(exclude_none=True) but for the parts' null fields (tests/unit/test_step_state.py).
            parts = ",".join([f'"{name}":' + self._guards_recording[name].decode() for name in changed])
            text = text[:-1] + ("," if len(text) > 2 else "") + '"guardrails_parts":{' + parts + "}}"
        return snap, text

    def refresh_projections(self, *, background: bool = False) -> None:
        """Bring the state files up to the journal (they lag it by at most PROJECTION_INTERVAL); ``background``:
        serialised now, written by the projection thread. Without it, what the thread still has to write is
        written first (at a run's end nothing is left to a thread the process's exit would stop)."""
        if not background:
            self.projections.flush()
            self._report_projection_errors()
        for comp in sorted(self._stale):
            if not background:
                self.project(comp)
                continue
            if comp == "experiences":
                self.write_experiences(background=True)
            # Held until the run asks its model (Session.run releases them): made from the state and written
            # during the call, while the run does not change it (it takes it back: ProjectionWriter.serialized).
            # guardrails.json, changed at every call, from the parts' JSON the journal's steps recorded.
            content = (self._recorded_guardrails() if comp == "guardrails" else None) or functools.partial(
                self._projection, comp)
            self.projections.submit(self._projection_paths[comp], content, self._tmp_dir, hold=True)
        self._stale.clear()
        self._projected_at = self.clock.monotonic()

    def _recorded_guardrails(self) -> bytes | None:
        """guardrails.json made of the parts' dumps the journal holds (_step_state), when it holds them all and no
        change to the guardrails waits for a commit (then they are the state); None: made from the state."""
        recorded = self._guards_recorded
        if "guardrails" in self._dirty or len(recorded) != len(GUARDRAIL_PARTS):
            return None
        return guardrails_file(recorded)

    def _projection(self, comp: str) -> bytes | None:
        value = self.component(comp)
        return None if value is None else projection_bytes(comp, value)

    def settle(self) -> None:
        """Wait until experiences.md, if written in the background, is written (before a tool may read it; the
        state files in .console/ are not the agent's to read)."""
        self.projections.flush(self._experiences_path)
        self._report_projection_errors()

    def _report_projection_errors(self) -> None:
        for path, why in self.projections.take_errors():
            if path.name == EXPERIENCES_FILE:
                self._experiences_written = None  # written again at the next change
            where = path.name if path.name == EXPERIENCES_FILE else f".console/{path.name}"
            self.events.emit(ev.ErrorEvent, message=f"cannot write {where}: {why}", where="state", recoverable=True)

    def rollback(self) -> None:
        """A step failed before its commit: forget what it would have recorded."""
        self._guards_recording = {}
        self._dirty.clear()
        self._effects.clear()
        self.events.discard_held()

    def project(self, component: str) -> None:
        self.projections.flush()  # an older content still queued must not land after this one
        if component == "experiences":
            self.write_experiences()
        try:
            write_projection(self.paths, component, self.component(component))
        except OSError as exc:
            self.events.emit(ev.ErrorEvent, message=f"cannot write .console/{component}.json: {exc.strerror}",
                             where="state", recoverable=True)

    def write_experiences(self, *, background: bool = False) -> None:
        """JOB/experiences.md from the record (console.engine.experiences): atomically, its temp file in
        .console/tmp; only when it has something to say and differs from what this process last wrote (so the
        first write of a process, e.g. at a resume, also puts right a file deleted or changed meanwhile)."""
        st = self.experiences.state
        if not st.entries and not st.dropped:
            return
        text = self.experiences.render_file()
        if text == self._experiences_written:
            return
        if background:
            self.projections.submit(self._experiences_path, text.encode("utf-8", "replace"), self._tmp_dir)
            self._experiences_written = text
            return
        self.projections.flush()
        try:
            atomic_write_text(self._experiences_path, text, durable=False, tmp_dir=self._tmp_dir)
        except OSError as exc:
            self.events.emit(ev.ErrorEvent, message=f"could not write {EXPERIENCES_FILE}: {exc.strerror or exc}",
                             where="state", recoverable=True)
            return
        self._experiences_written = text

    def apply_effects(self, effects: list[Effect]) -> None:
        """Write the files a committed step produced; rewriting one already written is harmless."""
        for e in effects:
            try:
                if e.path.startswith(STATE_DIR + "/"):
                    atomic_write_text(self.paths.root / e.path, e.content, durable=False,
                                      tmp_dir=self._tmp_dir)
                else:
                    assert self.sandbox is not None
                    failpoints.hit(f"effect {e.path}")
                    self.sandbox.write_bytes(e.path, e.content.encode("utf-8", "replace"))
            except (OSError, SandboxError) as exc:
                self.events.emit(ev.ErrorEvent, message=f"could not write {e.path}: {exc}", where="state",
                                 recoverable=True)

    def intent(self, compute: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        """The facts a tool saw before it acts on the world, recorded before it acts.

        Returns (facts, redo): on the redo of a call a kill interrupted, the facts
        the first attempt recorded, so the redo acts (and answers) as it would have.
        """
        call = self.current_call
        redo = call is not None and call in self.redo
        facts = self.redo.pop(call) if redo and call is not None else compute()
        if self.journal is not None and call is not None:
            self.journal.intent(call, facts)
        return facts, redo

    def logged_early(self, call_id: str) -> list[dict[str, Any]]:
        """The events the interrupted call ``call_id`` wrote to the log before the kill (its intent says it wrote
        some: LOGGED_EARLY); [] for any other call."""
        facts = self.redo.get(call_id)
        if not (isinstance(facts, dict) and facts.get(LOGGED_EARLY)):
            return []
        return self.events.logged_of_call(call_id)

    def _record_intent(self, key: str, facts: dict[str, Any]) -> None:
        if self.journal is not None:
            self.journal.intent(key, facts)

    # -- reading the job's own files (through the sandbox, like the agent) ----------------------
    def read_job_text(self, rel: str, limit: int = JOB_TEXT_LIMIT) -> str | None:
        """A job file's text, or None if it is absent or cannot be read safely (a link out, a pipe...)."""
        assert self.sandbox is not None
        try:
            info = self.sandbox.info(rel)
            if info is None:
                return None
            return self.sandbox.read_text(rel, max_bytes=limit)
        except SandboxError:
            return None

    def load_plan(self) -> Plan:
        """main_plan.md as it is now, or PlanError with what to do about it."""
        text = self.read_job_text("main_plan.md")
        if text is None:
            raise PlanError(
                "main_plan.md does not exist yet. Write it with write_file: a '# Execution Plan' title, "
                "an '## Overview', then one '## Phase N: Name' section per phase with '- [ ] step' lines.")
        return validate_plan(parse_plan(text), "main_plan.md")

    def _plan_to_read(self) -> Plan:
        """load_plan for readers that do not change the plan (the guardrails' record of what is left, every turn):
        parsed again only when the file's text changed (a parse is ~0.4 ms at 40 steps)."""
        text = self.read_job_text("main_plan.md")
        if text is None:
            return self.load_plan()  # its PlanError says what to do
        if self._plan_parsed is None or self._plan_parsed[0] != text:
            try:
                parsed: Plan | PlanError = validate_plan(parse_plan(text), "main_plan.md")
            except PlanError as exc:
                parsed = exc
            self._plan_parsed = (text, parsed)
        plan = self._plan_parsed[1]
        if isinstance(plan, PlanError):
            raise plan
        return plan

    # -- hooks used by tools and the phase manager ---------------------------------
    def inject_notice(self, text: str, kind: str) -> None:
        self.notices.append(Message.user(text, kind=kind))

    def take_notices(self) -> list[Message]:
        out, self.notices = self.notices, []
        return out

    def request_compaction(self, reason: str) -> None:
        self.compaction_reason = reason

    def generate_workspace_summary(self, *, checked: bool = False) -> str:
        """workspace_summary.md's new text, written after the step's commit. ``checked``: SandboxError now if that
        write would be refused (the tool's caller is told the truth; a phase transition goes on without it)."""
        if checked and self.sandbox is not None:
            text = self.workspace.render_summary(self.clock.now(), self.todos.state, self.blockers())
            self.sandbox.check_write(SUMMARY_FILE, len(text.encode("utf-8", "replace")))
            self.effect(SUMMARY_FILE, text)
            return text
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
        # experiences.md: the failed task and why. The operator's rewind comes at a turn boundary, never inside
        # a tool call, with its issue marked as theirs (console.engine.operator).
        by_operator = self.current_call is None and issue.startswith(OPERATOR_ISSUE)
        self.record_experience("failed", issue[len(OPERATOR_ISSUE):] if by_operator else issue,
                               "operator rewind" if by_operator else "rewind")
        self.guards.rewound()  # what a rewind resets in the guardrails: see console.engine.guardrails.guardrails

    def record_experience(self, section: Section, text: str, source: str, where: str = "") -> int | None:
        """An entry of experiences.md, recorded with this step; its id, or None if ``text`` was empty."""
        entry = self.experiences.record(section, text, source=source, now=self.clock.now(),
                                        session=self.events.session, generation=self.todos.state.generation,
                                        where=where or self.where())
        return entry.id if entry is not None else None

    def where(self) -> str:
        """Where the run is, in a few words: the current task, else the phase."""
        current = self.todos.current
        if current is not None:
            return f"task: {current.text}"
        return f"phase: {self.todos.state.phase_name or 'transition'}"

    def on_stuck(self, pattern: str) -> None:
        """The stuck detector saw a pattern (an error streak, a repeated or alternating call, idle turns)."""
        self.record_experience("failed", f"stuck: {pattern}", "stuck")

    # -- evidence (console.engine.evidence) -----------------------------------------------------
    def evidence_needs(self, text: str) -> list[evidence.Need]:
        """The evidence a todo's text asks for, from the run's tools and the files the job folder holds."""
        return evidence.needs(text, self.tool_names, self._holds_file)

    def _holds_file(self, rel: str) -> bool:
        assert self.sandbox is not None
        try:
            info = self.sandbox.info(rel)
        except (SandboxError, OSError, ValueError):
            return False
        return info is not None and info.kind == "file"

    def note_call(self, tool: str, params: dict[str, Any] | None) -> None:
        """A tool call that succeeded: its evidence joins the todo state, recorded with the call's own step."""
        keys = evidence.proofs(tool, params)
        if keys:
            self.todos.add_evidence(keys)

    def judge_evidence(self, archived_done: list[str]) -> None:
        """At a resume: tasks marked done without the evidence they name become owed (TodoManager.judge); a run
        whose job is already complete is left as it was (its outcome was given under the rule of its time)."""
        if self.outcome is not None:
            if self.todos.state.owed is None:
                self.todos.state.owed = []
                self.todos.save()
            return
        for owed in self.todos.judge(self.evidence_needs, archived_done):
            self.events.emit(ev.ErrorEvent, where="evidence", recoverable=True, message=(
                f"task '{owed.text}' was marked done without the evidence it names; the job is not complete "
                f"until it is given ({', '.join(owed.keys)})"))

    def on_task_completed(self, text: str) -> None:
        self.memory.record(text, self.clock.now())

    def on_phase_completed(self) -> None:
        self.memory.resolve_blockers(self.clock.now())

    def write_plan(self, plan: Plan, reason: str) -> None:
        """The engine's own edit of main_plan.md: recorded with the step, written after its commit."""
        text = plan.render()
        self.effect("main_plan.md", text)
        self._plan_changed(reason, text)

    def after_file_write(self, rel: str) -> str:
        """Called by the file tools after a write; returns text to add to the tool result."""
        if rel != "main_plan.md":
            return ""
        problem = self._plan_changed("agent edit")
        if problem:
            return f" Warning: {problem}"
        return ""

    def _plan_changed(self, reason: str, text: str | None = None) -> str | None:
        try:
            plan = validate_plan(parse_plan(text), "main_plan.md") if text is not None else self.load_plan()
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
        """The job's end: the outcome, the last todo and the event are recorded by one commit.

        The caller (the job_complete tool) has checked that the harness's record shows the plan done, unless the
        job declares free stops (then the event says what the record shows left, and the run ends incomplete)."""
        st = self.todos.state
        now = self.clock.now()
        final_phase = record.final_phase_open(st)
        # job_complete is itself the last todo: mark it rather than expect a todo_complete after the end.
        for item in st.items:
            if not item.done and record.is_job_complete_task(item.text):
                item.done = True
                item.completed_at = now
                item.proof = []  # done by the call it names
                self.todos.save()
                self.phases.publish_todos("job_complete")
                break
        if final_phase:
            # Seed 000's final phase ("... Call job_complete()") is closed by the call itself.
            self.todos.close_phase(st.phase_name, st.phase_number, len(st.items), now, "job_complete")
            self._mark_plan_phase_complete(st.phase_name)
        self.outcome = JobOutcome(summary=summary, deliverables=deliverables, confidence=confidence, notes=notes,
                                  completed_at=now)
        self.changed("outcome")
        # Empty, unless a free stop (type = "none") let the call through with the record showing work left.
        unmet = self.guards.unmet()
        self.events.emit(ev.JobCompleted, summary=summary, deliverables=deliverables, confidence=confidence,
                         notes=notes, unmet=unmet)

    def give_up(self, summary: str, deliverables: list[str], confidence: float, notes: str) -> None:
        """The agent gave up (job_complete with a low confidence and notes saying why): accepted whatever the
        record shows, recorded with its event by one commit; the run ends as gave up and asks its operator."""
        self.outcome = JobOutcome(summary=summary, deliverables=deliverables, confidence=confidence, notes=notes,
                                  completed_at=self.clock.now(), gave_up=True)
        self.changed("outcome")
        self.events.emit(ev.JobGaveUp, summary=summary, deliverables=deliverables, confidence=confidence,
                         notes=notes, unmet=self.guards.unmet())

    def reopen_outcome(self) -> JobOutcome | None:
        """The operator resumed a run whose recorded outcome the record does not bear out (the agent gave up, or
        a free stop's job_complete with work left): the job goes on (what was said stays in the log)."""
        if self.outcome is None:
            return None
        was, self.outcome = self.outcome, None
        self.changed("outcome")
        if was.gave_up:
            said = (f"after you gave up (your notes: {safe_text(was.notes, one_line=True, join=True, limit=600)}). "
                    "The cause may have been fixed: check, then continue")
        else:
            left = "; ".join(self.guards.unmet())
            said = f"after your job_complete, with work left ({safe_text(left, one_line=True, limit=600)}). Continue"
        self.inject_notice(f"[Your operator resumed the job {said} with the task marked ← CURRENT in the ACTIVE "
                           "TODO LIST.]", kind="resume")
        return was

    def _mark_plan_phase_complete(self, name: str) -> None:
        try:
            plan = self.load_plan()
        except PlanError:
            return
        phase = plan.find(name)
        if phase is not None and not phase.complete:
            plan.mark_complete(phase)
            self.write_plan(plan, reason="job_complete closed the final phase")
