"""The enforcer: the run's guardrails with the world and the recorders they need. One class that owns its parts,
each over one :class:`~console.engine.enforcement.context.EnforcementContext`: the tool gate every model tool call
passes before it runs (:mod:`.gate`), the stops (:mod:`.stops`), the feedback (:mod:`.feedback`), the budgets
(:mod:`.budgets`), the status the console shows (:mod:`.status`) and what the run asks its operator (:mod:`.asks`).

Its methods are the run's one face of enforcement (the loop, the supervisor and the tools call them); each says
which part does the work."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from console.engine import events as ev
from console.engine.clock import Clock
from console.engine.enforcement.asks import Asks
from console.engine.enforcement.budgets import BudgetWatch
from console.engine.enforcement.context import EnforcementContext
from console.engine.enforcement.feedback import FeedbackDelivery
from console.engine.enforcement.gate import ToolGate
from console.engine.enforcement.status import StatusReport
from console.engine.enforcement.stops import Stops
from console.engine.enforcement.world import Ask, BudgetTurn, SandboxWorld, StopVerdict
from console.engine.guardrails import Feedback, Guardrails, GuardrailState, TaskCompletionResult
from console.engine.guardrails.escalation import Pending
from console.engine.messages import Message, ToolCall
from console.engine.plan import Plan
from console.engine.todos import TodoState


class Enforcer:
    """The run's guardrails, with the world and the recorders they need (a narrow context, not the Runtime)."""

    def __init__(self, guardrails: Guardrails, *, events: ev.EventStream, clock: Clock, world: SandboxWorld,
                 changed: Callable[[], None], record_intent: Callable[[str, dict[str, Any]], None],
                 redo: Callable[[str], dict[str, Any] | None], todos: Callable[[], TodoState],
                 load_plan: Callable[[], Plan], on_stuck: Callable[[str], None] | None = None) -> None:
        self.ctx = EnforcementContext(guardrails=guardrails, events=events, clock=clock, world=world,
                                      changed=changed, todos=todos)
        self.tool_gate = ToolGate(self.ctx, record_intent=record_intent, redo=redo)
        self.stops = Stops(self.ctx, load_plan=load_plan)
        self.feedback = FeedbackDelivery(self.ctx, on_stuck=on_stuck)
        self.report = StatusReport(self.ctx, self.stops)
        self.budgets = BudgetWatch(self.ctx, self.report)
        self.asks = Asks(self.ctx, stops=self.stops, budgets=self.budgets)

    @property
    def g(self) -> Guardrails:
        return self.ctx.guardrails

    @property
    def world(self) -> SandboxWorld:
        return self.ctx.world

    @property
    def on_stuck(self) -> Callable[[str], None] | None:
        """What hears of each stuck pattern (the run's experiences.md)."""
        return self.feedback.on_stuck

    # -- state -----------------------------------------------------------------------------------
    def snapshot(self) -> GuardrailState:
        return self.ctx.guardrails.snapshot()

    def restore(self, state: GuardrailState) -> None:
        self.ctx.guardrails.restore(state)

    def start(self, priced: bool | None = None) -> None:
        """The run starts (or resumes): the budgets' clock starts once per job (``priced``: see
        :meth:`BudgetWatch.start`), and a new run is the operator's decision to go on: refused stops count from
        zero again."""
        self.budgets.start(priced)
        self.stops.new_run()

    # -- the tool gate ---------------------------------------------------------------------------
    def gate(self, turn: int, call_id: str, tool: str, params: Mapping[str, Any]) -> str | None:
        return self.tool_gate.check(turn, call_id, tool, params)

    def after_call(self, tool: str, params: Mapping[str, Any] | None, ok: bool, *, denied: bool) -> None:
        self.tool_gate.after_call(tool, params, ok, denied=denied)

    # -- feedback --------------------------------------------------------------------------------
    def session_started(self, number: int) -> None:
        self.feedback.session_started(number)

    def record_turn(self, turn: int, calls: list[ToolCall], results: dict[str, Message]) -> None:
        self.feedback.record_turn(turn, calls, results)

    def collect_feedback(self, turn: int, turns_without_progress: int, *, session: int = 0,
                         prompt: Any = None) -> tuple[list[Feedback], str]:
        return self.feedback.collect(turn, turns_without_progress, session=session, prompt=prompt)

    # -- stops -----------------------------------------------------------------------------------
    def check_stop(self, stop_reason: str, tentative_output: Any) -> StopVerdict:
        return self.stops.check_stop(stop_reason, tentative_output)

    def verdict(self, stop_reason: str, tentative_output: Any = None) -> TaskCompletionResult:
        return self.stops.verdict(stop_reason, tentative_output)

    def unmet(self) -> list[str]:
        return self.stops.unmet()

    def blocked_out(self) -> str | None:
        return self.stops.blocked_out()

    # -- the status the console shows ------------------------------------------------------------
    def status(self, force: bool = False) -> None:
        self.report.emit(force)

    # -- budgets ---------------------------------------------------------------------------------
    def why(self, kind: str) -> str:
        return self.budgets.why(kind)

    def spent(self) -> str | None:
        return self.budgets.spent()

    def cut_at(self) -> datetime | None:
        return self.budgets.cut_at()

    def seconds_to_cut(self) -> float | None:
        return self.budgets.seconds_to_cut()

    def count_tokens(self, n: int, cost_usd: float | None = None) -> float | None:
        return self.budgets.count_tokens(n, cost_usd)

    def budget_turn(self) -> BudgetTurn:
        return self.budgets.budget_turn()

    def deadline_while_waiting(self) -> str | None:
        return self.budgets.deadline_while_waiting()

    def spend_limit(self) -> str | None:
        return self.budgets.spend_limit()

    def grant(self, by: str) -> bool:
        return self.budgets.grant(by)

    # -- asking the operator ---------------------------------------------------------------------
    def progressed(self) -> None:
        self.asks.progressed()

    def rewound(self) -> None:
        self.asks.rewound()

    def stuck_ask(self, idle_turns: int, *, rewind: bool = True) -> Ask | None:
        return self.asks.stuck_ask(idle_turns, rewind=rewind)

    def completion_ask(self, *, rewind: bool = True) -> Ask | None:
        return self.asks.completion_ask(rewind=rewind)

    def pending(self) -> Ask | None:
        return self.asks.pending()

    def record_ask(self, ask: Ask) -> None:
        self.asks.record_ask(ask)

    def forget_ask(self) -> None:
        self.asks.forget_ask()

    def answer(self, *, resumed: bool, by: str) -> Pending | None:
        return self.asks.answer(resumed=resumed, by=by)
