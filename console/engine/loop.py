"""run_agent_session: one session of turns (seed 004's inner loop), as committed steps.

A turn: assemble the layers into a request, stream the model's answer
(publishing text deltas as they come), then record it; run its tool calls one
at a time, each recorded with its result and the feedback providers' blocks
after it (seed 002; the stuck detector is one); then the turn's bookkeeping
(harness notices and those blocks after all the results, compaction at a phase
boundary, a nudge if the agent stopped early, usage) is recorded. Between turns
the ContextManager decides (continue, mask old observations, ask for a
wind-down, or end the session for a restart) and operator commands are
applied, each a recorded step too.

Every step ends with a journal commit (:meth:`Runtime.commit`) whose checkpoint
says where the run is. ``run_agent_session`` starts from any such checkpoint:
given one taken after a reply or after some of its tool calls, it finishes that
turn without asking the model again and without re-running a recorded call.

When nudging does not help, the run asks its operator and holds at the next turn boundary
(:func:`console.engine.needs.ask_operator`): the agent stuck past ``stuck_escalate_after`` nudges, a spend
limit reached, stops refused past ``max_completion_blocks``, a provider down past its retry bound. The
operator's ``resume`` answers (and grants: a new stuck count, one more slice of the budget, the refused
stops from zero, one more try of the provider); their ``stop`` ends the run as that need would have ended
it (out of budget, incomplete, interrupted). A need is recorded with the step that asks it, so a run killed
while it waits asks again when resumed.
"""

from __future__ import annotations

import functools
import json
import random
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from console.engine import events as ev
from console.engine.context.carryover import extract_carryover
from console.engine.context.layers import assemble, build_protected, build_system, read_system_prompt
from console.engine.context.masking import apply_masking, mask_notice
from console.engine.context.pressure import ContextAction, ContextManager, wind_down_message
from console.engine.context.summary import build_summary, llm_summary_request, summary_message
from console.engine.context.tokens import CHARS_PER_TOKEN, estimate_message, estimate_request, estimate_text
from console.engine.enforcement import FEEDBACK_KIND, Ask
from console.engine.journal import Checkpoint, Conversation, UsageRecord
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import (
    IncompleteStream,
    Notice,
    Provider,
    ProviderError,
    ReasoningDelta,
    Stop,
    TextDelta,
    ToolCallEvent,
    Usage,
)
from console.engine.model_call import TICK, CallLimits, Outage, retrying, stream_abandonably
from console.engine.needs import answered, ask_operator
from console.engine.operator import Aborted, OperatorState, Paused
from console.engine.run_settings import RunSettings
from console.engine.runtime import Runtime
from console.engine.tools.registry import ToolOutcome, ToolRegistry, cut_by_output_limit, refused_arguments

CARRYOVER_BUDGET = 0.15  # share of the window the carried turns may take
OBSERVATION_BUDGET = 0.25  # share of the window one tool result may take
# Tool-call arguments longer than this are shortened in the conversation once the call has run: the
# content is in the file it wrote, and megabytes of it resent every turn would fill the window.
ARGUMENTS_KEPT = 64 * 1024
# The model's reasoning kept in the log for the operator (it is never sent back to the model).
REASONING_KEPT = 16 * 1024
# "Prompt too long" answers in a row (each followed by masking or a restart) before the run gives up.
MAX_OVERFLOWS = 3
KICKOFF = "Begin. Your ACTIVE TODO LIST is below: do the current task."


class ShutdownReason(StrEnum):
    USER_SHUTDOWN = "user_shutdown"
    CONTEXT_FULL = "context_full"
    JOB_COMPLETE = "job_complete"
    MAX_TURNS = "max_turns"
    ERROR = "error"
    # The completion checker refused more stops than max_completion_blocks allows (seed 002), and the operator,
    # asked, stopped the run.
    COMPLETION_BLOCKED = "completion_blocked"
    # The deadline passed (the agent had its wrap-up turn), or a spend limit was reached and the operator, asked,
    # stopped the run.
    BUDGET_EXHAUSTED = "budget_exhausted"
    # A turn ended without a tool call and no completion check stood in the way ([guardrails.completion]
    # type = "none"): the agent's stop is the end of the run.
    AGENT_STOPPED = "agent_stopped"
    # The model could not be reached past its retry bound, and the operator, asked, stopped the run: nothing is
    # lost, run --in-place goes on.
    MODEL_UNAVAILABLE = "model_unavailable"
    # The agent gave up: job_complete with a low confidence and notes saying why (seed 000's unrecoverable case).
    GAVE_UP = "gave_up"


@dataclass
class SessionResult:
    reason: ShutdownReason
    turns: int
    session_number: int
    carryover: list[Message] = field(default_factory=list)
    detail: str = ""
    used_tokens: int = 0
    budget: int = 0
    # The session's turns in all (across resumes), for the next session's restart marker (seed 004).
    session_turns: int = 0


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
    protected = build_protected(rt.todos, rt, [rt.memory.render()] if deps.settings.requires_context else [])
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
    try:
        deps.operator.apply(deps.runtime, streaming=True, asking=True)
    finally:
        deps.runtime.events.observe()  # a stop's confirmation must reach `agent-console stop` now
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
    for item in stream_abandonably(deps.provider, request, call_limits(deps.settings), tick):
        if isinstance(item, TextDelta):
            piece = clean(item.text)
            parts.append(piece)
            if streamed is not None:
                streamed[0] += len(piece)
            rt.events.emit(ev.TextDelta, turn=turn, text=piece)
        elif isinstance(item, ReasoningDelta):
            piece = clean(item.text)
            reasoning.append(piece)
            rt.events.emit(ev.TextDelta, turn=turn, text=piece, reasoning=True)
        elif isinstance(item, ToolCallEvent):
            c = item.call
            calls.append(c.model_copy(update={"name": clean(c.name), "arguments": clean(c.arguments),
                                              "id": clean(c.id)}))
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
                                    params := parsed[1].model_dump())) is not None:
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


def llm_summary(deps: SessionDeps, conversation: list[Message]) -> str | None:
    """A model-written summary of layers 4-5, or None (the caller falls back to the deterministic one)."""
    rt = deps.runtime
    tick = functools.partial(operator_tick, deps)
    try:
        # Abandonable like a turn: a stop or a stall must not wait for an optional summary.
        parts = [e.text for e in stream_abandonably(deps.provider, llm_summary_request(conversation),
                                                    call_limits(deps.settings), tick) if isinstance(e, TextDelta)]
    except (Aborted, Paused):
        # The operator's stop or pause applies at the turn's end, right after this (deterministic) compaction.
        rt.events.emit(ev.ErrorEvent, message="LLM summary abandoned for the operator's command; using the "
                                              "deterministic one", where="compaction", recoverable=True)
        return None
    except Exception as exc:  # a failed, garbled or cut summary: the deterministic one is always there
        why = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {str(exc)[:200]}"
        rt.events.emit(ev.ErrorEvent, message=f"LLM summary failed, using the deterministic one: {why}",
                       where="compaction", recoverable=True)
        return None
    text = "".join(parts).strip()
    return text or None


def compact(deps: SessionDeps, conversation: list[Message], reason: str) -> None:
    """Layers 4-5 become a new previous summary (the new todos are already in layer 2)."""
    rt = deps.runtime
    before = len(conversation)
    text = build_summary(rt.paths, rt.workspace, rt.clock.now(),
                         memory=rt.memory if deps.settings.requires_context else None)
    if deps.settings.summary == "llm" and (written := llm_summary(deps, conversation)):
        # The facts stay: the model's prose is added to them, never trusted to replace them.
        text = text.rstrip() + "\n\nSummary of the conversation, written by the model:\n" + written + "\n"
    conversation[:] = [summary_message(text)]
    rt.events.emit(ev.ContextCompacted, messages_before=before, messages_after=1, summary_chars=len(text),
                   reason=reason)


def progress_mark(rt: Runtime) -> list[int]:
    return [rt.memory.state.next_id, rt.todos.state.generation]


class Session:
    """One session's run: the conversation, its checkpoint, and the steps that move both."""

    def __init__(self, deps: SessionDeps, number: int, conversation: Conversation, cp: Checkpoint,
                 system: str | None) -> None:
        self.deps = deps
        self.rt = deps.runtime
        self.number = number
        self.conversation = conversation
        self.cp = cp
        st = deps.settings
        # Re-read at every session start: the agent (or the operator) may have edited SYSTEM_PROMPT.md.
        # A resumed session keeps the one it was recorded with.
        self.system = system if system is not None else build_system(read_system_prompt(self.rt), deps.registry,
                                                                     number)
        self.fresh_system = system is None
        self.cm = deps.context = ContextManager(st.context_window, st.soft_threshold, st.hard_threshold,
                                                reserve=output_reserve(st.context_window))
        self.rt.observation_chars = max(2_000, int(st.context_window * OBSERVATION_BUDGET * CHARS_PER_TOKEN))
        self.turns_here = 0
        self.outage: Outage | None = None  # the failures of the turn being asked
        self.down = ""  # why the model could not be reached, while the run asks its operator about it
        self.overflows = 0  # "prompt too long" answers in a row
        self.request: ModelRequest | None = None  # the turn in flight's request (None: not asked here)
        self.rng = random.Random(deps.seed) if deps.seed is not None else None

    # -- committing ------------------------------------------------------------------------------
    def commit(self, durable: bool = False) -> None:
        cp = self.cp
        cp.session = self.number
        cp.context = self.cm.snapshot()
        cp.job_done = self.rt.job_done
        cp.updated_at = self.rt.clock.now()
        if self.fresh_system:
            assert self.rt.journal is not None
            self.rt.journal.session(self.number, self.system)
            self.fresh_system = False
        self.rt.commit(cp, self.conversation, system=self.system, durable=durable or self.rt.job_done)

    def end(self, reason: ShutdownReason, detail: str, carry: list[Message] | None = None) -> SessionResult:
        return SessionResult(reason, self.turns_here, self.number, carry or [], detail, self.cm.used, self.cm.budget)

    def commands(self) -> None:
        """Apply operator commands at a turn boundary, as a recorded step if they did anything."""
        rt = self.rt
        applied = self.deps.operator.apply(rt)
        resumed = self.answers()
        notices = rt.take_notices()
        self.conversation.extend(notices)
        self.cm.appended(notices)
        if applied or notices or resumed:
            self.commit(durable=resumed)

    # -- asking the operator ---------------------------------------------------------------------
    def need(self, ask: Ask, *, commit: bool = True) -> None:
        """Ask the operator and hold after this step. Recorded with the step (``commit``: now, else the caller's
        commit carries it), so a run killed while it waits asks again when resumed."""
        rt = self.rt
        pending = rt.guards.pending()
        if pending is None or pending.reason != ask.reason:
            rt.guards.record_ask(ask)
        ask_operator(rt.events, self.deps.operator, ask.reason, ask.message, ask.evidence)
        if commit:
            self.commit(durable=True)

    def ask_again(self) -> None:
        """A need recorded by an earlier process (killed while the run waited) is asked again: nobody answered
        it. A spend limit is not: the budgets look again at the first boundary (job.toml may have raised it)."""
        pending = self.rt.guards.pending()
        if pending is None:
            return
        if pending.reason == "budget":
            self.rt.guards.forget_ask()
            self.commit()
            return
        self.need(pending)

    def answers(self) -> bool:
        """Whether the operator's resume (which clears the need: console.engine.operator) just answered the
        recorded need; if so the run goes on with what the answer grants (recorded by the caller's commit)."""
        op, rt = self.deps.operator, self.rt
        pending = rt.guards.pending()
        if pending is None or op.needs is not None or op.paused or op.stop_requested:
            return False
        rt.guards.answer(resumed=True, by="operator's resume")
        if pending.reason == "stuck":
            rt.inject_notice("[Your operator saw that the run was stuck and let it go on. Do not repeat what did "
                             "not work: take a different approach to the task marked ← CURRENT, or call "
                             "todo_rewind(issue) to re-plan.]", "operator_notice")
        elif pending.reason == "completion_refused":
            rt.inject_notice("[Your operator reviewed the refused stops and let the run go on. Continue with the "
                             "task marked ← CURRENT in the ACTIVE TODO LIST and call todo_complete() when it is "
                             "done, or call todo_rewind(issue) to re-plan.]", "operator_notice")
        return True

    def stopped(self) -> SessionResult:
        """The operator's stop at a turn boundary. A stop while the run waited for them about a need ends it as
        that need ended runs before they were asked: out of budget, incomplete, interrupted (the model)."""
        rt, op = self.rt, self.deps.operator
        pending, need = rt.guards.pending(), op.needs
        detail = ""
        if pending is not None:
            if pending.reason == "completion_refused":
                detail = rt.guards.blocked_out() or pending.message
            rt.guards.answer(resumed=False, by="operator's stop")
        answered(rt.events, op, "operator's stop")
        if pending is not None or need is not None:
            self.commit(durable=True)
        reason = pending.reason if pending is not None else need
        if reason == "budget" and (spent := rt.guards.spend_limit()) is not None:
            return self.end(ShutdownReason.BUDGET_EXHAUSTED, f"stopped at the spend limit: {spent}")
        if reason == "completion_refused":
            return self.end(ShutdownReason.COMPLETION_BLOCKED, detail)
        if reason == "provider_down":
            return self.end(ShutdownReason.MODEL_UNAVAILABLE, self.down or "the model could not be reached")
        if reason == "stuck":
            return self.end(ShutdownReason.USER_SHUTDOWN, "stopped by the operator, asked because the agent looked "
                                                          "stuck")
        return self.end(ShutdownReason.USER_SHUTDOWN, "stopped by the operator")

    # -- the session -----------------------------------------------------------------------------
    def run(self) -> SessionResult:
        rt, cm, cp, st, op = self.rt, self.cm, self.cp, self.deps.settings, self.deps.operator
        if not self.conversation:
            self.conversation.append(Message.user(KICKOFF, kind="kickoff"))
        fresh = cp.context is None
        if fresh:
            cm.reset(estimate_request(build_request(self.deps, self.system, self.conversation)))
        else:
            cm.restore(cp.context)
        if not cp.progress:
            cp.progress = progress_mark(rt)
        self.commit()  # the session's start (a new job's bootstrap todos with it) is recorded first
        if fresh and (cm.pct >= st.hard_threshold or not cm.fits):
            detail = (f"context window too small: the first prompt of session {self.number} already needs "
                      f"~{cm.used} tokens (+{cm.reserve} for the reply) of {st.context_window} ({cm.pct:.0%}); "
                      "raise --context-window")
            rt.events.emit(ev.ErrorEvent, message=detail, where="context", recoverable=False)
            return self.end(ShutdownReason.ERROR, detail)
        # Stopped inside a turn, the run finishes it from the next call: its reply is recorded.
        if cp.stage == "tools" and (done := self.finish_turn()) is not None:
            return done
        self.ask_again()
        while True:
            if not cp.evaluated and (restart := self.pressure()) is not None:
                return restart
            self.commands()
            while op.paused and not op.stop_requested:
                op.channel.wait(0.2)
                self.commands()
            if op.stop_requested:
                return self.stopped()
            if self.turns_here >= st.max_turns:
                return self.end(ShutdownReason.MAX_TURNS, f"reached max_turns ({st.max_turns}) in one session")
            if (spent := self.budgets()) is not None:
                return spent
            if op.paused:
                continue  # a spend limit asked the operator: the run holds at the top until they answer
            cp.turn += 1
            self.turns_here += 1
            request = self.request = build_request(self.deps, self.system, self.conversation)
            rt.events.emit(ev.TurnStarted, turn=cp.turn, layers=prompt_layers(request), prompt_tokens_est=cm.used)
            rt.events.observe()
            try:
                out = self.ask(request)
            except Aborted:
                # The half-streamed reply is dropped: the last commit stays the resume point.
                return self.end(ShutdownReason.USER_SHUTDOWN, "stopped by the operator during a turn")
            except Paused:
                self.unask()  # asked again, under the same number, once the operator resumes
                continue
            except DeadlineCut:
                # The half reply is dropped; the budgets' check at the top of the loop grants the wrap-up turn
                # (or, if this was it, ends the run).
                self.unask()
                rt.events.emit(ev.ErrorEvent, message="the model's reply was cut: the job's time is up",
                               where="budget", recoverable=True)
                rt.events.observe()
                continue
            except ProviderError as exc:
                if (ended := self.failed(exc)) is None:
                    continue
                return ended
            self.overflows = 0
            self.record_reply(out)
            if (done := self.finish_turn()) is not None:
                return done

    # -- asking the model ------------------------------------------------------------------------
    def ask(self, request: ModelRequest) -> TurnOutput:
        """The turn's reply, with transient failures retried for the whole turn (each wait an event)."""
        rt, deps = self.rt, self.deps
        limits = call_limits(deps.settings)
        outage = self.outage = Outage(limits, now=rt.clock.monotonic)
        streamed = [0]

        def attempt() -> TurnOutput:
            streamed[0] = 0
            return stream_turn(deps, self.cp.turn, request, streamed)

        def announce(state: Any) -> None:
            exc = state.outcome.exception()
            rt.events.emit(ev.ModelRetry, turn=self.cp.turn, attempt=state.attempt_number + 1,
                           delay_s=state.upcoming_sleep, cause=getattr(exc, "cause", "") or type(exc).__name__,
                           message=str(exc), waited_s=round(outage.elapsed() + state.upcoming_sleep, 3),
                           max_wait_s=outage.limit(), discarded_chars=streamed[0])
            rt.events.observe()

        try:
            return attempt()  # the common case, without the retry machinery's cost (~20-100 us a turn)
        except ProviderError as exc:
            if exc.kind != "transient":
                raise
            failed: list[ProviderError] = [exc]

        def again() -> TurnOutput:
            if failed:
                raise failed.pop()  # the first attempt's failure, already had: tenacity counts it as attempt 1
            return attempt()

        return retrying(limits, self.wait, announce, self.rng, outage)(again)

    def wait(self, seconds: float) -> None:
        """A retry's wait, in ticks that let a stop or a pause act at once."""
        clock = self.rt.clock
        end = clock.monotonic() + seconds
        while True:
            operator_tick(self.deps)
            left = end - clock.monotonic()
            if left <= 0:
                return
            clock.sleep(min(TICK, left))

    def failed(self, exc: ProviderError) -> SessionResult | None:
        """A model call that failed for good: the session's end, or None to go on (a full context; the model
        not reached: the run asks its operator and holds)."""
        rt = self.rt
        if exc.kind == "context":
            return self.overflowed(exc)
        if exc.kind == "transient":
            self.provider_down(exc)
            return None
        rt.events.emit(ev.ErrorEvent, message=str(exc), where="provider", recoverable=False)
        rt.events.observe()
        return self.end(ShutdownReason.ERROR, str(exc))

    def provider_down(self, exc: ProviderError) -> None:
        """Transient failures outlasted the turn's bound (unreachable_wait for a server not reached at all,
        retry_total_wait else): the run asks its operator and holds; their resume asks the model again (the same
        turn, a fresh bound), their stop ends the run, resumable. A provider back in the morning finds it
        waiting."""
        rt, st = self.rt, self.deps.settings
        outage = self.outage or Outage(call_limits(st), now=rt.clock.monotonic)
        tries, elapsed, limit = max(1, outage.tries), outage.elapsed(), outage.limit()
        bound = "unreachable_wait: the server cannot be reached" if outage.unreachable else "retry_total_wait"
        asked = (f"; the server asked to wait {exc.retry_after:.0f} s more" if exc.retry_after
                 and elapsed + exc.retry_after > limit else "")
        tried = f"{tries} {'try' if tries == 1 else 'tries'} over {elapsed:.0f} s"
        detail = f"the model could not be reached: {tried} (limit {limit:g} s, {bound}{asked}); last: {exc}"
        rt.events.emit(ev.ErrorEvent, message=detail, where="provider", recoverable=True)
        self.unask()  # asked again, under the same number, once the operator resumes
        self.down = detail
        ask_operator(rt.events, self.deps.operator, "provider_down",
                     f"the model could not be reached ({getattr(exc, 'cause', '') or 'failed'}): resume tries again, "
                     "stop ends the run (resumable with run --in-place)",
                     [str(exc), f"failing for {elapsed:.0f} s: {tried}", f"limit {limit:g} s ({bound}{asked})"])
        rt.events.observe()

    def unask(self) -> None:
        """The turn that was being asked did not happen: its number is used again."""
        self.cp.turn -= 1
        self.turns_here -= 1

    def overflowed(self, exc: ProviderError) -> SessionResult | None:
        """The server says the prompt is too long: the context is full, whatever our estimate says. The next
        look at the pressure masks or restarts; a fresh session's first prompt that is still too long ends
        the run (nothing is left to take out)."""
        rt, cm = self.rt, self.cm
        self.unask()
        self.overflows += 1
        rt.events.emit(ev.ErrorEvent, message=f"{exc} - the context is treated as full", where="context",
                       recoverable=True)
        if self.overflows > MAX_OVERFLOWS or not any(m.role == "assistant" for m in self.conversation):
            # Nothing can be taken out (the session's first prompt, no reply in it yet, is already too long),
            # or taking out did not help: our window is larger than the model's. (A session resumed with
            # replies in it can still restart: its first turn here is not its first turn.)
            detail = (f"the model's server refused the prompt as too long ({exc}), with nothing left to mask or "
                      f"restart; lower context_window (now {self.deps.settings.context_window:,}) to the model's "
                      "real window")
            rt.events.emit(ev.ErrorEvent, message=detail, where="context", recoverable=False)
            return self.end(ShutdownReason.ERROR, detail)
        cm.used = max(cm.used, cm.budget) + 1  # over the budget: mask if that is enough, else restart
        self.cp.evaluated = False
        return None

    def record_reply(self, out: TurnOutput) -> None:
        """The reply as one step: once it is recorded, a resume never asks the model for this turn again."""
        rt, cp = self.rt, self.cp
        text, text_cut = ev.cap_text(out.text)
        records = []
        for c in out.calls:
            shown, cut = ev.cap_text(c.arguments)
            records.append(ev.ToolCallRecord(id=c.id, name=c.name, arguments=shown, arguments_cut=cut))
        rt.events.emit(ev.AssistantMessage, turn=cp.turn, text=text, text_cut=text_cut,
                       stop_reason=out.stop.reason, tool_calls=records, reasoning=out.reasoning[:REASONING_KEPT])
        # Arguments too big for any tool are not recorded (nor resent every turn): the call is refused.
        calls = [c.model_copy(update={"arguments": stub}) if (stub := refused_arguments(c.arguments)) else c
                 for c in out.calls]
        reply = Message.assistant(out.text, calls)
        self.conversation.append(reply)
        # The reply counts with what is kept of it: refused arguments are not in the next prompt.
        output = out.usage.output_tokens if calls == out.calls else min(out.usage.output_tokens,
                                                                        estimate_message(reply))
        self.cm.record_usage(out.usage.input_tokens, output)
        cp.stage, cp.next_call, cp.finished, cp.notices, cp.compaction = "tools", 0, False, [], None
        cp.usage = UsageRecord(input_tokens=out.usage.input_tokens, output_tokens=out.usage.output_tokens,
                               cached_input_tokens=out.usage.cached_input_tokens, reported=out.usage.reported,
                               cache_write_tokens=out.usage.cache_write_tokens)
        self.commit()

    def reply_index(self) -> int:
        for i in range(len(self.conversation) - 1, -1, -1):
            if self.conversation[i].role == "assistant":
                return i
        raise RuntimeError("a turn in flight has no recorded reply")

    def finish_turn(self) -> SessionResult | None:
        """Run the reply's remaining tool calls (each a step), then the turn's bookkeeping (a step)."""
        rt, cm, cp, conv = self.rt, self.cm, self.cp, self.conversation
        at = self.reply_index()
        calls = conv[at].tool_calls
        # On a resume, notices the start-up added (an old transition recovered) follow the recorded ones.
        rt.notices, rt.compaction_reason = [*cp.notices, *rt.notices], cp.compaction or rt.compaction_reason
        for i in range(cp.next_call, len(calls)):
            call = calls[i]
            outcome = dispatch(self.deps, cp.turn, call)
            result = Message.tool(call, outcome.content, ok=outcome.ok)
            conv.append(result)
            cm.appended([result])
            if len(call.arguments) > ARGUMENTS_KEPT:
                shortened = [c.model_copy(update={"arguments": elide_arguments(c.arguments)}) if c.id == call.id
                             else c for c in conv[at].tool_calls]
                before = estimate_message(conv[at])
                conv[at] = conv[at].model_copy(update={"tool_calls": shortened})
                cm.freed(before - estimate_message(conv[at]))
            cp.finished = cp.finished or outcome.end_session
            self.feedback(call, result, collect=not outcome.end_session)
            cp.next_call = i + 1
            cp.notices, cp.compaction = list(rt.notices), rt.compaction_reason
            self.commit(durable=outcome.end_session)
            if self.deps.operator.abort and i + 1 < len(calls):
                # A second stop during the turn's tool calls: the rest are not run now (a resume runs them, from
                # the next call, as after any interruption).
                return self.end(ShutdownReason.USER_SHUTDOWN, "stopped by the operator during the turn's tool calls")
        return self.bookkeeping(calls)

    def feedback(self, call: ToolCall, result: Message, *, collect: bool) -> None:
        """After each tool call (seed 002): the call is counted for the feedback providers, and those whose
        trigger fires give their blocks. The blocks reach the agent after the turn's tool results (a message
        between the results of one reply would break the wire's call/result pairing), in the order the calls
        ran; they are recorded with this call's step, so a resume neither loses nor repeats them. ``collect``
        False (the call ended the session): counted only."""
        rt, cp = self.rt, self.cp
        guards = rt.guards
        guards.record_turn(cp.turn, [call], {call.id: result})
        if not collect:
            return
        # Turns without a completed todo, this one counted as such until a call of it makes progress.
        idle = cp.idle_turns + 1 if progress_mark(rt) == cp.progress else 0
        _, text = guards.collect_feedback(cp.turn, idle, session=self.number, prompt=self.prompt)
        if not text:
            return
        last = rt.notices[-1] if rt.notices else None
        if last is not None and last.meta.get("kind") == FEEDBACK_KIND:
            # The blocks of several calls in a row: one message, blocks joined by blank lines (seed 002).
            rt.notices[-1] = last.model_copy(update={"content": f"{last.content}\n\n{text}"})
        else:
            rt.inject_notice(text, FEEDBACK_KIND)

    def prompt(self) -> ModelRequest:
        """What the model was sent for the turn in flight, for the feedback providers (FeedbackContext.prompt).
        A turn resumed after a kill rebuilds it from the recorded conversation (the request is not recorded)."""
        if self.request is None:
            self.request = build_request(self.deps, self.system, self.conversation[: self.reply_index()])
        return self.request

    def bookkeeping(self, calls: list[ToolCall]) -> SessionResult | None:
        """The turn's end, as one step: progress, feedback, a stop's check, harness notices, usage."""
        rt, cm, cp, st, conv = self.rt, self.cm, self.cp, self.deps.settings, self.conversation
        guards = rt.guards
        mark = progress_mark(rt)
        cp.idle_turns = 0 if mark != cp.progress else cp.idle_turns + 1
        if mark != cp.progress:
            guards.progressed()
        cp.progress = mark
        # The feedback providers ran after each tool call (self.feedback); their blocks are among the notices.
        after: list[Message] = []
        stopped: str | None = None
        if not calls and not cp.finished and not rt.job_done:
            # A turn without a tool call is a stop: the completion checker decides (seed 002).
            verdict = guards.check_stop("end_turn", conv[self.reply_index()].content)
            if verdict.allowed:
                stopped = "the agent ended its turn without a tool call" + (
                    "" if verdict.bypassed else " (no completion check stood in the way)")
            else:
                after.append(Message.user(verdict.message, kind="completion_blocked"))
        notices = [*after, *rt.take_notices()]
        compacted = bool(rt.compaction_reason)
        if rt.compaction_reason:
            reason, rt.compaction_reason = rt.compaction_reason, None
            compact(self.deps, conv, reason)
            conv.extend(notices)
            cm.reset(estimate_request(build_request(self.deps, self.system, conv)))
        else:
            conv.extend(notices)
            cm.appended(notices)
        usage = cp.usage or UsageRecord()
        cost = None if st.prices is None else st.prices.cost(Usage(
            usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, usage.reported,
            usage.cache_write_tokens))
        # Counted here, from the reply's recorded usage: the turn's end is one step, so a resume counts it once.
        job_cost = guards.count_tokens(usage.input_tokens + usage.output_tokens, cost)
        rt.events.emit(ev.TokenUsage, turn=cp.turn, input_tokens=usage.input_tokens,
                       output_tokens=usage.output_tokens, cached_input_tokens=usage.cached_input_tokens,
                       cache_write_tokens=usage.cache_write_tokens, cost_usd=cost, job_cost_usd=job_cost,
                       reported=usage.reported, context_window=st.context_window, context_tokens=cm.used,
                       prompt_budget=cm.budget, soft_threshold=st.soft_threshold, hard_threshold=st.hard_threshold)
        guards.status()
        finished = cp.finished
        # Nudging did not help: the agent kept trying to stop an unfinished job, or it looks stuck. The run asks
        # its operator, and holds at the top of the loop, once this step (with the need) is recorded.
        ask = None
        if not (finished or rt.job_done or stopped is not None):
            ask = guards.completion_ask() or guards.stuck_ask(cp.idle_turns)
            if ask is not None:
                self.need(ask, commit=False)
        cp.stage, cp.next_call, cp.notices, cp.compaction, cp.finished, cp.usage = "boundary", 0, [], None, False, None
        cp.evaluated = False
        self.commit(durable=compacted or stopped is not None or ask is not None)  # boundaries are worth an fsync
        if (spent := guards.spent()) is not None:
            # The wrap-up turn is over: the run ends, whatever the agent did with it (its job_complete,
            # if any, is kept as the outcome).
            return self.end(ShutdownReason.BUDGET_EXHAUSTED, spent)
        if finished or rt.job_done:
            if rt.outcome is not None and rt.outcome.gave_up:
                return self.end(ShutdownReason.GAVE_UP, "the agent gave up (job_complete with confidence "
                                                         f"{rt.outcome.confidence:g})")
            return self.end(ShutdownReason.JOB_COMPLETE, "job_complete")
        if stopped is not None:
            return self.end(ShutdownReason.AGENT_STOPPED, stopped)
        return None

    def budgets(self) -> SessionResult | None:
        """Before a turn: a passed deadline gives the agent one wrap-up turn (a recorded step), then ends the run;
        a spend limit asks the operator (the caller holds while the run is paused)."""
        verdict = self.rt.guards.budget_turn()
        if verdict.ends is not None:
            return self.end(ShutdownReason.BUDGET_EXHAUSTED, verdict.ends)
        if verdict.ask is not None:
            self.need(Ask("budget", f"{verdict.ask}: resume grants one more slice of the budget, stop ends the run "
                                    "as out of budget", verdict.evidence))
            return None
        if (message := verdict.wrap_up) is not None:
            msg = Message.user(message, kind="wrap_up")
            self.conversation.append(msg)
            self.cm.appended([msg])
            self.commit(durable=True)
        return None

    def pressure(self) -> SessionResult | None:
        """Between turns: what the context pressure calls for (a masking and a wind-down are recorded steps)."""
        rt, cm, st, conv = self.rt, self.cm, self.deps.settings, self.conversation
        evaluation = cm.evaluate(conv)
        if evaluation.action is ContextAction.MASK and evaluation.plan is not None:
            freed = apply_masking(conv, evaluation.plan)
            before = cm.used
            cm.freed(freed)
            notice = Message.user(mask_notice(len(evaluation.plan.indices), freed, cm.window_pct),
                                  kind="mask_notice")
            conv.append(notice)
            cm.appended([notice])
            cm.masked_total += len(evaluation.plan.indices)
            self.cp.evaluated = True
            rt.events.emit(ev.ContextMasked, masked=len(evaluation.plan.indices), tokens_freed=freed,
                           used_before=before, used_after=cm.used, context_window=st.context_window,
                           prompt_budget=cm.budget,
                           call_ids=[conv[i].tool_call_id or "" for i in evaluation.plan.indices],
                           detail=f"masked the {len(evaluation.plan.indices)} oldest tool results")
            self.commit()
        elif evaluation.action is ContextAction.WIND_DOWN:
            text = wind_down_message(evaluation.window_pct)
            msg = Message.user(text, kind="wind_down")
            conv.append(msg)
            cm.appended([msg])
            cm.mark_wind_down()
            self.cp.evaluated = True
            rt.events.emit(ev.WindDown, usage_pct=round(evaluation.pct, 4), used_tokens=evaluation.used,
                           context_window=st.context_window, prompt_budget=cm.budget, message=text)
            self.commit()
        elif evaluation.action is ContextAction.RESTART:
            carry = extract_carryover(conv, st.carryover_turns, int(st.context_window * CARRYOVER_BUDGET))
            ended = self.end(ShutdownReason.CONTEXT_FULL, f"context {evaluation.pct:.0%} full", carry)
            ended.session_turns = cm.turns
            return ended
        return None


def run_agent_session(deps: SessionDeps, session_number: int, conversation: Conversation,
                      cp: Checkpoint | None = None, system: str | None = None) -> SessionResult:
    """Run one session from ``cp`` (a fresh checkpoint for a new session) until it ends."""
    return Session(deps, session_number, conversation, cp or Checkpoint(session=session_number), system).run()
