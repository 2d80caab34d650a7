"""Operator-facing wording shared by the views: one description per event, used by the headless log, the console
(feedback pane, conversation notices, the gauge's last action) and the fleet view.

:func:`describe` turns an engine event into a :class:`Presented`: an icon, a kind, a severity and one line of plain
text (no colours, no markup, no control characters: agent text can neither break nor colour a line). Each view
styles and places it (the headless log indents it under its turn, the console colours it by severity, the fleet
view shows :func:`brief`), but the words are these, once. :func:`tool_args` is the one formatter of a tool call's
arguments, :func:`reply_text` of the model's text and :func:`result_text` of a call's result in a log line.
:func:`in_story` says which events make a run's story (the headless log and ``agent-console logs``).
Pure functions of engine events: no Textual here (import-linter keeps it so).
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from console.engine import events as ev
from console.engine.cost import format_cost
from console.engine.job import one_line
from console.engine.text import safe_text

# Said wherever an operator could take the offline scripted model's output for a real model's.
DEMO = "scripted demo model: deterministic, no AI"
DEMO_PROVIDER = "scripted"

TEXT = 240  # the most of one piece of agent or guardrail text a description carries
SEVERITIES = ("info", "caution", "warning", "error", "success")
# Kinds too frequent or too routine to be "the last thing that happened" in a fleet row or a notice.
QUIET_KINDS = frozenset({"tool", "received"})

__all__ = [
    "DEMO", "QUIET_KINDS", "STORY_TYPES", "Presented", "argument_items", "brief", "cost", "describe",
    "discarded_text", "flat", "in_story", "is_demo", "need_label", "needs_answer", "phase_label", "phase_short",
    "reply_text", "result_text", "retry_badge", "retry_text", "run_ended_text", "safe_event", "stop_kind",
    "stuck_told", "todo_list_text", "tokens", "tool_args", "unpriced_text", "window_text",
]


@dataclass(frozen=True, slots=True)
class Presented:
    """One event as an operator reads it.

    ``kind`` says what happened in one word the views style by (``denied``, ``masked``, ``session``, ...);
    ``severity`` is one of :data:`SEVERITIES`; ``text`` is the line itself and ``detail`` what it means for the
    run, which a view short of room (the fleet's one line) may leave out; ``source`` is who acted (a policy, a
    feedback provider, "context", "engine", ...); ``lines``: what a view with room shows under it (the evidence
    of a needs-you moment).
    """

    icon: str
    kind: str
    severity: str
    text: str
    detail: str = ""
    source: str = ""
    seq: int = 0
    ts: datetime | None = None
    # More lines a view may show under this one, each one line of plain text: a needs-you's evidence.
    lines: tuple[str, ...] = ()

    @property
    def line(self) -> str:
        """The text and its detail: ``masked the 3 oldest tool results, ...; the agent now sees placeholders``."""
        return f"{self.text}; {self.detail}" if self.detail else self.text


def brief(p: Presented | None, limit: int = 0) -> str:
    """``⊗ denied write_file by read_before_write: ...``: an event in one line of at most ``limit`` characters
    (0: no limit), for a fleet row or a status line."""
    if p is None:
        return ""
    text = f"{p.icon} {p.text}" if p.icon else p.text
    return text if not limit or len(text) <= limit else text[: max(0, limit - 1)] + "…"


def is_demo(provider: str) -> bool:
    """The offline scripted model: its replies are a deterministic script, not an AI's."""
    return provider == DEMO_PROVIDER


# -- small wording helpers ---------------------------------------------------------------------------------------
def flat(text: str, limit: int = TEXT) -> str:
    """``text`` on one line, as prose reads: line breaks become spaces, every other control character is shown
    escaped (:func:`console.engine.text.safe_text`); at most ``limit`` characters (0: no limit)."""
    return safe_text(text, one_line=True, join=True, limit=limit)


def safe_event(e: ev.EventBase) -> ev.EventBase:
    """``e`` with every text it carries, at any depth, made safe for a terminal (multi-line: a reply or a tool
    result keeps its newlines and tabs; see :func:`console.engine.text.safe_text`). The views fold what they show
    from this, so no field of an event can reach a widget raw. ``e`` itself when nothing needed it (the usual
    case: a check of each string, no copy)."""
    update = _safe_fields(e)
    return e if update is None else e.model_copy(update=update)


def _safe_fields(model: BaseModel) -> dict[str, Any] | None:
    update: dict[str, Any] = {}
    values = model.__dict__
    for name in _text_fields(type(model)):
        value = values.get(name)
        safe = _safe_value(value)
        if safe is not value:
            update[name] = safe
    return update or None


@functools.cache
def _text_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of ``cls`` that may hold text: not its numbers, times, flags or Literal constants (a view folds
    thousands of text deltas a second: each is one string to check, not eight fields)."""
    return tuple(name for name, field in cls.model_fields.items() if _may_hold_text(field.annotation))


def _may_hold_text(annotation: Any) -> bool:
    if annotation in (int, float, bool, datetime, type(None)):
        return False
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return False  # validated against our own constants when the event was made or read
    if origin in (typing.Union, types.UnionType):
        return any(_may_hold_text(arg) for arg in typing.get_args(annotation))
    return True


def _safe_value(value: Any) -> Any:
    """``value`` made safe, or ``value`` itself (the same object) when it is already."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, BaseModel):
        update = _safe_fields(value)
        return value if update is None else value.model_copy(update=update)
    if isinstance(value, list | tuple):
        items = [_safe_value(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        pairs = [(_safe_value(k), _safe_value(v)) for k, v in value.items()]
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value


def tokens(n: int | float) -> str:
    """``950``, ``1.2k``, ``56k``, ``2.50M``."""
    n = int(n)
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "?"


def cost(usd: float | None) -> str:
    """``$0.42``, or "" when the price is unknown (the views leave cost out then, never "n/a")."""
    return "" if usd is None else format_cost(usd)


def unpriced_text(model: str) -> str:
    """Said once per view when the model's price is unknown (``session_started.priced`` is False)."""
    name = one_line(model, 80) or "this model"
    return (f"no price known for {name}: costs are not shown; add it under [prices] in the config "
            "(see README)")


def _seconds(s: float) -> str:
    # A jittered first wait is often under a second: "0 s" would read as "not at all".
    return f"{s:.1f} s" if 0 < s < 9.95 and s != round(s) else f"{max(0, round(s))} s"


def retry_text(e: ev.ModelRetry, message: int = 0) -> str:
    """``rate limited; retrying in 32 s, attempt 3 (waited 48 s of max 600 s)``: one model retry, in one line.

    The waits so far are said from the second wait on (the first one says nothing more than its delay).
    ``message``: add up to that many characters of the provider's own message (0: none)."""
    cause = one_line(e.cause, 60) or "model call failed"
    text = f"{cause}; retrying in {_seconds(e.delay_s)}, attempt {e.attempt}"
    if e.max_wait_s > 0 and e.waited_s > e.delay_s + 0.5:
        text += f" (waited {_seconds(e.waited_s)} of max {_seconds(e.max_wait_s)})"
    said = flat(e.message, message) if message and e.message.strip() else ""
    if said and said.strip().lower() != cause.lower():
        text += f": {said}"
    return text


def retry_badge(e: ev.ModelRetry, left_s: float | None, short: bool = False) -> str:
    """The state while a retry waits: ``waiting: rate limited, retry in 32 s`` (``left_s``: seconds left, counting
    down; None: the delay as announced), then ``retrying: attempt 3`` once the wait is over. ``short``: ``retry in
    32 s`` and ``retrying``, for a narrow line."""
    if left_s is not None and left_s <= 0:
        return "retrying" if short else f"retrying: attempt {e.attempt}"
    left = e.delay_s if left_s is None else left_s
    seconds = max(1, -int(-left // 1))
    if short:
        return f"retry in {seconds} s"
    cause = one_line(e.cause, 28) or "model call failed"
    return f"waiting: {cause}, retry in {seconds} s"


def discarded_text(e: ev.OperatorCommand) -> str:
    """``discarded stop from an earlier run``: a command left in the inbox for a run that is over."""
    detail = f" ({flat(e.detail, 160)})" if e.detail else ""
    return f"discarded {one_line(e.command.replace('_', ' '), 40)} from an earlier run{detail}"


def window_text(window: int, source: str) -> str:
    """``window 200k (registry: claude-sonnet-4-5)``: the context window and where the figure came from."""
    if not window:
        return ""
    if window >= 1_000_000:
        n = f"{window / 1_000_000:g}M" if window % 100_000 == 0 else f"{window / 1_000_000:.2f}M"
    elif window >= 10_000:
        n = f"{round(window / 1000)}k"
    else:
        n = f"{window:,}"
    where = f" ({one_line(source, 60)})" if source else ""
    return f"window {n}{where}"


def phase_short(t: ev.TodosChanged | None) -> str:
    """``2/4`` (``boot``, ``done``, ``→`` between phases): the phase in a list's narrow column."""
    if t is None:
        return ""
    short = {"bootstrap": "boot", "completion": "done", "transition": "→"}.get(t.kind)
    if short:
        return short
    return f"{t.phase_number}/{t.total_phases}" if t.phase_number and t.total_phases else ""


def phase_label(t: ev.TodosChanged | None) -> str:
    """``Name (X of Y)`` as the agent sees it in Layer 2."""
    if t is None:
        return ""
    if t.kind == "transition":
        return "transition in progress"
    if t.kind == "bootstrap":
        return "Bootstrap"
    if t.kind == "completion":
        return flat(t.phase_name, 120) or "Job Completion"
    if t.phase_number and t.total_phases:
        return f"{flat(t.phase_name, 120)} ({t.phase_number} of {t.total_phases})"
    return flat(t.phase_name, 120)


def stop_kind(stop_reason: str) -> str:
    """What the agent did to stop: ``job_complete``, ``a turn without a tool call``."""
    return {"job_complete": "job_complete", "end_turn": "a turn without a tool call"}.get(
        stop_reason, one_line(stop_reason, 40) or "a stop")


BUDGET_SPENT = {"deadline": "the deadline passed", "tokens": "the token budget is spent",
                "cost": "the money budget is spent"}


def stuck_told(last: ev.Feedback | None, e: ev.StuckDetected) -> bool:
    """The stuck detector is a feedback provider: its block, just delivered, already says what this says."""
    return last is not None and last.message == e.reason and 0 < e.seq - last.seq <= 2


# A run's outcome (events.Outcome) in the operator's words, and how each is shown.
OUTCOME_WORDS = {"completed": "completed", "gave_up": "the agent gave up", "incomplete": "incomplete",
                 "failed": "failed"}
OUTCOME_SEVERITY = {"completed": "success", "gave_up": "warning", "incomplete": "warning", "failed": "error"}


def outcome_text(outcome: str | None, reason: str) -> str:
    """``incomplete (stopped by the operator)``: the outcome first, then what ended the run when it says more."""
    why = REASON_WORDS.get(reason) or one_line(reason.replace("_", " "), 80)
    if outcome is None:  # a log from before outcomes were recorded
        return why
    said = OUTCOME_WORDS.get(outcome, one_line(outcome, 40))
    return said if outcome in ("completed", "gave_up") and reason in ("job_complete", "gave_up") else f"{said} ({why})"


# What ended a run (a run_ended or session_ended reason), in words.
REASON_WORDS = {"job_complete": "job_complete", "user_shutdown": "stopped",
                "max_turns": "turn limit reached", "error": "an error", "context_full": "context full",
                "completion_blocked": "stops refused too often", "budget_exhausted": "out of budget",
                "agent_stopped": "the agent stopped", "model_unavailable": "the model was unreachable",
                "gave_up": "the agent gave up"}


def run_ended_text(e: ev.RunEnded, run_id: str = "") -> str:
    """``run k3f9q ended: incomplete (stopped by the operator) after 2 sessions``."""
    run = f"run {run_id}" if run_id else "run"
    return f"{run} ended: {outcome_text(e.outcome, e.reason)} after {_plural(e.sessions, 'session')}"


REPLY = 200  # the most of a model's reply a log line carries (the whole reply is in events.jsonl)
RESULT = 100  # the most of a call's result a log line carries


def reply_text(text: str, limit: int = REPLY) -> str:
    """The model's text of a turn in one line of a log: its lines joined, every run of whitespace one space,
    control characters shown escaped (:func:`flat`); at most ``limit`` characters (0: no limit), cut with "...".
    "" for a reply of only whitespace."""
    # split() also drops the C0 separators and the line separators Python counts as spaces: nothing to show there.
    return flat(" ".join(text.split()), limit)


def result_text(e: ev.ToolResult, limit: int = RESULT) -> str:
    """``read_file: [notes.md: lines 1-24 of 24] (+24 lines)``: a call's result in a few words, for a log line under
    its turn: the first line that says something, and how many more lines there are."""
    lines = e.content.splitlines()
    at = next((n for n, ln in enumerate(lines) if ln.strip()), len(lines))
    said = reply_text(lines[at], limit) if at < len(lines) else "(empty)"
    rest = sum(1 for ln in lines[at + 1:] if ln.strip())
    more = f" (+{_plural(rest, 'line')})" if rest else ""
    took = f" ({e.duration_ms / 1000:.1f} s)" if e.duration_ms >= 1000 else ""
    return f"{one_line(e.tool, 60)}: {said}{more}{took}"


NEED_LABELS = {"restart_approval": "restart approval", "stuck": "stuck", "budget": "budget",
               "completion_refused": "completion refused", "provider_down": "provider down", "crashed": "crashed",
               "gave_up": "gave up"}


def need_label(reason: str) -> str:
    """``restart approval``: why a run needs its operator, in words."""
    return NEED_LABELS.get(reason) or one_line(reason.replace("_", " "), 40)


def needs_answer(e: ev.NeedsOperator, run_id: str = "") -> str:
    """How the operator answers a needs-you moment from a shell: ``answer with `agent-console approve k3f9q` or
    `agent-console deny k3f9q```; "" when the run does not wait for an answer."""
    run = run_id or "RUN"
    if e.reason == "restart_approval":
        return f"answer with `agent-console approve {run}` or `agent-console deny {run}`"
    if e.paused:
        return f"go on with `agent-console resume {run}`, or end it with `agent-console stop {run}`"
    return ""


# -- tool arguments --------------------------------------------------------------------------------------------
# The argument that says what a call is about, first match wins; a path is self-evident and shown bare.
MAIN_KEYS = ("path", "pattern", "command", "query", "url", "text", "issue", "summary", "note")


def _parse_args(raw: str) -> Any:
    try:
        return json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return ValueError


def tool_args(name: str, raw: str, limit: int = 48) -> str:
    """The one argument that says what a call is about: ``notes/a.md``, ``summary=done``, ``5 tasks``.

    ``name`` is the tool's; ``raw`` the arguments as the model sent them (JSON); at most ``limit`` characters
    (0: no limit), on one line. Every view shows a call's arguments with this."""
    data = _parse_args(raw)
    if data is ValueError:
        return "<invalid JSON>"
    if not isinstance(data, dict) or not data:
        return ""
    key = next((k for k in MAIN_KEYS if k in data), None)
    if key is None:
        todos = data.get("todos")
        if isinstance(todos, list):
            return _plural(len(todos), "task")
        key = next(iter(data))
    value = data[key]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    shown = flat(text, 0) if key == "path" else f"{one_line(str(key), 40)}={flat(text, 0)}"
    return shown if not limit or len(shown) <= limit else shown[: max(0, limit - 1)] + "…"


def argument_items(raw: str) -> list[tuple[str, str]]:
    """A call's arguments for the expanded view: (key, value) with string values as their text (real line
    breaks, not JSON escapes) and others as compact JSON. Not JSON: one item with no key and the raw text."""
    data = _parse_args(raw)
    if data is ValueError or not isinstance(data, dict):
        return [("", safe_text(raw))] if (raw or "").strip() not in ("", "{}") else []
    out = []
    for key, value in data.items():
        # Decoded JSON: a "\u001b" in the arguments is a real ESC here, made visible again.
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        out.append((safe_text(str(key), one_line=True), safe_text(text)))
    return out


# -- events ------------------------------------------------------------------------------------------------------
def _model_label(provider: str, model: str) -> str:
    return one_line(f"{provider}/{model}".strip("/"), 120)


def _session_started(e: ev.SessionStarted) -> Presented:
    if e.reason == "restart":
        return Presented("↻", "restart", "info", f"session {e.session} started after a context restart: "
                                                 f"{_plural(e.carryover_messages, 'message')} carried over",
                         source="context")
    label = _model_label(e.provider, e.model)
    how = "resumed" if e.reason == "resume" else "started"
    text = f"session {e.session} {how}" + (f" ({label})" if label else "")
    if e.detail:
        text += f": {flat(e.detail)}"
    # Once per process (not at each context restart): what the prompts carry when it is not the default.
    said = [DEMO] if is_demo(e.provider) else []
    said += _context_notes(e)
    return Presented("●", "session", "info", text, "; ".join(said), "engine")


def _context_notes(e: ev.SessionStarted) -> list[str]:
    """Seed 003's settings when they differ from the defaults (``working memory off (requires_context = ...``)."""
    notes = []
    if not e.working_memory:
        notes.append("working memory off (requires_context = false): the prompts carry no task history or blockers")
    if e.file_index:
        notes.append("file index on: the agent has find_files")
    return notes


END_SEVERITY = {"job_complete": "success", "context_full": "info", "user_shutdown": "warning", "gave_up": "warning"}


def _session_ended(e: ev.SessionEnded) -> Presented:
    # job_complete's and a give-up's own lines say what they said.
    detail = f" ({flat(e.detail, 0)})" if e.detail and e.reason not in ("job_complete", "gave_up") else ""
    why = REASON_WORDS.get(e.reason) or one_line(e.reason, 80)
    return Presented("■", "session-end", END_SEVERITY.get(e.reason, "error"),
                     f"session {e.session} ended: {why} after {_plural(e.turns, 'turn')}{detail}", source="engine")


def _run_ended(e: ev.RunEnded) -> Presented:
    severity = OUTCOME_SEVERITY.get(e.outcome or "", "") or END_SEVERITY.get(e.reason, "error")
    return Presented("■", "run-end", severity, run_ended_text(e), flat(e.detail, 0), "engine")


def _retry(e: ev.ModelRetry) -> Presented:
    gone = f"the partial reply ({e.discarded_chars:,} chars) was discarded" if e.discarded_chars else ""
    return Presented("⧗", "retry", "caution", f"model call failed: {retry_text(e, message=160)}", gone, "model")


def _tool_called(e: ev.ToolCalled) -> Presented:
    return Presented("▸", "tool", "info", f"{one_line(e.tool, 60)}({tool_args(e.tool, e.arguments)})",
                     source="agent")


def _tool_result(e: ev.ToolResult) -> Presented | None:
    if e.ok:
        return None
    first = next((ln.strip() for ln in e.content.splitlines() if ln.strip()), "(no message)")
    took = f" ({e.duration_ms / 1000:.1f} s)" if e.duration_ms >= 1000 else ""
    return Presented("✗", "tool-failed", "caution", f"{one_line(e.tool, 60)} failed: {flat(first, 160)}{took}",
                     source=f"tool {one_line(e.tool, 60)}")


def _tool_denied(e: ev.ToolDenied) -> Presented:
    failed = f" (the policy failed: {flat(e.error, 120)})" if e.error else ""
    return Presented("⊗", "denied", "warning", f"denied {one_line(e.tool, 60)} by {one_line(e.policy, 60)}: "
                                                f"{flat(e.reason)}{failed}", source=one_line(e.policy, 60))


def _todos(e: ev.TodosChanged) -> Presented:
    if e.reason.startswith("transition"):
        why = one_line(e.reason.split(":", 1)[-1], 40)
        return Presented("≡", "todos", "info", f"todo list archived for the {why} transition", source="todos")
    done = [n for n, item in enumerate(e.items) if item.done]
    if e.reason in ("todo_complete", "job_complete") and done:
        return Presented("✓", "todo-done", "success",
                         f"{len(done)}/{len(e.items)} {flat(e.items[done[-1]].text)}", source="todos")
    return Presented("□", "todos", "info", todo_list_text(e), source="todos")


def todo_list_text(e: ev.TodosChanged) -> str:
    """``Review Inputs (1 of 2): 5 tasks``: a todo list, by its phase and size."""
    return f"{phase_label(e) or 'todo list'}: {_plural(len(e.items), 'task')}"


def _plan(e: ev.PlanChanged) -> Presented | None:
    if not e.error:
        return None
    return Presented("✎", "plan", "caution", f"main_plan.md: {flat(e.error)}", source="plan")


def _phase(e: ev.PhaseTransition) -> Presented | None:
    if e.stage == "completed":
        name = flat(e.to_name or "", 120)
        target = f"phase {e.to_phase} '{name}'" if e.to_phase else f"'{name}'"
        return Presented("━", "phase", "info", f"{one_line(e.kind, 40)} transition done: now {target}",
                         f"issue: {flat(e.issue)}" if e.issue else "", "phases")
    if e.kind in ("rewind", "checkpoint"):
        return Presented("↺", "phase", "info", f"{e.kind} of phase {e.from_phase} started"
                         + (f": {flat(e.issue)}" if e.issue else ""), source="phases")
    return None


def _feedback(e: ev.Feedback) -> Presented:
    severity = e.severity if e.severity in SEVERITIES else "info"
    return Presented("◆", "feedback", severity, f"feedback from {one_line(e.source, 60)} ({e.severity}): "
                                                 f"{flat(e.message)}", source=one_line(e.source, 60))


def _masked(e: ev.ContextMasked) -> Presented:
    limit = e.prompt_budget or e.context_window
    change = f" ({_pct(e.used_before, limit)} → {_pct(e.used_after, limit)})" if limit else ""
    return Presented("⊘", "masked", "info", f"masked the {_plural(e.masked, 'oldest tool result')}, "
                                            f"~{tokens(e.tokens_freed)} tokens freed{change}",
                     "the agent now sees placeholders", "context")


def _compacted(e: ev.ContextCompacted) -> Presented:
    carried = f" + {e.messages_after - 1} carried" if e.messages_after > 1 else ""
    return Presented("≡", "compacted", "info", f"compacted {_plural(e.messages_before, 'message')} into a summary "
                                               f"({e.summary_chars:,} chars){carried}",
                     f"why: {flat(e.reason, 120) or 'compaction'}", "context")


def _wind_down(e: ev.WindDown) -> Presented:
    return Presented("⚠", "wind-down", "caution", f"context {e.usage_pct:.0%} full: wind-down sent",
                     "the agent was asked to save its state; the session restarts after its next turn", "context")


def _restart_pending(e: ev.RestartPending) -> Presented:
    return Presented("⏸", "restart-pending", "warning", f"restart pending: context {e.usage_pct:.0%} full",
                     f"session {e.next_session} would start with {_plural(e.carryover_messages, 'carried message')} "
                     f"(~{tokens(e.carryover_tokens)} tokens); awaiting approval", "context")


def _restart_approved(e: ev.RestartApproved) -> Presented:
    return Presented("✓", "restart-approved", "info", f"restart approved ({one_line(e.by, 40)})", source="context")


def _restart_denied(e: ev.RestartDenied) -> Presented:
    return Presented("✗", "restart-denied", "warning", f"restart denied ({one_line(e.by, 40)})",
                     # The event does not name the run: the command (with its folder) is on the CLI's last line.
                     "the run ends; it can be resumed later (run --in-place)", "context")


def refusal_count(e: ev.CompletionBlocked) -> str:
    """``2 of 5``, or past the bound ``6th, over the 5 allowed`` (never "6/5"); "" for an older event."""
    if not e.max_blocks:
        return ""
    if e.blocks <= e.max_blocks:
        return f"{e.blocks} of {e.max_blocks}"
    return f"over the {e.max_blocks} allowed: the operator is asked"


def _blocked(e: ev.CompletionBlocked) -> Presented:
    who = f" by {one_line(e.checker, 60)}" if e.checker else ""
    count = f" ({refusal_count(e)})" if e.max_blocks else ""
    return Presented("↩", "blocked", "caution", f"stop refused{who}{count}: {flat(e.feedback or e.reason)}",
                     "the agent was told to continue", one_line(e.checker, 60) or "completion")


def _bypassed(e: ev.CompletionBypassed) -> Presented:
    spent = BUDGET_SPENT.get(e.budget, f"the {e.budget} budget is spent")
    return Presented("↷", "bypassed", "warning", f"{stop_kind(e.stop_reason)} accepted without the completion "
                                                 f"check: {spent}", source=e.budget)


def _exhausted(e: ev.BudgetExhausted) -> Presented:
    if e.detail:
        what = flat(e.detail)
    elif e.budget == "deadline":
        what = f"deadline passed ({e.used:.0f}s of {e.limit:.0f}s)"
    elif e.budget == "cost":
        what = f"money budget spent ({cost(e.used)} of {cost(e.limit)})"
    else:
        what = f"token budget spent ({tokens(e.used)} of {tokens(e.limit)})"
    told = "the agent was told to wrap up" if e.budget == "deadline" else "the run pauses and asks its operator"
    return Presented("◷", "budget", "warning", what, told, e.budget)


def _raised(e: ev.BudgetRaised) -> Presented:
    what = flat(e.detail) if e.detail else (
        f"{'token' if e.budget == 'tokens' else 'money'} budget raised to "
        f"{tokens(e.limit) if e.budget == 'tokens' else cost(e.limit)}")
    return Presented("◷", "budget", "info", what, f"by {flat(e.by)}" if e.by else "", e.budget)


def _stuck(e: ev.StuckDetected) -> Presented:
    pattern = f" ({flat(e.pattern, 80)})" if e.pattern else ""
    return Presented("⚠", "stuck", "warning", f"stuck: {flat(e.reason)}{pattern}", source="stuck")


EXPERIENCE_SECTIONS = {"failed": "failed approach", "lesson": "lesson learned", "pattern": "pattern that works"}


def _experience(e: ev.ExperienceRecorded) -> Presented:
    """An entry of experiences.md: which section, who recorded it, its text (the agent's words: hostile)."""
    again = f" (seen {e.times} times)" if e.times > 1 else ""
    return Presented("✎", "experience", "caution" if e.section == "failed" else "info",
                     f"experience · {EXPERIENCE_SECTIONS.get(e.section, e.section)}{again}: {flat(e.text)}",
                     flat(e.where, 120), f"experiences · {one_line(e.source, 40)}")


SANDBOX_SEVERITY = {"confined": "info", "unconfined": "warning", "refused": "error"}


def _command_sandbox(e: ev.CommandSandbox) -> Presented:
    """The run's header for its commands: what they see and their bounds (the engine's paragraph, whole)."""
    return Presented("▣", "sandbox", SANDBOX_SEVERITY.get(e.mode, "warning"),
                     flat(e.text, 0) or f"commands: {one_line(e.mode, 40)}", source="sandbox")


def _launch(e: ev.LaunchSettings) -> Presented:
    """How this process runs the job: the settings it started with, and what a resume's flags changed."""
    restart = "auto-restart" if e.auto_restart else "restarts wait for approval"
    parts = [f"{one_line(e.provider, 40)}/{one_line(e.model, 80)}"]
    if e.base_url:
        parts.append(one_line(e.base_url, 120))
    if e.context_window:
        parts.append(f"window {e.context_window:,}")
    parts.append(restart)
    if e.unconfined:
        parts.append("UNCONFINED")
    if e.notify:
        parts.append("notify " + ", ".join(one_line(u, 80) for u in e.notify))
    head = "resumed with" if e.source == "resume" else "started with"
    changed = f"; changed at resume: {flat('; '.join(e.changes), 0)}" if e.changes else ""
    return Presented("⚙", "launch", "warning" if e.changes else "info", f"{head}: {', '.join(parts)}{changed}",
                     source="run")


def _operator(e: ev.OperatorCommand) -> Presented:
    source = one_line(e.source, 40)
    who = f"operator · {source}" if source else "operator"
    if e.status == "discarded":
        return Presented("⌘", "operator", "info", discarded_text(e), source=who)
    detail = f": {flat(e.detail, 0)}" if e.detail else ""
    text = f"{one_line(e.command.replace('_', ' '), 40)} {e.status}" + (f" ({source})" if source else "") + detail
    kind = "received" if e.status == "received" else "operator"
    return Presented("⌘", kind, "warning" if e.status == "rejected" else "info", text, source=who)


def _completed(e: ev.JobCompleted) -> Presented:
    if e.unmet:  # a free stop let it through: the agent's word, not the record's
        return Presented("✔", "done-unverified", "warning", f"job_complete accepted without a completion check "
                                                            f"(confidence {e.confidence:.2f}): {flat(e.summary, 0)}",
                         "the record shows work left: the run ends incomplete", "job",
                         lines=tuple(flat(x, 300) for x in e.unmet))
    return Presented("✔", "done", "success", f"job complete (confidence {e.confidence:.2f}): {flat(e.summary, 0)}",
                     source="job")


def _gave_up(e: ev.JobGaveUp) -> Presented:
    return Presented("⚐", "gave-up", "warning", f"the agent gave up (confidence {e.confidence:.2f}): "
                                                f"{flat(e.summary, 0)}", f"notes: {flat(e.notes, 0)}", "job",
                     lines=tuple(flat(x, 300) for x in e.unmet))


def _recovered(e: ev.StateRecovered) -> Presented:
    moved = f" (kept as {one_line(e.moved_to, 120)})" if e.moved_to else ""
    return Presented("‼", "recovered", "warning", f"recovered {one_line(e.file, 120)}: {flat(e.problem, 0)}{moved}",
                     flat(e.action, 0), "recovery")


def _error(e: ev.ErrorEvent) -> Presented:
    where = one_line(e.where, 40)
    return Presented("✗", "error", "error", f"error ({where}): {flat(e.message, 0)}" if where else
                     f"error: {flat(e.message, 0)}", source=f"error · {where}" if where else "error")


def _reply(e: ev.AssistantMessage) -> Presented | None:
    said = reply_text(e.text)
    return Presented("»", "reply", "info", said, source="agent") if said else None


def _needs(e: ev.NeedsOperator) -> Presented:
    return Presented("⚑", "needs-you", "warning", f"NEEDS YOU ({need_label(e.reason)}): {flat(e.message, 0)}",
                     "the run is paused until you answer" if e.paused else "", "needs",
                     lines=tuple(flat(x, 300) for x in e.evidence if x.strip()))


def _needs_cleared(e: ev.NeedsOperatorCleared) -> Presented:
    by = f": {flat(e.by, 120)}" if e.by.strip() else ""
    return Presented("✓", "needs-cleared", "info", f"no longer needs you ({need_label(e.reason)}){by}",
                     source="needs")


DESCRIBERS: dict[type, Callable[[Any], Presented | None]] = {
    ev.SessionStarted: _session_started,
    ev.SessionEnded: _session_ended,
    ev.RunEnded: _run_ended,
    ev.ModelRetry: _retry,
    ev.AssistantMessage: _reply,
    ev.ToolCalled: _tool_called,
    ev.ToolResult: _tool_result,
    ev.ToolDenied: _tool_denied,
    ev.TodosChanged: _todos,
    ev.PlanChanged: _plan,
    ev.PhaseTransition: _phase,
    ev.Feedback: _feedback,
    ev.ContextMasked: _masked,
    ev.ContextCompacted: _compacted,
    ev.WindDown: _wind_down,
    ev.RestartPending: _restart_pending,
    ev.RestartApproved: _restart_approved,
    ev.RestartDenied: _restart_denied,
    ev.CompletionBlocked: _blocked,
    ev.CompletionBypassed: _bypassed,
    ev.BudgetExhausted: _exhausted,
    ev.BudgetRaised: _raised,
    ev.StuckDetected: _stuck,
    ev.ExperienceRecorded: _experience,
    ev.CommandSandbox: _command_sandbox,
    ev.LaunchSettings: _launch,
    ev.OperatorCommand: _operator,
    ev.JobCompleted: _completed,
    ev.JobGaveUp: _gave_up,
    ev.StateRecovered: _recovered,
    ev.NeedsOperator: _needs,
    ev.NeedsOperatorCleared: _needs_cleared,
    ev.ErrorEvent: _error,
}
# Described by no view on their own: the turn line (headless), the status line and the panes show what they carry.
SILENT = frozenset({ev.TurnStarted, ev.TextDelta, ev.TokenUsage, ev.GuardrailsStatus, ev.MemoryUpdated})


def _type_name(cls: type) -> str:
    return cls.model_fields["type"].default  # type: ignore[attr-defined, no-any-return]


# A run's story (the headless log, `agent-console logs`): the turns (the model's text and its calls, from the
# assistant_message; the tokens, from the token_usage that closes the turn), the calls' results, and every event an
# operator reads about: todos and phases, the guardrails, the context, restarts, operator commands, needs-you
# moments, the run's end. Left out: turn_started, text deltas, tool_called (the turn's line says the calls),
# guardrails_status and memory_updated (bookkeeping).
STORY_TYPES = frozenset({_type_name(cls) for cls in DESCRIBERS if cls is not ev.ToolCalled}
                        | {_type_name(ev.TokenUsage)})


def in_story(e: ev.EventBase | str) -> bool:
    """Whether an operator sees ``e`` (an event, or its ``type``) in a run's story: the one answer the headless
    log and ``agent-console logs`` both follow (the latter skips other lines of a huge log without parsing them)."""
    return (e if isinstance(e, str) else getattr(e, "type", "")) in STORY_TYPES


def describe(e: ev.EventBase) -> Presented | None:
    """``e`` as an operator reads it, or None for an event no view describes on its own (a text delta, a turn's
    token usage, a successful tool result, a guardrails status, ...)."""
    fn = DESCRIBERS.get(type(e))
    if fn is None:
        return None
    p = fn(e)
    if p is None:
        return None
    # Each describer already shows agent text through one_line or flat; this holds for a field one forgot too.
    return Presented(p.icon, p.kind, p.severity, safe_text(p.text, one_line=True), safe_text(p.detail, one_line=True),
                     safe_text(p.source, one_line=True), e.seq, e.ts,
                     tuple(safe_text(line, one_line=True) for line in p.lines))
