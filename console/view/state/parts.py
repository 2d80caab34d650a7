"""The pieces of what the console shows: the aspects a batch of events can change (which panes to refresh), and the
records the fold keeps (a needs-you moment, a feedback entry, an experience, the guardrails' and the gauge's state)."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime

from console.engine import events as ev
from console.engine import needs
from console.engine.text import safe_text

FEEDBACK_KEEP = 300
TREND_KEEP = 120


# Aspects a batch of events can change.
STATUS, TODOS, GAUGE, FEEDBACK, PLAN, RESTART = "status", "todos", "gauge", "feedback", "plan", "restart"
GUARDS = "guards"
EXPERIENCES = "experiences"
EXPERIENCES_KEEP = 300  # entries of experiences.md the console keeps (the engine keeps 200 at most)


def need_label(reason: str) -> str:
    """``restart_approval`` as ``restart approval`` (console.engine.needs.label), safe for the terminal."""
    return safe_text(needs.label(reason), one_line=True)


# A run's outcome (console.engine.events.Outcome) as the status line and the fleet say it.
OUTCOME_SHOWN = {"completed": "completed", "gave_up": "gave up", "incomplete": "incomplete", "failed": "failed"}


@dataclass(frozen=True)
class Need:
    """What the run waits for its operator about (a ``needs_operator`` event; console.engine.needs)."""

    reason: str
    message: str
    evidence: tuple[str, ...]
    since: datetime  # when it started needing them (kept while a need follows another unanswered)
    paused: bool  # the run holds until they answer
    seq: int  # the event that asked (a new one rings an attached console)

    @property
    def label(self) -> str:
        return need_label(self.reason)


@dataclass(frozen=True)
class FeedbackItem:
    """One entry of the feedback pane.

    ``kind`` "feedback" is a feedback provider's block as the agent got it (summary, observations,
    suggestions); every other kind is a one-line notice, ``message`` in :mod:`console.view.present`'s words and
    ``kind`` its kind there ("denied", "blocked", "masked", "error", ...).
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
    icon: str = ""


@dataclass(frozen=True)
class ExperienceItem:
    """One entry of experiences.md as the console shows it (an ``experience_recorded`` event, made safe)."""

    entry_id: int
    section: str  # failed | lesson | pattern
    text: str
    source: str
    where: str
    times: int
    seq: int
    ts: datetime


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
    delivered: dict[str, ProviderTally] = field(default_factory=dict)  # by provider
    last_blocked: ev.CompletionBlocked | None = None
    bypassed: ev.CompletionBypassed | None = None
    exhausted: dict[str, ev.BudgetExhausted] = field(default_factory=dict)  # "deadline" | "tokens" | "cost"
    stuck: int = 0
    sandbox: ev.CommandSandbox | None = None  # what the job's commands see and their bounds (the run's header)
    # The run's MCP servers by name: the latest mcp_server event of each, and its calls and failed calls (counted
    # from the tool_result events of its tools, mcp__SERVER__TOOL).
    mcp: dict[str, McpServerTally] = field(default_factory=dict)


@dataclass
class McpServerTally:
    """One MCP server of the run as the guardrails view lists it."""

    last: ev.McpServerEvent
    calls: int = 0
    errors: int = 0


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
