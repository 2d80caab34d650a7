"""A run's story as lines of text: the live log of ``run --headless``, and ``agent-console logs`` (a finished run's,
or a live one's, followed). One compact line per turn (its calls and tokens) with the model's text under it, todo
and phase milestones, and one line per thing the engine, the guardrails or the operator did, needs-you moments
first among them (in :mod:`console.view.present`'s words, the same as the console's; :class:`console.view.story.Told`
says which events are told, for every view).

The first line names the run (its short id, when the caller gives it) and says when the model is the offline
scripted demo. Costs are shown when the model's price is known (the turn's on its line, the job's at a session's
and the run's end); otherwise one line says so, once. A model retry is one line while the engine waits.

Every line is written by :meth:`HeadlessLog.write`, which makes each piece of it safe for the terminal
(:func:`console.engine.text.safe_text`: an escape sequence in a tool's name or a summary is shown, never run)
before colouring it: the colours are the only control sequences the log writes.

The live log is :mod:`.live`, ``agent-console logs`` :mod:`.logs`; both are importable from here.
"""

from __future__ import annotations

from console.headless.live import HeadlessLog, Part, use_color
from console.headless.logs import (
    LOCK_EVERY_S,
    MAX_LINE,
    POLL_S,
    QUIET_S,
    READ_CHUNK,
    LogEnd,
    LogReader,
    StoryPrinter,
)

__all__ = ["LOCK_EVERY_S", "MAX_LINE", "POLL_S", "QUIET_S", "READ_CHUNK", "HeadlessLog", "LogEnd", "LogReader", "Part",
           "StoryPrinter", "use_color"]
