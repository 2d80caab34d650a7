"""Enforcement: where the job's guardrails (:mod:`console.engine.guardrails`) meet the run.

The guardrails package is pure logic; this module gives it the run's narrow world and records what it
decides, so that every decision is an event and its state a recorded component of the run:

- the tool gate: every model tool call passes the policies before it runs (a denial is the call's error
  result and a ``tool_denied`` event); a decision that looked at the job folder is recorded before the
  call acts, so the redo of a call a kill interrupted is judged as the first attempt was;
- stops: ``job_complete`` and a turn without a tool call pass the task completion checker, bounded by
  ``max_completion_blocks`` (past it the run asks its operator), and are let through without it once the
  deadline has passed (recorded);
- budgets: the deadline and the wrap-up turn it grants; the token and money budgets, spend limits that pause
  the run and ask its operator, whose resume grants one more slice (``budget_raised``);
- feedback: after each tool call, the providers whose triggers fire produce ``<feedback>`` blocks
  that reach the agent after the turn's tool results, each a ``feedback`` event; the stuck detector's count as nudges,
  and ``stuck_escalate_after`` nudges without progress ask the operator.

What the run asks its operator is decided here and recorded in the guardrails' state (a kill while the run
waits loses nothing); the loop does the asking (:func:`console.engine.needs.ask_operator`) and the waiting.

One class, :class:`Enforcer` (:mod:`.enforcer`), owns a part for each guardrail it applies: :mod:`.gate` (the tool
gate), :mod:`.stops`, :mod:`.feedback`, :mod:`.budgets`, :mod:`.status` (the status event) and :mod:`.asks`, each
built over one :class:`EnforcementContext` (:mod:`.context`: the guardrails, the events, the clock, the world, the
todo list and the change signal) and never over the Enforcer; :mod:`.limits` says the budgets' limits, and
:mod:`.world` holds what the guardrails see of the run and the answers the loop gets.
"""

from __future__ import annotations

from console.engine.enforcement.context import EnforcementContext
from console.engine.enforcement.enforcer import Enforcer
from console.engine.enforcement.world import (
    FEEDBACK_KIND,
    STATUS_REFRESH,
    WRAP_UP,
    Ask,
    BudgetTurn,
    SandboxWorld,
    StopVerdict,
    flat,
)

__all__ = ["FEEDBACK_KIND", "STATUS_REFRESH", "WRAP_UP", "Ask", "BudgetTurn", "EnforcementContext", "Enforcer",
           "SandboxWorld", "StopVerdict", "flat"]
