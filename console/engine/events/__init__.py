"""Typed, versioned events: the engine's backbone.

Every state change is one of these. They are appended to ``JOB/.console/events.jsonl``
(the audit log operators query with jq) and published in-process to subscribers
(the console, the headless log). The ``type`` strings are a stable schema: add
new ones freely, rename none.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from console.engine import failpoints
from console.engine.clock import Clock, SystemClock

SCHEMA_VERSION = 1
# The most text one field of a logged event carries; beyond it the log keeps a preview, the size and
# the sha256 (the journal keeps the whole payload while a resume may need it).
EVENT_TEXT_LIMIT = 16 * 1024


class Cut(BaseModel):
    """A payload cut to a preview in the log."""

    chars: int
    sha256: str


def cap_text(text: str, limit: int = EVENT_TEXT_LIMIT) -> tuple[str, Cut | None]:
    if len(text) <= limit:
        return text, None
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    return (text[:limit] + f"\n[... {len(text) - limit} more chars not logged; sha256 {digest[:16]}]",
            Cut(chars=len(text), sha256=digest))


class EventBase(BaseModel):
    v: int = SCHEMA_VERSION
    ts: datetime
    seq: int
    session: int


class SessionStarted(EventBase):
    type: Literal["session_started"] = "session_started"
    reason: Literal["new", "resume", "restart"] = "new"
    provider: str = ""
    model: str = ""
    carryover_messages: int = 0
    # On a resume: where the run continues (e.g. "turn 12, tool call 2 of 3").
    detail: str = ""
    # The context window this session works in, and where that figure came from ("job.toml",
    # "--context-window", "registry: gpt-4.1", "default").
    context_window: int = 0
    context_window_source: str = ""
    # The model's prices are known (costs are shown) or not (said once, here).
    priced: bool = False
    # What the prompts carry beyond the todo list and the plan (seed 003; job.toml [context]): working memory
    # (requires_context), the file catalogue's find_files tool (file_index).
    working_memory: bool = True
    file_index: bool = False


class SessionEnded(EventBase):
    type: Literal["session_ended"] = "session_ended"
    reason: str
    turns: int = 0
    detail: str = ""


class TurnStarted(EventBase):
    type: Literal["turn_started"] = "turn_started"
    turn: int
    # Which layers the prompt of this turn carries (the protected ones must always be there).
    layers: list[str] = Field(default_factory=list)
    prompt_tokens_est: int = 0


class TextDelta(EventBase):
    """Published in-process only: the log keeps the whole assistant_message."""

    type: Literal["text_delta"] = "text_delta"
    turn: int
    text: str
    # The model's reasoning (reasoning_content, thinking), shown dimmed, never part of the answer.
    reasoning: bool = False


class ModelRetry(EventBase):
    """A model call failed in a way worth retrying; the half-streamed turn (if any) is dropped.

    The console discards the turn's streamed text on this event; the agent never sees the partial reply.
    """

    type: Literal["model_retry"] = "model_retry"
    turn: int
    attempt: int  # the attempt that is coming next (2 = the first retry)
    delay_s: float  # how long the engine waits before it
    cause: str  # short: "rate limited", "server error 503", "stream cut", "stalled 120 s"
    message: str = ""  # the provider's one line
    waited_s: float = 0.0  # time since the turn's first failure, this wait included
    max_wait_s: float = 0.0  # the most it may be (retry_total_wait, or unreachable_wait for a server not reached)
    discarded_chars: int = 0  # streamed text thrown away with the failed attempt


class ToolCallRecord(BaseModel):
    id: str
    name: str
    arguments: str
    arguments_cut: Cut | None = None


class AssistantMessage(EventBase):
    type: Literal["assistant_message"] = "assistant_message"
    turn: int
    text: str
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    stop_reason: str = ""
    text_cut: Cut | None = None
    # The model's reasoning for this reply (capped), for the operator; never sent back to the model.
    reasoning: str = ""


class ToolCalled(EventBase):
    type: Literal["tool_called"] = "tool_called"
    turn: int
    call_id: str
    tool: str
    arguments: str
    arguments_cut: Cut | None = None


class ToolDenied(EventBase):
    """A tool policy refused a call (seed 002): the agent got ``reason`` as the call's error result."""

    type: Literal["tool_denied"] = "tool_denied"
    turn: int
    call_id: str
    tool: str
    policy: str
    reason: str
    # The policy itself failed (raised): fail-closed, so the call was denied; what it raised.
    error: str | None = None


class ToolResult(EventBase):
    type: Literal["tool_result"] = "tool_result"
    turn: int
    call_id: str
    tool: str
    ok: bool
    content: str
    duration_ms: float = 0.0
    content_cut: Cut | None = None


class TodoItemRecord(BaseModel):
    text: str
    done: bool


class TodosChanged(EventBase):
    type: Literal["todos_changed"] = "todos_changed"
    phase_name: str
    phase_number: int
    total_phases: int
    kind: str
    items: list[TodoItemRecord]
    reason: str = ""
    display: str = ""
    generation: int = 0


class PlanChanged(EventBase):
    type: Literal["plan_changed"] = "plan_changed"
    phases: int = 0
    complete: int = 0
    current: str | None = None
    error: str | None = None


class PhaseTransition(EventBase):
    type: Literal["phase_transition"] = "phase_transition"
    kind: str
    stage: Literal["started", "completed"]
    from_phase: int | None = None
    to_phase: int | None = None
    to_name: str | None = None
    archive: str | None = None
    issue: str | None = None


class Feedback(EventBase):
    """A feedback provider's block (seed 002), delivered to the agent after the turn's tool results.

    ``source`` is the provider's name and ``message`` its summary; ``block`` is the exact
    ``<feedback provider='...'>`` text the agent received.
    """

    type: Literal["feedback"] = "feedback"
    source: str
    severity: Literal["info", "caution", "warning", "error"] = "info"
    message: str
    observations: list[str] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    call_index: int = 0
    turn: int = 0
    block: str = ""


class TokenUsage(EventBase):
    type: Literal["token_usage"] = "token_usage"
    turn: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    reported: bool = True
    # Tokens written to the prompt cache (part of input_tokens, priced apart).
    cache_write_tokens: int = 0
    # This turn's cost and the whole job's so far, in US dollars; None when the model's price is unknown.
    cost_usd: float | None = None
    job_cost_usd: float | None = None
    context_window: int = 0
    # The next prompt's size after this turn's results are appended (what pressure acts on).
    context_tokens: int = 0
    # The most a prompt may take (window less the reply's reserve and a margin); thresholds are shares of it.
    prompt_budget: int = 0
    soft_threshold: float = 0.0
    hard_threshold: float = 0.0


class ContextMasked(EventBase):
    type: Literal["context_masked"] = "context_masked"
    masked: int
    tokens_freed: int = 0
    used_before: int = 0
    used_after: int = 0
    context_window: int = 0
    prompt_budget: int = 0
    call_ids: list[str] = Field(default_factory=list)
    detail: str = ""


class ContextCompacted(EventBase):
    type: Literal["context_compacted"] = "context_compacted"
    messages_before: int
    messages_after: int
    summary_chars: int
    reason: str = ""


class WindDown(EventBase):
    type: Literal["wind_down"] = "wind_down"
    usage_pct: float
    used_tokens: int = 0
    context_window: int = 0
    prompt_budget: int = 0
    message: str = ""


class RestartPending(EventBase):
    type: Literal["restart_pending"] = "restart_pending"
    usage_pct: float = 0.0
    used_tokens: int = 0
    context_window: int = 0
    prompt_budget: int = 0
    carryover_messages: int = 0
    carryover_tokens: int = 0
    next_session: int = 0
    reason: str = "context full"


class RestartApproved(EventBase):
    type: Literal["restart_approved"] = "restart_approved"
    by: str = "auto"


class RestartDenied(EventBase):
    type: Literal["restart_denied"] = "restart_denied"
    by: str = "operator"


class CompletionBlocked(EventBase):
    """A stop (job_complete, or a turn without a tool call) refused by the task completion checker."""

    type: Literal["completion_blocked"] = "completion_blocked"
    reason: str
    checker: str = ""
    feedback: str = ""
    # "job_complete" or "end_turn"
    stop_reason: str = ""
    blocks: int = 0
    max_blocks: int = 0


class CompletionBypassed(EventBase):
    """A stop accepted without the completion check because a budget (deadline, tokens) is spent (seed 002)."""

    type: Literal["completion_bypassed"] = "completion_bypassed"
    budget: Literal["deadline", "tokens", "cost"]
    stop_reason: str
    detail: str = ""


class BudgetExhausted(EventBase):
    """The job's deadline passed or its token budget is spent: the agent is told to wrap up."""

    type: Literal["budget_exhausted"] = "budget_exhausted"
    budget: Literal["deadline", "tokens", "cost"]
    limit: float
    used: float
    detail: str = ""


class BudgetRaised(EventBase):
    """The operator's resume at a spend limit granted one more slice of it: ``limit`` is the budget now."""

    type: Literal["budget_raised"] = "budget_raised"
    budget: Literal["tokens", "cost"]
    limit: float
    added: float
    used: float
    grants: int = 1  # slices granted so far
    by: str = ""
    detail: str = ""


class StuckDetected(EventBase):
    type: Literal["stuck_detected"] = "stuck_detected"
    reason: str
    pattern: str = ""


class PolicyInfo(BaseModel):
    name: str
    kind: str
    detail: str = ""


class FeedbackInfo(BaseModel):
    name: str
    kind: str
    trigger: str = ""
    # When it can fire next, in words ("after 3 more calls", "at 12:31:05", "when CHANGELOG.md appears", "fired").
    next: str = ""


class GuardrailsStatus(EventBase):
    """What guards the run now: emitted at the start and whenever it changes (the console's guardrails view)."""

    type: Literal["guardrails_status"] = "guardrails_status"
    policies: list[PolicyInfo] = Field(default_factory=list)
    feedback: list[FeedbackInfo] = Field(default_factory=list)
    checker: str = ""
    # "complete", "incomplete: <what is left>", "off"
    verdict: str = ""
    completion_blocks: int = 0
    max_completion_blocks: int = 0
    deadline_at: datetime | None = None
    budget_tokens: int | None = None
    tokens_used: int = 0
    # The money budget (US dollars) and what the job has cost so far.
    budget_usd: float | None = None
    cost_usd: float = 0.0
    # How job-declared command tools run: the bubblewrap that confines them, "UNCONFINED (run --unconfined)",
    # "refused: no sandbox works here", or "" (no command tools). The whole header is a command_sandbox event.
    confinement: str = ""
    tools: list[str] = Field(default_factory=list)


class CommandSandbox(EventBase):
    """What the job's declared commands see and the bounds they run within: the run's header, at every start."""

    type: Literal["command_sandbox"] = "command_sandbox"
    # "confined": by bubblewrap; "unconfined": the operator's run --unconfined; "refused": no sandbox works here
    # (every call is refused until one does).
    mode: Literal["confined", "unconfined", "refused"]
    # The bubblewrap used ("bubblewrap 0.11.0 (bundled with agent-console)"), or why none works.
    tool: str = ""
    # "cgroup v1" / "cgroup v2" (the whole tree's memory and processes), or "rlimits" (per process).
    bounds_by: str = ""
    network: bool = False
    read_only: list[str] = Field(default_factory=list)
    limits: dict[str, float] = Field(default_factory=dict)
    commands: list[str] = Field(default_factory=list)
    # The paragraph every view shows.
    text: str = ""


class OperatorCommand(EventBase):
    type: Literal["operator_command"] = "operator_command"
    command: str
    args: dict[str, Any] = Field(default_factory=dict)
    source: str = "api"
    # discarded: meant for an earlier run of the job (a stop left in the inbox), never applied.
    status: Literal["received", "applied", "rejected", "discarded"] = "received"
    detail: str = ""
    command_id: str = ""


class JobCompleted(EventBase):
    """The agent's job_complete, accepted: the harness's record showed the plan done (console.engine.record),
    or the job declares free stops ([guardrails.completion] type = "none") and ``unmet`` says what the record
    shows left (the run then ends incomplete)."""

    type: Literal["job_completed"] = "job_completed"
    summary: str
    deliverables: list[str] = Field(default_factory=list)
    confidence: float
    notes: str = ""
    unmet: list[str] = Field(default_factory=list)


class JobGaveUp(EventBase):
    """The agent gave up: job_complete with a confidence below [guardrails] low_confidence and notes saying why
    (seed 000's unrecoverable case), accepted whatever the record shows. ``unmet``: what the record says is
    left. The run ends as gave up and asks its operator."""

    type: Literal["job_gave_up"] = "job_gave_up"
    summary: str
    deliverables: list[str] = Field(default_factory=list)
    confidence: float
    notes: str = ""
    unmet: list[str] = Field(default_factory=list)


class MemoryUpdated(EventBase):
    """Working-memory bookkeeping (seed 003): task records, blockers, pruning, legacy backfill."""

    type: Literal["memory_updated"] = "memory_updated"
    what: str
    detail: dict[str, Any] = Field(default_factory=dict)


class ExperienceRecorded(EventBase):
    """An entry of experiences.md (seed 000), recorded by the harness (a rewind, a stuck detection) or by the
    agent's record_experience; ``times`` > 1: the same entry again, moved to the newest."""

    type: Literal["experience_recorded"] = "experience_recorded"
    entry_id: int
    section: Literal["failed", "lesson", "pattern"]
    text: str
    source: str = ""
    where: str = ""
    times: int = 1


# How a run ended, in the operator's terms: completed (the harness's record shows the plan done), gave_up (the
# agent said it cannot be done: the operator is asked), incomplete (stopped, out of budget, refused stops, a
# turn limit: the work is not done, the run can go on), failed (an internal error, a restart loop).
Outcome = Literal["completed", "gave_up", "incomplete", "failed"]


class RunEnded(EventBase):
    """The last event of a run (a process's supervisor), whatever ended it."""

    type: Literal["run_ended"] = "run_ended"
    reason: str
    detail: str = ""
    sessions: int = 0
    restarts: int = 0
    # None in a log from before outcomes were recorded (the reason tells what it can).
    outcome: Outcome | None = None


class StateRecovered(EventBase):
    """A harness file could not be used as it was (damaged, or a step cut short by a kill): what was done."""

    type: Literal["state_recovered"] = "state_recovered"
    file: str
    problem: str
    action: str
    moved_to: str | None = None


class LaunchSettings(EventBase):
    """How this process runs the job (at each start): the settings recorded when the run began
    (``.console/launch.json``), with what a resume's flags changed. Notification targets as scheme://host."""

    type: Literal["launch_settings"] = "launch_settings"
    source: Literal["start", "resume"] = "start"
    provider: str = ""
    model: str = ""
    base_url: str | None = None
    context_window: int = 0
    auto_restart: bool = True
    max_restarts: int = 0
    max_turns: int = 0
    unconfined: bool = False
    notify: list[str] = Field(default_factory=list)
    budgets: dict[str, Any] = Field(default_factory=dict)
    # "model: a -> b" per setting a flag given at this resume changed (empty: resumed as it was started).
    changes: list[str] = Field(default_factory=list)
    # How the process was started: "console" (a runner a console started), "headless", "resume", "fleet".
    by: str = ""


# Why a run needs its operator (seed 004's approval, and what the harness escalates instead of looping).
NeedReason = Literal["restart_approval", "stuck", "budget", "completion_refused", "provider_down", "crashed",
                     "gave_up"]


class NeedsOperator(EventBase):
    """The run needs its operator: every view shows it first, attached consoles ring, the operator's channels
    (Apprise URLs) are told. ``paused``: the run holds until the operator acts (resume, approve, stop...);
    ``evidence``: the lines that show why (the repeated call, the spend, the provider's error)."""

    type: Literal["needs_operator"] = "needs_operator"
    reason: NeedReason
    message: str
    evidence: list[str] = Field(default_factory=list)
    paused: bool = True


class NeedsOperatorCleared(EventBase):
    """The operator answered (or the cause went away): the run no longer needs them."""

    type: Literal["needs_operator_cleared"] = "needs_operator_cleared"
    reason: NeedReason
    by: str = ""


class ErrorEvent(EventBase):
    type: Literal["error"] = "error"
    message: str
    where: str = ""
    recoverable: bool = True


Event = Annotated[
    SessionStarted
    | SessionEnded
    | TurnStarted
    | TextDelta
    | ModelRetry
    | AssistantMessage
    | ToolCalled
    | ToolDenied
    | ToolResult
    | TodosChanged
    | PlanChanged
    | PhaseTransition
    | Feedback
    | TokenUsage
    | ContextMasked
    | ContextCompacted
    | WindDown
    | RestartPending
    | RestartApproved
    | RestartDenied
    | CompletionBlocked
    | CompletionBypassed
    | BudgetExhausted
    | BudgetRaised
    | StuckDetected
    | GuardrailsStatus
    | CommandSandbox
    | OperatorCommand
    | JobCompleted
    | JobGaveUp
    | MemoryUpdated
    | ExperienceRecorded
    | RunEnded
    | StateRecovered
    | LaunchSettings
    | NeedsOperator
    | NeedsOperatorCleared
    | ErrorEvent,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)

# Events too chatty for the audit log; everything they carry is in a logged event too.
IN_PROCESS_ONLY = frozenset({"text_delta"})

Subscriber = Callable[[EventBase], None]


def parse_event(line: str) -> EventBase:
    return EVENT_ADAPTER.validate_json(line)


def read_events(path: Path) -> Iterator[EventBase]:
    """Yield events from a log, tolerating a torn last line and unknown types.

    A crash can leave half a line at the end; newer versions may add types an
    older reader does not know. Neither must stop an operator from reading the log.
    """
    fh = _open_log(path)
    if fh is None:
        return
    with fh:
        for raw in fh:
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield parse_event(raw.decode("utf-8", "replace"))
            except (ValidationError, ValueError, RecursionError):
                continue


def _open_log(path: Path) -> BinaryIO | None:
    """The log opened for reading, or None; never blocks (a named pipe there is not a log)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def read_new(path: Path, offset: int, limit: int = -1) -> tuple[list[EventBase], int]:
    """Events appended since byte ``offset``, and the offset to continue from.

    Only whole lines are consumed, so a line being written right now is read
    on the next call, not parsed half-way. ``limit``: read about that many bytes at
    most (a huge log is then caught up over several calls; a longer line is read whole).
    """
    fh = _open_log(path)
    if fh is None:
        return [], offset
    with fh:
        fh.seek(offset)
        data = fh.read(limit)
        if 0 < limit <= len(data) and not data.endswith(b"\n"):
            data += fh.readline()  # finish the line the limit cut
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    out: list[EventBase] = []
    for raw in data[: end + 1].splitlines():
        if raw.strip():
            try:
                out.append(parse_event(raw.decode("utf-8", "replace")))
            except (ValidationError, ValueError, RecursionError):
                continue
    return out, offset + end + 1


def _last_seq(path: Path) -> int:
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return 0
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            tail = fh.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return 0
    for raw in reversed(tail):
        seq = _seq_of(raw)
        if seq is not None:
            return seq
    return 0


def _seq_of(raw: str | bytes) -> int | None:
    """The seq of a log line, or None if the line is not an event we could have written."""
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    seq = data.get("seq") if isinstance(data, dict) else None
    return seq if type(seq) is int and 0 <= seq < 2**63 else None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON that jq reads")


def damaged_lines(path: Path) -> int:
    """How many lines of events.jsonl are not events (damage from outside: ours are whole lines).

    A last line without its newline is a kill's torn write, not damage (the stream cuts it).
    """
    bad = 0
    try:
        with path.open("rb") as fh:
            for raw in fh:
                if raw.strip() and raw.endswith(b"\n") and _seq_of(raw) is None:
                    bad += 1
    except OSError:
        return 0
    return bad


def copy_events(src: Path, dest: Path) -> int:
    """Write the lines of ``src`` that are events to ``dest`` (atomically); returns how many were left out."""
    bad = 0
    tmp = dest.with_name(f".{dest.name}.check.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)  # private, like the log
    with src.open("rb") as fh, os.fdopen(fd, "wb") as out:
        for raw in fh:
            if not raw.strip():
                continue
            if raw.endswith(b"\n") and _seq_of(raw) is not None:
                out.write(raw)
            else:
                bad += 1
    os.replace(tmp, dest)
    return bad


class EventStream:
    """Stamps, records and publishes events.

    Subscribers (the console, the headless log) get every event at once. The
    log gets them through an outbox: while a step of the run is in flight its
    events are held, the step's journal commit carries them, and only then are
    they appended to events.jsonl (:meth:`take_held` + :meth:`write_lines`), so a
    kill can neither log the effects of a step that never committed nor lose
    those of one that did (a resume appends what the journal has and the log
    lacks: :meth:`append_committed`). Events that report rather than change
    anything (a turn starting, a command received while streaming) are written
    at once with :meth:`observe`. A torn last line from a crash is repaired
    before the first append.
    """

    def __init__(self, log_path: Path | None, clock: Clock | None = None, session: int = 0) -> None:
        self.log_path = log_path
        self.clock = clock or SystemClock()
        self.session = session
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._failed: set[int] = set()
        self._fd: int | None = None
        self._held: list[str] = []
        # Until a run starts stepping, events go straight to the log.
        self.holding = False
        self.seq = 0
        if log_path is not None:
            log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._repair_torn_tail(log_path)
            self.seq = _last_seq(log_path)
            # 0600: the audit log holds the conversation's tool calls and results, the operator's only.
            self._fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    @staticmethod
    def _repair_torn_tail(path: Path) -> None:
        """Close or cut a last line without its newline: jq must read every line of the log.

        A whole event (a kill between its last byte and the newline, or a copy that dropped the final
        newline) is kept and closed: it may be one that no journal holds (an observed one). A half-written one
        is cut; nothing is lost by it: an event the journal committed is appended again whole by
        :meth:`append_committed`, and one it did not commit described a step that is redone.
        """
        try:
            if not path.is_file() or path.stat().st_size == 0:
                return
            with path.open("rb+") as fh:
                size = fh.seek(0, os.SEEK_END)
                back = min(size, 1 << 20)
                fh.seek(size - back)
                tail = fh.read(back)
                if tail.endswith(b"\n"):
                    return
                cut = tail.rfind(b"\n")
                if (cut < 0 and back < size) or _seq_of(tail[cut + 1:]) is not None:
                    fh.seek(size)
                    fh.write(b"\n")  # a whole event, or a line over a megabyte: keep it, close it
                    return
                fh.truncate(size - back + cut + 1 if cut >= 0 else 0)
        except OSError:
            return

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers.remove(fn)

        return unsubscribe

    def emit(self, cls: type[EventBase], **fields: Any) -> EventBase:
        with self._lock:
            self.seq += 1
            event = cls(ts=self.clock.now(), seq=self.seq, session=self.session, **fields)
            type_name = fields.get("type") or cls.model_fields["type"].default
            if type_name not in IN_PROCESS_ONLY:
                try:
                    line = event.model_dump_json()
                except ValueError:
                    # Unencodable text (a lone surrogate) must not take the engine down: escape it.
                    line = json.dumps(event.model_dump(mode="json"), ensure_ascii=True)
                if self.holding:
                    self._held.append(line)
                else:
                    self._write([line])
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(event)
            except Exception as exc:  # a broken view must never stop the agent
                self._subscriber_failed(fn, exc)
        return event

    def _subscriber_failed(self, fn: Subscriber, exc: Exception) -> None:
        """Report a failing view once; one whose output is gone (a closed pipe) is dropped.

        Reporting must not fail either: stderr may be the same closed pipe.
        """
        gone = isinstance(exc, OSError)
        with self._lock:
            if gone and fn in self._subscribers:
                self._subscribers.remove(fn)
            first = id(fn) not in self._failed
            self._failed.add(id(fn))
        if first:
            with contextlib.suppress(Exception):
                what = "stopped receiving events" if gone else "failed on an event (it keeps receiving them)"
                print(f"agent-console: a view {what}: {exc!r}", file=sys.stderr, flush=True)

    # -- the outbox ------------------------------------------------------------------------------
    def take_held(self) -> list[str]:
        """The held lines, for the journal commit that records them (then :meth:`write_lines`)."""
        with self._lock:
            out, self._held = self._held, []
            return out

    def write_lines(self, lines: list[str]) -> None:
        with self._lock:
            self._write(lines)

    def observe(self) -> None:
        """Write what is held now: only events that report, not ones that record an effect."""
        self.write_lines(self.take_held())

    def discard_held(self) -> None:
        """A step failed before its commit: its events describe nothing that happened."""
        self.take_held()

    def append_committed(self, events: list[dict[str, Any]]) -> int:
        """Append events the journal committed but the log never got (a kill between the two)."""
        lines = []
        for e in events:
            try:
                lines.append(json.dumps(e, ensure_ascii=False, separators=(",", ":")))
            except (TypeError, ValueError):
                continue
        with self._lock:
            self._write(lines)
            for e in events:
                if isinstance(e.get("seq"), int):
                    self.seq = max(self.seq, e["seq"])
        return len(lines)

    def _write(self, lines: list[str]) -> None:
        if self._fd is None or not lines:
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8", "replace")
        fd = self._fd
        failpoints.hit("events", tear=lambda: os.write(fd, data[: max(1, len(data) // 2)]))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    def sync(self) -> None:
        """Make everything logged so far durable (called at the end of a run)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Write what is still held (an orderly end) and close the log."""
        self.observe()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
