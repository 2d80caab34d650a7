"""run_agent_session: one session of turns (seed 004's inner loop).

A turn: assemble the layers into a request, stream the model's answer
(publishing text deltas as they come), dispatch its tool calls, append the
results and any harness notices, compact at phase boundaries, checkpoint.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import StrEnum

from console.engine import events as ev
from console.engine.checkpoint import Checkpoint, save_checkpoint
from console.engine.context.layers import assemble, build_protected, build_system, read_system_prompt
from console.engine.context.summary import build_summary, summary_message
from console.engine.context.tokens import estimate_request, estimate_text
from console.engine.messages import Message, ToolCall
from console.engine.runtime import Runtime
from console.engine.tools.registry import ToolOutcome, ToolRegistry
from console.providers.base import Provider, ProviderError, Stop, TextDelta, ToolCallEvent, Usage
from console.settings import RunSettings

MAX_NUDGES = 3
KICKOFF = "Begin. Your ACTIVE TODO LIST is below: do the current task."
NUDGE = (
    "You ended your turn without a tool call, but the job is not complete. Continue with the task marked "
    "← CURRENT in the ACTIVE TODO LIST and call todo_complete() when it is done. If the job cannot be done, "
    "call todo_rewind(issue) or job_complete with a low confidence and notes."
)


class ShutdownReason(StrEnum):
    USER_SHUTDOWN = "user_shutdown"
    CONTEXT_FULL = "context_full"
    JOB_COMPLETE = "job_complete"
    MAX_TURNS = "max_turns"
    ERROR = "error"


@dataclass
class SessionResult:
    reason: ShutdownReason
    turns: int
    session_number: int
    carryover: list[Message] = field(default_factory=list)
    detail: str = ""


class Controls:
    """Operator flags the loop polls between turns (thread-safe)."""

    def __init__(self) -> None:
        self.stop_requested = threading.Event()

    def request_stop(self) -> None:
        self.stop_requested.set()


@dataclass
class SessionDeps:
    runtime: Runtime
    provider: Provider
    registry: ToolRegistry
    settings: RunSettings
    controls: Controls


@dataclass
class TurnOutput:
    text: str
    calls: list[ToolCall]
    usage: Usage
    stop: Stop


def stream_turn(deps: SessionDeps, turn: int, conversation: list[Message], system: str) -> TurnOutput:
    rt = deps.runtime
    request = assemble(system, deps.registry, conversation, build_protected(rt.todos, rt.paths))
    parts: list[str] = []
    calls: list[ToolCall] = []
    usage: Usage | None = None
    stop = Stop("end_turn")
    for item in deps.provider.stream(request):
        if isinstance(item, TextDelta):
            parts.append(item.text)
            rt.events.emit(ev.TextDelta, turn=turn, text=item.text)
        elif isinstance(item, ToolCallEvent):
            calls.append(item.call)
        elif isinstance(item, Usage):
            usage = item
        elif isinstance(item, Stop):
            stop = item
    text = "".join(parts)
    if usage is None:
        out = estimate_text(text) + sum(estimate_text(c.arguments) for c in calls)
        usage = Usage(estimate_request(request), out, 0, reported=False)
    return TurnOutput(text, calls, usage, stop)


def dispatch(deps: SessionDeps, turn: int, call: ToolCall) -> ToolOutcome:
    rt = deps.runtime
    rt.events.emit(ev.ToolCalled, turn=turn, call_id=call.id, tool=call.name, arguments=call.arguments)
    started = time.perf_counter()
    parsed = deps.registry.parse(call)
    if isinstance(parsed, ToolOutcome):
        outcome = parsed
    else:
        tool, args = parsed
        try:
            outcome = deps.registry.run(rt, tool, args)
        except Exception as exc:  # a tool bug must become a result the agent sees, not a dead run
            rt.events.emit(ev.ErrorEvent, message=f"tool {call.name} crashed: {exc!r}", where="tool")
            outcome = ToolOutcome(False, f"{call.name} failed with an internal error: {type(exc).__name__}. "
                                         "Try a different approach; the operator has been notified.")
    rt.events.emit(ev.ToolResult, turn=turn, call_id=call.id, tool=call.name, ok=outcome.ok,
                   content=outcome.content, duration_ms=round((time.perf_counter() - started) * 1000, 3))
    return outcome


def compact(deps: SessionDeps, conversation: list[Message], reason: str) -> None:
    rt = deps.runtime
    before = len(conversation)
    text = build_summary(rt.paths, rt.workspace, rt.clock.now())
    conversation[:] = [summary_message(text)]
    rt.events.emit(ev.ContextCompacted, messages_before=before, messages_after=1, summary_chars=len(text),
                   reason=reason)


def run_agent_session(
    deps: SessionDeps,
    session_number: int,
    conversation: list[Message],
    start_turn: int = 0,
    nudges: int = 0,
) -> SessionResult:
    rt = deps.runtime
    system = build_system(read_system_prompt(rt.paths), deps.registry, session_number)
    if not conversation:
        conversation.append(Message.user(KICKOFF, kind="kickoff"))
    turn = start_turn
    turns_here = 0

    def checkpoint() -> None:
        save_checkpoint(rt.paths.checkpoint, Checkpoint(
            session=session_number, turn=turn, conversation=conversation, nudges=nudges,
            job_done=rt.job_done, updated_at=rt.clock.now()))

    while True:
        if deps.controls.stop_requested.is_set():
            return SessionResult(ShutdownReason.USER_SHUTDOWN, turns_here, session_number,
                                 detail="stopped by the operator")
        if turns_here >= deps.settings.max_turns:
            return SessionResult(ShutdownReason.MAX_TURNS, turns_here, session_number,
                                 detail=f"reached max_turns ({deps.settings.max_turns}) in one session")
        turn += 1
        turns_here += 1
        rt.events.emit(ev.TurnStarted, turn=turn)
        try:
            out = stream_turn(deps, turn, conversation, system)
        except ProviderError as exc:
            rt.events.emit(ev.ErrorEvent, message=str(exc), where="provider", recoverable=False)
            return SessionResult(ShutdownReason.ERROR, turns_here, session_number, detail=str(exc))
        rt.events.emit(
            ev.AssistantMessage, turn=turn, text=out.text, stop_reason=out.stop.reason,
            tool_calls=[ev.ToolCallRecord(id=c.id, name=c.name, arguments=c.arguments) for c in out.calls])
        rt.events.emit(ev.TokenUsage, turn=turn, input_tokens=out.usage.input_tokens,
                       output_tokens=out.usage.output_tokens, cached_input_tokens=out.usage.cached_input_tokens,
                       reported=out.usage.reported, context_window=deps.settings.context_window)
        conversation.append(Message.assistant(out.text, out.calls))
        end = False
        for call in out.calls:
            outcome = dispatch(deps, turn, call)
            conversation.append(Message.tool(call, outcome.content, ok=outcome.ok))
            end = end or outcome.end_session
        notices = rt.take_notices()
        if rt.compaction_reason:
            reason, rt.compaction_reason = rt.compaction_reason, None
            compact(deps, conversation, reason)
        conversation.extend(notices)
        if out.calls:
            nudges = 0
        elif not end:
            nudges += 1
            if nudges > MAX_NUDGES:
                detail = f"the agent stopped {nudges} times in a row without finishing the job"
                rt.events.emit(ev.ErrorEvent, message=detail, where="loop", recoverable=False)
                checkpoint()
                return SessionResult(ShutdownReason.ERROR, turns_here, session_number, detail=detail)
            rt.events.emit(ev.CompletionBlocked, reason="the agent tried to stop before job_complete")
            conversation.append(Message.user(NUDGE, kind="nudge"))
        checkpoint()
        if end or rt.job_done:
            return SessionResult(ShutdownReason.JOB_COMPLETE, turns_here, session_number, detail="job_complete")
