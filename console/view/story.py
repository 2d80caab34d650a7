"""Which events an operator sees: the one answer the headless log, ``logs``, the console's panes and the fleet's
"last event" share.

An event is told when its type is in a run's story (:func:`console.view.present.in_story`) and no other line says it
already: a denied call's error result is the denial (said on the call's line), a refused ``job_complete``'s error
result is the refusal (and a ``todo_complete`` refused for want of evidence, its ``todo_refused``), and the stuck
detector's event repeats the feedback block it just delivered. Those answers
depend on what came before, so :class:`Told` is a small fold: feed it every event, in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from console.engine import events as ev
from console.view.present import in_story, stuck_told

# Denied calls remembered (their results follow within the turn; a long run must not grow this).
DENIED_KEEP = 200


class Told:
    """The fold that says whether an operator sees each event on a line of its own."""

    def __init__(self) -> None:
        self.denied: deque[str] = deque(maxlen=DENIED_KEEP)  # call ids denied: their error result is the denial
        self.refusing = False  # job_complete was just refused: its error result is the refusal
        self.refused_tick = False  # todo_complete was just refused for want of evidence: likewise
        self.last_feedback: ev.Feedback | None = None

    def said_elsewhere(self, e: ev.EventBase) -> bool:
        """Fold ``e``; True when another line already says what it says (see the module's docstring)."""
        # By the event's exact type (every event type derives from EventBase alone): a failed isinstance against
        # an event type costs ~1,200 instructions (pydantic's metaclass is an ABCMeta: its __instancecheck__ runs),
        # ~230 for `type(e) is`, and a turn's three events in the story failed up to six each here, in every view.
        fold = _FOLDS.get(type(e))
        return False if fold is None else fold(self, e)

    def _denied(self, e: ev.ToolDenied) -> bool:
        self.denied.append(e.call_id)
        return False

    def _blocked(self, e: ev.CompletionBlocked) -> bool:
        self.refusing = e.stop_reason == "job_complete"
        return False

    def _refused(self, e: ev.TodoRefused) -> bool:
        self.refused_tick = True
        return False

    def _feedback(self, e: ev.Feedback) -> bool:
        self.last_feedback = e
        return False

    def _stuck(self, e: ev.StuckDetected) -> bool:
        return stuck_told(self.last_feedback, e)

    def _result(self, e: ev.ToolResult) -> bool:
        if e.tool == "job_complete" and self.refusing:
            self.refusing = False
            return not e.ok
        if e.tool == "todo_complete" and self.refused_tick:
            self.refused_tick = False
            return not e.ok
        return not e.ok and e.call_id in self.denied

    def sees(self, e: ev.EventBase) -> bool:
        """Fold ``e``; whether an operator sees it on a line of its own in a run's story."""
        return not self.said_elsewhere(e) and in_story(e)


# What Told's fold reads of each event type; every other type is folded as nothing.
_FOLDS: dict[type[ev.EventBase], Callable[[Told, Any], bool]] = {
    ev.ToolDenied: Told._denied, ev.CompletionBlocked: Told._blocked, ev.TodoRefused: Told._refused,
    ev.Feedback: Told._feedback, ev.StuckDetected: Told._stuck, ev.ToolResult: Told._result,
}
