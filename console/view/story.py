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
        if isinstance(e, ev.ToolDenied):
            self.denied.append(e.call_id)
        elif isinstance(e, ev.CompletionBlocked):
            self.refusing = e.stop_reason == "job_complete"
        elif isinstance(e, ev.TodoRefused):
            self.refused_tick = True
        elif isinstance(e, ev.Feedback):
            self.last_feedback = e
        elif isinstance(e, ev.StuckDetected):
            return stuck_told(self.last_feedback, e)
        elif isinstance(e, ev.ToolResult):
            if e.tool == "job_complete" and self.refusing:
                self.refusing = False
                return not e.ok
            if e.tool == "todo_complete" and self.refused_tick:
                self.refused_tick = False
                return not e.ok
            return not e.ok and e.call_id in self.denied
        return False

    def sees(self, e: ev.EventBase) -> bool:
        """Fold ``e``; whether an operator sees it on a line of its own in a run's story."""
        return not self.said_elsewhere(e) and in_story(e)
