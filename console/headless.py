"""The headless run's live log: one compact line per turn, plus todo and phase milestones."""

from __future__ import annotations

import json
import threading
from typing import TextIO

from console.engine import events as ev


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
    val = str(data[key]).replace("\n", " ")
    return val if len(val) <= limit else val[: limit - 1] + "…"


class HeadlessLog:
    def __init__(self, out: TextIO, color: bool = False) -> None:
        self.out = out
        self.color = color
        self._lock = threading.Lock()
        self._last_msg: ev.AssistantMessage | None = None
        self._held: list[str] = []  # tool failures, printed under their turn's line
        self._phase = ""
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

    def __call__(self, e: ev.EventBase) -> None:
        if isinstance(e, ev.SessionStarted):
            where = f"; continuing {e.detail}" if e.detail else ""
            self.write(self._c("1", f"session {e.session} started ({e.reason}, {e.provider}/{e.model}){where}"))
        elif isinstance(e, ev.StateRecovered):
            moved = f" (kept as {e.moved_to})" if e.moved_to else ""
            self.write(self._c("1;33", f"recovered: {e.file}: {e.problem}{moved}; {e.action}"))
        elif isinstance(e, ev.AssistantMessage):
            self._last_msg = e
        elif isinstance(e, ev.TokenUsage) and self._last_msg is not None:
            m = self._last_msg
            tools = ", ".join(f"{c.name}({_brief_args(c.arguments)})" for c in m.tool_calls) or "(no tool call)"
            cached = f", {_fmt_tokens(e.cached_input_tokens)} cached" if e.cached_input_tokens else ""
            est = "~" if not e.reported else ""
            budget = e.prompt_budget or e.context_window
            ctx = f" | ctx {e.context_tokens / budget:.0%}" if budget else ""
            tokens = f"[{est}{_fmt_tokens(e.input_tokens)} in{cached}, {_fmt_tokens(e.output_tokens)} out{ctx}]"
            self.write(f"  t{e.turn:<4} {tools}  {self._c('2', tokens)}")
            for line in self._held:
                self.write(line)
            self._held.clear()
            self._last_msg = None
        elif isinstance(e, ev.ToolResult) and not e.ok:
            first = e.content.splitlines()[0][:140] if e.content else ""
            self._held.append(self._c("33", f"        ✗ {e.tool}: {first}"))
        elif isinstance(e, ev.ToolDenied):
            self._held.append(self._c("33", f"        ⛔ {e.tool} denied by {e.policy}: {e.reason[:120]}"))
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
                                    + (f" ({e.detail})" if e.detail and e.reason != "job_complete" else "")))
        elif isinstance(e, ev.TodosChanged):
            self._todos(e)
        elif isinstance(e, ev.PhaseTransition) and e.stage == "completed":
            target = f"phase {e.to_phase} '{e.to_name}'" if e.to_phase else f"'{e.to_name}'"
            self.write(self._c("1;36", f"== {e.kind} transition done: now {target} =="))
        elif isinstance(e, ev.ContextCompacted):
            self.write(self._c("2", f"  context compacted: {e.messages_before} messages -> summary "
                                    f"({e.summary_chars} chars)"))
        elif isinstance(e, ev.ErrorEvent):
            self.write(self._c("31", f"  error ({e.where}): {e.message}"))
        elif isinstance(e, ev.StuckDetected):
            self.write(self._c("33", f"  stuck: {e.reason}; the agent was told to finish or rewind"))
        elif isinstance(e, ev.CompletionBlocked):
            self.write(self._c("33", f"  completion blocked: {e.reason}"))
        elif isinstance(e, ev.OperatorCommand):
            self.write(self._c("35", f"  operator: {e.command} {e.status} {e.detail}".rstrip()))
        elif isinstance(e, ev.JobCompleted):
            self.write(self._c("1;32", f"job_complete: {e.summary} (confidence {e.confidence:.2f})"))

    def _todos(self, e: ev.TodosChanged) -> None:
        if e.reason.startswith("transition"):
            self.write(self._c("36", f"-- transition ({e.reason.split(':', 1)[-1]}): todo list archived --"))
            return
        label = ("Bootstrap" if e.kind == "bootstrap" else
                 f"{e.phase_name}" if e.kind == "completion" else f"Phase {e.phase_number}/{e.total_phases} "
                                                                  f"{e.phase_name}")
        if label != self._phase or e.reason in ("todo_write", "bootstrap", "resume", "job_completion"):
            self._phase = label
            self.write(self._c("1;36", f"[{label}] {len(e.items)} tasks"))
        if e.reason in ("todo_complete", "job_complete"):
            done = [i for i in e.items if i.done]
            if done:
                idx = max(n for n, i in enumerate(e.items) if i.done)
                self.write(self._c("32", f"    ✓ {len(done)}/{len(e.items)} {e.items[idx].text}"))
