"""The guardrails' status the console shows (``guardrails_status``): the policies, the feedback providers, the
completion checker's verdict now, the budgets and what confines the job's commands; emitted when it changed."""

from __future__ import annotations

from typing import Any

from console.engine import events as ev
from console.engine.enforcement.context import EnforcementContext
from console.engine.enforcement.stops import Stops
from console.engine.enforcement.world import STATUS_REFRESH
from console.engine.guardrails.completion import reads_only_the_record
from console.engine.job_files import one_line
from console.engine.sandbox import SandboxError


class StatusReport:
    """The guardrails_status event, and the checker's verdict it shows (from ``stops``), recomputed only when what
    the checker reads may have changed."""

    def __init__(self, ctx: EnforcementContext, stops: Stops) -> None:
        self.ctx = ctx
        self._stops = stops
        # What confines the job-declared commands, and their names (set once the run's tools are built).
        self.confinement = ""
        self.command_tools: list[str] = []
        self._last_status: dict[str, Any] | None = None
        self._verdict_key: tuple[Any, ...] | None = None
        self._verdict_text: str | None = None
        self._verdict_at = 0.0

    def _status_verdict(self) -> str:
        """The checker's verdict for the console, recomputed only when what it reads may have changed (the
        todo list, main_plan.md, the files it checks): reading and parsing the plan every turn is not free."""
        todos = self.ctx.todos()
        clock = self.ctx.clock
        try:
            sandbox = getattr(self.ctx.world, "sandbox", None)  # a world without a folder (tests) has no plan to watch
            info = sandbox.info("main_plan.md") if sandbox is not None else None
            plan_key = (info.size, info.mtime) if info is not None else None
        except SandboxError:
            plan_key = None
        key = (todos.generation, todos.kind, tuple([i.done for i in todos.items]), todos.pending is not None,
               len(todos.closed or ()), plan_key)
        # Other files a checker looks at (files = [...]) are looked at again every few seconds; the plan checker's
        # verdict is in the key (its recomputation was a fifth of a turn's bookkeeping, every few seconds).
        stale = (not reads_only_the_record(self.ctx.guardrails.checker)
                 and clock.monotonic() - self._verdict_at >= STATUS_REFRESH)
        if key != self._verdict_key or self._verdict_text is None or stale:
            self._verdict_at = clock.monotonic()
            r = self._stops.verdict("status")
            # Its whole text within reason: the console wraps it (300 cut the list of phases left short).
            self._verdict_text = "complete" if r.complete else f"incomplete: {one_line(r.feedback or '', 1200)}"
            self._verdict_key = key
        return self._verdict_text

    def emit(self, force: bool = False) -> None:
        """Emit ``guardrails_status`` when what guards the run changed (or ``force``)."""
        g = self.ctx.guardrails
        now = self.ctx.clock.now()
        d = g.describe(now)
        # Seed 000's protocol holds for every job (a free stop's outcome says what the record shows too).
        verdict = self._status_verdict()
        # The policies' and providers' rows as described (tuples): compared as they are, and made the event's models
        # only when the status is emitted, which is seldom (every turn compares it).
        body = {
            "policies": d["policies"], "feedback": d["feedback"],
            "checker": d["checker"], "verdict": verdict,
            "completion_blocks": g.completion_blocks, "max_completion_blocks": g.max_completion_blocks,
            "deadline_at": d.get("deadline_at"), "budget_tokens": d.get("budget_tokens"),
            "tokens_used": g.budget_state.tokens_used, "confinement": self.confinement,
            "tools": list(self.command_tools),
            "budget_usd": d.get("budget_usd"), "cost_usd": round(g.budget_state.cost_usd, 6),
        }
        # Tokens and cost move every turn: the status says so again only at each percent of their budget (the
        # limits now: with the slices the operator granted).
        budget, budget_usd = d.get("budget_tokens"), d.get("budget_usd")
        key = {**body, "tokens_used": body["tokens_used"] // max(1, budget // 100) if budget else 0,
               "cost_usd": int(body["cost_usd"] * 100 // budget_usd) if budget_usd else 0}
        if not force and key == self._last_status:
            return
        self._last_status = key
        self.ctx.events.emit(ev.GuardrailsStatus, **{
            **body, "policies": [ev.PolicyInfo(name=n, kind=k, detail=dt) for n, k, dt in d["policies"]],
            "feedback": [ev.FeedbackInfo(name=n, kind=k, trigger=t, next=x) for n, k, t, x in d["feedback"]]})
