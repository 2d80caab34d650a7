"""What the console shows, folded from engine events. Pure Python: no Textual here.

The same fold serves a run in this process (events from the subscription) and an
attached console (events replayed from ``events.jsonl``, then followed). Every
pane reads from one :class:`ConsoleState`; :meth:`ConsoleState.apply` says which
aspects changed so the app refreshes only those panes.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime

from console import present
from console.engine import events as ev
from console.tui.format import clip, tokens

FEEDBACK_KEEP = 300
TREND_KEEP = 120

DENIED_KEEP = 1000  # call ids of denied calls remembered (their error results are not failures to report)

# Aspects a batch of events can change.
STATUS, TODOS, GAUGE, FEEDBACK, PLAN, RESTART = "status", "todos", "gauge", "feedback", "plan", "restart"
GUARDS = "guards"


@dataclass(frozen=True)
class FeedbackItem:
    """One entry of the feedback pane.

    ``kind`` "feedback" is a feedback provider's block as the agent got it (summary, observations,
    suggestions); every other kind is a one-line notice ("denied", "blocked", "bypassed", "budget",
    "stuck", or "notice" for the engine's own).
    """

    seq: int
    ts: datetime
    source: str
    severity: str  # info | caution | warning | error | success
    message: str
    kind: str = "notice"
    observations: tuple[str, ...] = ()
    suggestions: tuple[str, ...] = ()
    turn: int = 0
    call_index: int = 0
    block: str = ""


@dataclass
class ProviderTally:
    """What one feedback provider delivered so far in this run."""

    count: int = 0
    last_ts: datetime | None = None
    last_severity: str = ""


@dataclass
class GuardrailsState:
    """The latest ``guardrails_status`` and what the guardrail events since say (the guardrails view)."""

    status: ev.GuardrailsStatus | None = None
    denials: Counter[str] = field(default_factory=Counter)  # by policy
    denied_calls: deque[str] = field(default_factory=lambda: deque(maxlen=DENIED_KEEP))
    delivered: dict[str, ProviderTally] = field(default_factory=dict)  # by provider
    last_blocked: ev.CompletionBlocked | None = None
    bypassed: ev.CompletionBypassed | None = None
    exhausted: dict[str, ev.BudgetExhausted] = field(default_factory=dict)  # "deadline" | "tokens" | "cost"
    stuck: int = 0
    last_feedback: ev.Feedback | None = None
    refusing: bool = False  # job_complete was just refused: its error result is the refusal


@dataclass
class GaugeState:
    used: int = 0
    window: int = 0
    # Where the window figure came from: "job.toml", "--context-window", "registry: gpt-4.1", "default".
    window_source: str = ""
    budget: int = 0  # the most a prompt may take: the window less the reply's reserve
    soft: float = 0.70
    hard: float = 0.85
    trend: deque[int] = field(default_factory=lambda: deque(maxlen=TREND_KEEP))
    last_action: str = ""
    last_action_ts: datetime | None = None
    last_input: int = 0
    last_cached: int = 0
    last_output: int = 0
    reported: bool = True

    @property
    def limit(self) -> int:
        """What the thresholds are shares of: the prompt budget (the window until the engine reports it)."""
        return self.budget or self.window

    @property
    def pct(self) -> float:
        return self.used / self.limit if self.limit else 0.0


# -- guardrail events in words (the feedback pane; the conversation has its own, shorter marks) -----------------
def denial_text(e: ev.ToolDenied) -> str:
    failed = f" (the policy failed: {e.error})" if e.error else ""
    return f"denied {e.tool} by {e.policy}: {e.reason}{failed}"


def stop_kind(stop_reason: str) -> str:
    return {"job_complete": "job_complete", "end_turn": "a turn without a tool call"}.get(stop_reason,
                                                                                        stop_reason or "a stop")


def blocked_text(e: ev.CompletionBlocked) -> str:
    what = e.feedback or e.reason
    count = f" ({e.blocks}/{e.max_blocks})" if e.max_blocks else ""
    who = f" by {e.checker}" if e.checker else ""
    return f"stop refused{who}{count}: {what}"


BUDGET_NAMES = {"deadline": "deadline", "tokens": "token budget", "cost": "money budget"}


def bypassed_text(e: ev.CompletionBypassed) -> str:
    return f"completion check bypassed ({e.budget} spent): {stop_kind(e.stop_reason)} accepted unchecked"


def exhausted_text(e: ev.BudgetExhausted) -> str:
    if e.detail:
        what = e.detail
    elif e.budget == "deadline":
        what = f"deadline passed ({e.used:.0f}s of {e.limit:.0f}s)"
    elif e.budget == "cost":
        what = f"money budget spent ({present.cost(e.used)} of {present.cost(e.limit)})"
    else:
        what = f"token budget spent ({tokens(e.used)} of {tokens(e.limit)})"
    return f"{what}; the agent was told to wrap up"


def stuck_text(e: ev.StuckDetected) -> str:
    return f"stuck: {e.reason}" + (f" ({e.pattern})" if e.pattern else "")


def stuck_told(last: ev.Feedback | None, e: ev.StuckDetected) -> bool:
    """The stuck detector is a feedback provider: its block, just delivered, already says what this says."""
    return last is not None and last.message == e.reason and 0 < e.seq - last.seq <= 2


def phase_label(t: ev.TodosChanged | None) -> str:
    """``Name (X of Y)`` as the agent sees it in Layer 2."""
    if t is None:
        return ""
    if t.kind == "transition":
        return "transition in progress"
    if t.kind == "bootstrap":
        return "Bootstrap"
    if t.kind == "completion":
        return t.phase_name or "Job Completion"
    if t.phase_number and t.total_phases:
        return f"{t.phase_name} ({t.phase_number} of {t.total_phases})"
    return t.phase_name


class ConsoleState:
    def __init__(self, job_title: str = "", *, provider: str = "", model: str = "", window: int = 0,
                 soft: float = 0.70, hard: float = 0.85) -> None:
        self.job_title = job_title
        self.provider = provider
        self.model = model
        self.session = 0
        self.turn = 0
        self.last_seq = 0
        self.run_started: datetime | None = None
        self.last_ts: datetime | None = None
        self.ended_at: datetime | None = None
        self.outcome: str | None = None  # completed | stopped | failed
        self.outcome_detail = ""
        self.paused = False
        self.stopping = False
        self.todos: ev.TodosChanged | None = None
        self.gauge = GaugeState(window=window, soft=soft, hard=hard)
        self.restart_pending: ev.RestartPending | None = None
        self.feedback: deque[FeedbackItem] = deque(maxlen=FEEDBACK_KEEP)  # oldest first
        self.guards = GuardrailsState()
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_tokens = 0
        self.turns_total = 0
        self.tool_calls = 0
        self.masked_total = 0
        self.completed_summary = ""
        # Commands this console sent that the engine has not answered yet: name -> what to show.
        self.requested: dict[str, str] = {}
        # Cost: the whole job's so far (None while unknown), and whether the model's price is known (None: not
        # said, e.g. an older log); "no price known" is said once.
        self.job_cost: float | None = None
        self.priced: bool | None = None
        self.price_told = False
        # A model call failed and the engine waits before asking again (cleared when the turn goes on).
        self.retry: ev.ModelRetry | None = None

    # -- derived ------------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        return self.outcome is not None

    @property
    def phase(self) -> str:
        return phase_label(self.todos)

    @property
    def status(self) -> str:
        if self.outcome:
            return self.outcome
        if self.restart_pending is not None:
            return "restart pending"
        if self.stopping:
            return "stopping"
        if self.paused:
            return "paused"
        if self.retry is not None:
            return "waiting"
        return "running" if self.session else "starting"

    # -- folding ------------------------------------------------------------------------
    def apply_all(self, events: list[ev.EventBase]) -> set[str]:
        changed: set[str] = set()
        for e in events:
            changed |= self.apply(e)
        return changed

    def _feedback(self, e: ev.EventBase, source: str, severity: str, message: str, kind: str = "notice") -> set[str]:
        self.feedback.append(FeedbackItem(e.seq, e.ts, source, severity, message, kind))
        return {FEEDBACK}

    def _action(self, e: ev.EventBase, text: str) -> None:
        self.gauge.last_action = text
        self.gauge.last_action_ts = e.ts

    def apply(self, e: ev.EventBase) -> set[str]:
        self.last_seq = max(self.last_seq, e.seq)
        self.last_ts = e.ts
        if e.session:
            self.session = e.session
        if isinstance(e, ev.TextDelta):
            if self.retry is not None and e.text:
                self.retry = None  # the retried call answers: the wait is over
                return {STATUS}
            return set()
        if isinstance(e, ev.ModelRetry):
            self.retry = e
            return {STATUS}
        retried = self.retry is not None and not isinstance(e, ev.OperatorCommand | ev.ErrorEvent
                                                            | ev.GuardrailsStatus)
        if retried:
            self.retry = None  # the turn went on (or ended): nothing waits any more
        return self._apply(e) | ({STATUS} if retried else set())

    def _apply(self, e: ev.EventBase) -> set[str]:
        g = self.gauge
        if isinstance(e, ev.TurnStarted):
            self.turn = e.turn
            if e.prompt_tokens_est:
                g.used = e.prompt_tokens_est
            return {STATUS, GAUGE}
        if isinstance(e, ev.AssistantMessage):
            self.tool_calls += len(e.tool_calls)
            return set()
        if isinstance(e, ev.TokenUsage):
            if e.job_cost_usd is not None:
                self.job_cost = e.job_cost_usd
            self.turn = e.turn
            self.turns_total += 1
            self.input_tokens += e.input_tokens
            self.output_tokens += e.output_tokens
            self.cached_tokens += e.cached_input_tokens
            g.used = e.context_tokens or (e.input_tokens + e.output_tokens)
            g.window = e.context_window or g.window
            g.budget = e.prompt_budget or g.budget
            g.soft = e.soft_threshold or g.soft
            g.hard = e.hard_threshold or g.hard
            g.trend.append(g.used)
            g.last_input, g.last_cached, g.last_output = e.input_tokens, e.cached_input_tokens, e.output_tokens
            g.reported = e.reported
            return {STATUS, GAUGE}
        if isinstance(e, ev.TodosChanged):
            self.todos = e
            return {TODOS, STATUS}
        if isinstance(e, ev.SessionStarted):
            if e.reason in ("new", "resume"):
                self.run_started = e.ts
                self.ended_at = None
                self.outcome, self.outcome_detail = None, ""
                self.paused = self.stopping = False
                self.restart_pending = None
                self.requested.clear()
            self.provider = e.provider or self.provider
            self.model = e.model or self.model
            g.window = e.context_window or g.window
            g.window_source = e.context_window_source or g.window_source
            out = {GAUGE} if e.context_window or e.context_window_source else set()
            if "priced" in e.model_fields_set:  # an older log does not say: then nothing is said about price
                self.priced = e.priced
                if not e.priced and not self.price_told:
                    self.price_told = True
                    out |= self._feedback(e, "cost", "info", present.unpriced_text(e.model or self.model))
            if e.reason == "restart":
                self._action(e, f"restarted: session {e.session}, {e.carryover_messages} messages carried")
                return out | {STATUS, GAUGE, RESTART} | self._feedback(
                    e, "context", "info",
                    f"Session {e.session} started after a context restart; {e.carryover_messages} messages "
                    "carried over.")
            if e.reason == "resume":
                where = f": {e.detail}" if e.detail else ""
                return out | {STATUS} | self._feedback(e, "engine", "info",
                                                       f"Run resumed in session {e.session}{where}.")
            return out | {STATUS}
        if isinstance(e, ev.SessionEnded):
            out = {STATUS}
            if e.reason == "job_complete":
                self._end(e, "completed", e.detail)
            elif e.reason == "user_shutdown":
                self._end(e, "stopped", e.detail or "stopped by the operator")
                out |= self._feedback(e, "engine", "warning", f"Session {e.session} ended: {e.detail or e.reason}.")
            elif e.reason != "context_full":
                self._end(e, "failed", f"{e.reason}: {e.detail}" if e.detail else e.reason)
                out |= self._feedback(e, "engine", "error",
                                      f"Session {e.session} ended: {e.reason}" + (f" ({e.detail})" if e.detail else ""))
            return out
        if isinstance(e, ev.ContextMasked):
            self.masked_total += e.masked
            g.used = e.used_after or g.used
            g.budget = e.prompt_budget or g.budget
            limit = e.prompt_budget or e.context_window
            pct = f" ({e.used_before / limit:.0%} → {e.used_after / limit:.0%})" if limit else ""
            self._action(e, f"masked {e.masked} observation{'s' if e.masked != 1 else ''}, "
                            f"freed ~{tokens(e.tokens_freed)}{pct}")
            return {GAUGE} | self._feedback(
                e, "context", "info", f"Masked the {e.masked} oldest tool result{'s' if e.masked != 1 else ''} "
                                      f"to free ~{tokens(e.tokens_freed)} tokens{pct}.")
        if isinstance(e, ev.WindDown):
            self._action(e, f"wind-down sent at {e.usage_pct:.0%}")
            return {GAUGE} | self._feedback(
                e, "context", "caution", f"Context {e.usage_pct:.0%} full: the agent was asked to wind down; "
                                         "the session restarts after its next turn.")
        if isinstance(e, ev.ContextCompacted):
            self._action(e, f"compacted {e.messages_before} → {e.messages_after} messages")
            carried = f" + {e.messages_after - 1} carried" if e.messages_after > 1 else ""
            return {GAUGE} | self._feedback(
                e, "context", "info", f"Conversation compacted: {e.messages_before} messages → summary{carried}. "
                                      f"Why: {e.reason or 'compaction'}.")
        if isinstance(e, ev.RestartPending):
            self.restart_pending = e
            self._action(e, f"restart pending ({e.usage_pct:.0%} full)")
            return {STATUS, GAUGE, RESTART} | self._feedback(
                e, "context", "warning",
                f"Context {e.usage_pct:.0%} full: restart into session {e.next_session} awaits approval "
                f"({e.carryover_messages} messages, ~{tokens(e.carryover_tokens)} tokens carried over). "
                "Press a to approve, d to deny.")
        if isinstance(e, ev.RestartApproved):
            self.restart_pending = None
            self._action(e, f"restart approved ({e.by})")
            return {STATUS, GAUGE, RESTART} | self._feedback(e, "context", "info", f"Restart approved ({e.by}).")
        if isinstance(e, ev.RestartDenied):
            self.restart_pending = None
            self._action(e, f"restart denied ({e.by})")
            self._end(e, "stopped", "restart denied by the operator")
            return {STATUS, GAUGE, RESTART} | self._feedback(
                e, "context", "warning", f"Restart denied ({e.by}): the run ends; resume it later with "
                                         "`agent-console run --in-place`.")
        if isinstance(e, ev.ToolCalled):
            return set()
        if isinstance(e, ev.ToolResult):
            refusal = e.tool == "job_complete" and self.guards.refusing
            self.guards.refusing = False
            # A denial and a refused job_complete are reported as what they are, not as failed calls.
            if not e.ok and e.call_id not in self.guards.denied_calls and not refusal:
                first = e.content.strip().splitlines()[0] if e.content.strip() else "(no message)"
                return self._feedback(e, f"tool {e.tool}", "caution", clip(first, 240))
            return set()
        if isinstance(e, ev.ToolDenied | ev.CompletionBlocked | ev.CompletionBypassed | ev.BudgetExhausted
                      | ev.StuckDetected | ev.Feedback | ev.GuardrailsStatus):
            return self._guardrail(e)
        if isinstance(e, ev.StateRecovered):
            moved = f" (kept as {e.moved_to})" if e.moved_to else ""
            return {STATUS} | self._feedback(e, "recovery", "warning",
                                             f"{e.file}: {e.problem}{moved}; {e.action}.")
        if isinstance(e, ev.ErrorEvent):
            if not e.recoverable and e.where == "supervisor":
                self._end(e, "failed", e.message)
            return {STATUS} | self._feedback(e, f"error · {e.where}" if e.where else "error", "error", e.message)
        if isinstance(e, ev.OperatorCommand):
            return self._operator(e)
        if isinstance(e, ev.PhaseTransition):
            if e.stage == "completed":
                target = f"phase {e.to_phase} '{e.to_name}'" if e.to_phase else f"'{e.to_name}'"
                text = f"{e.kind.capitalize()} transition done: now {target}."
                if e.issue:
                    text += f" Issue: {e.issue}"
                return {PLAN} | self._feedback(e, "phases", "info", text)
            what = {"rewind": "Rewind", "checkpoint": "Checkpoint"}.get(e.kind)
            if what:
                return self._feedback(e, "phases", "info", f"{what} of phase {e.from_phase} started"
                                                           + (f": {e.issue}" if e.issue else "."))
            return set()
        if isinstance(e, ev.PlanChanged):
            if e.error:
                return {PLAN} | self._feedback(e, "plan", "caution", f"main_plan.md: {e.error}")
            return {PLAN}
        if isinstance(e, ev.JobCompleted):
            self.completed_summary = e.summary
            self._end(e, "completed", e.summary)
            return {STATUS} | self._feedback(
                e, "job", "success", f"Job complete (confidence {e.confidence:.2f}): {e.summary}")
        return set()

    def _guardrail(self, e: ev.EventBase) -> set[str]:
        g = self.guards
        if isinstance(e, ev.GuardrailsStatus):
            g.status = e
            return {GUARDS}
        if isinstance(e, ev.ToolDenied):
            g.denials[e.policy] += 1
            g.denied_calls.append(e.call_id)
            return {GUARDS} | self._feedback(e, e.policy, "warning", denial_text(e), "denied")
        if isinstance(e, ev.CompletionBlocked):
            g.last_blocked = e
            g.refusing = e.stop_reason == "job_complete"
            return {GUARDS} | self._feedback(e, e.checker or "completion", "caution", blocked_text(e), "blocked")
        if isinstance(e, ev.CompletionBypassed):
            g.bypassed = e
            return {GUARDS} | self._feedback(e, e.budget, "warning", bypassed_text(e), "bypassed")
        if isinstance(e, ev.BudgetExhausted):
            g.exhausted[e.budget] = e
            return {GUARDS} | self._feedback(e, e.budget, "warning", exhausted_text(e), "budget")
        if isinstance(e, ev.StuckDetected):
            g.stuck += 1
            if stuck_told(g.last_feedback, e):
                return {GUARDS}  # the stuck detector's own feedback block says it already
            return {GUARDS} | self._feedback(e, "stuck", "warning", stuck_text(e), "stuck")
        assert isinstance(e, ev.Feedback)
        g.last_feedback = e
        tally = g.delivered.setdefault(e.source, ProviderTally())
        tally.count += 1
        tally.last_ts, tally.last_severity = e.ts, e.severity
        self.feedback.append(FeedbackItem(e.seq, e.ts, e.source, e.severity, e.message, "feedback",
                                          tuple(e.observations), tuple(e.suggestions), e.turn, e.call_index,
                                          e.block))
        return {FEEDBACK, GUARDS}

    def _end(self, e: ev.EventBase, outcome: str, detail: str) -> None:
        if self.outcome == "completed" and outcome != "completed":
            return
        self.outcome, self.outcome_detail = outcome, detail
        self.ended_at = e.ts
        self.paused = self.stopping = False

    def _operator(self, e: ev.OperatorCommand) -> set[str]:
        if e.status == "received":
            return set()
        if e.status == "discarded":  # meant for an earlier run: this console's own requests still wait
            return self._feedback(e, f"operator · {e.source}" if e.source else "operator", "info",
                                  present.discarded_text(e))
        if e.source == "console" or e.status != "received":
            self.requested.pop(e.command, None)
        if e.status == "applied":
            if e.command == "pause":
                self.paused = True
            elif e.command == "resume":
                self.paused = False
            elif e.command == "stop":
                self.stopping = True
        severity = "info" if e.status == "applied" else "warning"
        who = f"operator · {e.source}" if e.source else "operator"
        detail = f": {e.detail}" if e.detail else ""
        return {STATUS} | self._feedback(e, who, severity, f"{e.command.replace('_', ' ')} {e.status}{detail}")

    def mark_finished(self, outcome: str, detail: str, ts: datetime | None) -> None:
        """The run ended in a way the events do not say (e.g. the engine thread raised)."""
        if self.outcome is None:
            self.outcome, self.outcome_detail = outcome, detail
            self.ended_at = ts or self.last_ts
        self.paused = self.stopping = False
