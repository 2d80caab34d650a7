"""How the guardrails' events read: feedback, refused and bypassed stops, budgets, the stuck detector."""

from __future__ import annotations

from console.engine import events as ev
from console.engine.job_files import one_line
from console.view.present.words import (
    BUDGET_SPENT,
    SEVERITIES,
    Presented,
    cost,
    flat,
    stop_kind,
    tokens,
)


def _feedback(e: ev.Feedback) -> Presented:
    severity = e.severity if e.severity in SEVERITIES else "info"
    return Presented("◆", "feedback", severity, f"feedback from {one_line(e.source, 60)} ({e.severity}): "
                                                 f"{flat(e.message)}", source=one_line(e.source, 60))


def refusal_count(e: ev.CompletionBlocked) -> str:
    """``2 of 5``, or past the bound ``6th, over the 5 allowed`` (never "6/5"); "" for an older event."""
    if not e.max_blocks:
        return ""
    if e.blocks <= e.max_blocks:
        return f"{e.blocks} of {e.max_blocks}"
    return f"over the {e.max_blocks} allowed: the operator is asked"


def _blocked(e: ev.CompletionBlocked) -> Presented:
    who = f" by {one_line(e.checker, 60)}" if e.checker else ""
    count = f" ({refusal_count(e)})" if e.max_blocks else ""
    return Presented("↩", "blocked", "caution", f"stop refused{who}{count}: {flat(e.feedback or e.reason)}",
                     "the agent was told to continue", one_line(e.checker, 60) or "completion")


def _bypassed(e: ev.CompletionBypassed) -> Presented:
    spent = BUDGET_SPENT.get(e.budget, f"the {e.budget} budget is spent")
    return Presented("↷", "bypassed", "warning", f"{stop_kind(e.stop_reason)} accepted without the completion "
                                                 f"check: {spent}", source=e.budget)


def _exhausted(e: ev.BudgetExhausted) -> Presented:
    if e.detail:
        what = flat(e.detail)
    elif e.budget == "deadline":
        what = f"deadline passed ({e.used:.0f}s of {e.limit:.0f}s)"
    elif e.budget == "cost":
        what = f"money budget spent ({cost(e.used)} of {cost(e.limit)})"
    else:
        what = f"token budget spent ({tokens(e.used)} of {tokens(e.limit)})"
    told = ("the run pauses and asks its operator" if e.budget != "deadline" else
            "the agent was told to wrap up" if e.wrap_up else
            "the run was waiting: it ends now, without a wrap-up turn")
    return Presented("◷", "budget", "warning", what, told, e.budget)


def _raised(e: ev.BudgetRaised) -> Presented:
    what = flat(e.detail) if e.detail else (
        f"{'token' if e.budget == 'tokens' else 'money'} budget raised to "
        f"{tokens(e.limit) if e.budget == 'tokens' else cost(e.limit)}")
    return Presented("◷", "budget", "info", what, f"by {flat(e.by)}" if e.by else "", e.budget)


def _stuck(e: ev.StuckDetected) -> Presented:
    pattern = f" ({flat(e.pattern, 80)})" if e.pattern else ""
    return Presented("⚠", "stuck", "warning", f"stuck: {flat(e.reason)}{pattern}", source="stuck")
