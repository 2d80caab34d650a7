"""The headless run's live log: one compact line per turn, plus todo and phase milestones and one line per thing the
engine, the guardrails or the operator did (in :mod:`console.present`'s words, the same as the console's).

The first line names the run (its short id, when the caller gives it) and says when the model is the offline
scripted demo. Costs are shown when the model's price is known (the turn's on its line, the job's at a session's
and the run's end); otherwise one line says so, once. A model retry is one line while the engine waits.

Every line is written by :meth:`HeadlessLog.write`, which makes each piece of it safe for the terminal
(:func:`console.engine.text.safe_text`: an escape sequence in a tool's name or a summary is shown, never run)
before colouring it: the colours are the only control sequences the log writes.
"""

from __future__ import annotations

import threading
from typing import TextIO

from console import present
from console.engine import events as ev
from console.engine.text import safe_text
from console.present import Presented

# A line as pieces: plain text, or (colour code, text); HeadlessLog.write makes each safe, then colours it.
Part = str | tuple[str, str]

# Colours by severity, and the kinds that get their own (the run's structure stands out from what happens in it).
SEVERITY_COLOR = {"info": "36", "caution": "33", "warning": "1;33", "error": "31", "success": "32"}
KIND_COLOR = {"session": "1", "restart": "1", "session-end": "2", "run-end": "2", "masked": "35", "wind-down": "35",
              "compacted": "2", "restart-pending": "1;33", "restart-approved": "35", "restart-denied": "33",
              "operator": "35", "received": "2", "phase": "1;36", "done": "1;32", "recovered": "1;33",
              "todos": "36", "todo-done": "32"}
# Lines about what happened in a turn: printed under that turn's line.
TURN_KINDS = frozenset({"denied", "feedback", "blocked", "bypassed", "budget", "stuck", "tool-failed"})


class HeadlessLog:
    """An event subscriber writing the log to ``out``.

    ``run_id``: the run's short id, said on the first line; ``provider``: the provider's name if known before the
    first session starts (otherwise the session_started event says it)."""

    def __init__(self, out: TextIO, color: bool = False, *, run_id: str = "", provider: str = "") -> None:
        self.out = out
        self.color = color
        self.run_id = run_id
        self.provider = provider
        self._lock = threading.Lock()
        self._last_msg: ev.AssistantMessage | None = None
        self._held: list[tuple[Part, ...]] = []  # what happened in a turn (failures, denials...), under its line
        self._denied: set[str] = set()  # call ids denied this turn: their error result is the denial, not a failure
        self._feedback: ev.Feedback | None = None
        self._refusing = False
        self._phase = ""
        self._job_cost: float | None = None  # the whole job's, from the last token_usage that knew it
        self._price_told = False
        self._said_run = False  # the first line (the run's) is written
        self.closed = False

    def _c(self, code: str, text: str) -> str:
        text = safe_text(text, one_line=True)
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and code else text

    def write(self, *parts: Part) -> None:
        """One line of the log: each part (plain text, or a colour code and its text) made safe, then coloured."""
        line = "".join(self._c(*part) if isinstance(part, tuple) else self._c("", part) for part in parts)
        if not self._said_run:
            self._say_run()
        with self._lock:
            if self.closed:
                return
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (OSError, ValueError):
                # The reader went away (`| head`, a closed SSH session): the run goes on without its log.
                self.closed = True

    def _color(self, p: Presented) -> str:
        if p.kind in ("feedback", "error", "session-end", "run-end") and p.severity in ("warning", "error"):
            return SEVERITY_COLOR[p.severity]
        return KIND_COLOR.get(p.kind) or SEVERITY_COLOR.get(p.severity, "")

    def _demo(self) -> str:
        return f"; {present.DEMO}" if present.is_demo(self.provider) else ""

    def _say_run(self) -> None:
        """The log's first line names the run (and says when the model is the scripted demo)."""
        if self._said_run:
            return
        self._said_run = True
        if self.run_id or present.is_demo(self.provider):
            head = f"run {self.run_id}" if self.run_id else "run"
            self.write(("1", head + self._demo()))

    def _turn_line(self, *parts: Part) -> None:
        """A line about the turn in flight goes under that turn's line; between turns it is written at once."""
        if self._last_msg is not None:
            self._held.append(parts)
        else:
            self.write(*parts)

    def _flush_held(self) -> None:
        for parts in self._held:
            self.write(*parts)
        self._held.clear()
        self._denied.clear()

    def __call__(self, e: ev.EventBase) -> None:
        if isinstance(e, ev.AssistantMessage):
            self._last_msg = e
            return
        if isinstance(e, ev.TokenUsage):
            self._turn(e)
            return
        if isinstance(e, ev.SessionEnded | ev.RunEnded | ev.JobCompleted) and self._held:
            self._last_msg = None  # a turn cut short never gets its line: what it held is not lost
            self._flush_held()
        if isinstance(e, ev.ToolDenied):
            self._denied.add(e.call_id)
        elif isinstance(e, ev.CompletionBlocked):
            self._refusing = e.stop_reason == "job_complete"
        elif isinstance(e, ev.Feedback):
            self._feedback = e
        elif isinstance(e, ev.StuckDetected) and present.stuck_told(self._feedback, e):
            return  # the stuck detector's feedback line said it
        elif isinstance(e, ev.ToolResult):
            if self._refusing and e.tool == "job_complete":
                self._refusing = False  # its error result is the refusal, already on its line
                return
            if e.call_id in self._denied:
                return  # its error result is the denial, already on its line
        elif isinstance(e, ev.TodosChanged):
            self._todos(e)
            return
        p = present.describe(e)
        if p is None or p.kind == "tool":
            return
        if isinstance(e, ev.SessionStarted):
            self._session(e, p)
        elif isinstance(e, ev.SessionEnded):
            self.write((self._color(p), p.text + self._cost_so_far()))
        elif isinstance(e, ev.RunEnded):
            # The cli's own last line says how the run ended; this one adds the job's cost, when it is known.
            if self._job_cost is not None:
                self.write((self._color(p), f"{present.run_ended_text(e, self.run_id)}; job cost "
                                            f"{present.cost(self._job_cost)}{self._demo()}"))
        elif isinstance(e, ev.RestartPending):
            run = self.run_id or "JOB"
            self.write((self._color(p), f"{p.line}; answer with `agent-console approve {run}` or "
                                        f"`agent-console deny {run}`"))
        elif isinstance(e, ev.PhaseTransition) and e.stage == "completed":
            self.write((self._color(p), f"== {p.line} =="))
        elif isinstance(e, ev.JobCompleted):
            self.write((self._color(p), f"{p.icon} {p.line}"))
        elif p.kind in TURN_KINDS:
            self._turn_line((self._color(p), f"  {p.icon} {p.line}"))
        else:
            self.write((self._color(p), f"  {p.icon} {p.line}"))

    def _session(self, e: ev.SessionStarted, p: Presented) -> None:
        self.provider = e.provider or self.provider
        first = not self._said_run
        self._said_run = True
        self.write((self._color(p), (f"run {self.run_id} · " if first and self.run_id else "") + p.line))
        # Said once per log, and only when the engine said so (an older log has no "priced" at all).
        if "priced" in e.model_fields_set and not e.priced and not self._price_told:
            self._price_told = True
            self.write(("2", f"  {present.unpriced_text(e.model)}"))

    def _turn(self, e: ev.TokenUsage) -> None:
        """The turn's line: its tool calls and tokens (and cost), then what happened in it."""
        self._job_cost = e.job_cost_usd if e.job_cost_usd is not None else self._job_cost
        m = self._last_msg
        if m is None:
            return
        tools = ", ".join(f"{safe_text(c.name, one_line=True, limit=60)}({present.tool_args(c.name, c.arguments)})"
                          for c in m.tool_calls) \
            or "(no tool call)"
        tok = present.tokens
        cached = f", {tok(e.cached_input_tokens)} cached" if e.cached_input_tokens else ""
        est = "~" if not e.reported else ""
        budget = e.prompt_budget or e.context_window
        ctx = f" | ctx {e.context_tokens / budget:.0%}" if budget else ""
        cost = f" | {present.cost(e.cost_usd)}" if e.cost_usd is not None else ""
        tokens = f"[{est}{tok(e.input_tokens)} in{cached}, {tok(e.output_tokens)} out{ctx}{cost}]"
        self.write(f"  t{e.turn:<4} {tools}  ", ("2", tokens))
        self._flush_held()
        self._last_msg = None

    def _cost_so_far(self) -> str:
        return f"; job cost so far {present.cost(self._job_cost)}" if self._job_cost is not None else ""

    def _todos(self, e: ev.TodosChanged) -> None:
        """Milestones: a new todo list (its phase and size), a task done, a list archived at a transition."""
        p = present.describe(e)
        assert p is not None
        if e.reason.startswith("transition"):
            self.write((self._color(p), f"-- {p.text} --"))
            return
        label = present.phase_label(e)
        if label != self._phase or e.reason in ("todo_write", "bootstrap", "resume", "job_completion"):
            self._phase = label
            self.write(("1;36", f"[{present.todo_list_text(e)}]"))
        if p.kind == "todo-done":
            self.write((self._color(p), f"    {p.icon} {p.text}"))
