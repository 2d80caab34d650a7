"""Typed, versioned events: the engine's backbone.

Every state change is one of these. They are appended to ``JOB/.console/events.jsonl``
(the audit log operators query with jq) and published in-process to subscribers
(the console, the headless log). The ``type`` strings are a stable schema: add
new ones freely, rename none.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from console.engine.clock import Clock, SystemClock

SCHEMA_VERSION = 1


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


class ToolCallRecord(BaseModel):
    id: str
    name: str
    arguments: str


class AssistantMessage(EventBase):
    type: Literal["assistant_message"] = "assistant_message"
    turn: int
    text: str
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    stop_reason: str = ""


class ToolCalled(EventBase):
    type: Literal["tool_called"] = "tool_called"
    turn: int
    call_id: str
    tool: str
    arguments: str


class ToolDenied(EventBase):
    type: Literal["tool_denied"] = "tool_denied"
    turn: int
    call_id: str
    tool: str
    policy: str
    reason: str


class ToolResult(EventBase):
    type: Literal["tool_result"] = "tool_result"
    turn: int
    call_id: str
    tool: str
    ok: bool
    content: str
    duration_ms: float = 0.0


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
    type: Literal["feedback"] = "feedback"
    source: str
    severity: Literal["info", "caution", "warning", "error"] = "info"
    message: str


class TokenUsage(EventBase):
    type: Literal["token_usage"] = "token_usage"
    turn: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    reported: bool = True
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
    type: Literal["completion_blocked"] = "completion_blocked"
    reason: str


class StuckDetected(EventBase):
    type: Literal["stuck_detected"] = "stuck_detected"
    reason: str


class OperatorCommand(EventBase):
    type: Literal["operator_command"] = "operator_command"
    command: str
    args: dict[str, Any] = Field(default_factory=dict)
    source: str = "api"
    status: Literal["received", "applied", "rejected"] = "received"
    detail: str = ""
    command_id: str = ""


class JobCompleted(EventBase):
    type: Literal["job_completed"] = "job_completed"
    summary: str
    deliverables: list[str] = Field(default_factory=list)
    confidence: float
    notes: str = ""


class MemoryUpdated(EventBase):
    """Working-memory bookkeeping (seed 003): task records, blockers, pruning, legacy backfill."""

    type: Literal["memory_updated"] = "memory_updated"
    what: str
    detail: dict[str, Any] = Field(default_factory=dict)


class RunEnded(EventBase):
    """The last event of a run (a process's supervisor), whatever ended it."""

    type: Literal["run_ended"] = "run_ended"
    reason: str
    detail: str = ""
    sessions: int = 0
    restarts: int = 0


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
    | StuckDetected
    | OperatorCommand
    | JobCompleted
    | MemoryUpdated
    | RunEnded
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
    if not path.exists():
        return
    with path.open("r", encoding="utf-8") as fh:
        for raw in fh:
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield parse_event(raw)
            except (ValidationError, ValueError):
                continue


def read_new(path: Path, offset: int) -> tuple[list[EventBase], int]:
    """Events appended since byte ``offset``, and the offset to continue from.

    Only whole lines are consumed, so a line being written right now is read
    on the next call, not parsed half-way.
    """
    if not path.exists():
        return [], offset
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    out: list[EventBase] = []
    for raw in data[: end + 1].splitlines():
        if raw.strip():
            try:
                out.append(parse_event(raw.decode("utf-8")))
            except (ValidationError, ValueError):
                continue
    return out, offset + end + 1


def _last_seq(path: Path) -> int:
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 65536))
        tail = fh.read().decode("utf-8", errors="replace").splitlines()
    for raw in reversed(tail):
        try:
            return int(json.loads(raw)["seq"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0


class EventStream:
    """Stamps, records and publishes events.

    Appends go straight to the file (one write per line, flushed) so another
    process following the log, such as an attached console, sees them at once.
    A torn last line from a crash is repaired before the first append.
    """

    def __init__(self, log_path: Path | None, clock: Clock | None = None, session: int = 0) -> None:
        self.log_path = log_path
        self.clock = clock or SystemClock()
        self.session = session
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._fh = None
        self.seq = 0
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self._repair_torn_tail(log_path)
            self.seq = _last_seq(log_path)
            self._fh = log_path.open("a", encoding="utf-8")

    @staticmethod
    def _repair_torn_tail(path: Path) -> None:
        if not path.exists() or path.stat().st_size == 0:
            return
        with path.open("rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")

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
            if self._fh is not None and type_name not in IN_PROCESS_ONLY:
                try:
                    line = event.model_dump_json()
                except ValueError:
                    # Unencodable text (a lone surrogate) must not take the engine down: escape it.
                    line = json.dumps(event.model_dump(mode="json"), ensure_ascii=True)
                self._fh.write(line + "\n")
                self._fh.flush()
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(event)
            except Exception as exc:  # a broken view must never stop the agent
                print(f"agent-console: event subscriber failed: {exc!r}", file=sys.stderr)
        return event

    def sync(self) -> None:
        """Make everything logged so far durable (called at checkpoints)."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
