"""Guardrails (seed 002): tool policies gate calls, feedback providers guide, completion checkers block early
stops, budgets bound the job, and escalation decides when the operator is asked (nudging did not help). Pure
logic: the loop gives each part a narrow context (a :class:`World` to ask about files, the run's counters) and
records their state (:class:`GuardrailState`).

See :mod:`console.engine.guardrails.guardrails` for restore and rewind semantics.

Its names are imported when first asked for (PEP 562): job.toml's check (``run --detach``) needs only
:mod:`.config` and what it validates with, never the guardrails' machinery (the facade, its states)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.engine.guardrails.budgets import (
        Budgets,
        BudgetState,
        Deadline,
        Exhausted,
        format_duration,
        parse_duration,
    )
    from console.engine.guardrails.completion import (
        CompositeChecker,
        FileExistsChecker,
        NoChecker,
        PlanBasedChecker,
        TaskCompletionChecker,
        TaskCompletionContext,
        TaskCompletionResult,
        run_checker,
    )
    from console.engine.guardrails.config import (
        CompositeCheck,
        DeadlineEntry,
        FilesCheck,
        GuardrailsConfig,
        KnownTool,
        NoneCheck,
        PlanCheck,
        ReadBeforeWriteEntry,
        SequentialEntry,
        StaticEntry,
        StuckEntry,
        build_checker,
        build_guardrails,
        default_guardrails,
    )
    from console.engine.guardrails.escalation import Escalation, EscalationState
    from console.engine.guardrails.feedback import (
        Feedback,
        FeedbackContext,
        FeedbackProvider,
        FeedbackProviderConfig,
        FeedbackRecord,
        FeedbackRunner,
        FeedbackState,
        FeedbackTrigger,
        FileCreatedTrigger,
        Observation,
        Severity,
        ToolCallSummary,
        render_feedback,
    )
    from console.engine.guardrails.feedback_providers import (
        DeadlineFeedback,
        Detection,
        StaticFeedbackProvider,
        StuckDetector,
    )
    from console.engine.guardrails.guardrails import Guardrails, GuardrailState
    from console.engine.guardrails.policies import (
        FILE_CHANGING_TOOLS,
        GateVerdict,
        PolicyContext,
        PolicyDecision,
        PolicyGate,
        PolicyState,
        ReadBeforeWritePolicy,
        SequentialDependencyPolicy,
        ToolPolicy,
        World,
        find_cycle,
    )

__all__ = [
    "FILE_CHANGING_TOOLS",
    "BudgetState",
    "Budgets",
    "CompositeCheck",
    "CompositeChecker",
    "Deadline",
    "DeadlineEntry",
    "DeadlineFeedback",
    "Detection",
    "Escalation",
    "EscalationState",
    "Exhausted",
    "Feedback",
    "FeedbackContext",
    "FeedbackProvider",
    "FeedbackProviderConfig",
    "FeedbackRecord",
    "FeedbackRunner",
    "FeedbackState",
    "FeedbackTrigger",
    "FileCreatedTrigger",
    "FileExistsChecker",
    "FilesCheck",
    "GateVerdict",
    "GuardrailState",
    "Guardrails",
    "GuardrailsConfig",
    "KnownTool",
    "NoChecker",
    "NoneCheck",
    "Observation",
    "PlanBasedChecker",
    "PlanCheck",
    "PolicyContext",
    "PolicyDecision",
    "PolicyGate",
    "PolicyState",
    "ReadBeforeWriteEntry",
    "ReadBeforeWritePolicy",
    "SequentialDependencyPolicy",
    "SequentialEntry",
    "Severity",
    "StaticEntry",
    "StaticFeedbackProvider",
    "StuckDetector",
    "StuckEntry",
    "TaskCompletionChecker",
    "TaskCompletionContext",
    "TaskCompletionResult",
    "ToolCallSummary",
    "ToolPolicy",
    "World",
    "build_checker",
    "build_guardrails",
    "default_guardrails",
    "find_cycle",
    "format_duration",
    "parse_duration",
    "render_feedback",
    "run_checker",
]

# Each public name and the module of this package that defines it.
_HOMES = {
    "BudgetState": "budgets",
    "Budgets": "budgets",
    "Deadline": "budgets",
    "Exhausted": "budgets",
    "format_duration": "budgets",
    "parse_duration": "budgets",
    "CompositeChecker": "completion",
    "FileExistsChecker": "completion",
    "NoChecker": "completion",
    "PlanBasedChecker": "completion",
    "TaskCompletionChecker": "completion",
    "TaskCompletionContext": "completion",
    "TaskCompletionResult": "completion",
    "run_checker": "completion",
    "CompositeCheck": "config",
    "DeadlineEntry": "config",
    "FilesCheck": "config",
    "GuardrailsConfig": "config",
    "KnownTool": "config",
    "NoneCheck": "config",
    "PlanCheck": "config",
    "ReadBeforeWriteEntry": "config",
    "SequentialEntry": "config",
    "StaticEntry": "config",
    "StuckEntry": "config",
    "build_checker": "config",
    "build_guardrails": "config",
    "default_guardrails": "config",
    "Escalation": "escalation",
    "EscalationState": "escalation",
    "Feedback": "feedback",
    "FeedbackContext": "feedback",
    "FeedbackProvider": "feedback",
    "FeedbackProviderConfig": "feedback",
    "FeedbackRecord": "feedback",
    "FeedbackRunner": "feedback",
    "FeedbackState": "feedback",
    "FeedbackTrigger": "feedback",
    "FileCreatedTrigger": "feedback",
    "Observation": "feedback",
    "Severity": "feedback",
    "ToolCallSummary": "feedback",
    "render_feedback": "feedback",
    "DeadlineFeedback": "feedback_providers",
    "Detection": "feedback_providers",
    "StaticFeedbackProvider": "feedback_providers",
    "StuckDetector": "feedback_providers",
    "GuardrailState": "guardrails",
    "Guardrails": "guardrails",
    "FILE_CHANGING_TOOLS": "policies",
    "GateVerdict": "policies",
    "PolicyContext": "policies",
    "PolicyDecision": "policies",
    "PolicyGate": "policies",
    "PolicyState": "policies",
    "ReadBeforeWritePolicy": "policies",
    "SequentialDependencyPolicy": "policies",
    "ToolPolicy": "policies",
    "World": "policies",
    "find_cycle": "policies",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
