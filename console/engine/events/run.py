"""The events of a run as a whole: the operator's commands, how it ended, what it needs from its operator,
its launch settings, memory, experiences and errors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from console.engine.events.base import BoundedInt, EventBase


class OperatorCommand(EventBase):
    type: Literal["operator_command"] = "operator_command"
    command: str
    args: dict[str, Any] = Field(default_factory=dict)
    source: str = "api"
    # discarded: meant for an earlier run of the job (a stop left in the inbox), never applied.
    status: Literal["received", "applied", "rejected", "discarded"] = "received"
    detail: str = ""
    command_id: str = ""


class JobCompleted(EventBase):
    """The agent's job_complete, accepted: the harness's record showed the plan done (console.engine.record),
    or the job declares free stops ([guardrails.completion] type = "none") and ``unmet`` says what the record
    shows left (the run then ends incomplete)."""

    type: Literal["job_completed"] = "job_completed"
    summary: str
    deliverables: list[str] = Field(default_factory=list)
    confidence: float
    notes: str = ""
    unmet: list[str] = Field(default_factory=list)


class JobGaveUp(EventBase):
    """The agent gave up: job_complete with a confidence below [guardrails] low_confidence and notes saying why
    (seed 000's unrecoverable case), accepted whatever the record shows. ``unmet``: what the record says is
    left. The run ends as gave up and asks its operator."""

    type: Literal["job_gave_up"] = "job_gave_up"
    summary: str
    deliverables: list[str] = Field(default_factory=list)
    confidence: float
    notes: str = ""
    unmet: list[str] = Field(default_factory=list)


class MemoryUpdated(EventBase):
    """Working-memory bookkeeping (seed 003): task records, blockers, pruning, legacy backfill."""

    type: Literal["memory_updated"] = "memory_updated"
    what: str
    detail: dict[str, Any] = Field(default_factory=dict)


class ExperienceRecorded(EventBase):
    """An entry of experiences.md (seed 000), recorded by the harness (a rewind, a stuck detection) or by the
    agent's record_experience; ``times`` > 1: the same entry again, moved to the newest."""

    type: Literal["experience_recorded"] = "experience_recorded"
    entry_id: BoundedInt
    section: Literal["failed", "lesson", "pattern"]
    text: str
    source: str = ""
    where: str = ""
    times: BoundedInt = 1


# How a run ended, in the operator's terms: completed (the harness's record shows the plan done), gave_up (the
# agent said it cannot be done: the operator is asked), incomplete (stopped, out of budget, refused stops, a
# turn limit: the work is not done, the run can go on), failed (an internal error, a restart loop).
Outcome = Literal["completed", "gave_up", "incomplete", "failed"]


class RunEnded(EventBase):
    """The last event of a run (a process's supervisor), whatever ended it."""

    type: Literal["run_ended"] = "run_ended"
    reason: str
    detail: str = ""
    sessions: BoundedInt = 0
    restarts: BoundedInt = 0
    # None in a log from before outcomes were recorded (the reason tells what it can).
    outcome: Outcome | None = None
    # What the operator fixes before a resume goes on (a provider's refusal: "set OPENAI_API_KEY to a working key");
    # "" when nothing is known to fix.
    fix: str = ""


class StateRecovered(EventBase):
    """A harness file could not be used as it was (damaged, or a step cut short by a kill): what was done."""

    type: Literal["state_recovered"] = "state_recovered"
    file: str
    problem: str
    action: str
    moved_to: str | None = None


class LaunchSettings(EventBase):
    """How this process runs the job (at each start): the settings recorded when the run began
    (``.console/launch.json``), with what a resume's flags changed. Notification targets as scheme://host."""

    type: Literal["launch_settings"] = "launch_settings"
    source: Literal["start", "resume"] = "start"
    provider: str = ""
    model: str = ""
    base_url: str | None = None
    context_window: BoundedInt = 0
    auto_restart: bool = True
    max_restarts: BoundedInt = 0
    max_turns: BoundedInt = 0
    unconfined: bool = False
    notify: list[str] = Field(default_factory=list)
    budgets: dict[str, Any] = Field(default_factory=dict)
    # "model: a -> b" per setting a flag given at this resume changed (empty: resumed as it was started).
    changes: list[str] = Field(default_factory=list)
    # How the process was started: "console" (a runner a console started), "headless", "resume", "fleet".
    by: str = ""


# Why a run needs its operator (seed 004's approval, and what the harness escalates instead of looping).
NeedReason = Literal["restart_approval", "stuck", "budget", "completion_refused", "provider_down", "crashed",
                     "gave_up", "store_down", "fleet_budget", "mcp_question"]


class NeedsOperator(EventBase):
    """The run needs its operator: every view shows it first, attached consoles ring, the operator's channels
    (Apprise URLs) are told. ``paused``: the run holds until the operator acts (resume, approve, stop...);
    ``evidence``: the lines that show why (the repeated call, the spend, the provider's error)."""

    type: Literal["needs_operator"] = "needs_operator"
    reason: NeedReason
    message: str
    evidence: list[str] = Field(default_factory=list)
    paused: bool = True
    # False: another run tells the operator's channels of this need (the fleet budget's hold is told once, by the
    # run that created it), so this run's notifier sends nothing.
    notify: bool = True


class NeedsOperatorCleared(EventBase):
    """The operator answered (or the cause went away): the run no longer needs them."""

    type: Literal["needs_operator_cleared"] = "needs_operator_cleared"
    reason: NeedReason
    by: str = ""


class RunAcknowledged(EventBase):
    """The operator acknowledged a run that ended without completing (the agent gave up, it crashed or failed): it
    asks for them no more (no view lists it as needing them, no channel is told again), its outcome and folder are
    kept, and a resume goes on with it (its new process asks anew for whatever still needs them). Written by
    ``agent-console ack``, the fleet's and the console's key (console.engine.acknowledge), never by a runner."""

    type: Literal["run_acknowledged"] = "run_acknowledged"
    reason: str = ""  # what was acknowledged: the need ("gave_up", "crashed"), else the run's outcome ("failed")
    by: str = ""  # where the operator acknowledged it: cli | fleet | console


class ErrorEvent(EventBase):
    type: Literal["error"] = "error"
    message: str
    where: str = ""
    recoverable: bool = True
