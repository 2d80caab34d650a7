"""run_agent_session: one session of turns (seed 004's inner loop).

A turn: apply operator commands, assemble the layers into a request, stream
the model's answer (publishing text deltas as they come), dispatch its tool
calls, append the results and any harness notices, compact at phase
boundaries, checkpoint, then let the ContextManager decide: continue, mask
old observations, ask for a wind-down, or end the session for a restart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from console.engine import events as ev
from console.engine.checkpoint import Checkpoint, Conversation, SessionStore
from console.engine.context.carryover import extract_carryover
from console.engine.context.layers import assemble, build_protected, build_system, read_system_prompt
from console.engine.context.masking import apply_masking, mask_notice
from console.engine.context.pressure import WIND_DOWN_MESSAGE, ContextAction, ContextManager
from console.engine.context.summary import build_summary, llm_summary_request, summary_message
from console.engine.context.tokens import CHARS_PER_TOKEN, estimate_request, estimate_text
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.operator import Aborted, OperatorState
from console.engine.runtime import Runtime
from console.engine.tools.registry import ToolOutcome, ToolRegistry
from console.providers.base import Provider, ProviderError, Stop, TextDelta, ToolCallEvent, Usage
from console.settings import RunSettings

MAX_NUDGES = 3
# Seed 000's stuck detection: this many turns in a row without completing a todo.
STUCK_TURNS = 30
STUCK_NOTICE = (
    "[No todo has been completed in the last {n} turns. If the current task is done, call todo_complete(). "
    "If it cannot be done this way, call todo_rewind(issue) to re-plan instead of going round in circles.]"
)
CARRYOVER_TURNS = 3
CARRYOVER_BUDGET = 0.15  # share of the window the carried turns may take
OBSERVATION_BUDGET = 0.25  # share of the window one tool result may take
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
    used_tokens: int = 0
    budget: int = 0


@dataclass
class SessionDeps:
    runtime: Runtime
    provider: Provider
    registry: ToolRegistry
    settings: RunSettings
    operator: OperatorState
    sessions: SessionStore
    context: ContextManager | None = None


@dataclass
class TurnOutput:
    text: str
    calls: list[ToolCall]
    usage: Usage
    stop: Stop


def clean(text: str) -> str:
    """Text that can be stored as UTF-8: a lone surrogate (half an emoji, a mangled filename) becomes '?'."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def prompt_layers(request: ModelRequest) -> list[str]:
    """Which layers a request really carries, read from the request itself."""
    layers = []
    if request.system:
        layers.append("system_prompt")
    if "ACTIVE TODO LIST" in request.protected:
        layers.append("todo_list")
    if "MAIN PLAN (main_plan.md)" in request.protected:
        layers.append("plan")
    if request.tools:
        layers.append("tools")
    if "WORKING MEMORY" in request.protected:
        layers.append("working_memory")
    if request.messages and request.messages[0].meta.get("kind") == "summary":
        layers.append("summary")
    return layers


def output_reserve(window: int) -> int:
    """max_output_tokens for a window: 4096, or an eighth of a small window."""
    return max(256, min(4096, window // 8))


def build_request(deps: SessionDeps, system: str, conversation: list[Message]) -> ModelRequest:
    rt = deps.runtime
    protected = build_protected(rt.todos, rt.paths, [rt.memory.render()])
    return assemble(system, deps.registry, conversation, protected, output_reserve(deps.settings.context_window))


def stream_turn(deps: SessionDeps, turn: int, request: ModelRequest) -> TurnOutput:
    rt = deps.runtime
    parts: list[str] = []
    calls: list[ToolCall] = []
    usage: Usage | None = None
    stop = Stop("end_turn")
    for item in deps.provider.stream(request):
        deps.operator.apply(rt, streaming=True)  # raises Aborted on a second stop
        if isinstance(item, TextDelta):
            piece = clean(item.text)
            parts.append(piece)
            rt.events.emit(ev.TextDelta, turn=turn, text=piece)
        elif isinstance(item, ToolCallEvent):
            c = item.call
            calls.append(c.model_copy(update={"name": clean(c.name), "arguments": clean(c.arguments),
                                              "id": clean(c.id)}))
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
    outcome.content = clean(outcome.content)
    if len(outcome.content) > rt.observation_chars:
        cut = outcome.content.rfind("\n", 0, rt.observation_chars)
        cut = cut if cut > rt.observation_chars // 2 else rt.observation_chars
        outcome.content = (outcome.content[:cut] + f"\n[... output truncated at {cut} of {len(outcome.content)} "
                           "chars to fit the context budget; narrow the request to see the rest]")
    rt.events.emit(ev.ToolResult, turn=turn, call_id=call.id, tool=call.name, ok=outcome.ok,
                   content=outcome.content, duration_ms=round((time.perf_counter() - started) * 1000, 3))
    return outcome


def llm_summary(deps: SessionDeps, conversation: list[Message]) -> str | None:
    """A model-written summary of layers 4-5, or None (the caller falls back to the deterministic one)."""
    rt = deps.runtime
    try:
        parts = [e.text for e in deps.provider.stream(llm_summary_request(conversation))
                 if isinstance(e, TextDelta)]
    except ProviderError as exc:
        rt.events.emit(ev.ErrorEvent, message=f"LLM summary failed, using the deterministic one: {exc}",
                       where="compaction", recoverable=True)
        return None
    text = "".join(parts).strip()
    return text or None


def compact(deps: SessionDeps, conversation: list[Message], reason: str) -> None:
    """Layers 4-5 become a new previous summary (the new todos are already in layer 2)."""
    rt = deps.runtime
    before = len(conversation)
    text = build_summary(rt.paths, rt.workspace, rt.clock.now(), memory=rt.memory)
    if deps.settings.summary == "llm" and (written := llm_summary(deps, conversation)):
        # The facts stay: the model's prose is added to them, never trusted to replace them.
        text = text.rstrip() + "\n\nSummary of the conversation, written by the model:\n" + written + "\n"
    conversation[:] = [summary_message(text)]
    rt.events.emit(ev.ContextCompacted, messages_before=before, messages_after=1, summary_chars=len(text),
                   reason=reason)


def _wait_while_paused(deps: SessionDeps) -> None:
    op, rt = deps.operator, deps.runtime
    while op.paused and not op.stop_requested:
        op.channel.wait(0.2)
        op.apply(rt)


def run_agent_session(
    deps: SessionDeps,
    session_number: int,
    conversation: Conversation,
    start_turn: int = 0,
    nudges: int = 0,
) -> SessionResult:
    rt, op, st = deps.runtime, deps.operator, deps.settings
    # Re-read at every session start: the agent (or the operator) may have edited SYSTEM_PROMPT.md.
    system = build_system(read_system_prompt(rt.paths), deps.registry, session_number)
    if not conversation:
        conversation.append(Message.user(KICKOFF, kind="kickoff"))
    cm = deps.context = ContextManager(st.context_window, st.soft_threshold, st.hard_threshold,
                                       reserve=output_reserve(st.context_window))
    rt.observation_chars = max(2_000, int(st.context_window * OBSERVATION_BUDGET * CHARS_PER_TOKEN))
    cm.reset(estimate_request(build_request(deps, system, conversation)))
    if cm.pct >= st.hard_threshold or not cm.fits:
        detail = (f"context window too small: the first prompt of session {session_number} already needs "
                  f"~{cm.used} tokens (+{cm.reserve} for the reply) of {st.context_window} ({cm.pct:.0%}); "
                  "raise --context-window")
        rt.events.emit(ev.ErrorEvent, message=detail, where="context", recoverable=False)
        return SessionResult(ShutdownReason.ERROR, 0, session_number, detail=detail)
    turn = start_turn
    turns_here = 0
    progress_mark = (rt.memory.state.next_id, rt.todos.state.generation)
    idle_turns = 0

    def checkpoint(durable: bool = False) -> None:
        deps.sessions.save(Checkpoint(session=session_number, turn=turn, nudges=nudges, job_done=rt.job_done,
                                      updated_at=rt.clock.now()), conversation, durable=durable or rt.job_done)

    def end(reason: ShutdownReason, detail: str, carry: list[Message] | None = None) -> SessionResult:
        return SessionResult(reason, turns_here, session_number, carry or [], detail, cm.used, cm.budget)

    while True:
        op.apply(rt)
        _wait_while_paused(deps)
        if op.stop_requested:
            return end(ShutdownReason.USER_SHUTDOWN, "stopped by the operator")
        conversation.extend(notices := rt.take_notices())
        cm.appended(notices)
        if turns_here >= st.max_turns:
            return end(ShutdownReason.MAX_TURNS, f"reached max_turns ({st.max_turns}) in one session")
        turn += 1
        turns_here += 1
        request = build_request(deps, system, conversation)
        rt.events.emit(ev.TurnStarted, turn=turn, layers=prompt_layers(request), prompt_tokens_est=cm.used)
        try:
            out = stream_turn(deps, turn, request)
        except Aborted:
            # The half-streamed reply is dropped: the conversation stays whole for a resume.
            return end(ShutdownReason.USER_SHUTDOWN, "stopped by the operator during a turn")
        except ProviderError as exc:
            rt.events.emit(ev.ErrorEvent, message=str(exc), where="provider", recoverable=False)
            return end(ShutdownReason.ERROR, str(exc))
        rt.events.emit(
            ev.AssistantMessage, turn=turn, text=out.text, stop_reason=out.stop.reason,
            tool_calls=[ev.ToolCallRecord(id=c.id, name=c.name, arguments=c.arguments) for c in out.calls])
        reply = Message.assistant(out.text, out.calls)
        conversation.append(reply)
        cm.record_usage(out.usage.input_tokens, out.usage.output_tokens)
        finished = False
        added: list[Message] = []
        for call in out.calls:
            outcome = dispatch(deps, turn, call)
            added.append(Message.tool(call, outcome.content, ok=outcome.ok))
            finished = finished or outcome.end_session
        conversation.extend(added)
        notices = rt.take_notices()
        compacted = bool(rt.compaction_reason)
        if rt.compaction_reason:
            reason, rt.compaction_reason = rt.compaction_reason, None
            compact(deps, conversation, reason)
            conversation.extend(notices)
            cm.reset(estimate_request(build_request(deps, system, conversation)))
        else:
            conversation.extend(notices)
            cm.appended(added + notices)
        if out.calls:
            nudges = 0
        elif not finished and not rt.job_done:
            nudges += 1
            if nudges > MAX_NUDGES:
                detail = f"the agent stopped {nudges} times in a row without finishing the job"
                rt.events.emit(ev.ErrorEvent, message=detail, where="loop", recoverable=False)
                checkpoint()
                return end(ShutdownReason.ERROR, detail)
            rt.events.emit(ev.CompletionBlocked, reason="the agent tried to stop before job_complete")
            nudge = Message.user(NUDGE, kind="nudge")
            conversation.append(nudge)
            cm.appended([nudge])
        mark = (rt.memory.state.next_id, rt.todos.state.generation)
        idle_turns = 0 if mark != progress_mark else idle_turns + 1
        progress_mark = mark
        if idle_turns and idle_turns % STUCK_TURNS == 0:
            rt.events.emit(ev.StuckDetected, reason=f"no todo completed in {idle_turns} turns")
            stuck = Message.user(STUCK_NOTICE.format(n=idle_turns), kind="stuck_notice")
            conversation.append(stuck)
            cm.appended([stuck])
        rt.events.emit(ev.TokenUsage, turn=turn, input_tokens=out.usage.input_tokens,
                       output_tokens=out.usage.output_tokens, cached_input_tokens=out.usage.cached_input_tokens,
                       reported=out.usage.reported, context_window=st.context_window, context_tokens=cm.used,
                       prompt_budget=cm.budget,
                       soft_threshold=st.soft_threshold, hard_threshold=st.hard_threshold)
        checkpoint(durable=compacted)  # phase boundaries are worth an fsync
        if finished or rt.job_done:
            return end(ShutdownReason.JOB_COMPLETE, "job_complete")
        evaluation = cm.evaluate(conversation)
        if evaluation.action is ContextAction.MASK and evaluation.plan is not None:
            freed = apply_masking(conversation, evaluation.plan)
            before = cm.used
            cm.freed(freed)
            notice = Message.user(mask_notice(len(evaluation.plan.indices), freed, cm.pct), kind="mask_notice")
            conversation.append(notice)
            cm.appended([notice])
            cm.masked_total += len(evaluation.plan.indices)
            rt.events.emit(ev.ContextMasked, masked=len(evaluation.plan.indices), tokens_freed=freed,
                           used_before=before, used_after=cm.used, context_window=st.context_window,
                           prompt_budget=cm.budget,
                           call_ids=[conversation[i].tool_call_id or "" for i in evaluation.plan.indices],
                           detail=f"masked the {len(evaluation.plan.indices)} oldest tool results")
            checkpoint()
        elif evaluation.action is ContextAction.WIND_DOWN:
            text = WIND_DOWN_MESSAGE.format(pct=evaluation.pct)
            msg = Message.user(text, kind="wind_down")
            conversation.append(msg)
            cm.appended([msg])
            cm.mark_wind_down()
            rt.events.emit(ev.WindDown, usage_pct=round(evaluation.pct, 4), used_tokens=evaluation.used,
                           context_window=st.context_window, prompt_budget=cm.budget, message=text)
            checkpoint()
        elif evaluation.action is ContextAction.RESTART:
            carry = extract_carryover(conversation, CARRYOVER_TURNS, int(st.context_window * CARRYOVER_BUDGET))
            return end(ShutdownReason.CONTEXT_FULL, f"context {evaluation.pct:.0%} full", carry)
