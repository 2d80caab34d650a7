"""The words every presentation shares: :class:`Presented`, the small wording helpers (tokens, costs, retries,
phases, outcomes, needs-you labels) and the tables of what a reason or an outcome is called."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from console.engine import events as ev
from console.engine.job_files import one_line
from console.engine.text import safe_text

# A list's figures need no event: they live in console.view.format, which the fleet's first frame imports without
# the typed events; here for every view that says ``present.fill``.
from console.view.format import cost as cost
from console.view.format import fill as fill
from console.view.format import tokens as tokens

DEMO = "scripted demo model: deterministic, no AI"
DEMO_PROVIDER = "scripted"

TEXT = 240  # the most of one piece of agent or guardrail text a description carries
SEVERITIES = ("info", "caution", "warning", "error", "success")
# Kinds too frequent or too routine to be "the last thing that happened" in a fleet row or a notice.
QUIET_KINDS = frozenset({"tool", "received"})


def clause(text: str) -> str:
    """``text`` as the first clause of a line that goes on ("; ..."): without its own closing full stop (the
    agent's summary ends with one: "...openai.; notes:" read as a typo). An ellipsis stays."""
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text


# Not frozen: a frozen dataclass's __init__ sets each of its nine fields through object.__setattr__ (~1,300
# instructions a field), and every view builds two for each event it describes (present.describe). Nothing sets
# a field after it is built; it hashes as it did (unsafe_hash: by its fields).
@dataclass(slots=True, unsafe_hash=True)
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
        return f"{clause(self.text)}; {self.detail}" if self.detail else self.text


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


# -- small wording helpers ----------------------------------------------------------------------------------------
def flat(text: str, limit: int = TEXT) -> str:
    """``text`` on one line, as prose reads: line breaks become spaces, every other control character is shown
    escaped (:func:`console.engine.text.safe_text`); at most ``limit`` characters (0: no limit)."""
    return safe_text(text, one_line=True, join=True, limit=limit)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "?"


def context_full(share: float) -> str:
    """``context 96% full``, or ``context over full (107% of the prompt budget)``."""
    return f"context {share:.0%} full" if share <= 1 else f"context over full ({share:.0%} of the prompt budget)"


def unpriced_text(model: str, fleet_uncounted: bool = False) -> str:
    """Said once per view when the model's price is unknown (``session_started.priced`` is False); with
    ``fleet_uncounted`` (a fleet daily budget is set), that this budget neither counts nor holds the run."""
    name = one_line(model, 80) or "this model"
    fleet = ", and the fleet's daily budget ([budgets]) neither counts nor holds this run" if fleet_uncounted else ""
    return (f"no price known for {name}: costs are not shown{fleet}; add it under [prices] in the config "
            "(see docs/operators-guide.md)")


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
    """``2/4`` (``boot``, ``final`` for the final review, ``→`` between phases): the phase in a list's narrow column."""
    if t is None:
        return ""
    # "final", not "done": a run in its final review is not done (one that gave up there read "done").
    short = {"bootstrap": "boot", "completion": "final", "transition": "→"}.get(t.kind)
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
                "gave_up": "the agent gave up", "interrupted": "interrupted"}


def run_ended_text(e: ev.RunEnded, run_id: str = "") -> str:
    """``run k3f9q ended: incomplete (stopped by the operator) after 2 sessions``."""
    run = f"run {run_id}" if run_id else "run"
    return f"{run} ended: {outcome_text(e.outcome, e.reason)} after {plural(e.sessions, 'session')}"


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
    more = f" (+{plural(rest, 'line')})" if rest else ""
    took = f" ({e.duration_ms / 1000:.1f} s)" if e.duration_ms >= 1000 else ""
    return f"{one_line(e.tool, 60)}: {said}{more}{took}"


NEED_LABELS = {"restart_approval": "restart approval", "stuck": "stuck", "budget": "budget",
               "completion_refused": "completion refused", "provider_down": "provider down", "crashed": "crashed",
               "gave_up": "gave up", "store_down": "store down",
               "fleet_budget": "fleet budget reached", "mcp_question": "question from an MCP server"}


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


END_SEVERITY = {"job_complete": "success", "context_full": "info", "user_shutdown": "warning", "gave_up": "warning",
                "interrupted": "warning"}
