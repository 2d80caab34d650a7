"""Enforcement: where the job's guardrails (:mod:`console.engine.guardrails`) meet the run.

The guardrails package is pure logic; this module gives it the run's narrow world and records what it
decides, so that every decision is an event and its state a recorded component of the run:

- the tool gate: every model tool call passes the policies before it runs (a denial is the call's error
  result and a ``tool_denied`` event); a decision that looked at the job folder is recorded before the
  call acts, so the redo of a call a kill interrupted is judged as the first attempt was;
- stops: ``job_complete`` and a turn without a tool call pass the task completion checker, bounded by
  ``max_completion_blocks`` (past it the run asks its operator), and are let through without it once the
  deadline has passed (recorded);
- budgets: the deadline and the wrap-up turn it grants; the token and money budgets, spend limits that pause
  the run and ask its operator, whose resume grants one more slice (``budget_raised``);
- feedback: after each tool call, the providers whose triggers fire produce ``<feedback>`` blocks
  that reach the agent after the turn's tool results, each a ``feedback`` event; the stuck detector's count as nudges,
  and ``stuck_escalate_after`` nudges without progress ask the operator.

What the run asks its operator is decided here and recorded in the guardrails' state (a kill while the run
waits loses nothing); the loop does the asking (:func:`console.engine.needs.ask_operator`) and the waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from console.engine import events as ev
from console.engine.clock import Clock
from console.engine.cost import format_cost
from console.engine.guardrails import (
    Feedback,
    GateVerdict,
    Guardrails,
    GuardrailState,
    StuckDetector,
    TaskCompletionContext,
    TaskCompletionResult,
    ToolCallSummary,
    render_feedback,
)
from console.engine.guardrails.budgets import SPEND_LIMITS, WRAP_UP_SECONDS, Exhausted, format_duration
from console.engine.guardrails.escalation import Pending
from console.engine.guardrails.guardrails import PROTOCOL
from console.engine.job import one_line
from console.engine.messages import Message, ToolCall
from console.engine.plan import Plan, PlanError
from console.engine.record import is_job_complete_task
from console.engine.record import unmet as record_unmet
from console.engine.sandbox import Sandbox, SandboxError
from console.engine.text import safe_text
from console.engine.todos import TodoState

# Seconds between two looks at the files a completion checker names, for the console's status.
STATUS_REFRESH = 5.0
# The kind of message that carries feedback blocks in the conversation (after the turn's tool results).
FEEDBACK_KIND = "feedback"
# The deadline's wrap-up turn (the spend limits ask the operator instead: no turn is spent past them).
WRAP_UP = {
    "deadline": "[The job's deadline ({limit}) has passed. Wrap up NOW, in this turn: save what you have, record "
                "what is left with add_note, and call job_complete with an honest confidence and notes. The run "
                "ends after this turn.]",
}


def flat(text: str, limit: int) -> str:
    """A checker's feedback on one line for the agent and the log: lines joined with a space (never a literal
    "\\n"), control characters escaped, at most ``limit`` characters."""
    return safe_text(text, one_line=True, join=True, limit=limit)


class SandboxWorld:
    """The job folder as the guardrails may see it: through the sandbox, like the agent's own tools."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def normalize(self, path: str) -> str | None:
        try:
            rel = self.sandbox.check(path)
        except SandboxError:
            return None
        return None if rel == "." else rel

    def file_exists(self, path: str) -> bool:
        try:
            info = self.sandbox.info(self.sandbox.check(path))
        except SandboxError:
            return False
        return info is not None and info.kind == "file"


@dataclass
class StopVerdict:
    allowed: bool
    # What the agent is told when the stop is refused.
    message: str = ""
    # The refusals are past max_completion_blocks: the run asks its operator, with this reason.
    give_up: str | None = None
    bypassed: bool = False


@dataclass(frozen=True)
class BudgetTurn:
    """What the budgets call for at a turn boundary (at most one of these is set)."""

    wrap_up: str | None = None  # the deadline passed: give the agent this message, for its wrap-up turn
    ends: str | None = None  # the wrap-up turn was had: the run ends now, for this reason
    ask: str | None = None  # a spend limit is reached: the run asks its operator (why), with the evidence
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ask:
    """A need to put to the operator: the reason recorded, the message and the evidence."""

    reason: Pending
    message: str
    evidence: tuple[str, ...]


class Enforcer:
    """The run's guardrails, with the world and the recorders they need (a narrow context, not the Runtime)."""

    def __init__(self, guardrails: Guardrails, *, events: ev.EventStream, clock: Clock, world: SandboxWorld,
                 changed: Callable[[], None], record_intent: Callable[[str, dict[str, Any]], None],
                 redo: Callable[[str], dict[str, Any] | None], todos: Callable[[], TodoState],
                 load_plan: Callable[[], Plan]) -> None:
        self.g = guardrails
        self.events = events
        self.clock = clock
        self.world = world
        self._changed = changed
        self._record_intent = record_intent
        self._redo = redo
        self._todos = todos
        self._load_plan = load_plan
        self._last_status: dict[str, Any] | None = None
        self.last_refusal = ""
        self._verdict_key: tuple[Any, ...] | None = None
        self._verdict_text: str | None = None
        self._verdict_at = 0.0
        self.confinement = ""
        self.command_tools: list[str] = []
        self.on_stuck: Callable[[str], None] | None = None  # the run's experiences.md hears of each stuck pattern

    # -- state -----------------------------------------------------------------------------------
    def snapshot(self) -> GuardrailState:
        return self.g.snapshot()

    def restore(self, state: GuardrailState) -> None:
        self.g.restore(state)

    def start(self, priced: bool | None = None) -> None:
        """The run starts (or resumes): the budgets' clock starts once per job, and an operator who raised a
        spent budget in job.toml gets the run going again.

        ``priced``: whether the model's prices are known. False with a ``budget_usd`` set: no cost is ever
        counted, so that budget can never be reached; the operator is told so once, at the start."""
        budget_usd = self.g.budgets.budget_usd
        if priced is False and budget_usd is not None:
            self.events.emit(ev.ErrorEvent, where="guardrails", recoverable=True, message=(
                f"budget_usd = {format_cost(budget_usd)} can never be reached: no price is known for this model, "
                "so no cost is counted. Add the model under [prices] in the config (see README), or limit the "
                "job with budget_tokens."))
        st = self.g.budget_state
        now = self.clock.now()
        before = (st.model_dump(), self.g.feedback.state.started_at)
        self.g.start(now)
        if st.exhausted is not None:
            st.exhausted, wrap = None, st.wrap_up_turns
            if (kind := self.g.exhausted(now)) is None or kind in SPEND_LIMITS:
                # Raised in job.toml (the run goes on), or still at a spend limit: the run asks again at its
                # first turn boundary; no wrap-up turn is involved either way.
                st.wrap_up_turns, st.wrap_up_until = 0, None
            else:
                st.wrap_up_turns = wrap
                if st.wrap_up_until is not None:
                    # Resumed in (or after) the wrap-up turn: the operator's resume gives it its time again.
                    st.wrap_up_until = now + timedelta(seconds=WRAP_UP_SECONDS)
        # A new run is the operator's decision to go on: refused stops count from zero again.
        if self.g.completion_blocks > self.g.max_completion_blocks:
            self.g.completion_blocks = 0
            self._changed()
        if (st.model_dump(), self.g.feedback.state.started_at) != before:
            self._changed()

    def blocked_out(self) -> str | None:
        """Why the run must ask its operator (or, told to stop, end) because the agent kept trying to stop an
        unfinished job, or None."""
        n, mx = self.g.completion_blocks, self.g.max_completion_blocks
        if n <= mx:
            return None
        return (f"the agent tried to stop {n} times with the job incomplete (max_completion_blocks = {mx}); "
                f"{self.last_refusal}" if self.last_refusal else
                f"the agent tried to stop {n} times with the job incomplete (max_completion_blocks = {mx})")

    def spent(self) -> str | None:
        """Why the run ends now because the deadline passed and its wrap-up turn was given, or None."""
        st = self.g.budget_state
        if st.exhausted is None or st.exhausted in SPEND_LIMITS or st.wrap_up_turns < 1:
            return None
        return self.why(st.exhausted)

    def cut_at(self) -> datetime | None:
        """When work in flight (a model call, a command) must be cut: the deadline, or once a spent budget has
        granted the wrap-up turn, the end of that turn's time. None: nothing bounds a turn."""
        st = self.g.budget_state
        if st.wrap_up_until is not None:
            return st.wrap_up_until
        deadline = self.g.budgets.deadline(st)
        return deadline.expires_at if deadline is not None else None

    def seconds_to_cut(self) -> float | None:
        """Seconds until :meth:`cut_at` (negative once past), None without one."""
        at = self.cut_at()
        return None if at is None else (at - self.clock.now()).total_seconds()

    # -- the tool gate ---------------------------------------------------------------------------
    def gate(self, turn: int, call_id: str, tool: str, params: Mapping[str, Any]) -> str | None:
        """None if every policy allows the call, else the error result the agent gets (and the event)."""
        key = f"{call_id}#gate"
        recorded = self._redo(key)
        if recorded is not None and recorded.get("allowed") is True:
            return None  # the first attempt was allowed and may have acted: judge the redo the same way
        verdict: GateVerdict = self.g.gate.check(tool, params, self.world)
        if verdict.allowed:
            if verdict.consulted_world:
                # The call is about to change what the policy looked at (a new file becomes an existing one).
                self._record_intent(key, {"allowed": True})
            return None
        reason = one_line(verdict.reason, 2000)
        self.events.emit(ev.ToolDenied, turn=turn, call_id=call_id, tool=tool, policy=verdict.policy or "?",
                         reason=reason, error=verdict.error)
        return f"Denied by the {verdict.policy} policy: {reason}"

    def after_call(self, tool: str, params: Mapping[str, Any] | None, ok: bool, *, denied: bool) -> None:
        """A call that ran has its result: the policies learn from it (recorded with the call's own step)."""
        if params is None or denied:
            return
        before = self.g.gate.snapshot()
        for err in self.g.gate.on_result(tool, params, ok, self.world):
            self.events.emit(ev.ErrorEvent, message=f"policy bookkeeping failed: {err}"[:2000],
                             where="guardrails", recoverable=True)
        if self.g.gate.snapshot() != before:
            self._changed()

    def record_turn(self, turn: int, calls: list[ToolCall], results: dict[str, Message]) -> None:
        """The turn's calls, for the feedback providers (the stuck detector's history), taken from the recorded
        conversation at the turn's end: one change of state per turn, and a resumed turn records the same."""
        for call in calls:
            result = results.get(call.id)
            ok = result is not None and result.meta.get("ok", True) is not False
            self.g.feedback.record_call(ToolCallSummary.of(call.name, call.arguments, ok,
                                                           result.content if result is not None else "", turn))
        if calls:
            self._changed()

    # -- budgets ---------------------------------------------------------------------------------
    def count_tokens(self, n: int, cost_usd: float | None = None) -> float | None:
        """Count a turn's tokens and cost; returns the job's cost so far (None while no price is known)."""
        if n > 0:
            self.g.add_tokens(n)
            self._changed()
        if cost_usd is not None:
            self.g.add_cost(cost_usd)
            self._changed()
            return self.g.budget_state.cost_usd
        return self.g.budget_state.cost_usd or None

    def budget_turn(self) -> BudgetTurn:
        """At a turn boundary: what the budgets call for. The deadline: a wrap-up turn, then the run's end. A
        spend limit (tokens, money): the operator is asked, every boundary until they answer (the loop holds)."""
        st = self.g.budget_state
        was = st.exhausted
        kind = self.g.exhausted(self.clock.now())
        if kind is None:
            return BudgetTurn()
        limit, used = self._limit(kind)
        if was is None:
            self.events.emit(ev.BudgetExhausted, budget=kind, limit=limit, used=used, detail=self.why(kind))
            self._changed()
        if kind in SPEND_LIMITS:
            return BudgetTurn(ask=self.why(kind), evidence=self._spend_evidence(kind))
        if st.wrap_up_turns >= 1:
            return BudgetTurn(ends=self.why(kind))
        st.wrap_up_turns += 1
        st.wrap_up_until = self.clock.now() + timedelta(seconds=WRAP_UP_SECONDS)
        self._changed()
        return BudgetTurn(wrap_up=WRAP_UP[kind].format(limit=self._shown_limit(kind)))

    def _spend_evidence(self, kind: Exhausted) -> tuple[str, ...]:
        st, b = self.g.budget_state, self.g.budgets
        grants = st.token_grants if kind == "tokens" else st.cost_grants
        if kind == "tokens":
            slice_, after = f"{b.budget_tokens or 0:,} tokens", f"{(b.budget_tokens or 0) * (grants + 2):,} tokens"
        else:
            slice_, after = format_cost(b.budget_usd or 0), format_cost((b.budget_usd or 0) * (grants + 2))
        lines = [self.why(kind)]
        if grants:
            lines.append(f"the operator granted {grants} more slice{'s' if grants != 1 else ''} of {slice_} so far")
        lines.append(f"resume grants one more slice of {slice_} (the limit becomes {after}); stop ends the run as "
                     "out of budget")
        return tuple(lines)

    def spend_limit(self) -> str | None:
        """Why a spend limit (tokens, money) holds the run, or None."""
        kind = self.g.budget_state.exhausted
        return self.why(kind) if kind is not None and kind in SPEND_LIMITS else None

    def grant(self, by: str) -> bool:
        """The operator's resume at a spend limit: one more slice of that budget (recorded, with an event).
        False if no spend limit is reached (nothing to grant)."""
        st = self.g.budget_state
        kind = st.exhausted
        if kind not in SPEND_LIMITS:
            return False
        before, used = self._limit(kind)
        if kind == "tokens":
            st.token_grants += 1
            grants = st.token_grants
        else:
            st.cost_grants += 1
            grants = st.cost_grants
        st.exhausted = None
        st.wrap_up_turns, st.wrap_up_until = 0, None
        limit, _ = self._limit(kind)
        shown = self._shown_limit(kind)
        self.events.emit(ev.BudgetRaised, budget=kind, limit=limit, added=round(limit - before, 6), used=used,
                         grants=grants, by=by, detail=f"{by}: the {'token' if kind == 'tokens' else 'money'} "
                                                     f"budget is now {shown} (one more slice granted)")
        self._changed()
        self.status(force=True)
        return True

    def _limit(self, kind: str) -> tuple[float, float]:
        """(the budget's limit now, what is used of it): tokens, dollars or seconds."""
        st, b = self.g.budget_state, self.g.budgets
        if kind == "tokens":
            return float(b.token_limit(st) or 0), float(st.tokens_used)
        if kind == "cost":
            return float(b.usd_limit(st) or 0), round(st.cost_usd, 6)
        elapsed = (self.clock.now() - st.started_at).total_seconds() if st.started_at else 0.0
        return float(b.deadline_seconds or 0), round(elapsed, 3)

    def _shown_limit(self, kind: str) -> str:
        st, b = self.g.budget_state, self.g.budgets
        if kind == "tokens":
            return f"{b.token_limit(st) or 0:,} tokens"
        if kind == "cost":
            return format_cost(b.usd_limit(st) or 0)
        return format_duration(b.deadline_seconds or 0)

    def why(self, kind: str) -> str:
        limit, used = self._limit(kind)
        if kind == "tokens":
            return f"token budget spent: {int(used):,} of {int(limit):,} tokens used"
        if kind == "cost":
            return f"money budget spent: {format_cost(used)} of {format_cost(limit)} used"
        return f"deadline passed: {format_duration(used)} since the job started, deadline {format_duration(limit)}"

    # -- stops -----------------------------------------------------------------------------------
    def check_stop(self, stop_reason: str, tentative_output: Any) -> StopVerdict:
        """May the agent stop now? (``job_complete``, or a turn that ended without a tool call.)

        Seed 000's protocol (the harness's record must show the plan done) and a declared checker (seed 002) on
        top; where the job declares ``type = "none"`` every stop is free (the run's outcome still says whether
        the record shows the work done)."""
        spent = self.g.budget_state.exhausted
        if spent is not None and spent not in SPEND_LIMITS:  # a spend limit pauses the run: no stop gets here
            self.events.emit(ev.CompletionBypassed, budget=spent, stop_reason=stop_reason, detail=self.why(spent))
            return StopVerdict(True, bypassed=True)
        if self.g.free_stop:
            # type = "none": the agent stops when it says so; the outcome still says what the record shows.
            return StopVerdict(True)
        result = self.verdict(stop_reason, tentative_output)
        if result.complete and stop_reason == "end_turn" and any(
                not i.done and is_job_complete_task(i.text) for i in self._todos().items):
            # Everything else is done, but the job's own end is the job_complete call (seed 000's last todo):
            # it records the summary, the deliverables and the agent's confidence.
            result = TaskCompletionResult(False, "Every task is done: call job_complete(summary, deliverables, "
                                                 "confidence, notes) to finish the job.", "job_complete")
        if result.complete:
            return StopVerdict(True)
        self.g.completion_blocks += 1
        blocks = self.g.completion_blocks
        self._changed()
        name = result.checker or getattr(self.g.checker, "name", PROTOCOL)
        feedback = flat(result.feedback or "the job is not complete", 2000)
        mx = self.g.max_completion_blocks
        self.events.emit(ev.CompletionBlocked, reason=f"{name}: {feedback}", checker=name, feedback=feedback,
                         stop_reason=stop_reason, blocks=blocks, max_blocks=mx)
        self.last_refusal = f"{name}: {feedback}"
        self.g.escalation.refused(self.last_refusal)
        if blocks > mx:
            return StopVerdict(False, give_up=self.blocked_out(), message=(
                f"[The stop was refused again ({name}): {feedback} That was more refused stops than the "
                f"{mx} allowed: the run now waits for your operator to review it. If they let it go on, continue "
                "with the task marked ← CURRENT in the ACTIVE TODO LIST, or call todo_rewind(issue) to re-plan.]"))
        how = ("job_complete was refused" if stop_reason == "job_complete"
               else "You ended your turn without a tool call, but the stop was refused")
        return StopVerdict(False, message=(
            f"[{how}: the job is not complete ({name}). {feedback} Continue with the task marked ← CURRENT in "
            "the ACTIVE TODO LIST and call todo_complete() when it is done. If the job cannot be done this way, "
            f"call todo_rewind(issue) to re-plan; if it cannot be done at all, call job_complete with a low "
            f"confidence (below {self.g.low_confidence:g}) and notes saying why. (Refused stop {blocks} of at "
            f"most {mx}.)]"))

    def verdict(self, stop_reason: str, tentative_output: Any = None) -> TaskCompletionResult:
        """The verdict on a stop now: seed 000's protocol and the declared checker (fail-closed: a checker that
        raises says incomplete)."""
        return self.g.check_completion(self._completion_context(stop_reason, tentative_output))

    def unmet(self) -> list[str]:
        """What the harness's record of the work says is left (empty: the plan is done)."""
        plan, problem = None, None
        try:
            plan = self._load_plan()
        except PlanError as exc:
            if self.world.file_exists("main_plan.md"):
                problem = str(exc)
        return record_unmet(self._todos(), plan, problem)

    def _completion_context(self, stop_reason: str, tentative_output: Any) -> TaskCompletionContext:
        todos = self._todos()
        return TaskCompletionContext(stop_reason=stop_reason, tentative_output=tentative_output, world=self.world,
                                     open_tasks=tuple(i.text for i in todos.items if not i.done),
                                     unmet=tuple(self.unmet()))

    def progressed(self) -> None:
        """A todo was completed (or the todo list is new): refused stops and stuck nudges count again from zero
        (the bounds are on stops and nudges without progress)."""
        esc = self.g.escalation
        if self.g.completion_blocks or esc.state.refusals:
            self.g.completion_blocks = 0
            esc.refusals_cleared()
            self._changed()
        if esc.progressed():
            self._changed()

    def rewound(self) -> None:
        self.g.reset_for_rewind()
        self._changed()

    # -- asking the operator ---------------------------------------------------------------------
    def stuck_ask(self, idle_turns: int) -> Ask | None:
        """The agent was nudged ``stuck_escalate_after`` times without progress: what to ask its operator."""
        esc = self.g.escalation
        if not esc.stuck_due():
            return None
        n = esc.state.stuck_nudges
        return Ask("stuck", f"the agent looks stuck: {n} nudges without progress did not help. Resume lets it go on "
                            "(the count starts over), rewind re-plans with your words, stop ends the run",
                   tuple(esc.stuck_evidence(idle_turns)))

    def completion_ask(self) -> Ask | None:
        """The agent's stops were refused past max_completion_blocks: what to ask its operator."""
        why = self.blocked_out()
        if why is None or self.g.escalation.state.pending is not None:
            return None
        mx = self.g.max_completion_blocks
        reasons: list[str] = self.g.escalation.state.refusals or ([self.last_refusal] if self.last_refusal else [])
        return Ask("completion_refused", f"the agent tried to stop {self.g.completion_blocks} times with the job "
                                         f"incomplete. Resume gives it {mx} more tries, rewind re-plans with your "
                                         "words, stop ends the run as incomplete",
                   (*reasons, f"{self.g.completion_blocks} refused stops without a completed todo "
                              f"(max_completion_blocks = {mx})"))

    def pending(self) -> Ask | None:
        """The need the run waits on its operator for (recorded: a run killed while it waited asks again)."""
        st = self.g.escalation.state
        return None if st.pending is None else Ask(st.pending, st.message, tuple(st.evidence))

    def record_ask(self, ask: Ask) -> None:
        self.g.escalation.ask(ask.reason, ask.message, list(ask.evidence))
        self._changed()

    def forget_ask(self) -> None:
        """The need went away by itself (a spend limit raised in job.toml between runs)."""
        if self.g.escalation.state.pending is not None:
            self.g.escalation.answered()
            self._changed()

    def answer(self, *, resumed: bool, by: str) -> Pending | None:
        """The operator answered the pending need. ``resumed``: the run goes on, with what that grants (a stuck
        count from zero, a spend limit's next slice, the full max_completion_blocks again); else they stopped it
        (the budget stays spent and the refused stops stay counted: the run ends as it would have). Returns the
        reason answered, None if nothing was pending."""
        reason = self.g.escalation.answered()
        if reason is None:
            return None
        if resumed and reason == "budget":
            self.grant(by)
        elif resumed and reason == "completion_refused":
            self.g.completion_blocks = 0
        self._changed()
        return reason

    # -- feedback --------------------------------------------------------------------------------
    def collect_feedback(self, turn: int, turns_without_progress: int, *, session: int = 0,
                         prompt: Any = None) -> tuple[list[Feedback], str]:
        """The feedback after a tool call: the providers' records and the text to deliver. ``session`` and
        ``prompt`` (the request the model was sent, or a function that gives it) reach the providers'
        FeedbackContext."""
        now = self.clock.now()
        deadline = self.g.deadline()
        fired = self.g.feedback.collect(now=now, world=self.world, deadline=deadline, turn=turn,
                                        turns_without_progress=turns_without_progress, session=session,
                                        prompt=prompt)
        for err in self.g.feedback.errors:
            self.events.emit(ev.ErrorEvent, message=f"feedback provider failed: {err}"[:2000], where="guardrails",
                             recoverable=True)
        self.g.feedback.errors.clear()
        if not fired:
            return [], ""
        self._changed()
        out = []
        for cfg, fb in fired:
            block = fb.render()
            self.events.emit(ev.Feedback, source=fb.provider_name, severity=fb.severity, message=fb.summary,
                             observations=[o.description for o in fb.observations], suggestions=list(fb.suggestions),
                             call_index=fb.call_index, turn=turn, block=block)
            if isinstance(cfg.provider, StuckDetector):
                pattern = next((o.description for o in fb.observations if o.category == "pattern"), "")
                self.events.emit(ev.StuckDetected, reason=fb.summary, pattern=pattern.split(":", 1)[0])
                self.g.escalation.nudged(pattern or fb.summary)  # counted toward asking the operator
                if self.on_stuck is not None:
                    self.on_stuck(pattern or fb.summary)
            out.append(fb)
        return out, render_feedback(out)

    def _status_verdict(self) -> str:
        """The checker's verdict for the console, recomputed only when what it reads may have changed (the
        todo list, main_plan.md, the files it checks): reading and parsing the plan every turn is not free."""
        todos = self._todos()
        try:
            sandbox = getattr(self.world, "sandbox", None)  # a world without a folder (tests) has no plan to watch
            info = sandbox.info("main_plan.md") if sandbox is not None else None
            plan_key = (info.size, info.mtime) if info is not None else None
        except SandboxError:
            plan_key = None
        key = (todos.generation, todos.kind, tuple(i.done for i in todos.items), plan_key)
        # Other files a checker looks at (files = [...]) are looked at again every few seconds.
        stale = self.clock.monotonic() - self._verdict_at >= STATUS_REFRESH
        if key != self._verdict_key or self._verdict_text is None or stale:
            self._verdict_at = self.clock.monotonic()
            r = self.verdict("status")
            self._verdict_text = "complete" if r.complete else f"incomplete: {one_line(r.feedback or '', 300)}"
            self._verdict_key = key
        return self._verdict_text

    # -- the status the console shows ------------------------------------------------------------
    def status(self, force: bool = False) -> None:
        """Emit ``guardrails_status`` when what guards the run changed (or ``force``)."""
        now = self.clock.now()
        d = self.g.describe(now)
        # Seed 000's protocol holds for every job (a free stop's outcome says what the record shows too).
        verdict = self._status_verdict()
        body = {
            "policies": [ev.PolicyInfo(name=n, kind=k, detail=dt) for n, k, dt in d["policies"]],
            "feedback": [ev.FeedbackInfo(name=n, kind=k, trigger=t, next=x) for n, k, t, x in d["feedback"]],
            "checker": d["checker"], "verdict": verdict,
            "completion_blocks": self.g.completion_blocks, "max_completion_blocks": self.g.max_completion_blocks,
            "deadline_at": d.get("deadline_at"), "budget_tokens": d.get("budget_tokens"),
            "tokens_used": self.g.budget_state.tokens_used, "confinement": self.confinement,
            "tools": list(self.command_tools),
            "budget_usd": d.get("budget_usd"), "cost_usd": round(self.g.budget_state.cost_usd, 6),
        }
        # Tokens and cost move every turn: the status says so again only at each percent of their budget (the
        # limits now: with the slices the operator granted).
        budget, budget_usd = d.get("budget_tokens"), d.get("budget_usd")
        key = {**body, "tokens_used": body["tokens_used"] // max(1, budget // 100) if budget else 0,
               "cost_usd": int(body["cost_usd"] * 100 // budget_usd) if budget_usd else 0}
        if not force and key == self._last_status:
            return
        self._last_status = key
        self.events.emit(ev.GuardrailsStatus, **body)

