"""A turn's steps once the model replied (:class:`TurnSteps`): the reply recorded, each tool call run and recorded
with its result and the feedback after it, then the turn's bookkeeping; each a journal step, in the order the
kill-point sweeps check, so a resume finishes a turn from its last recorded step without asking the model again or
running a recorded call twice.

A part of :class:`console.engine.session.Session`, over the session's shared state
(:class:`console.engine.session_state.SessionState`); where the turn must ask the operator (refused stops, a stuck
agent), it is given how (:class:`console.engine.session_state.AskOperator`).
"""

from __future__ import annotations

from console.engine import events as ev
from console.engine.compaction import compact
from console.engine.context.tokens import estimate_message, estimate_request
from console.engine.enforcement import FEEDBACK_KIND
from console.engine.journal import UsageRecord
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import Usage
from console.engine.session_state import AskOperator, SessionState, progress_mark
from console.engine.shutdown import SessionResult, ShutdownReason
from console.engine.tools.registry import refused_arguments
from console.engine.turn import ARGUMENTS_KEPT, REASONING_KEPT, TurnOutput, build_request, dispatch, elide_arguments


class TurnSteps:
    """A turn from its reply to its end: the steps that record it."""

    def __init__(self, state: SessionState, need: AskOperator) -> None:
        self.state = state
        self.need = need  # asks the operator (its step is the bookkeeping's: commit=False)

    def record_reply(self, out: TurnOutput) -> None:
        """The reply as one step: once it is recorded, a resume never asks the model for this turn again."""
        s = self.state
        rt, cp = s.rt, s.cp
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
        s.conversation.append(reply)
        # The reply counts with what is kept of it: refused arguments are not in the next prompt.
        output = out.usage.output_tokens if calls == out.calls else min(out.usage.output_tokens,
                                                                        estimate_message(reply))
        s.cm.record_usage(out.usage.input_tokens, output)
        cp.reply_recorded(UsageRecord(input_tokens=out.usage.input_tokens, output_tokens=out.usage.output_tokens,
                                      cached_input_tokens=out.usage.cached_input_tokens, reported=out.usage.reported,
                                      cache_write_tokens=out.usage.cache_write_tokens))
        s.commit()

    def reply_index(self) -> int:
        conversation = self.state.conversation
        for i in range(len(conversation) - 1, -1, -1):
            if conversation[i].role == "assistant":
                return i
        raise RuntimeError("a turn in flight has no recorded reply")

    def finish_turn(self) -> SessionResult | None:
        """Run the reply's remaining tool calls (each a step), then the turn's bookkeeping (a step).

        The last call is recorded with the bookkeeping, in one step, unless a compaction is to follow it (which may
        ask the model for a summary): what the bookkeeping adds is a fraction of a millisecond of work that a redo
        does alike, and a kill before that commit is a kill during the call, which a resume already redoes as the
        first attempt did (its intents). One journal commit and one log append fewer in most turns."""
        s = self.state
        rt, cm, cp, conv = s.rt, s.cm, s.cp, s.conversation
        at = self.reply_index()
        calls = conv[at].tool_calls
        # On a resume, notices the start-up added (an old transition recovered) follow the recorded ones.
        rt.notices, rt.compaction_reason = [*cp.notices, *rt.notices], cp.compaction or rt.compaction_reason
        durable = False
        for i in range(cp.next_call, len(calls)):
            call = calls[i]
            outcome = dispatch(s.deps, cp.turn, call)
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
            s.commit(durable=outcome.end_session)
            if s.deps.operator.abort and i + 1 < len(calls):
                # A second stop during the turn's tool calls: the rest are not run now (a resume runs them, from
                # the next call, as after any interruption).
                return s.stop_end("stopped by the operator during the turn's tool calls")
        return self.bookkeeping(calls, durable=durable)

    def feedback(self, call: ToolCall, result: Message, *, collect: bool) -> None:
        """After each tool call (seed 002): the call is counted for the feedback providers, and those whose
        trigger fires give their blocks. The blocks reach the agent after the turn's tool results (a message
        between the results of one reply would break the wire's call/result pairing), in the order the calls
        ran; they are recorded with this call's step, so a resume neither loses nor repeats them. ``collect``
        False (the call ended the session): counted only."""
        s = self.state
        rt, cp = s.rt, s.cp
        guards = rt.guards
        guards.record_turn(cp.turn, [call], {call.id: result})
        if not collect:
            return
        # Turns without a completed todo, this one counted as such until a call of it makes progress.
        idle = cp.idle_turns + 1 if progress_mark(rt) == cp.progress else 0
        _, text = guards.collect_feedback(cp.turn, idle, session=s.number, prompt=self.prompt)
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
        s = self.state
        if s.request is None:
            s.request = build_request(s.deps, s.system, s.conversation[: self.reply_index()])
        return s.request

    def bookkeeping(self, calls: list[ToolCall], *, durable: bool = False) -> SessionResult | None:
        """The turn's end, as one step: progress, feedback, a stop's check, harness notices, usage. ``durable``: the
        step records the turn's last call too, and that call asked for an fsync (it ended the session)."""
        s = self.state
        rt, cm, cp, st, conv = s.rt, s.cm, s.cp, s.deps.settings, s.conversation
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
            compact(s.deps, conv, reason)
            conv.extend(notices)
            cm.reset(estimate_request(build_request(s.deps, s.system, conv)))
        else:
            conv.extend(notices)
            cm.appended(notices)
        usage = cp.usage or UsageRecord()
        used = Usage(usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, usage.reported,
                     usage.cache_write_tokens)
        cost = None if st.prices is None else st.prices.cost(used)
        # Counted here, from the reply's recorded usage: the turn's end is one step, so a resume counts it once.
        job_cost = guards.count_tokens(usage.input_tokens + usage.output_tokens, cost)
        # The fleet's day counts the turn here, at once (the store is not the run's journal: a kill before this
        # step is recorded counts it again when the resumed run finishes the turn; the fleet's figure errs high,
        # never low).
        rt.fleet_spent(used, cost)
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
        s.commit(durable=durable or compacted or stopped is not None or ask is not None)  # worth an fsync
        if (spent := guards.spent()) is not None:
            # The wrap-up turn is over: the run ends, whatever the agent did with it (its job_complete,
            # if any, is kept as the outcome).
            return s.end(ShutdownReason.BUDGET_EXHAUSTED, spent)
        if finished or rt.job_done:
            if rt.outcome is not None and rt.outcome.gave_up:
                return s.end(ShutdownReason.GAVE_UP, "the agent gave up (job_complete with confidence "
                                                      f"{rt.outcome.confidence:g})")
            return s.end(ShutdownReason.JOB_COMPLETE, "job_complete")
        if stopped is not None:
            return s.end(ShutdownReason.AGENT_STOPPED, stopped)
        return None
