"""Budgets: the deadline and the wrap-up turn it grants; the token and money budgets, spend limits that pause
the run and ask its operator, whose resume grants one more slice (budget_raised)."""

from __future__ import annotations

from datetime import datetime, timedelta

from console.engine import events as ev
from console.engine.cost import format_cost
from console.engine.enforcement.context import EnforcementContext
from console.engine.enforcement.limits import limit, shown_limit, why
from console.engine.enforcement.status import StatusReport
from console.engine.enforcement.world import WRAP_UP, BudgetTurn
from console.engine.guardrails.budgets import SPEND_LIMITS, WRAP_UP_SECONDS, Exhausted


class BudgetWatch:
    """The deadline and the spend limits. ``status``: the guardrails' status, said again when the operator grants
    a slice."""

    def __init__(self, ctx: EnforcementContext, status: StatusReport) -> None:
        self.ctx = ctx
        self._status = status

    def start(self, priced: bool | None = None) -> None:
        """The run starts (or resumes): the budgets' clock starts once per job, and an operator who raised a
        spent budget in job.toml gets the run going again.

        ``priced``: whether the model's prices are known. False with a ``budget_usd`` set: no cost is ever
        counted, so that budget can never be reached; the operator is told so once, at the start."""
        g, clock = self.ctx.guardrails, self.ctx.clock
        budget_usd = g.budgets.budget_usd
        if priced is False and budget_usd is not None:
            self.ctx.events.emit(ev.ErrorEvent, where="guardrails", recoverable=True, message=(
                f"budget_usd = {format_cost(budget_usd)} can never be reached: no price is known for this model, "
                "so no cost is counted. Add the model under [prices] in the config (see docs/operators-guide.md), "
                "or limit the job with budget_tokens."))
        st = g.budget_state
        now = clock.now()
        before = (st.model_dump(), g.feedback.state.started_at)
        g.start(now)
        if st.exhausted is not None:
            st.exhausted, wrap = None, st.wrap_up_turns
            if (kind := g.exhausted(now)) is None or kind in SPEND_LIMITS:
                # Raised in job.toml (the run goes on), or still at a spend limit: the run asks again at its
                # first turn boundary; no wrap-up turn is involved either way.
                st.wrap_up_turns, st.wrap_up_until = 0, None
            else:
                st.wrap_up_turns = wrap
                if st.wrap_up_until is not None:
                    # Resumed in (or after) the wrap-up turn: the operator's resume gives it its time again.
                    st.wrap_up_until = now + timedelta(seconds=WRAP_UP_SECONDS)
        if (st.model_dump(), g.feedback.state.started_at) != before:
            self.ctx.changed()

    def why(self, kind: str) -> str:
        """Why the budget ``kind`` stops the run (console.engine.enforcement.limits.why)."""
        return why(self.ctx.guardrails, self.ctx.clock, kind)

    def _limit(self, kind: str) -> tuple[float, float]:
        return limit(self.ctx.guardrails, self.ctx.clock, kind)

    def _shown(self, kind: str) -> str:
        return shown_limit(self.ctx.guardrails, kind)

    def spent(self) -> str | None:
        """Why the run ends now because the deadline passed and its wrap-up turn was given, or None."""
        st = self.ctx.guardrails.budget_state
        if st.exhausted is None or st.exhausted in SPEND_LIMITS or st.wrap_up_turns < 1:
            return None
        return self.why(st.exhausted)

    def cut_at(self) -> datetime | None:
        """When work in flight (a model call, a command) must be cut: the deadline, or once a spent budget has
        granted the wrap-up turn, the end of that turn's time. None: nothing bounds a turn."""
        g = self.ctx.guardrails
        st = g.budget_state
        if st.wrap_up_until is not None:
            return st.wrap_up_until
        deadline = g.budgets.deadline(st)
        return deadline.expires_at if deadline is not None else None

    def seconds_to_cut(self) -> float | None:
        """Seconds until :meth:`cut_at` (negative once past), None without one."""
        at = self.cut_at()
        return None if at is None else (at - self.ctx.clock.now()).total_seconds()

    # -- budgets ---------------------------------------------------------------------------------
    def count_tokens(self, n: int, cost_usd: float | None = None) -> float | None:
        """Count a turn's tokens and cost; returns the job's cost so far (None while no price is known)."""
        g = self.ctx.guardrails
        if n > 0:
            g.add_tokens(n)
            self.ctx.changed()
        if cost_usd is not None:
            g.add_cost(cost_usd)
            self.ctx.changed()
            return g.budget_state.cost_usd
        return g.budget_state.cost_usd or None

    def budget_turn(self) -> BudgetTurn:
        """At a turn boundary: what the budgets call for. The deadline: a wrap-up turn, then the run's end. A
        spend limit (tokens, money): the operator is asked, every boundary until they answer (the loop holds)."""
        g = self.ctx.guardrails
        st = g.budget_state
        was = st.exhausted
        kind = g.exhausted(self.ctx.clock.now())
        if kind is None:
            return BudgetTurn()
        top, used = self._limit(kind)
        if was is None:
            self.ctx.events.emit(ev.BudgetExhausted, budget=kind, limit=top, used=used, detail=self.why(kind))
            self.ctx.changed()
        if kind in SPEND_LIMITS:
            return BudgetTurn(ask=self.why(kind), evidence=self._spend_evidence(kind))
        if st.wrap_up_turns >= 1:
            return BudgetTurn(ends=self.why(kind))
        st.wrap_up_turns += 1
        st.wrap_up_until = self.ctx.clock.now() + timedelta(seconds=WRAP_UP_SECONDS)
        self.ctx.changed()
        return BudgetTurn(wrap_up=WRAP_UP[kind].format(limit=self._shown(kind)))

    def deadline_while_waiting(self) -> str | None:
        """While the run waits for its operator (a need, their pause, a restart's approval): why the deadline ends
        it now, or None before the deadline. Time passes whether the run waits or not, so the run ends as a
        deadline reached while working ends it (``budget_exhausted``, once), but at once: no wrap-up turn is
        given, the agent was not working (a stuck agent, a model that cannot be reached, a spent budget or a full
        context would not use it). Recorded as had, so a resume without a later deadline ends at once, as after
        any deadline's end. It passes a spend limit the run waited at: the deadline is what ends it."""
        g = self.ctx.guardrails
        st = g.budget_state
        deadline = g.budgets.deadline(st)
        if deadline is None or self.ctx.clock.now() < deadline.expires_at:
            return None
        if st.exhausted != "deadline":
            st.exhausted = "deadline"
            top, used = self._limit("deadline")
            self.ctx.events.emit(ev.BudgetExhausted, budget="deadline", limit=top, used=used,
                                 detail=self.why("deadline"), wrap_up=False)
        if st.wrap_up_turns < 1 or st.wrap_up_until is not None:
            st.wrap_up_turns, st.wrap_up_until = max(1, st.wrap_up_turns), None
        self.ctx.changed()
        return self.why("deadline")

    def _spend_evidence(self, kind: Exhausted) -> tuple[str, ...]:
        g = self.ctx.guardrails
        st, b = g.budget_state, g.budgets
        grants = st.token_grants if kind == "tokens" else st.cost_grants
        if kind == "tokens":
            slice_, after = f"{b.budget_tokens or 0:,} tokens", f"{(b.budget_tokens or 0) * (grants + 2):,} tokens"
        else:
            slice_, after = format_cost(b.budget_usd or 0), format_cost((b.budget_usd or 0) * (grants + 2))
        lines = [self.why(kind)]
        if grants:
            lines.append(f"the operator granted {grants} more slice{'s' if grants != 1 else ''} of {slice_} so far")
        lines.append(f"resume grants one more slice of {slice_} (the limit becomes {after}); stop ends the run as "
                     "out of budget")
        return tuple(lines)

    def spend_limit(self) -> str | None:
        """Why a spend limit (tokens, money) holds the run, or None."""
        kind = self.ctx.guardrails.budget_state.exhausted
        return self.why(kind) if kind is not None and kind in SPEND_LIMITS else None

    def grant(self, by: str) -> bool:
        """The operator's resume at a spend limit: one more slice of that budget (recorded, with an event).
        False if no spend limit is reached (nothing to grant)."""
        st = self.ctx.guardrails.budget_state
        kind = st.exhausted
        if kind not in SPEND_LIMITS:
            return False
        before, used = self._limit(kind)
        if kind == "tokens":
            st.token_grants += 1
            grants = st.token_grants
        else:
            st.cost_grants += 1
            grants = st.cost_grants
        st.exhausted = None
        st.wrap_up_turns, st.wrap_up_until = 0, None
        top, _ = self._limit(kind)
        shown = self._shown(kind)
        self.ctx.events.emit(ev.BudgetRaised, budget=kind, limit=top, added=round(top - before, 6), used=used,
                             grants=grants, by=by, detail=f"{by}: the {'token' if kind == 'tokens' else 'money'} "
                                                         f"budget is now {shown} (one more slice granted)")
        self.ctx.changed()
        self._status.emit(force=True)
        return True
