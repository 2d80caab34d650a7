"""One session of turns (seed 004's inner loop), as committed steps: see :mod:`console.engine.loop`.

Why one module of ~520 lines: a turn's steps (the reply, each call, the bookkeeping, pressure, the waits for the
operator) commit one checkpoint in a fixed order that the kill-point sweeps check; asking the model and the
operator are apart already (:mod:`console.engine.asking`), and what is left is that order.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Callable

from console.engine import events as ev
from console.engine.asking import AskingTheModel, AskingTheOperator
from console.engine.compaction import compact
from console.engine.context.carryover import extract_carryover
from console.engine.context.layers import build_system, read_system_prompt
from console.engine.context.masking import apply_masking, mask_notice
from console.engine.context.pressure import ContextAction, ContextManager, PressureState, wind_down_message
from console.engine.context.tokens import CHARS_PER_TOKEN, estimate_message, estimate_request
from console.engine.enforcement import FEEDBACK_KIND, Ask
from console.engine.journal import Checkpoint, Conversation, UsageRecord
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import (
    ProviderError,
    Usage,
)
from console.engine.model_call import Outage
from console.engine.needs import answered
from console.engine.operator import Aborted, Paused
from console.engine.run_settings import RunSettings
from console.engine.runtime import Runtime
from console.engine.shutdown import SessionResult, ShutdownReason
from console.engine.tools.registry import refused_arguments
from console.engine.turn import (
    ARGUMENTS_KEPT,
    REASONING_KEPT,
    DeadlineCut,
    SessionDeps,
    TurnOutput,
    build_request,
    dispatch,
    elide_arguments,
    output_reserve,
    prompt_layers,
)

CARRYOVER_BUDGET = 0.15  # share of the window the carried turns may take
OBSERVATION_BUDGET = 0.25  # share of the window one tool result may take
# How a need the run waited on is closed when its deadline passes meanwhile (no one answered it; "stop": the
# notifier takes it as an end, not as an answer that let the run go on).
DEADLINE_ENDS_WAIT = "the deadline passed: the run stops as out of time"
KICKOFF = "Begin. Your ACTIVE TODO LIST is below: do the current task."


_frozen = False


def freeze_heap() -> None:
    """Once per process, at its first session's start: what is alive then (the modules, a resumed conversation of
    thousands of messages, the job's state) is kept out of the cyclic collector's full passes, each of which would
    otherwise stop a turn for ~40 ms at 2,800 messages. It is still freed by reference counting when dropped
    (messages hold no cycles). Once only: later sessions of a process (a test suite's) would freeze its garbage."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


def progress_mark(rt: Runtime) -> list[int]:
    return [rt.memory.state.next_id, rt.todos.state.generation]


def session_context(st: RunSettings) -> ContextManager:
    """A session's context manager, from the run's settings."""
    return ContextManager(st.context_window, st.soft_threshold, st.hard_threshold,
                          reserve=output_reserve(st.context_window), carry_turns=st.carryover_turns,
                          compact_tokens=st.compact_at)


def first_prompt(deps: SessionDeps, number: int, conversation: list[Message]) -> ContextManager:
    """The context manager a new session ``number`` would start with, its first prompt estimated (the system
    prompt as the session will read it, from disk): what a restart would start from, known before it is made."""
    cm = session_context(deps.settings)
    cm.reset(estimate_request(build_request(deps, build_system(read_system_prompt(deps.runtime), deps.registry,
                                                               number), conversation)))
    return cm


def window_too_small(cm: ContextManager, st: RunSettings, number: int, run_id: str) -> str | None:
    """Why a session cannot start in this window (its first prompt is already past the hard threshold, or the
    reply does not fit), with the window that goes on and the command; None when it can."""
    if cm.pct < st.hard_threshold and cm.fits:
        return None
    # What a window needs: this first prompt at half the soft threshold (a session needs room to work before
    # its context presses), the reply's reserve on top; rounded up to a thousand.
    needed = -(-(int(cm.used / st.soft_threshold * 2) + cm.reserve) // 1000) * 1000
    return (f"context window too small: the first prompt of session {number} already needs ~{cm.used:,} tokens "
            f"(+{cm.reserve:,} for the reply) of {st.context_window:,}: {cm.pct:.0%} of the prompt budget (a "
            f"session restarts at {st.hard_threshold:.0%}); go on with a window of at least ~{needed:,}: "
            f"agent-console resume {run_id} --context-window {needed}")


class Session(AskingTheOperator, AskingTheModel):
    """One session's run: the conversation, its checkpoint, and the steps that move both."""

    def __init__(self, deps: SessionDeps, number: int, conversation: Conversation, cp: Checkpoint,
                 system: str | None, on_start: Callable[[int, int], None] | None = None) -> None:
        self.deps = deps
        self.on_start = on_start  # told the first prompt's estimate and the prompt budget, before the first commit
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
        self.cm = deps.context = session_context(st)
        self.rt.observation_chars = max(2_000, int(st.context_window * OBSERVATION_BUDGET * CHARS_PER_TOKEN))
        self.turns_here = 0
        self.outage: Outage | None = None  # the failures of the turn being asked
        self.down = ""  # why the model could not be reached, while the run asks its operator about it
        self.ready_checked = False  # the model's server was checked before the session's first chat request
        self.overflows = 0  # "prompt too long" answers in a row
        self.request: ModelRequest | None = None  # the turn in flight's request (None: not asked here)
        self.rng = random.Random(deps.seed) if deps.seed is not None else None

    # -- committing ------------------------------------------------------------------------------
    def commit(self, durable: bool = False) -> None:
        cp = self.cp
        # A pydantic assignment is four calls, twice a turn: the two that seldom change are made when they do.
        if cp.session != self.number:
            cp.session = self.number
        if cp.job_done != self.rt.job_done:
            cp.job_done = self.rt.job_done
        cp.context = self.cm.snapshot()
        cp.updated_at = self.rt.clock.now()
        if self.fresh_system:
            assert self.rt.journal is not None
            self.rt.journal.session(self.number, self.system)
            self.fresh_system = False
        self.rt.commit(cp, self.conversation, system=self.system, durable=durable or self.rt.job_done)

    def end(self, reason: ShutdownReason, detail: str, carry: list[Message] | None = None) -> SessionResult:
        return SessionResult(reason, self.turns_here, self.number, carry or [], detail, self.cm.used, self.cm.budget,
                             session_turns=self.cm.turns)

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

    def restart_dropped(self, recorded: PressureState) -> None:
        """Resumed under other settings (a larger window, a higher hard threshold), the restart the recorded state
        called for no longer holds: the session goes on, the need it waited on (its approval) is closed saying why,
        and the agent, who was told a restart comes, is told it does not."""
        rt, cm, st = self.rt, self.cm, self.deps.settings
        cm.go_on()
        # Short enough for the views' line (120 characters): the figures are the next turn's.
        why = (f"not needed at window {st.context_window:,}: the context is {cm.pct:.0%} of the prompt budget "
               f"(restarts at {st.hard_threshold:.0%}); the session goes on")
        if not st.auto_restart:
            # Asked by the process that ended while it waited (or answered by its stop): closed, with why.
            rt.events.emit(ev.NeedsOperatorCleared, reason="restart_approval", by=why)
        text = (f"[The restart announced is not needed: the context window is now {st.context_window:,} tokens, "
                f"{cm.window_pct:.0%} full. Go on with the task marked ← CURRENT in the ACTIVE TODO LIST.]")
        if self.cp.stage == "tools":
            rt.inject_notice(text, "restart_dropped")  # after the turn's results (recorded with its next call)
        else:
            notice = Message.user(text, kind="restart_dropped")
            self.conversation.append(notice)  # recorded with the session's start, as the drop is
            cm.appended([notice])

    def deadline_while_waiting(self) -> SessionResult | None:
        """While the run holds for its operator (a need, their pause): the deadline, once passed, ends it now, as a
        deadline reached while working does (out of time, resumable once the deadline is raised); the need it
        waited on is closed, by the deadline, not by an answer. None before the deadline."""
        rt, op = self.rt, self.deps.operator
        why = rt.guards.deadline_while_waiting()
        if why is None:
            return None
        if rt.guards.pending() is not None:
            rt.guards.answer(resumed=False, by=DEADLINE_ENDS_WAIT)
        answered(rt.events, op, DEADLINE_ENDS_WAIT)
        op.paused = False
        self.commit(durable=True)
        return self.end(ShutdownReason.BUDGET_EXHAUSTED, why)

    # -- the session -----------------------------------------------------------------------------
    def run(self) -> SessionResult:
        rt, cm, cp, st, op = self.rt, self.cm, self.cp, self.deps.settings, self.deps.operator
        if not self.conversation:
            self.conversation.append(Message.user(KICKOFF, kind="kickoff"))
        fresh = cp.context is None
        if cp.context is None:
            cm.reset(estimate_request(build_request(self.deps, self.system, self.conversation)))
        else:
            cm.restore(cp.context)
            if cm.restart_stale(cp.context):
                self.restart_dropped(cp.context)  # recorded with the session's start, just below
        if self.on_start is not None:
            self.on_start(cm.used, cm.budget)
        if not cp.progress:
            cp.progress = progress_mark(rt)
        rt.guards.session_started(self.number)
        self.commit()  # the session's start (a new job's bootstrap todos with it) is recorded first
        freeze_heap()
        if fresh and (detail := window_too_small(cm, st, self.number, rt.paths.run_id)) is not None:
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
                if (late := self.deadline_while_waiting()) is not None:
                    return late
                op.channel.wait(0.2)
                self.commands()
                if rt.events.holds_lines:
                    # No step is open while the run waits (commands() committed what it applied): what is held
                    # only reports, e.g. a notification channel's failure from its thread, which must reach the
                    # log (`logs`, `jobs`, the console) now, not at the commit after the operator's answer.
                    rt.events.observe()
                rt.events.quiet()
            if op.stop_requested:
                return self.stopped()
            if self.turns_here >= st.max_turns:
                # Counted from this process's start of the session (a resume gives max_turns more): said so, since
                # the session's end counts all of its turns.
                where = " since this session was resumed" if self.turns_here < self.cm.turns else " in one session"
                return self.end(ShutdownReason.MAX_TURNS, f"reached max_turns ({st.max_turns}){where}")
            if (spent := self.budgets()) is not None:
                return spent
            if op.paused:
                continue  # a spend limit asked the operator: the run holds at the top until they answer
            if not self.ready_checked:
                if (ended := self.model_ready()) is not None:
                    return ended
                if op.paused or op.stop_requested or not self.ready_checked:
                    continue  # provider down (asked), or paused or stopped meanwhile: the top of the loop decides
            cp.turn += 1
            self.turns_here += 1
            request = self.request = build_request(self.deps, self.system, self.conversation)
            rt.events.emit(ev.TurnStarted, turn=cp.turn, layers=prompt_layers(request), prompt_tokens_est=cm.used)
            rt.events.observe()
            rt.projections.release()  # the state files of the last turn's end are written while the model is asked
            rt.events.quiet()  # and the views (the headless log) told what the turn did
            try:
                out = self.ask(request)
            except Aborted:
                # The half-streamed reply is dropped: the last commit stays the resume point.
                return self.stop_end("stopped by the operator during a turn")
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
        cp.reply_recorded(UsageRecord(input_tokens=out.usage.input_tokens, output_tokens=out.usage.output_tokens,
                                      cached_input_tokens=out.usage.cached_input_tokens, reported=out.usage.reported,
                                      cache_write_tokens=out.usage.cache_write_tokens))
        self.commit()

    def reply_index(self) -> int:
        for i in range(len(self.conversation) - 1, -1, -1):
            if self.conversation[i].role == "assistant":
                return i
        raise RuntimeError("a turn in flight has no recorded reply")

    def finish_turn(self) -> SessionResult | None:
        """Run the reply's remaining tool calls (each a step), then the turn's bookkeeping (a step).

        The last call is recorded with the bookkeeping, in one step, unless a compaction is to follow it (which may
        ask the model for a summary): what the bookkeeping adds is a fraction of a millisecond of work that a redo
        does alike, and a kill before that commit is a kill during the call, which a resume already redoes as the
        first attempt did (its intents). One journal commit and one log append fewer in most turns."""
        rt, cm, cp, conv = self.rt, self.cm, self.cp, self.conversation
        at = self.reply_index()
        calls = conv[at].tool_calls
        # On a resume, notices the start-up added (an old transition recovered) follow the recorded ones.
        rt.notices, rt.compaction_reason = [*cp.notices, *rt.notices], cp.compaction or rt.compaction_reason
        durable = False
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
            cp.call_recorded(i + 1, list(rt.notices), rt.compaction_reason)
            if i + 1 == len(calls) and not rt.compaction_reason:
                durable = outcome.end_session  # recorded by the bookkeeping's commit, just below
                break
            self.commit(durable=outcome.end_session)
            if self.deps.operator.abort and i + 1 < len(calls):
                # A second stop during the turn's tool calls: the rest are not run now (a resume runs them, from
                # the next call, as after any interruption).
                return self.stop_end("stopped by the operator during the turn's tool calls")
        return self.bookkeeping(calls, durable=durable)

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

    def bookkeeping(self, calls: list[ToolCall], *, durable: bool = False) -> SessionResult | None:
        """The turn's end, as one step: progress, feedback, a stop's check, harness notices, usage. ``durable``: the
        step records the turn's last call too, and that call asked for an fsync (it ended the session)."""
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
                       prompt_budget=cm.budget, soft_threshold=st.soft_threshold, hard_threshold=st.hard_threshold,
                       context_used_pct=round(cm.window_pct, 4))
        guards.status()
        finished = cp.finished
        # Nudging did not help: the agent kept trying to stop an unfinished job, or it looks stuck. The run asks
        # its operator, and holds at the top of the loop, once this step (with the need) is recorded.
        ask = None
        if not (finished or rt.job_done or stopped is not None):
            rewind = rt.phases.operator_refusal() is None  # offered only where it would apply
            ask = guards.completion_ask(rewind=rewind) or guards.stuck_ask(cp.idle_turns, rewind=rewind)
            if ask is not None:
                self.need(ask, commit=False)
        cp.at_boundary()
        self.commit(durable=durable or compacted or stopped is not None or ask is not None)  # worth an fsync
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
        elif evaluation.action is ContextAction.COMPACT:
            # In place, within the session: the summary and the last whole turns (pairs intact), which are in
            # the prompt already, so they fit as they are (a restart's carryover budget is for a new session).
            carry = extract_carryover(conv, cm.compact_turns, cm.budget)
            compact(self.deps, conv, "context: older turns compacted into the summary", carry)
            cm.reset(estimate_request(build_request(self.deps, self.system, conv)))
            self.cp.evaluated = True
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
            # pct is of the prompt budget, which the prompt after a wind-down can pass while it fits the window:
            # said as the views say it (console.view.present.context_full), never "107% full".
            pct = evaluation.pct
            full = f"context {pct:.0%} full" if pct <= 1 else f"context over full ({pct:.0%} of the prompt budget)"
            ended = self.end(ShutdownReason.CONTEXT_FULL, full, carry)
            return ended
        return None


def run_agent_session(deps: SessionDeps, session_number: int, conversation: Conversation,
                      cp: Checkpoint | None = None, system: str | None = None,
                      on_start: Callable[[int, int], None] | None = None) -> SessionResult:
    """Run one session from ``cp`` (a fresh checkpoint for a new session) until it ends; ``on_start`` is told its
    first prompt's estimated size and the prompt budget once they are known (a restart's session_started)."""
    return Session(deps, session_number, conversation, cp or Checkpoint(session=session_number), system,
                   on_start).run()
