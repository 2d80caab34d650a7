"""The live log of ``run --headless``: :class:`HeadlessLog` prints each event of a run as it comes (see the package's
docstring for what it says and how)."""

from __future__ import annotations

import os
import threading
from typing import TextIO

from console.engine import events as ev
from console.engine.text import safe_text
from console.view import present
from console.view.present import Presented
from console.view.story import Told

# A line as pieces: plain text, or (colour code, text); HeadlessLog.write makes each safe, then colours it.
Part = str | tuple[str, str]

# Colours by severity, and the kinds that get their own (the run's structure stands out from what happens in it).
SEVERITY_COLOR = {"info": "36", "caution": "33", "warning": "1;33", "error": "31", "success": "32"}
KIND_COLOR = {"session": "1", "restart": "1", "session-end": "2", "run-end": "2", "masked": "35", "wind-down": "35",
              "compacted": "2", "restart-pending": "1;33", "restart-approved": "35", "restart-denied": "33",
              "operator": "35", "received": "2", "phase": "1;36", "done": "1;32", "recovered": "1;33",
              "todos": "36", "todo-done": "32", "needs-you": "1;31", "needs-cleared": "32", "reply": "",
              "result": "2"}
# Tools whose result a milestone line says (a task done, a new todo list, the job complete): not said twice.
SAID_BY_MILESTONE = frozenset({"todo_complete", "todo_write", "job_complete"})
INDENT = " " * 8  # the turn line's calls column: the model's text and the results go under the calls
# The events that end the turn in flight (its line is written without tokens).
_TURN_ENDERS = frozenset({ev.SessionStarted, ev.SessionEnded, ev.RunEnded})


def use_color(stream: object) -> bool:
    """Colours on a terminal only, and never when NO_COLOR is set (https://no-color.org) or TERM is dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False


class HeadlessLog:
    """An event subscriber writing the story to ``out``.

    ``run_id``: the run's short id, said on the first line; ``provider``: the provider's name if known before the
    first session starts (otherwise the session_started event says it). ``results``: a line per tool call's result
    under its turn (``logs``; the live log stays compact). ``say_end``: say how the run ended even when its cost is
    unknown (``logs``: no closing line of the cli follows). ``flush``: flush after every line (a live log); else the
    caller flushes (:meth:`flush`).

    What happens during a turn (its results, todo milestones, denials, feedback...) is held and written under the
    turn's line, which is written when the turn ends (its token_usage: the tokens are on it); a needs-you moment is
    written at once, the turn's line first without its tokens."""

    def __init__(self, out: TextIO, color: bool = False, *, run_id: str = "", provider: str = "",
                 results: bool = False, say_end: bool = False, flush: bool = True) -> None:
        self.out = out
        self.color = color
        self.run_id = run_id
        self.provider = provider
        self.results = results
        self.say_end = say_end
        self.autoflush = flush
        self._lock = threading.Lock()
        self._last_msg: ev.AssistantMessage | None = None  # the turn in flight, until its line is written
        self._results: list[tuple[Part, ...]] = []  # its calls' results, under its reply
        self._held: list[tuple[Part, ...]] = []  # what happened in it (failures, denials...), under its results
        self._told = Told()  # which events are told (the one answer every view shares)
        self._phase = ""
        self._job_cost: float | None = None  # the whole job's, from the last token_usage that knew it
        self._price_told = False
        self._restart_answer = False  # the restart-pending line just said how to answer (its needs-you need not)
        self._said_run = False  # the first line (the run's) is written
        self.closed = False

    def _c(self, code: str, text: str) -> str:
        text = safe_text(text, one_line=True)
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and code else text

    def write(self, *parts: Part) -> None:
        """One line of the log: each part (plain text, or a colour code and its text) made safe, then coloured."""
        self._write_lines([self._line(parts)])

    def _line(self, parts: tuple[Part, ...]) -> str:
        return "".join([self._c(*part) if isinstance(part, tuple) else self._c("", part) for part in parts])

    def _write_lines(self, lines: list[str]) -> None:
        """Lines of the log written at once: a turn's lines are one write and one flush, not one per line."""
        if not self._said_run:
            self._say_run()
        with self._lock:
            if self.closed:
                return
            try:
                self.out.write("\n".join(lines) + "\n")
                if self.autoflush:
                    self.out.flush()
            except (OSError, ValueError):
                # The reader went away (`| head`, a closed SSH session): the run goes on without its log.
                self.closed = True

    def missed(self, n: int) -> None:
        """``n`` events were dropped before this log could be written (its reader stopped reading for a while:
        console.engine.events.feed); the run's own log has them."""
        self.write(("33", f"... {n} events not told here (this output was not being read); all of them: "
                          f"agent-console logs {self.run_id or 'RUN'}"))

    def flush(self) -> None:
        with self._lock:
            if self.closed:
                return
            try:
                self.out.flush()
            except (OSError, ValueError):
                self.closed = True

    def _color(self, p: Presented) -> str:
        if p.kind in ("feedback", "error", "session-end", "run-end") and p.severity in ("warning", "error"):
            return SEVERITY_COLOR[p.severity]
        return KIND_COLOR.get(p.kind, SEVERITY_COLOR.get(p.severity, ""))

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

    def __call__(self, e: ev.EventBase) -> None:
        # An event outside the story (a turn started, a call's own event, the guardrails' status) is told by no view,
        # and Told's fold reads only events in it (tests/tui/test_headless.py): passed over by its type's name,
        # before the fold's checks (each a failed isinstance on the event), as two of a turn's five events are.
        if not present.in_story(e) or not self._told.sees(e):
            return
        # Every event type derives from EventBase alone: its exact type says what it is. A failed isinstance on an
        # event costs what a few lines of this method do (the object's __class__ looked up through pydantic's
        # attribute hook), and each of a turn's events used to fail several before its own.
        kind = type(e)
        if kind is ev.AssistantMessage:
            assert isinstance(e, ev.AssistantMessage)
            if self._last_msg is not None:
                self._write_turn(None)  # the turn before never got its usage (a kill): its line all the same
            self._last_msg = e
            return
        if kind is ev.TokenUsage:
            assert isinstance(e, ev.TokenUsage)
            self._job_cost = e.job_cost_usd if e.job_cost_usd is not None else self._job_cost
            if self._last_msg is not None and not e.source:  # a sampling's (mcp_sampled says it): no turn's line
                self._write_turn(e)
            return
        if kind in _TURN_ENDERS and self._last_msg is not None:
            self._write_turn(None)  # a turn cut short: its line without tokens, and what it held
        if kind is ev.ToolResult:
            assert isinstance(e, ev.ToolResult)
            if e.ok:
                if self.results and e.tool not in SAID_BY_MILESTONE:
                    self._result(("2", f"{INDENT}← {present.result_text(e)}"))
                return
        elif kind is ev.TodosChanged:
            assert isinstance(e, ev.TodosChanged)
            self._todos(e)
            return
        elif kind is ev.NeedsOperator:
            assert isinstance(e, ev.NeedsOperator)
            self._needs(e)
            return
        p = present.describe(e)
        if p is None or p.kind == "tool":
            return
        # By the exact type here too: a failed tool call's result, a denial or a feedback went past every check.
        if kind is ev.SessionStarted:
            assert isinstance(e, ev.SessionStarted)
            self._session(e, p)
        elif kind is ev.SessionEnded:
            self.write((self._color(p), p.text + self._cost_so_far()))
        elif kind is ev.RunEnded:
            assert isinstance(e, ev.RunEnded)
            self._run_ended(e, p)
        elif kind is ev.RestartPending:
            run = self.run_id or "JOB"
            self.write((self._color(p), f"{p.line}; answer with `agent-console approve {run}` or "
                                        f"`agent-console deny {run}`"))
            self._restart_answer = True
        elif kind is ev.PhaseTransition and e.stage == "completed":  # type: ignore[attr-defined]
            self._turn_line((self._color(p), f"== {p.line} =="))
        elif kind is ev.JobCompleted:
            self._turn_line((self._color(p), f"{p.icon} {p.line}"))
        elif kind is ev.CommandSandbox or kind is ev.McpServerEvent:  # the header: its line, then a clause a line
            self._turn_line((self._color(p), f"  {p.icon} {p.line}"))
            for line in p.lines:
                self._turn_line(("2", f"      {line}"))
        else:
            self._turn_line((self._color(p), f"  {p.icon} {p.line}"))

    def _result(self, *parts: Part) -> None:
        if self._last_msg is not None:
            self._results.append(parts)
        else:
            self.write(*parts)

    def _session(self, e: ev.SessionStarted, p: Presented) -> None:
        self.provider = e.provider or self.provider
        first = not self._said_run
        self._said_run = True
        self.write((self._color(p), (f"run {self.run_id} · " if first and self.run_id else "") + p.line))
        # Said once per log, and only when the engine said so (an older log has no "priced" at all).
        if "priced" in e.model_fields_set and not e.priced and not self._price_told:
            self._price_told = True
            self.write(("2", f"  {present.unpriced_text(e.model, e.fleet_uncounted)}"))

    def _run_ended(self, e: ev.RunEnded, p: Presented) -> None:
        # Live, the cli's own last line says how the run ended; this one adds the job's cost, when it is known.
        if self._job_cost is None and not self.say_end:
            return
        text = present.run_ended_text(e, self.run_id)
        if self.say_end and p.detail and p.detail != e.reason:
            text += f" ({p.detail})"
        if self._job_cost is not None:
            text += f"; job cost {present.cost(self._job_cost)}"
        self.write((self._color(p), text + self._demo()))

    def _needs(self, e: ev.NeedsOperator) -> None:
        """A needs-you moment, at once and whole: the headline, its evidence, and how to answer it."""
        p = present.describe(e)
        assert p is not None
        if self._last_msg is not None:
            self._write_turn(None)  # the turn it happened in first, without its tokens (they come later)
        self.write((self._color(p), f"{p.icon} {p.text}"))
        for line in p.lines:
            self.write(("33", f"    {line}"))
        said = self._restart_answer and e.reason == "restart_approval"
        answer = "" if said else present.needs_answer(e, self.run_id)
        how = "; ".join(x for x in (p.detail, answer) if x)
        if how:
            self.write(("1", f"    {how}"))
        self._restart_answer = False

    def _write_turn(self, e: ev.TokenUsage | None) -> None:
        """The turn's line: its tool calls and tokens (and cost; none when ``e`` is None: the turn was cut short,
        or its line is due before its end), the model's text, then the calls' results and what happened in it."""
        m = self._last_msg
        if m is None:
            return
        self._last_msg = None
        tools = ", ".join(f"{safe_text(c.name, one_line=True, limit=60)}({present.tool_args(c.name, c.arguments)})"
                          for c in m.tool_calls) or "(no tool call)"
        # The turn's lines are written together: one write, one flush and one lock a turn, not one a line.
        if e is None:
            lines = [self._line((f"  t{m.turn:<4} {tools}",))]
        else:
            tok = present.tokens
            cached = f", {tok(e.cached_input_tokens)} cached" if e.cached_input_tokens else ""
            est = "~" if not e.reported else ""
            budget = e.prompt_budget or e.context_window
            ctx = f" | ctx {present.fill(e.context_tokens / budget)}" if budget else ""
            cost = f" | {present.cost(e.cost_usd)}" if e.cost_usd is not None else ""
            tokens = f"[{est}{tok(e.input_tokens)} in{cached}, {tok(e.output_tokens)} out{ctx}{cost}]"
            lines = [self._line((f"  t{e.turn:<4} {tools}  ", ("2", tokens)))]
        reply = present.describe(m)
        if reply is not None:
            lines.append(self._line(((self._color(reply), f"{INDENT}{reply.icon} {reply.text}"),)))
        lines += [self._line(parts) for parts in (*self._results, *self._held)]
        self._results.clear()
        self._held.clear()
        self._write_lines(lines)

    def _cost_so_far(self) -> str:
        return f"; job cost so far {present.cost(self._job_cost)}" if self._job_cost is not None else ""

    def _todos(self, e: ev.TodosChanged) -> None:
        """Milestones: a new todo list (its phase and size), a task done, a list archived at a transition."""
        p = present.describe(e)
        assert p is not None
        if e.reason.startswith("transition"):
            self._turn_line((self._color(p), f"-- {p.text} --"))
            return
        label = present.phase_label(e)
        if label != self._phase or e.reason in ("todo_write", "bootstrap", "resume", "job_completion"):
            self._phase = label
            self._turn_line(("1;36", f"[{present.todo_list_text(e)}]"))
        if p.kind == "todo-done":
            self._turn_line((self._color(p), f"    {p.icon} {p.text}"))
