"""The headless run's live log: one compact line per turn, plus todo and phase milestones.

Costs are shown when the model's price is known (the turn's on its line, the job's at a session's and the run's
end); otherwise one line says so, once. A model retry is one line while the engine waits.
"""

from __future__ import annotations

import json
import threading
from typing import TextIO

from console import present
from console.engine import events as ev
from console.engine.job import one_line

LINE = 240  # the most of one piece of agent or guardrail text a line carries


def _fmt_tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _pct(used: int, window: int) -> str:
    return f"{used / window:.0%}" if window else "?"


def _brief_args(raw: str, limit: int = 48) -> str:
    try:
        data = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return "<bad json>"
    if not isinstance(data, dict) or not data:
        return ""
    key = next((k for k in ("path", "pattern", "text", "issue", "summary") if k in data), None)
    if key is None:
        if "todos" in data and isinstance(data["todos"], list):
            return f"{len(data['todos'])} tasks"
        key = next(iter(data))
    return one_line(str(data[key]).replace("\n", " "), limit)


class HeadlessLog:
    def __init__(self, out: TextIO, color: bool = False) -> None:
        self.out = out
        self.color = color
        self._lock = threading.Lock()
        self._last_msg: ev.AssistantMessage | None = None
        self._held: list[str] = []  # what happened in a turn (failures, denials, feedback), printed under its line
        self._denied: set[str] = set()  # call ids denied this turn: their error result is the denial, not a failure
        self._feedback: ev.Feedback | None = None
        self._refusing = False
        self._phase = ""
        self._job_cost: float | None = None  # the whole job's, from the last token_usage that knew it
        self._price_told = False
        self.closed = False

    def _c(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def write(self, line: str) -> None:
        with self._lock:
            if self.closed:
                return
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (OSError, ValueError):
                # The reader went away (`| head`, a closed SSH session): the run goes on without its log.
                self.closed = True

    def _turn_line(self, line: str) -> None:
        """A line about the turn in flight goes under that turn's line; between turns it is written at once."""
        if self._last_msg is not None:
            self._held.append(line)
        else:
            self.write(line)

    def _flush_held(self) -> None:
        for line in self._held:
            self.write(line)
        self._held.clear()
        self._denied.clear()

    def _guardrail(self, e: ev.EventBase) -> None:
        if isinstance(e, ev.ToolDenied):
            self._denied.add(e.call_id)
            failed = f" (the policy failed: {one_line(e.error, 120)})" if e.error else ""
            self._turn_line(self._c("33", f"  ✗ denied {one_line(e.tool, 60)} by {one_line(e.policy, 60)}: "
                                          f"{one_line(e.reason, LINE)}{failed}"))
        elif isinstance(e, ev.Feedback):
            self._feedback = e
            color = {"info": "36", "caution": "33", "warning": "1;33"}.get(e.severity, "31")
            self._turn_line(self._c(color, f"  ◆ feedback {one_line(e.source, 60)} ({e.severity}): "
                                           f"{one_line(e.message, LINE)}"))
        elif isinstance(e, ev.CompletionBlocked):
            self._refusing = e.stop_reason == "job_complete"
            who = one_line(e.checker, 60) if e.checker else ""
            count = f"{e.blocks}/{e.max_blocks}" if e.max_blocks else ""
            where = f" ({', '.join(p for p in (who, count) if p)})" if who or count else ""
            self._turn_line(self._c("33", f"  ⛔ stop refused{where}: {one_line(e.feedback or e.reason, LINE)}"))
        elif isinstance(e, ev.CompletionBypassed):
            self._turn_line(self._c("33", f"  ⏭ completion check bypassed ({e.budget} spent): "
                                          f"{one_line(e.stop_reason, 40) or 'the stop'} accepted unchecked"))
        elif isinstance(e, ev.BudgetExhausted):
            detail = one_line(e.detail, LINE) if e.detail else f"{e.used:g} of {e.limit:g}"
            self._turn_line(self._c("1;33", f"  ⌛ budget exhausted ({e.budget}): {detail}; the agent was told to "
                                            "wrap up"))
        elif isinstance(e, ev.StuckDetected):
            fb = self._feedback
            if fb is not None and fb.message == e.reason and 0 < e.seq - fb.seq <= 2:
                return  # the stuck detector's feedback line said it
            pattern = f" ({one_line(e.pattern, 80)})" if e.pattern else ""
            self._turn_line(self._c("33", f"  ⟳ stuck: {one_line(e.reason, LINE)}{pattern}"))

    def __call__(self, e: ev.EventBase) -> None:
        if isinstance(e, ev.ToolDenied | ev.Feedback | ev.CompletionBlocked | ev.CompletionBypassed
                      | ev.BudgetExhausted | ev.StuckDetected):
            self._guardrail(e)
            return
        if isinstance(e, ev.SessionEnded | ev.RunEnded | ev.JobCompleted) and self._held:
            self._last_msg = None  # a turn cut short never gets its line: what it held is not lost
            self._flush_held()
        if isinstance(e, ev.SessionStarted):
            where = f"; continuing {one_line(e.detail, 0)}" if e.detail else ""
            self.write(self._c("1", f"session {e.session} started ({e.reason}, {e.provider}/{e.model}){where}"))
            # Said once per log, and only when the engine said so (an older log has no "priced" at all).
            if "priced" in e.model_fields_set and not e.priced and not self._price_told:
                self._price_told = True
                self.write(self._c("2", f"  {present.unpriced_text(e.model)}"))
        elif isinstance(e, ev.ModelRetry):
            self.write(self._c("33", f"  ⧗ {present.retry_text(e, message=160)}"))
        elif isinstance(e, ev.StateRecovered):
            moved = f" (kept as {e.moved_to})" if e.moved_to else ""
            self.write(self._c("1;33", one_line(f"recovered: {e.file}: {e.problem}{moved}; {e.action}", 0)))
        elif isinstance(e, ev.AssistantMessage):
            self._last_msg = e
        elif isinstance(e, ev.TokenUsage) and self._last_msg is None:
            self._job_cost = e.job_cost_usd if e.job_cost_usd is not None else self._job_cost
        elif isinstance(e, ev.TokenUsage) and self._last_msg is not None:
            self._job_cost = e.job_cost_usd if e.job_cost_usd is not None else self._job_cost
            m = self._last_msg
            tools = ", ".join(f"{c.name}({_brief_args(c.arguments)})" for c in m.tool_calls) or "(no tool call)"
            cached = f", {_fmt_tokens(e.cached_input_tokens)} cached" if e.cached_input_tokens else ""
            est = "~" if not e.reported else ""
            budget = e.prompt_budget or e.context_window
            ctx = f" | ctx {e.context_tokens / budget:.0%}" if budget else ""
            cost = f" | {present.cost(e.cost_usd)}" if e.cost_usd is not None else ""
            tokens = (f"[{est}{_fmt_tokens(e.input_tokens)} in{cached}, {_fmt_tokens(e.output_tokens)} out{ctx}"
                      f"{cost}]")
            self.write(f"  t{e.turn:<4} {tools}  {self._c('2', tokens)}")
            self._flush_held()
            self._last_msg = None
        elif isinstance(e, ev.ToolResult) and self._refusing and e.tool == "job_complete":
            self._refusing = False  # its error result is the refusal, already on its line
        elif isinstance(e, ev.ToolResult) and not e.ok and e.call_id not in self._denied:
            first = one_line(next((ln for ln in e.content.splitlines() if ln.strip()), "(no message)").strip(), 140)
            if e.duration_ms and e.duration_ms >= 1000:
                first += f" ({e.duration_ms / 1000:.1f} s)"
            self._turn_line(self._c("33", f"        ✗ {one_line(e.tool, 60)}: {first}"))
        elif isinstance(e, ev.ContextMasked):
            budget = e.prompt_budget or e.context_window
            change = f"{_pct(e.used_before, budget)} -> {_pct(e.used_after, budget)}"
            self.write(self._c("35", f"  context: masked {e.masked} old tool result(s), freed "
                                     f"~{_fmt_tokens(e.tokens_freed)} ({change})"))
        elif isinstance(e, ev.WindDown):
            self.write(self._c("35", f"  context: {e.usage_pct:.0%} full, wind-down sent (one more turn, "
                                     "then restart)"))
        elif isinstance(e, ev.RestartPending):
            self.write(self._c("1;33", f"restart pending: context {e.usage_pct:.0%} full; session {e.next_session} "
                                       f"would start with {e.carryover_messages} carried messages. "
                                       "Approve with `agent-console approve JOB`, or deny."))
        elif isinstance(e, ev.RestartApproved):
            self.write(self._c("35", f"  restart approved ({e.by})"))
        elif isinstance(e, ev.RestartDenied):
            self.write(self._c("33", f"  restart denied ({e.by})"))
        elif isinstance(e, ev.SessionEnded):
            self.write(self._c("2", f"session {e.session} ended: {e.reason} after {e.turns} turns"
                                    + (f" ({one_line(e.detail, 0)})" if e.detail and e.reason != "job_complete"
                                       else "") + self._cost_so_far()))
        elif isinstance(e, ev.RunEnded) and self._job_cost is not None:
            sessions = f" after {e.sessions} session{'s' if e.sessions != 1 else ''}" if e.sessions else ""
            self.write(self._c("2", f"run ended: {one_line(e.reason, 80)}{sessions}; job cost "
                                    f"{present.cost(self._job_cost)}"))
        elif isinstance(e, ev.TodosChanged):
            self._todos(e)
        elif isinstance(e, ev.PhaseTransition) and e.stage == "completed":
            target = one_line(f"phase {e.to_phase} '{e.to_name}'" if e.to_phase else f"'{e.to_name}'", 0)
            self.write(self._c("1;36", f"== {e.kind} transition done: now {target} =="))
        elif isinstance(e, ev.ContextCompacted):
            self.write(self._c("2", f"  context compacted: {e.messages_before} messages -> summary "
                                    f"({e.summary_chars} chars)"))
        elif isinstance(e, ev.ErrorEvent):
            self.write(self._c("31", f"  error ({e.where}): {one_line(e.message, 0)}"))
        elif isinstance(e, ev.OperatorCommand) and e.status == "discarded":
            self.write(self._c("2", f"  operator: {present.discarded_text(e)}"))
        elif isinstance(e, ev.OperatorCommand):
            self.write(self._c("35", f"  operator: {e.command} {e.status} {one_line(e.detail, 0)}".rstrip()))
        elif isinstance(e, ev.JobCompleted):
            self.write(self._c("1;32", f"job_complete: {one_line(e.summary, 0)} (confidence {e.confidence:.2f})"))

    def _cost_so_far(self) -> str:
        return f"; job cost so far {present.cost(self._job_cost)}" if self._job_cost is not None else ""

    def _todos(self, e: ev.TodosChanged) -> None:
        if e.reason.startswith("transition"):
            why = one_line(e.reason.split(":", 1)[-1], 0)
            self.write(self._c("36", f"-- transition ({why}): todo list archived --"))
            return
        label = one_line("Bootstrap" if e.kind == "bootstrap" else
                         f"{e.phase_name}" if e.kind == "completion" else f"Phase {e.phase_number}/{e.total_phases} "
                                                                          f"{e.phase_name}", 0)
        if label != self._phase or e.reason in ("todo_write", "bootstrap", "resume", "job_completion"):
            self._phase = label
            self.write(self._c("1;36", f"[{label}] {len(e.items)} tasks"))
        if e.reason in ("todo_complete", "job_complete"):
            done = [i for i in e.items if i.done]
            if done:
                idx = max(n for n, i in enumerate(e.items) if i.done)
                self.write(self._c("32", f"    ✓ {len(done)}/{len(e.items)} {one_line(e.items[idx].text, LINE)}"))
