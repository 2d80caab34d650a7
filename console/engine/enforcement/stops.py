"""Stops: job_complete and a turn without a tool call pass the task completion checker, bounded by
max_completion_blocks, and are let through without it once the deadline has passed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.engine import events as ev
from console.engine.enforcement.context import EnforcementContext
from console.engine.enforcement.limits import why
from console.engine.enforcement.world import StopVerdict, flat
from console.engine.evidence import Need, owed_line
from console.engine.guardrails import TaskCompletionContext, TaskCompletionResult
from console.engine.guardrails.budgets import SPEND_LIMITS
from console.engine.guardrails.guardrails import PROTOCOL
from console.engine.plan import Plan, PlanError
from console.engine.record import is_job_complete_task
from console.engine.record import unmet as record_unmet
from console.engine.todos import TodoState


def owed_lines(todos: TodoState) -> list[str]:
    """Tasks marked done without the evidence they name (a run from before the evidence rule, an edited state):
    until the record holds it, the run is not complete (console.engine.evidence; at most 3 named, as the plan
    checker does)."""
    owed = [o for o in todos.owed or [] if o.keys]
    lines = [owed_line(o.text, [_need(k) for k in o.keys[:4]]) for o in owed[:3]]
    if len(owed) > 3:
        lines.append(f"{len(owed) - 3} more tasks were marked done without the evidence they name")
    return lines


def _need(key: str) -> Need:
    kind, _, target = key.partition(":")
    return Need("read" if kind == "read" else "call", target)


class Stops:
    """The task completion checker at every stop. ``load_plan``: main_plan.md as the run parsed it last (raises
    PlanError when it cannot be read)."""

    def __init__(self, ctx: EnforcementContext, *, load_plan: Callable[[], Plan]) -> None:
        self.ctx = ctx
        self._load_plan = load_plan
        # The last refused stop's reason (which checker, what it said), for the question the run asks.
        self.last_refusal = ""

    def blocked_out(self) -> str | None:
        """Why the run must ask its operator (or, told to stop, end) because the agent kept trying to stop an
        unfinished job, or None."""
        g = self.ctx.guardrails
        n, mx = g.completion_blocks, g.max_completion_blocks
        if n <= mx:
            return None
        return (f"the agent tried to stop {n} times with the job incomplete (max_completion_blocks = {mx}); "
                f"{self.last_refusal}" if self.last_refusal else
                f"the agent tried to stop {n} times with the job incomplete (max_completion_blocks = {mx})")

    def new_run(self) -> None:
        """A new run is the operator's decision to go on: refused stops past the bound count from zero again."""
        g = self.ctx.guardrails
        if g.completion_blocks > g.max_completion_blocks:
            g.completion_blocks = 0
            self.ctx.changed()

    # -- stops -----------------------------------------------------------------------------------
    def check_stop(self, stop_reason: str, tentative_output: Any) -> StopVerdict:
        """May the agent stop now? (``job_complete``, or a turn that ended without a tool call.)

        Seed 000's protocol (the harness's record must show the plan done) and a declared checker (seed 002) on
        top; where the job declares ``type = "none"`` every stop is free (the run's outcome still says whether
        the record shows the work done)."""
        g, events = self.ctx.guardrails, self.ctx.events
        spent = g.budget_state.exhausted
        if spent is not None and spent not in SPEND_LIMITS:  # a spend limit pauses the run: no stop gets here
            events.emit(ev.CompletionBypassed, budget=spent, stop_reason=stop_reason,
                        detail=why(g, self.ctx.clock, spent))
            return StopVerdict(True, bypassed=True)
        if g.free_stop:
            # type = "none": the agent stops when it says so; the outcome still says what the record shows.
            return StopVerdict(True)
        result = self.verdict(stop_reason, tentative_output)
        if result.complete and stop_reason == "end_turn" and any(
                not i.done and is_job_complete_task(i.text) for i in self.ctx.todos().items):
            # Everything else is done, but the job's own end is the job_complete call (seed 000's last todo):
            # it records the summary, the deliverables and the agent's confidence.
            result = TaskCompletionResult(False, "Every task is done: call job_complete(summary, deliverables, "
                                                 "confidence, notes) to finish the job.", "job_complete")
        if result.complete:
            return StopVerdict(True)
        g.completion_blocks += 1
        blocks = g.completion_blocks
        self.ctx.changed()
        name = result.checker or getattr(g.checker, "name", PROTOCOL)
        feedback = flat(result.feedback or "the job is not complete", 2000)
        mx = g.max_completion_blocks
        events.emit(ev.CompletionBlocked, reason=f"{name}: {feedback}", checker=name, feedback=feedback,
                    stop_reason=stop_reason, blocks=blocks, max_blocks=mx)
        self.last_refusal = f"{name}: {feedback}"
        g.escalation.refused(self.last_refusal)
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
            f"confidence (below {g.low_confidence:g}) and notes saying why. (Refused stop {blocks} of at "
            f"most {mx}.)]"))

    def verdict(self, stop_reason: str, tentative_output: Any = None) -> TaskCompletionResult:
        """The verdict on a stop now: seed 000's protocol and the declared checker (fail-closed: a checker that
        raises says incomplete)."""
        return self.ctx.guardrails.check_completion(self._completion_context(stop_reason, tentative_output))

    def unmet(self) -> list[str]:
        """What the harness's record of the work says is left (empty: the plan is done)."""
        plan, problem = None, None
        try:
            plan = self._load_plan()
        except PlanError as exc:
            if self.ctx.world.file_exists("main_plan.md"):
                problem = str(exc)
        todos = self.ctx.todos()
        return [*record_unmet(todos, plan, problem), *owed_lines(todos)]

    def _completion_context(self, stop_reason: str, tentative_output: Any) -> TaskCompletionContext:
        todos = self.ctx.todos()
        return TaskCompletionContext(stop_reason=stop_reason, tentative_output=tentative_output,
                                     world=self.ctx.world, open_tasks=tuple(i.text for i in todos.items if not i.done),
                                     unmet=tuple(self.unmet()))
