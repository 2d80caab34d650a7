"""Operator settings: defaults < config file (TOML) < env vars < job.toml < command-line flags.

The config file lives at ``$AGENT_CONSOLE_CONFIG`` or the platform's user
config folder (``~/.config/agent-console/config.toml`` on Linux). Env vars
are ``AGENT_CONSOLE_<FIELD>``, e.g. ``AGENT_CONSOLE_PROVIDER=openai``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from console.engine.job import JobConfig, JobError, format_validation_error

APP_NAME = "agent-console"
ProviderName = Literal["scripted", "openai", "anthropic"]


def config_path() -> Path:
    env = os.environ.get("AGENT_CONSOLE_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENT_CONSOLE_", extra="forbid")

    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir(APP_NAME)))
    provider: ProviderName = "scripted"
    model: str | None = None
    base_url: str | None = None
    openai_api_key: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    # Scripted model pacing: 1.0 looks alive in a demo, 0 is instant (tests, benchmarks).
    speed: float = Field(default=1.0, ge=0)
    context_window: int = Field(default=128_000, gt=0)
    soft_threshold: float = Field(default=0.70, gt=0, lt=1)
    hard_threshold: float = Field(default=0.85, gt=0, lt=1)
    max_turns: int = Field(default=500, gt=0)
    max_restarts: int = Field(default=10, ge=0)
    auto_restart: bool = True
    # How layers 4-5 are compacted at phase boundaries: facts only, or a summary written by the model.
    summary: Literal["deterministic", "llm"] = "deterministic"
    theme: str = "agent-dark"
    # Console key remapping: binding id -> keys, e.g. {"checkpoint": "ctrl+k"} (see the console's help screen).
    keys: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=config_path()),
        )

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def store_path(self) -> Path:
        return self.data_dir / "jobs.db"


def load_settings(**overrides: Any) -> Settings:
    """Load settings; a bad config file or env var becomes a :class:`JobError` naming the key."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise JobError(format_validation_error(f"settings ({config_path()} or AGENT_CONSOLE_*)", exc)) from None
    except Exception as exc:  # e.g. the TOML file does not parse
        raise JobError(f"settings: cannot read {config_path()}: {exc}") from None


@dataclass(frozen=True)
class RunSettings:
    """What one run actually uses, after job.toml and flags are applied."""

    provider: ProviderName
    model: str
    base_url: str | None
    speed: float
    context_window: int
    soft_threshold: float
    hard_threshold: float
    max_turns: int
    max_restarts: int
    auto_restart: bool
    summary: Literal["deterministic", "llm"] = "deterministic"

    def with_overrides(self, **kw: Any) -> RunSettings:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


DEFAULT_MODELS = {"scripted": "scripted-agent", "openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-5"}


def resolve_run_settings(settings: Settings, job: JobConfig, **flags: Any) -> RunSettings:
    provider = job.model.provider or settings.provider
    model = job.model.name or settings.model
    if flags.get("provider") and flags["provider"] != provider:
        # A provider switched on the command line must not inherit the job's model name.
        model = None
    rs = RunSettings(
        provider=provider,
        model=model or DEFAULT_MODELS[provider],
        base_url=job.model.base_url or settings.base_url,
        speed=job.model.speed if job.model.speed is not None else settings.speed,
        context_window=job.context.window or settings.context_window,
        soft_threshold=job.context.soft_threshold or settings.soft_threshold,
        hard_threshold=job.context.hard_threshold or settings.hard_threshold,
        max_turns=job.limits.max_turns or settings.max_turns,
        max_restarts=job.limits.max_restarts if job.limits.max_restarts is not None else settings.max_restarts,
        auto_restart=job.limits.auto_restart if job.limits.auto_restart is not None else settings.auto_restart,
        summary=job.context.summary or settings.summary,
    ).with_overrides(**flags)
    if rs.soft_threshold >= rs.hard_threshold:
        raise JobError(
            f"soft_threshold ({rs.soft_threshold}) must be below hard_threshold ({rs.hard_threshold})"
        )
    return rs
