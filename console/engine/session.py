"""One session of turns (seed 004's inner loop), as committed steps: see :mod:`console.engine.loop`.

:class:`Session` runs the loop, in the fixed order of steps the kill-point sweeps check, over parts that share one
state (:class:`console.engine.session_state.SessionState`): asking the model (:mod:`console.engine.model_asking`),
asking the operator (:mod:`console.engine.operator_asking`), a turn's recorded steps (:mod:`console.engine.turn_steps`)
and the steps between turns (:mod:`console.engine.between_turns`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from console.engine import events as ev
from console.engine.between_turns import CARRYOVER_BUDGET, BetweenTurns
from console.engine.context.layers import build_system, read_system_prompt
from console.engine.context.pressure import ContextManager
from console.engine.context.tokens import CHARS_PER_TOKEN, estimate_request
from console.engine.journal import Checkpoint, Conversation
from console.engine.messages import Message
from console.engine.model_asking import ModelAsking
from console.engine.operator_asking import DEADLINE_ENDS_WAIT, OperatorAsking
from console.engine.run_settings import RunSettings
from console.engine.session_state import SessionState, progress_mark
from console.engine.shutdown import SessionResult, ShutdownReason
from console.engine.turn import SessionDeps, build_request, output_reserve, prompt_layers
from console.engine.turn_steps import TurnSteps

__all__ = [  # CARRYOVER_BUDGET, DEADLINE_ENDS_WAIT and progress_mark are the parts', importable from here as before
    "CARRYOVER_BUDGET", "DEADLINE_ENDS_WAIT", "KICKOFF", "OBSERVATION_BUDGET", "Session", "first_prompt",
    "freeze_heap", "progress_mark", "run_agent_session", "session_context", "window_too_small",
]

OBSERVATION_BUDGET = 0.25  # share of the window one tool result may take
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


class Session:
    """One session's run: the loop of turns over its parts, which share one state (:class:`SessionState`).

    The parts: ``model`` asks the model (its outages, overflows and retries), ``operator`` asks the operator (their
    commands, needs, answers and stop), ``turns`` records a turn's steps once the model replied, ``between`` takes
    the steps between turns (pressure, budgets). None of them knows this class: each gets the state, and the two
    that must ask the operator get how (``operator.need``)."""

    def __init__(self, deps: SessionDeps, number: int, conversation: Conversation, cp: Checkpoint,
                 system: str | None, on_start: Callable[[int, int], None] | None = None) -> None:
        self.on_start = on_start  # told the first prompt's estimate and the prompt budget, before the first commit
        rt, st = deps.runtime, deps.settings
        # Re-read at every session start: the agent (or the operator) may have edited SYSTEM_PROMPT.md.
        # A resumed session keeps the one it was recorded with.
        prompt = system if system is not None else build_system(read_system_prompt(rt), deps.registry, number)
        cm = deps.context = session_context(st)
        rt.observation_chars = max(2_000, int(st.context_window * OBSERVATION_BUDGET * CHARS_PER_TOKEN))
        self.state = SessionState(deps, number, conversation, cp, prompt, cm, fresh_system=system is None)
        self.model = ModelAsking(self.state)
        self.operator = OperatorAsking(self.state)
        self.turns = TurnSteps(self.state, self.operator.need)
        self.between = BetweenTurns(self.state, self.operator.need)
        self.operator.lifted = self.between.fleet_lifted

    def run(self) -> SessionResult:
        s, model, operator, turns, between = self.state, self.model, self.operator, self.turns, self.between
        rt, cm, cp, st, op = s.rt, s.cm, s.cp, s.deps.settings, s.deps.operator
        if not s.conversation:
            s.conversation.append(Message.user(KICKOFF, kind="kickoff"))
        fresh = cp.context is None
        if cp.context is None:
            cm.reset(estimate_request(build_request(s.deps, s.system, s.conversation)))
        else:
            cm.restore(cp.context)
            if cm.restart_stale(cp.context):
                between.restart_dropped(cp.context)  # recorded with the session's start, just below
        if self.on_start is not None:
            self.on_start(cm.used, cm.budget)
        if not cp.progress:
            cp.progress = progress_mark(rt)
        rt.guards.session_started(s.number)
        s.commit()  # the session's start (a new job's bootstrap todos with it) is recorded first
        freeze_heap()
        if fresh and (detail := window_too_small(cm, st, s.number, rt.paths.run_id)) is not None:
            rt.events.emit(ev.ErrorEvent, message=detail, where="context", recoverable=False)
            return s.end(ShutdownReason.ERROR, detail)
        # Stopped inside a turn, the run finishes it from the next call: its reply is recorded.
        if cp.stage == "tools" and (done := turns.finish_turn()) is not None:
            return done
        operator.ask_again()
        while True:
            if not cp.evaluated and (restart := between.pressure()) is not None:
                return restart
            if (late := operator.hold()) is not None:
                return late
            if op.stop_requested:
                return operator.stopped(model.down)
            if s.turns_here >= st.max_turns:
                # Counted from this process's start of the session (a resume gives max_turns more): said so, since
                # the session's end counts all of its turns.
                where = " since this session was resumed" if s.turns_here < cm.turns else " in one session"
                return s.end(ShutdownReason.MAX_TURNS, f"reached max_turns ({st.max_turns}){where}")
            if (spent := between.budgets()) is not None:
                return spent
            if not op.paused:
                between.fleet()
            if op.paused:
                continue  # a spend limit asked the operator: the run holds at the top until they answer
            if not model.ready_checked:
                if (ended := model.model_ready()) is not None:
                    return ended
                if op.paused or op.stop_requested or not model.ready_checked:
                    continue  # provider down (asked), or paused or stopped meanwhile: the top of the loop decides
            cp.turn += 1
            s.turns_here += 1
            request = s.request = build_request(s.deps, s.system, s.conversation)
            rt.events.emit(ev.TurnStarted, turn=cp.turn, layers=prompt_layers(request), prompt_tokens_est=cm.used)
            rt.events.observe()
            rt.projections.release()  # the state files of the last turn's end are written while the model is asked
            rt.events.quiet()  # and the views (the headless log) told what the turn did
            out = model.turn(request)
            if out is None:
                continue  # the turn did not happen (asked again, or the top of the loop ends the run)
            if isinstance(out, SessionResult):
                return out
            turns.record_reply(out)
            if (done := turns.finish_turn()) is not None:
                return done


def run_agent_session(deps: SessionDeps, session_number: int, conversation: Conversation,
                      cp: Checkpoint | None = None, system: str | None = None,
                      on_start: Callable[[int, int], None] | None = None) -> SessionResult:
    """Run one session from ``cp`` (a fresh checkpoint for a new session) until it ends; ``on_start`` is told its
    first prompt's estimated size and the prompt budget once they are known (a restart's session_started)."""
    return Session(deps, session_number, conversation, cp or Checkpoint(session=session_number), system,
                   on_start).run()
