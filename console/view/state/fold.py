"""The fold itself: :class:`ConsoleState` takes engine events one by one and says which aspects each changed."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal

from console.engine import events as ev
from console.engine.command_specs import CommandName
from console.engine.needs import restart_message
from console.engine.text import safe_text
from console.view import present
from console.view.present import phase_label
from console.view.state.parts import (
    EXPERIENCES,
    EXPERIENCES_KEEP,
    FEEDBACK,
    FEEDBACK_KEEP,
    GAUGE,
    GUARDS,
    OUTCOME_SHOWN,
    PLAN,
    RESTART,
    STATUS,
    TODOS,
    ExperienceItem,
    FeedbackItem,
    GaugeState,
    GuardrailsState,
    McpServerTally,
    Need,
    ProviderTally,
)
from console.view.story import Told

# What the status line says this console asked for and waits on: a command's kind, or "start" (a resume it started
# in the background, until the run's new process holds it).
Requested = CommandName | Literal["start"]


class ConsoleState:
    """The fold. ``apply`` (or ``apply_all``) returns the aspects that changed.

    ``run_started`` is when the run would have started had it never been stopped: the current process's start less
    the active time of the run's earlier processes (from each one's session_started to its last event), so that
    ``now - run_started`` (``ended_at - run_started`` once it ended) is the time the run has been running, summed
    over resumes. A run that sat stopped for a day does not count that day. ``first_started`` is its real start.
    ``last_event`` is the newest event worth a fleet row's "last event" (see :data:`present.QUIET_KINDS`).
    """

    def __init__(self, job_title: str = "", *, provider: str = "", model: str = "", window: int = 0,
                 soft: float = 0.70, hard: float = 0.85) -> None:
        self.job_title = safe_text(job_title, one_line=True)  # a folder's name: anything a file name may hold
        self.provider = provider
        self.model = model
        self.session = 0
        self.turn = 0
        self.last_seq = 0
        self.run_started: datetime | None = None
        self.first_started: datetime | None = None
        self.last_ts: datetime | None = None
        self.ended_at: datetime | None = None
        self.outcome: str | None = None  # completed | gave up | incomplete | stopped | failed (OUTCOME_SHOWN)
        self.outcome_detail = ""
        self.paused = False
        self.stopping = False
        self.todos: ev.TodosChanged | None = None
        self.gauge = GaugeState(window=window, soft=soft, hard=hard)
        self.restart_pending: ev.RestartPending | None = None
        # The run needs its operator (stuck, a budget, a restart to approve...): None when it does not.
        self.needs: Need | None = None
        # The operator acknowledged the ended run (agent-console ack, the fleet's or console's key): it asks no
        # more until a new process runs it.
        self.acknowledged = False
        self.feedback: deque[FeedbackItem] = deque(maxlen=FEEDBACK_KEEP)  # oldest first
        # experiences.md's entries by id, oldest first (an entry recorded again moves to the end).
        self.experiences: dict[int, ExperienceItem] = {}
        self.guards = GuardrailsState()
        self.told = Told()  # which events another line already says (the one answer every view shares)
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_tokens = 0
        self.turns_total = 0
        self.tool_calls = 0
        self.masked_total = 0
        self.completed_summary = ""
        # Commands this console sent that the engine has not answered yet (and "start": a resume it started):
        # their kind -> what to show.
        self.requested: dict[Requested, str] = {}
        # Cost: the whole job's so far (None while unknown), and whether the model's price is known (None: not
        # said, e.g. an older log); "no price known" is said once.
        self.job_cost: float | None = None
        self.priced: bool | None = None
        self.price_told = False
        # A model call failed and the engine waits before asking again (cleared when the turn goes on).
        self.retry: ev.ModelRetry | None = None
        self.last_event: present.Presented | None = None
        # This process's active span (its session_started, its latest event) and the earlier processes' total.
        self._span_start: datetime | None = None
        self._span_end: datetime | None = None
        self._active_before = timedelta(0)
        self._handlers: dict[type, Callable[[Any], set[str]]] = {
            ev.TurnStarted: self._turn_started,
            ev.AssistantMessage: self._message,
            ev.ToolCalled: self._tool_called,
            ev.ToolResult: self._tool_result,
            ev.TokenUsage: self._usage,
            ev.TodosChanged: self._todos,
            ev.SessionStarted: self._session_started,
            ev.SessionEnded: self._session_ended,
            ev.ContextMasked: self._masked,
            ev.WindDown: self._context,
            ev.ContextCompacted: self._context,
            ev.NeedsOperator: self._needs,
            ev.NeedsOperatorCleared: self._needs_cleared,
            ev.RunAcknowledged: self._acknowledged,
            ev.RestartPending: self._restart_pending,
            ev.RestartApproved: self._restart_answered,
            ev.RestartDenied: self._restart_answered,
            ev.ToolDenied: self._guardrail,
            ev.CompletionBlocked: self._guardrail,
            ev.CompletionBypassed: self._guardrail,
            ev.BudgetExhausted: self._guardrail,
            ev.StuckDetected: self._guardrail,
            ev.Feedback: self._guardrail,
            ev.GuardrailsStatus: self._guardrail,
            ev.CommandSandbox: self._guardrail,
            ev.McpServerEvent: self._guardrail,
            ev.StateRecovered: self._recovered,
            ev.ErrorEvent: self._error,
            ev.OperatorCommand: self._operator,
            ev.PhaseTransition: self._phase,
            ev.PlanChanged: self._plan,
            ev.JobCompleted: self._completed,
            ev.ExperienceRecorded: self._experience,
            ev.RunEnded: self._run_ended,
        }

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
        if self.needs is not None:
            return "needs you"
        if self.restart_pending is not None:
            return "restart pending"
        if self.stopping:
            return "stopping"
        if self.paused:
            return "paused"
        if self.retry is not None:
            return "waiting"
        return "running" if self.session else "starting"

    def active_seconds(self, now: datetime) -> float:
        """How long the run has been running, over all its processes (``now``: the time to count to while it runs)."""
        if self.run_started is None:
            return 0.0
        end = self.ended_at if self.ended and self.ended_at is not None else now
        return max(0.0, (end - self.run_started).total_seconds())

    # -- folding ------------------------------------------------------------------------
    def apply_all(self, events: list[ev.EventBase]) -> set[str]:
        changed: set[str] = set()
        for e in events:
            changed |= self.apply(e)
        return changed

    def apply(self, e: ev.EventBase) -> set[str]:
        e = present.safe_event(e)
        if e.seq > self.last_seq:
            self.last_seq = e.seq
        self.last_ts = e.ts
        if e.session:
            self.session = e.session
        cls = type(e)
        if cls is ev.TextDelta:
            if self.retry is not None and e.text:  # type: ignore[attr-defined]
                self.retry = None  # the retried call answers: the wait is over
                return {STATUS}
            return set()
        if cls is ev.ModelRetry:
            self.retry = e  # type: ignore[assignment]
            self.last_event = present.describe(e)
            return {STATUS}
        retried = self.retry is not None and cls not in (ev.OperatorCommand, ev.ErrorEvent, ev.GuardrailsStatus)
        if retried:
            self.retry = None  # the turn went on (or ended): nothing waits any more
        handler = self._handlers.get(cls)
        out = handler(e) if handler is not None else set()
        if cls is not ev.StateRecovered:  # recovery comes before a resumed process starts: not part of the last one
            self._span_end = e.ts
        return out | {STATUS} if retried else out

    def _feedback(self, p: present.Presented | None) -> set[str]:
        """``p`` as a one-line notice of the feedback pane (and the fleet's last event)."""
        if p is None:
            return set()
        self.last_event = p
        assert p.ts is not None
        self.feedback.append(FeedbackItem(p.seq, p.ts, p.source, p.severity, p.line, p.kind, icon=p.icon))
        return {FEEDBACK}

    def _action(self, p: present.Presented) -> None:
        """The gauge's last context action."""
        self.gauge.last_action = p.text
        self.gauge.last_action_ts = p.ts

    # -- the turn -----------------------------------------------------------------------
    def _turn_started(self, e: ev.TurnStarted) -> set[str]:
        self.turn = e.turn
        if e.prompt_tokens_est:
            self.gauge.used = e.prompt_tokens_est
        return {STATUS, GAUGE}

    def _message(self, e: ev.AssistantMessage) -> set[str]:
        self.tool_calls += len(e.tool_calls)
        return set()

    def _tool_called(self, e: ev.ToolCalled) -> set[str]:
        return set()

    def _tool_result(self, e: ev.ToolResult) -> set[str]:
        # A denial and a refused job_complete are reported as what they are, not as failed calls.
        said = self.told.said_elsewhere(e)
        changed = self._mcp_call(e) if not said and e.tool.startswith("mcp__") else set()
        if said or e.ok:
            return changed
        return changed | self._feedback(present.describe(e))

    def _mcp_call(self, e: ev.ToolResult) -> set[str]:
        """A call of an MCP server's tool (mcp__SERVER__TOOL; a denied one never reached it): its server's tally."""
        tally = self.guards.mcp.get(e.tool.removeprefix("mcp__").partition("__")[0])
        if tally is None:
            return set()
        tally.calls += 1
        tally.errors += not e.ok
        return {GUARDS}

    def _usage(self, e: ev.TokenUsage) -> set[str]:
        g = self.gauge
        if e.job_cost_usd is not None:
            self.job_cost = e.job_cost_usd
        if e.source:  # an MCP server's sampling: spend, not a turn (the context gauge is the agent's)
            self.input_tokens += e.input_tokens
            self.output_tokens += e.output_tokens
            self.cached_tokens += e.cached_input_tokens
            return {STATUS}
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

    def _todos(self, e: ev.TodosChanged) -> set[str]:
        self.todos = e
        p = present.describe(e)
        if p is not None and p.kind == "todo-done":
            self.last_event = p
        return {TODOS, STATUS}

    # -- sessions -------------------------------------------------------------------------
    def _session_started(self, e: ev.SessionStarted) -> set[str]:
        g = self.gauge
        p = present.describe(e)
        assert p is not None
        self.last_event = p
        if e.reason in ("new", "resume"):  # a process starts (or starts again) the run
            if self._span_start is not None and self._span_end is not None:
                self._active_before += max(timedelta(0), self._span_end - self._span_start)
            self._span_start = e.ts
            self.first_started = self.first_started or e.ts
            self.run_started = e.ts - self._active_before
            self.ended_at = None
            self.outcome, self.outcome_detail = None, ""
            self.paused = self.stopping = False
            self.restart_pending = None
            self.needs = None  # a new process asks anew for what still needs its operator
            self.acknowledged = False  # and an acknowledgement of the last one's end is behind it
            self.requested.clear()
        self.provider = e.provider or self.provider
        self.model = e.model or self.model
        g.window = e.context_window or g.window
        g.window_source = e.context_window_source or g.window_source
        out = {STATUS} | ({GAUGE} if e.context_window or e.context_window_source else set())
        if e.prompt_tokens_est:
            # A restart's new session: its own first prompt, not the full context of the session it replaces
            # (an older log does not say; then the first turn's estimate does).
            g.used = e.prompt_tokens_est
            g.budget = e.prompt_budget or g.budget
            out.add(GAUGE)
        if "priced" in e.model_fields_set:  # an older log does not say: then nothing is said about price
            self.priced = e.priced
            if not e.priced and not self.price_told:
                self.price_told = True
                assert p.ts is not None
                self.feedback.append(FeedbackItem(e.seq, p.ts, "cost", "info",
                                                  present.unpriced_text(e.model or self.model, e.fleet_uncounted),
                                                  icon="$"))
                out.add(FEEDBACK)
        if e.reason == "restart":
            self._action(p)
            return out | {GAUGE, RESTART} | self._feedback(p)
        if e.reason == "resume":
            return out | self._feedback(p)
        return out

    def _session_ended(self, e: ev.SessionEnded) -> set[str]:
        p = present.describe(e)
        assert p is not None
        if e.reason == "job_complete":
            self._end(e, "completed", e.detail)
        elif e.reason == "gave_up":
            self._end(e, "gave up", e.detail)
        elif e.reason == "user_shutdown":
            self._end(e, "stopped", e.detail or "stopped by the operator")
        elif e.reason == "interrupted":
            self._end(e, "interrupted", e.detail or "interrupted by a signal")
        elif e.reason != "context_full":
            self._end(e, "failed", f"{e.reason}: {e.detail}" if e.detail else e.reason)
        if p.severity in ("warning", "error"):  # a job completed or a context restart says more than this
            return {STATUS} | self._feedback(p)
        return {STATUS}

    def _run_ended(self, e: ev.RunEnded) -> set[str]:
        self.last_event = present.describe(e)
        out = set()
        if e.outcome is not None:
            # The run's own verdict (an older log has none: its sessions' ends said what they could).
            shown = OUTCOME_SHOWN.get(e.outcome, e.outcome)
            if e.outcome == "incomplete" and e.reason in ("user_shutdown", "interrupted"):
                shown = "stopped" if e.reason == "user_shutdown" else "interrupted"
            if self.outcome != shown:
                self.outcome = None  # the run's verdict overrides what a session's end suggested
                self._end(e, shown, self.outcome_detail if shown == "completed" else
                          (e.detail or present.outcome_text(e.outcome, e.reason)))
                out.add(STATUS)
        if self.needs is not None and not (e.outcome == "gave_up" and self.needs.reason == "gave_up"):
            # The run is over: nothing waits for the operator in it any more (but an agent that gave up does).
            self.needs = None
            return out | {STATUS, RESTART}
        return out

    # -- context ----------------------------------------------------------------------------
    def _masked(self, e: ev.ContextMasked) -> set[str]:
        g = self.gauge
        self.masked_total += e.masked
        g.used = e.used_after or g.used
        g.budget = e.prompt_budget or g.budget
        return self._context(e)

    def _context(self, e: ev.EventBase) -> set[str]:
        p = present.describe(e)
        assert p is not None
        self._action(p)
        return {GAUGE} | self._feedback(p)

    def _restart_pending(self, e: ev.RestartPending) -> set[str]:
        self.restart_pending = e
        if self.needs is None:  # a log from before needs_operator: a restart to approve is a need all the same
            self.needs = Need("restart_approval", restart_message(e.used_tokens, e.next_session), (), e.ts,
                              False, e.seq)
        return {STATUS, RESTART} | self._context(e)

    def _restart_answered(self, e: ev.RestartApproved | ev.RestartDenied) -> set[str]:
        self.restart_pending = None
        if self.needs is not None and self.needs.reason == "restart_approval":
            self.needs = None
        if isinstance(e, ev.RestartDenied):
            # A stop while the restart waited is not a denial (the run's end says the same: jobs, wait).
            self._end(e, "stopped", "restart denied by the operator" if e.by == "operator" else
                      "stopped by the operator while a context restart waited for approval")
        return {STATUS, RESTART} | self._context(e)

    # -- the rest ---------------------------------------------------------------------------
    def _recovered(self, e: ev.StateRecovered) -> set[str]:
        return {STATUS} | self._feedback(present.describe(e))

    def _error(self, e: ev.ErrorEvent) -> set[str]:
        if not e.recoverable and e.where == "supervisor":
            self._end(e, "failed", e.message)
        return {STATUS} | self._feedback(present.describe(e))

    def _phase(self, e: ev.PhaseTransition) -> set[str]:
        p = present.describe(e)
        if p is None:
            return set()
        return ({PLAN} if e.stage == "completed" else set()) | self._feedback(p)

    def _plan(self, e: ev.PlanChanged) -> set[str]:
        return {PLAN} | self._feedback(present.describe(e))

    def _needs(self, e: ev.NeedsOperator) -> set[str]:
        old = self.needs
        since = old.since if old is not None else e.ts
        self.needs = Need(e.reason, e.message, tuple(e.evidence), since, e.paused, e.seq)
        if e.paused:
            self.paused = True  # the engine holds the run: resume (p) answers
        return {STATUS, RESTART} | self._feedback(present.describe(e))

    def _acknowledged(self, e: ev.RunAcknowledged) -> set[str]:
        """The operator acknowledged the ended run: it asks no more (its outcome stays; a resume asks anew)."""
        self.needs = None
        self.acknowledged = True
        return {STATUS, RESTART} | self._feedback(present.describe(e))

    def _needs_cleared(self, e: ev.NeedsOperatorCleared) -> set[str]:
        if self.needs is not None and self.needs.paused:
            # The need paused the run (its event said so), and its end is the end of that pause: the engine holds
            # a run for one need at a time and never keeps it paused once the need is closed (the operator's
            # resume, or a cause gone by itself: a fleet budget's hold lifted, with no resume command to say so).
            # An operator's own pause on top is refused while a need holds ("already paused"); one asked for while
            # a need that does not pause waits is kept (that need's `paused` is False).
            self.paused = False
        self.needs = None
        return {STATUS, RESTART} | self._feedback(present.describe(e))

    def _completed(self, e: ev.JobCompleted) -> set[str]:
        self.needs = None
        self.completed_summary = e.summary
        self._end(e, "completed", e.summary)
        return {STATUS} | self._feedback(present.describe(e))

    def _guardrail(self, e: ev.EventBase) -> set[str]:
        g = self.guards
        if isinstance(e, ev.GuardrailsStatus):
            g.status = e
            return {GUARDS}
        if isinstance(e, ev.CommandSandbox):
            g.sandbox = e  # and a notice in the feedback pane, below
        if isinstance(e, ev.McpServerEvent):  # the server's line in the guardrails view; its calls carry on
            known = g.mcp.get(e.server)
            g.mcp[e.server] = McpServerTally(e, known.calls if known else 0, known.errors if known else 0)
        p = present.describe(e)
        assert p is not None
        said = self.told.said_elsewhere(e)
        if isinstance(e, ev.ToolDenied):
            g.denials[e.policy] += 1
        elif isinstance(e, ev.CompletionBlocked):
            g.last_blocked = e
        elif isinstance(e, ev.CompletionBypassed):
            g.bypassed = e
        elif isinstance(e, ev.BudgetExhausted):
            g.exhausted[e.budget] = e
        elif isinstance(e, ev.StuckDetected):
            g.stuck += 1
            if said:
                return {GUARDS}  # the stuck detector's own feedback block says it already
        elif isinstance(e, ev.Feedback):
            tally = g.delivered.setdefault(e.source, ProviderTally())
            tally.count += 1
            tally.last_ts, tally.last_severity = e.ts, e.severity
            self.last_event = p
            # The block as the agent got it: summary, observations, suggestions (the pane draws it whole).
            self.feedback.append(FeedbackItem(e.seq, e.ts, e.source, e.severity, e.message, "feedback",
                                              tuple(e.observations), tuple(e.suggestions), e.turn, e.call_index,
                                              e.block, p.icon))
            return {FEEDBACK, GUARDS}
        return {GUARDS} | self._feedback(p)

    def _experience(self, e: ev.ExperienceRecorded) -> set[str]:
        self.experiences.pop(e.entry_id, None)
        self.experiences[e.entry_id] = ExperienceItem(e.entry_id, e.section, e.text, e.source, e.where, e.times,
                                                      e.seq, e.ts)
        while len(self.experiences) > EXPERIENCES_KEEP:
            del self.experiences[next(iter(self.experiences))]
        return {EXPERIENCES}

    def _end(self, e: ev.EventBase, outcome: str, detail: str) -> None:
        if self.outcome == "completed" and outcome != "completed":
            return
        self.outcome, self.outcome_detail = outcome, detail
        self.ended_at = e.ts
        self.paused = self.stopping = False

    def _operator(self, e: ev.OperatorCommand) -> set[str]:
        if e.status == "received":
            return set()
        p = present.describe(e)
        if e.status == "discarded":  # meant for an earlier run: this console's own requests still wait
            return self._feedback(p)
        # The event's command is any text a run wrote: the request of that kind is answered.
        self.requested = {kind: said for kind, said in self.requested.items() if kind != e.command}
        if e.status == "applied":
            if e.command == "pause":
                self.paused = True
            elif e.command == "resume":
                self.paused = False
            elif e.command == "stop":
                self.stopping = True
        return {STATUS} | self._feedback(p)

    def mark_finished(self, outcome: str, detail: str, ts: datetime | None) -> None:
        """The run ended in a way the events do not say (e.g. the engine thread raised)."""
        if self.outcome is None:
            self.outcome, self.outcome_detail = outcome, safe_text(detail)
            self.ended_at = ts or self.last_ts
        self.paused = self.stopping = False
        self.needs = None
