"""A turn of a session: the request assembled from the five layers, the model's streamed reply, and the dispatch
of each tool call through the one gate (parse, policies, run in the sandbox, record, on_result).

The session (:mod:`console.engine.session`) records each of these as a step of the journal.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from typing import Any

from console.engine import events as ev
from console.engine.context.layers import assemble, build_protected, goal_text
from console.engine.context.pressure import ContextManager
from console.engine.context.tokens import estimate_request, estimate_text
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import (
    IncompleteStream,
    Notice,
    Provider,
    ReasoningDelta,
    Stop,
    TextDelta,
    ToolCallEvent,
    Usage,
)
from console.engine.model_call import CallLimits, stream_abandonably
from console.engine.model_json import model_data
from console.engine.operator import OperatorState
from console.engine.run_settings import RunSettings
from console.engine.runtime import Runtime
from console.engine.tools.registry import ToolOutcome, ToolRegistry, cut_by_output_limit

# Tool-call arguments longer than this are shortened in the conversation once the call has run: the
# content is in the file it wrote, and megabytes of it resent every turn would fill the window.
ARGUMENTS_KEPT = 64 * 1024
# The model's reasoning kept in the log for the operator (it is never sent back to the model).
REASONING_KEPT = 16 * 1024


@dataclass
class SessionDeps:
    runtime: Runtime
    provider: Provider
    registry: ToolRegistry
    settings: RunSettings
    operator: OperatorState
    context: ContextManager | None = None
    # Seeds the retry jitter (tests, replays); None draws from the system's randomness.
    seed: int | None = None


@dataclass
class TurnOutput:
    text: str
    calls: list[ToolCall]
    usage: Usage
    stop: Stop
    reasoning: str = ""


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
    # requires_context off: seed 003's legacy prompts, without the working-memory block.
    # The goal and the previous task only when the current task asks for them (seed 003): see console.engine.memory.
    memory = ([rt.memory.prompt_block(current.text if (current := rt.todos.current) else None,
                                      functools.partial(goal_text, rt))]
              if deps.settings.requires_context else [])
    protected = build_protected(rt.todos, rt, memory)
    return assemble(system, deps.registry, conversation, protected, output_reserve(deps.settings.context_window))


def call_limits(st: RunSettings) -> CallLimits:
    return CallLimits(idle_timeout=st.idle_timeout, turn_timeout=st.turn_timeout,
                      retry_total_wait=st.retry_total_wait, retry_after_cap=st.retry_after_cap,
                      unreachable_wait=st.unreachable_wait)


class DeadlineCut(Exception):
    """The run's deadline (or the wrap-up turn's time) came while the model was being asked."""


def operator_tick(deps: SessionDeps) -> None:
    """While the model is asked: a stop or a pause acts now (raises Aborted / Paused), and the deadline cuts
    the call (raises DeadlineCut)."""
    events = deps.runtime.events
    try:
        deps.operator.apply_while_asking(deps.runtime)
    finally:
        if events.holds_lines:
            events.observe()  # a stop's confirmation must reach `agent-console stop` now
    left = deps.runtime.guards.seconds_to_cut()
    if left is not None and left <= 0:
        raise DeadlineCut


def stream_turn(deps: SessionDeps, turn: int, request: ModelRequest, streamed: list[int] | None = None) -> TurnOutput:
    """Ask the model for one turn. ``streamed`` (one counter) learns how much text was shown, so a failed
    attempt can say what the console must discard."""
    rt = deps.runtime
    parts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    usage: Usage | None = None
    stop: Stop | None = None
    tick = functools.partial(operator_tick, deps)
    # A headless run shows no reply as it comes (no view of it takes the streamed text): what came is taken at the
    # operator's looks, not every PACE (issue 37: the loop's thread wakes half as often while a reply streams).
    # The run's doorbell, when it has one: the loop wakes when a command comes, and a headless call looks by itself
    # every CALL_LOOK (5 s) only (console.engine.doorbell).
    for item in stream_abandonably(deps.provider, request, call_limits(deps.settings), tick,
                                   shown=rt.events.streams_text, bell=deps.operator.channel.doorbell):
        if isinstance(item, TextDelta):
            piece = clean(item.text)
            parts.append(piece)
            if streamed is not None:
                streamed[0] += len(piece)
            if rt.events.streams_text:
                rt.events.emit(ev.TextDelta, turn=turn, text=piece)
        elif isinstance(item, ReasoningDelta):
            piece = clean(item.text)
            reasoning.append(piece)
            if rt.events.streams_text:
                rt.events.emit(ev.TextDelta, turn=turn, text=piece, reasoning=True)
        elif isinstance(item, ToolCallEvent):
            c = item.call
            name, arguments, call_id = clean(c.name), clean(c.arguments), clean(c.id)
            # A copy only when something was cleaned (a copy is a few microseconds a call, every turn; no ToolCall
            # is ever changed in place, so sharing the provider's is safe).
            calls.append(c if (name, arguments, call_id) == (c.name, c.arguments, c.id)
                         else c.model_copy(update={"name": name, "arguments": arguments, "id": call_id}))
        elif isinstance(item, Usage):
            usage = item
        elif isinstance(item, Stop):
            stop = item
        elif isinstance(item, Notice):
            rt.events.emit(ev.ErrorEvent, message=clean(item.text), where="provider", recoverable=True)
        # Progress (tool-call arguments arriving) only keeps the stall watchdog quiet.
    # The output limit cut the reply: its last call may be cut too, and a cut call is never run.
    if (stop is not None and stop.reason == "max_tokens" and calls
            and (stub := cut_by_output_limit(calls[-1].arguments)) is not None):
        calls[-1] = calls[-1].model_copy(update={"arguments": stub})
    if stop is None:
        # Every adapter ends a complete reply with a Stop; a stream without one was cut, and a cut reply is
        # never executed (a half-received job_complete would run with {}).
        raise IncompleteStream(f"{deps.provider.name}: the reply ended without its end marker")
    text = "".join(parts)
    if usage is None:
        out = estimate_text(text) + sum(estimate_text(c.arguments) for c in calls)
        usage = Usage(estimate_request(request), out, 0, reported=False)
    return TurnOutput(text, calls, usage, stop, "".join(reasoning))


def dispatch(deps: SessionDeps, turn: int, call: ToolCall) -> ToolOutcome:
    rt = deps.runtime
    args, args_cut = ev.cap_text(call.arguments)
    if not any(e.get("type") == "tool_called" for e in rt.logged_early(call.id)):
        # (A call whose step wrote its events early, a kill then interrupting it, has its tool_called logged.)
        rt.events.emit(ev.ToolCalled, turn=turn, call_id=call.id, tool=call.name, arguments=args,
                       arguments_cut=args_cut)
    rt.settle()  # experiences.md and the state files, written in the background, are there for the tool
    started = time.perf_counter()
    parsed = deps.registry.parse(call)
    params: dict[str, Any] | None = None
    refusal: str | None = None
    left = rt.guards.seconds_to_cut()
    if left is not None and left <= 0:
        # The deadline passed during this turn: the rest of its calls are not run (the run winds down).
        outcome = ToolOutcome(False, f"{call.name} was not run: the job's time is up (its deadline passed during "
                                     "this turn); the run is winding down.")
    elif isinstance(parsed, ToolOutcome):
        outcome = parsed
    elif (refusal := rt.guards.gate(turn, call.id, (tool := parsed[0]).name,
                                    params := model_data(parsed[1]))) is not None:
        outcome = ToolOutcome(False, refusal)  # the one gate: a denied call never runs, and still has its result
    else:
        targs = parsed[1]
        rt.current_call = call.id
        try:
            outcome = deps.registry.run(rt, tool, targs)
        except Exception as exc:  # a tool bug must become a result the agent sees, not a dead run
            rt.events.emit(ev.ErrorEvent, message=f"tool {call.name} crashed: {exc!r}"[:2000], where="tool")
            outcome = ToolOutcome(False, f"{call.name} failed with an internal error: {type(exc).__name__}. "
                                         "Try a different approach; the operator has been notified.")
        finally:
            rt.current_call = None
    outcome.content = clean(outcome.content)
    if len(outcome.content) > rt.observation_chars:
        cut = outcome.content.rfind("\n", 0, rt.observation_chars)
        cut = cut if cut > rt.observation_chars // 2 else rt.observation_chars
        outcome.content = (outcome.content[:cut] + f"\n[... output truncated at {cut} of {len(outcome.content)} "
                           "chars to fit the context budget; narrow the request to see the rest]")
    content, content_cut = ev.cap_text(outcome.content)
    rt.events.emit(ev.ToolResult, turn=turn, call_id=call.id, tool=call.name, ok=outcome.ok, content=content,
                   content_cut=content_cut, duration_ms=round((time.perf_counter() - started) * 1000, 3))
    rt.guards.after_call(call.name, params, outcome.ok, denied=refusal is not None)
    return outcome


def elide_arguments(arguments: str, keep: int = 2048) -> str:
    """The arguments with every long string value shortened: still a valid JSON object with the same keys."""
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        return json.dumps({"elided": f"{len(arguments)} chars of arguments, not kept after the call ran"})
    if not isinstance(data, dict):
        return json.dumps({"elided": f"{len(arguments)} chars of arguments, not kept after the call ran"})
    short = {k: (v if not isinstance(v, str) or len(v) <= keep
                 else v[:keep] + f"... [{len(v) - keep} more chars elided from the conversation after the call ran]")
             for k, v in data.items()}
    out = json.dumps(short, ensure_ascii=False)
    if len(out) > ARGUMENTS_KEPT:
        return json.dumps({"elided": f"{len(arguments)} chars of arguments, not kept after the call ran"})
    return out
