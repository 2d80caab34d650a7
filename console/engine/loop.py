"""run_agent_session: one session of turns (seed 004's inner loop), as committed steps.

A turn: assemble the layers into a request, stream the model's answer
(publishing text deltas as they come), then record it; run its tool calls one
at a time, each recorded with its result and the feedback providers' blocks
after it (seed 002; the stuck detector is one); then the turn's bookkeeping
(harness notices and those blocks after all the results, compaction at a phase
boundary, a nudge if the agent stopped early, usage) is recorded, in the same
step as the last call unless a compaction follows it. Between turns
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

The loop is in modules named after what they do: :mod:`console.engine.turn` (a turn: the request, the streamed
reply, the dispatch of a tool call), :mod:`console.engine.session` (the session's loop over its parts:
:mod:`console.engine.model_asking`, :mod:`console.engine.operator_asking`, :mod:`console.engine.turn_steps`,
:mod:`console.engine.between_turns`), :mod:`console.engine.compaction` and :mod:`console.engine.shutdown` (how a
session ends). This module keeps the names importable from where they always were.
"""

from __future__ import annotations

from console.engine.compaction import compact, llm_summary
from console.engine.model_asking import MAX_OVERFLOWS
from console.engine.session import (
    CARRYOVER_BUDGET,
    KICKOFF,
    OBSERVATION_BUDGET,
    Session,
    progress_mark,
    run_agent_session,
)
from console.engine.shutdown import SessionResult, ShutdownReason
from console.engine.turn import (
    ARGUMENTS_KEPT,
    REASONING_KEPT,
    DeadlineCut,
    SessionDeps,
    TurnOutput,
    build_request,
    call_limits,
    clean,
    dispatch,
    elide_arguments,
    operator_tick,
    output_reserve,
    prompt_layers,
    stream_turn,
)

__all__ = [
    "ARGUMENTS_KEPT", "CARRYOVER_BUDGET", "KICKOFF", "MAX_OVERFLOWS", "OBSERVATION_BUDGET", "REASONING_KEPT",
    "DeadlineCut", "Session", "SessionDeps", "SessionResult", "ShutdownReason", "TurnOutput", "build_request",
    "call_limits", "clean", "compact", "dispatch", "elide_arguments", "llm_summary", "operator_tick",
    "output_reserve", "progress_mark", "prompt_layers", "run_agent_session", "stream_turn",
]
