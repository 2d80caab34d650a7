"""Feedback after each tool call (each block a feedback event, the stuck detector's counted as nudges) and the
guardrails' status the console shows."""

from __future__ import annotations

from typing import Any

from console.engine import events as ev
from console.engine.enforcement.stops import _Stops
from console.engine.enforcement.world import STATUS_REFRESH
from console.engine.guardrails import Feedback, StuckDetector
from console.engine.guardrails.completion import reads_only_the_record
from console.engine.guardrails.feedback import join_blocks
from console.engine.job import one_line
from console.engine.sandbox import SandboxError


class _Status(_Stops):
    """The feedback providers and the guardrails_status event."""

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
        out, blocks = [], []
        for cfg, fb in fired:
            block = fb.render()
            blocks.append(block)
            self.events.emit(ev.Feedback, source=fb.provider_name, severity=fb.severity, message=fb.summary,
                             observations=[o.description for o in fb.observations], suggestions=list(fb.suggestions),
                             call_index=fb.call_index, turn=turn, block=block)
            if isinstance(cfg.provider, StuckDetector):
                pattern = next((o.description for o in fb.observations if o.category == "pattern"), "")
                self.events.emit(ev.StuckDetected, reason=fb.summary, pattern=pattern.split(":", 1)[0])
                # Counted toward asking the operator, with the failing calls' errors as the evidence.
                self.g.escalation.nudged(pattern or fb.summary, fb.evidence)
                if self.on_stuck is not None:
                    self.on_stuck(pattern or fb.summary)
            out.append(fb)
        return out, join_blocks(blocks)  # render_feedback(out), each block rendered once

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
        key = (todos.generation, todos.kind, tuple([i.done for i in todos.items]), todos.pending is not None,
               len(todos.closed or ()), plan_key)
        # Other files a checker looks at (files = [...]) are looked at again every few seconds; the plan checker's
        # verdict is in the key (its recomputation was a fifth of a turn's bookkeeping, every few seconds).
        stale = (not reads_only_the_record(self.g.checker)
                 and self.clock.monotonic() - self._verdict_at >= STATUS_REFRESH)
        if key != self._verdict_key or self._verdict_text is None or stale:
            self._verdict_at = self.clock.monotonic()
            r = self.verdict("status")
            # Its whole text within reason: the console wraps it (300 cut the list of phases left short).
            self._verdict_text = "complete" if r.complete else f"incomplete: {one_line(r.feedback or '', 1200)}"
            self._verdict_key = key
        return self._verdict_text

    # -- the status the console shows ------------------------------------------------------------
    def status(self, force: bool = False) -> None:
        """Emit ``guardrails_status`` when what guards the run changed (or ``force``)."""
        now = self.clock.now()
        d = self.g.describe(now)
        # Seed 000's protocol holds for every job (a free stop's outcome says what the record shows too).
        verdict = self._status_verdict()
        # The policies' and providers' rows as described (tuples): compared as they are, and made the event's models
        # only when the status is emitted, which is seldom (every turn compares it).
        body = {
            "policies": d["policies"], "feedback": d["feedback"],
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
        self.events.emit(ev.GuardrailsStatus, **{
            **body, "policies": [ev.PolicyInfo(name=n, kind=k, detail=dt) for n, k, dt in d["policies"]],
            "feedback": [ev.FeedbackInfo(name=n, kind=k, trigger=t, next=x) for n, k, t, x in d["feedback"]]})
