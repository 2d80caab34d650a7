"""How the context events read: masking, compaction, wind-down and a restart's approval."""

from __future__ import annotations

from console.engine import events as ev
from console.engine.job_files import one_line
from console.view.present.words import (
    Presented,
    context_full,
    flat,
    pct,
    plural,
    tokens,
)


def _masked(e: ev.ContextMasked) -> Presented:
    limit = e.prompt_budget or e.context_window
    change = f" ({pct(e.used_before, limit)} → {pct(e.used_after, limit)})" if limit else ""
    return Presented("⊘", "masked", "info", f"masked the {plural(e.masked, 'oldest tool result')}, "
                                            f"~{tokens(e.tokens_freed)} tokens freed{change}",
                     "the agent now sees placeholders", "context")


def _compacted(e: ev.ContextCompacted) -> Presented:
    kept = e.carried if e.carried is not None else e.messages_after - 1
    carried = f" + {kept} carried" if kept > 0 else ""
    return Presented("≡", "compacted", "info", f"compacted {plural(e.messages_before, 'message')} into a summary "
                                               f"({e.summary_chars:,} chars){carried}",
                     f"why: {flat(e.reason, 120) or 'compaction'}", "context")


def _wind_down(e: ev.WindDown) -> Presented:
    return Presented("⚠", "wind-down", "caution", f"{context_full(e.usage_pct)}: wind-down sent",
                     "the agent was asked to save its state; the session restarts after its next turn", "context")


def _restart_pending(e: ev.RestartPending) -> Presented:
    return Presented("⏸", "restart-pending", "warning", f"restart pending: {context_full(e.usage_pct)}",
                     f"session {e.next_session} would start with {plural(e.carryover_messages, 'carried message')} "
                     f"(~{tokens(e.carryover_tokens)} tokens); awaiting approval", "context")


def _restart_approved(e: ev.RestartApproved) -> Presented:
    return Presented("✓", "restart-approved", "info", f"restart approved ({one_line(e.by, 40)})", source="context")


def _restart_denied(e: ev.RestartDenied) -> Presented:
    return Presented("✗", "restart-denied", "warning", f"restart denied ({one_line(e.by, 40)})",
                     # The event does not name the run: the command (with its folder) is on the CLI's last line.
                     "the run ends; it can be resumed later (agent-console resume)", "context")
