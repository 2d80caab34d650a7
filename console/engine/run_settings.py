"""The settings one run uses, owned by the engine.

The operator's layers (defaults < config file < env vars < job.toml < flags) are merged outside the
engine (``console.settings``); what comes out is this plain record, so the engine never imports the
settings machinery, and a test or a benchmark builds one directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from console.engine.context.carryover import DEFAULT_CARRYOVER_TURNS
from console.engine.cost import Prices
from console.engine.guardrails import GuardrailsConfig
from console.engine.run_setting_check import check_record
from console.engine.run_setting_specs import DEFAULT_COMPACT_AT, SPECS
from console.engine.tools.command_config import CommandToolConfig
from console.engine.tools.limits import CommandWorld


@dataclass(frozen=True)
class RunSettings:
    """What one run actually uses, after job.toml and flags are applied."""

    provider: str
    model: str
    base_url: str | None
    speed: float
    context_window: int
    soft_threshold: float
    hard_threshold: float
    max_turns: int
    # The most sessions a run may have (seed 004: a full context in session N >= max_restarts ends the run).
    max_restarts: int
    auto_restart: bool
    summary: Literal["deterministic", "llm"] = "deterministic"
    # Whole turns (a reply with all its tool results) a restart carries into the next session (seed 004).
    carryover_turns: int = DEFAULT_CARRYOVER_TURNS
    # Seed 003: working memory (the last 5 tasks by intent, the active blockers) in every prompt; False keeps the
    # prompts without it. Completed tasks are recorded either way (console.engine.memory says why).
    requires_context: bool = True
    # Seed 003 phase 2: the job's file catalogue and the agent's find_files tool.
    file_index: bool = False
    # Tokens masking cannot free, beyond the turns a compaction keeps, at which a session compacts in place
    # (0: never in place; phase boundaries and restarts still summarise).
    compact_at: int = DEFAULT_COMPACT_AT
    max_write_mb: float = 4.0  # the most one tool call may write
    max_job_mb: float = 1024.0  # the most the job folder may hold
    # The job definition's constraints (job.toml): guardrails, the commands it declares, and the world those
    # commands run in (what they see, their bounds; job.toml's [sandbox] within the operator's caps).
    guardrails: GuardrailsConfig | None = None
    tools: tuple[CommandToolConfig, ...] = ()
    commands: CommandWorld = field(default_factory=CommandWorld)
    # The model's prices (None: unknown, so costs are not shown) and where the window figure came from
    # ("job.toml", "--context-window", "registry: gpt-4.1", ...), for the console.
    prices: Prices | None = None
    # The operator's prices of the model (their config's [prices] or the table) where job.toml's differ: the fleet's
    # daily budget counts a turn at the higher of the two costs (None: ``prices`` is the operator's too).
    fleet_prices: Prices | None = None
    context_window_source: str = "default"
    # Resilient turns: a transient failure is retried for the whole turn, with backoff and jitter, for at most
    # retry_total_wait seconds since the turn's first failure (elapsed time: the attempts count too), or
    # unreachable_wait seconds while the server cannot be reached at all (refused, no such host, no route);
    # past that the run asks its operator and waits. A server's retry-after is honoured up to retry_after_cap;
    # a stream with no model output for idle_timeout seconds, or a turn longer than turn_timeout, is a failure.
    retry_total_wait: float = 600.0
    unreachable_wait: float = 30.0
    retry_after_cap: float = 300.0
    idle_timeout: float = 120.0
    turn_timeout: float = 1800.0

    def with_overrides(self, **kw: Any) -> RunSettings:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


# Every run setting of the config file is one of the run's, with the table's default where it has one: checked here,
# at import (console.engine.run_setting_specs).
check_record(RunSettings, [s.name for s in SPECS if s.config_key == s.name])
