"""Between a session's turns (:class:`BetweenTurns`): what the context pressure calls for (a masking, a compaction
in place, a wind-down, the session's end for a restart), a restart a resume under other settings no longer needs,
and the budgets before a turn (a passed deadline's wrap-up turn, a spend limit asked of the operator).

A part of :class:`console.engine.session.Session`, over the session's shared state
(:class:`console.engine.session_state.SessionState`); a spend limit asks the operator through what it is given
(:class:`console.engine.session_state.AskOperator`).
"""

from __future__ import annotations

from console.engine import events as ev
from console.engine import failpoints
from console.engine.compaction import compact
from console.engine.context.carryover import extract_carryover
from console.engine.context.masking import apply_masking, mask_notice
from console.engine.context.pressure import ContextAction, PressureState, wind_down_message
from console.engine.context.tokens import estimate_request
from console.engine.enforcement import Ask
from console.engine.guardrails.fleet import FleetBudget, FleetHold
from console.engine.messages import Message
from console.engine.needs import answered, ask_operator
from console.engine.session_state import AskOperator, SessionState
from console.engine.shutdown import SessionResult, ShutdownReason
from console.engine.turn import build_request

CARRYOVER_BUDGET = 0.15  # share of the window the carried turns may take


class BetweenTurns:
    """The steps a session takes between turns, each recorded when it changes anything."""

    def __init__(self, state: SessionState, need: AskOperator) -> None:
        self.state = state
        self.need = need  # asks the operator about a spend limit (recorded at once)
        self._fleet_next = 0.0  # when a run held by the fleet budget looks again (the clock's monotonic time)

    def budgets(self) -> SessionResult | None:
        """Before a turn: a passed deadline gives the agent one wrap-up turn (a recorded step), then ends the run;
        a spend limit asks the operator (the caller holds while the run is paused)."""
        s = self.state
        verdict = s.rt.guards.budget_turn()
        if verdict.ends is not None:
            return s.end(ShutdownReason.BUDGET_EXHAUSTED, verdict.ends)
        if verdict.ask is not None:
            self.need(Ask("budget", f"{verdict.ask}: resume grants one more slice of the budget, stop ends the run "
                                    "as out of budget", verdict.evidence))
            return None
        if (message := verdict.wrap_up) is not None:
            msg = Message.user(message, kind="wrap_up")
            s.conversation.append(msg)
            s.cm.appended([msg])
            s.commit(durable=True)
        return None

    def fleet(self) -> None:
        """Before a turn: the fleet's daily budget (console.engine.guardrails.fleet). A hold this run is in pauses it,
        asking its operator (told to the channels by one run only: the hold's ``tell``); a hold the operator let
        this run go on past (their resume of it) holds it no more today."""
        s = self.state
        rt, op = s.rt, s.deps.operator
        self._told_when_heard()
        if rt.fleet_hold is not None and op.needs != "fleet_budget":
            # The operator's resume of this run answered its hold: it goes on past that limit, today.
            if rt.fleet is not None:
                rt.fleet.waive(rt.fleet_hold)  # in the store: a resumed process, or another machine's, keeps it
            rt.fleet_hold = None
        if rt.fleet is None or op.needs is not None:
            return
        hold = rt.fleet.check(rt.clock.now())
        if hold is not None:
            self._held(rt.fleet, hold)

    def _held(self, fleet: FleetBudget, hold: FleetHold) -> None:
        """The run is in ``hold``: paused, its need recorded, and told to the channels if this run tells it."""
        s = self.state
        rt, op = s.rt, s.deps.operator
        rt.fleet_hold = hold
        if hold.tell:
            failpoints.hit("fleet hold")  # claimed the telling, not yet told: a kill here must not leave it untold
        ask_operator(rt.events, op, "fleet_budget", hold.message(), hold.evidence(), notify=hold.tell)
        need = rt.events.seq  # the need's own (the commit may log more after it)
        s.commit(durable=True)
        if hold.tell:
            self._tell(fleet, hold, need)

    def _tell(self, fleet: FleetBudget, hold: FleetHold, need: int) -> None:
        """The need of ``hold`` (its seq: ``need``) recorded, and so sent by this run's notifier: marked told in the
        store once its channels took it (console.engine.guardrails.fleet.Telling), at this run's next look; a kill
        before that leaves the telling to another held run."""
        rt = self.state.rt
        if not rt.fleet_telling.confirms:
            # No channel here: nobody heard it. Left to the next held run that has one (a run started without
            # channels marked the hold told, and the runs with a webhook it held were never told).
            fleet.pass_on(hold)
            return
        rt.fleet_telling.start(hold, need)

    def _told_when_heard(self) -> None:
        rt = self.state.rt
        if rt.fleet is not None and (heard := rt.fleet_telling.due()) is not None:
            rt.fleet.told(heard, rt.clock.now())

    def fleet_lifted(self) -> bool:
        """While the run holds on the fleet budget, every ``recheck_seconds``: whether the hold was lifted (a
        raise, a new day), the run's need then closed by it (recorded) and the run going on by itself."""
        s = self.state
        rt, op = s.rt, s.deps.operator
        hold = rt.fleet_hold
        if hold is None or rt.fleet is None or op.needs != "fleet_budget":
            return False
        self._told_when_heard()
        tick = rt.clock.monotonic()
        if tick < self._fleet_next:
            return False
        self._fleet_next = tick + rt.fleet.recheck_seconds
        now = rt.clock.now()
        again = rt.fleet.check(now)
        if again is None and not rt.fleet.known:
            return False  # the store cannot say now: still held (the operator's resume or stop still answers)
        if again is not None and again.key != hold.key:
            # Still held, at another limit (a raise too small, a lower limit in the config): the need of the old
            # hold is closed, the new one's asked at once, and told by this run if its look made the new hold
            # (dropped here, that telling would wait for a stale claim's takeover).
            rt.fleet_hold = None
            answered(rt.events, op, rt.fleet.lifted(hold, now))
            self._held(rt.fleet, again)
            return False
        if again is not None and again.key == hold.key:
            if again.tell:
                # The run that claimed the telling died before its need was recorded: this one tells it (its need
                # asked again, told this time), so the operator hears of the hold once, not never.
                rt.events.emit(ev.NeedsOperator, reason="fleet_budget", message=again.message(),
                               evidence=again.evidence(), paused=True)
                need = rt.events.seq
                s.commit(durable=True)
                self._tell(rt.fleet, again, need)
            return False
        rt.fleet_hold = None
        why = rt.fleet.lifted(hold, now)
        op.paused = False
        answered(rt.events, op, why)
        s.commit(durable=True)
        return True

    def restart_dropped(self, recorded: PressureState) -> None:
        """Resumed under other settings (a larger window, a higher hard threshold), the restart the recorded state
        called for no longer holds: the session goes on, the need it waited on (its approval) is closed saying why,
        and the agent, who was told a restart comes, is told it does not."""
        s = self.state
        rt, cm, st = s.rt, s.cm, s.deps.settings
        cm.go_on()
        # Short enough for the views' line (120 characters): the figures are the next turn's.
        why = (f"not needed at window {st.context_window:,}: the context is {cm.pct:.0%} of the prompt budget "
               f"(restarts at {st.hard_threshold:.0%}); the session goes on")
        if not st.auto_restart:
            # Asked by the process that ended while it waited (or answered by its stop): closed, with why.
            rt.events.emit(ev.NeedsOperatorCleared, reason="restart_approval", by=why)
        text = (f"[The restart announced is not needed: the context window is now {st.context_window:,} tokens, "
                f"{cm.window_pct:.0%} full. Go on with the task marked ← CURRENT in the ACTIVE TODO LIST.]")
        if s.cp.stage == "tools":
            rt.inject_notice(text, "restart_dropped")  # after the turn's results (recorded with its next call)
        else:
            notice = Message.user(text, kind="restart_dropped")
            s.conversation.append(notice)  # recorded with the session's start, as the drop is
            cm.appended([notice])

    def pressure(self) -> SessionResult | None:
        """Between turns: what the context pressure calls for (a masking and a wind-down are recorded steps)."""
        s = self.state
        rt, cm, st, conv = s.rt, s.cm, s.deps.settings, s.conversation
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
            s.cp.evaluated = True
            rt.events.emit(ev.ContextMasked, masked=len(evaluation.plan.indices), tokens_freed=freed,
                           used_before=before, used_after=cm.used, context_window=st.context_window,
                           prompt_budget=cm.budget,
                           call_ids=[conv[i].tool_call_id or "" for i in evaluation.plan.indices],
                           detail=f"masked the {len(evaluation.plan.indices)} oldest tool results")
            s.commit()
        elif evaluation.action is ContextAction.COMPACT:
            # In place, within the session: the summary and the last whole turns (pairs intact), which are in
            # the prompt already, so they fit as they are (a restart's carryover budget is for a new session).
            carry = extract_carryover(conv, cm.compact_turns, cm.budget)
            compact(s.deps, conv, "context: older turns compacted into the summary", carry)
            cm.reset(estimate_request(build_request(s.deps, s.system, conv)))
            s.cp.evaluated = True
            s.commit()
        elif evaluation.action is ContextAction.WIND_DOWN:
            text = wind_down_message(evaluation.window_pct)
            msg = Message.user(text, kind="wind_down")
            conv.append(msg)
            cm.appended([msg])
            cm.mark_wind_down()
            s.cp.evaluated = True
            rt.events.emit(ev.WindDown, usage_pct=round(evaluation.pct, 4), used_tokens=evaluation.used,
                           context_window=st.context_window, prompt_budget=cm.budget, message=text)
            s.commit()
        elif evaluation.action is ContextAction.RESTART:
            carry = extract_carryover(conv, st.carryover_turns, int(st.context_window * CARRYOVER_BUDGET))
            # pct is of the prompt budget, which the prompt after a wind-down can pass while it fits the window:
            # said as the views say it (console.view.present.context_full), never "107% full".
            pct = evaluation.pct
            full = f"context {pct:.0%} full" if pct <= 1 else f"context over full ({pct:.0%} of the prompt budget)"
            return s.end(ShutdownReason.CONTEXT_FULL, full, carry)
        return None
