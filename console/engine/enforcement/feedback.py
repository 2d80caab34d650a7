"""Feedback: after each tool call, the providers whose triggers fire produce ``<feedback>`` blocks that reach the
agent after the turn's tool results, each a ``feedback`` event; the stuck detector's count as nudges toward
asking the operator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.engine import events as ev
from console.engine.enforcement.context import EnforcementContext
from console.engine.guardrails import Feedback, StuckDetector, ToolCallSummary
from console.engine.guardrails.feedback import join_blocks
from console.engine.messages import Message, ToolCall


class FeedbackDelivery:
    """The feedback providers: what they hear of each turn, and the blocks they produce. ``on_stuck`` hears of each
    stuck pattern (the run's experiences.md)."""

    def __init__(self, ctx: EnforcementContext, *, on_stuck: Callable[[str], None] | None = None) -> None:
        self.ctx = ctx
        self.on_stuck = on_stuck

    def session_started(self, number: int) -> None:
        """Session ``number`` starts, new or resumed: the file triggers fire once per session (seed 002), recorded
        with the session's start."""
        if self.ctx.guardrails.feedback.session_started(number):
            self.ctx.changed()

    def record_turn(self, turn: int, calls: list[ToolCall], results: dict[str, Message]) -> None:
        """The turn's calls, for the feedback providers (the stuck detector's history), taken from the recorded
        conversation at the turn's end: one change of state per turn, and a resumed turn records the same."""
        for call in calls:
            result = results.get(call.id)
            ok = result is not None and result.meta.get("ok", True) is not False
            self.ctx.guardrails.feedback.record_call(ToolCallSummary.of(
                call.name, call.arguments, ok, result.content if result is not None else "", turn))
        if calls:
            self.ctx.changed()

    def collect(self, turn: int, turns_without_progress: int, *, session: int = 0,
                prompt: Any = None) -> tuple[list[Feedback], str]:
        """The feedback after a tool call: the providers' records and the text to deliver. ``session`` and
        ``prompt`` (the request the model was sent, or a function that gives it) reach the providers'
        FeedbackContext."""
        g, events = self.ctx.guardrails, self.ctx.events
        now = self.ctx.clock.now()
        deadline = g.deadline()
        fired = g.feedback.collect(now=now, world=self.ctx.world, deadline=deadline, turn=turn,
                                   turns_without_progress=turns_without_progress, session=session, prompt=prompt)
        for err in g.feedback.errors:
            events.emit(ev.ErrorEvent, message=f"feedback provider failed: {err}"[:2000], where="guardrails",
                        recoverable=True)
        g.feedback.errors.clear()
        if not fired:
            return [], ""
        self.ctx.changed()
        out, blocks = [], []
        for cfg, fb in fired:
            block = fb.render()
            blocks.append(block)
            events.emit(ev.Feedback, source=fb.provider_name, severity=fb.severity, message=fb.summary,
                        observations=[o.description for o in fb.observations], suggestions=list(fb.suggestions),
                        call_index=fb.call_index, turn=turn, block=block)
            if isinstance(cfg.provider, StuckDetector):
                pattern = next((o.description for o in fb.observations if o.category == "pattern"), "")
                events.emit(ev.StuckDetected, reason=fb.summary, pattern=pattern.split(":", 1)[0])
                # Counted toward asking the operator, with the failing calls' errors as the evidence.
                g.escalation.nudged(pattern or fb.summary, fb.evidence)
                if self.on_stuck is not None:
                    self.on_stuck(pattern or fb.summary)
            out.append(fb)
        return out, join_blocks(blocks)  # render_feedback(out), each block rendered once
