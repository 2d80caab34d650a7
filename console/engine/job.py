"""A job on disk: its folder layout, its job.toml, and fresh run folders.

A job is a folder with ``instructions.md`` and an optional ``job.toml``. The
harness keeps its own state in ``JOB/.console/`` so the agent's files and the
harness's files never mix.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

STATE_DIR = ".console"


class JobError(Exception):
    """A job folder or job.toml an operator must fix; the message says what and where."""


@dataclass(frozen=True)
class JobPaths:
    root: Path

    @property
    def instructions(self) -> Path:
        return self.root / "instructions.md"

    @property
    def job_toml(self) -> Path:
        return self.root / "job.toml"

    @property
    def system_prompt(self) -> Path:
        return self.root / "SYSTEM_PROMPT.md"

    @property
    def main_plan(self) -> Path:
        return self.root / "main_plan.md"

    @property
    def workspace_summary(self) -> Path:
        return self.root / "workspace_summary.md"

    @property
    def state(self) -> Path:
        return self.root / STATE_DIR

    @property
    def todos(self) -> Path:
        return self.state / "todos.json"

    @property
    def archive(self) -> Path:
        return self.state / "archive"

    @property
    def events(self) -> Path:
        return self.state / "events.jsonl"

    @property
    def checkpoint(self) -> Path:
        return self.state / "checkpoint.jsonl"

    @property
    def workspace(self) -> Path:
        return self.state / "workspace.json"

    @property
    def outcome(self) -> Path:
        return self.state / "outcome.json"

    @property
    def memory(self) -> Path:
        return self.state / "memory.json"

    @property
    def inbox(self) -> Path:
        return self.state / "inbox"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Strict):
    provider: Literal["scripted", "openai", "anthropic"] | None = None
    name: str | None = None
    base_url: str | None = None
    speed: float | None = Field(default=None, ge=0)


class ContextSection(_Strict):
    window: int | None = Field(default=None, gt=0)
    soft_threshold: float | None = Field(default=None, gt=0, lt=1)
    hard_threshold: float | None = Field(default=None, gt=0, lt=1)
    summary: Literal["deterministic", "llm"] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> ContextSection:
        if self.soft_threshold and self.hard_threshold and self.soft_threshold >= self.hard_threshold:
            raise ValueError("soft_threshold must be below hard_threshold")
        return self


class LimitsSection(_Strict):
    max_turns: int | None = Field(default=None, gt=0)
    max_restarts: int | None = Field(default=None, ge=0)
    auto_restart: bool | None = None


class JobConfig(_Strict):
    """``job.toml``. Unknown keys are errors: a typo must not be silently ignored."""

    name: str | None = None
    description: str | None = None
    model: ModelSection = Field(default_factory=ModelSection)
    context: ContextSection = Field(default_factory=ContextSection)
    limits: LimitsSection = Field(default_factory=LimitsSection)


def within(root_real: Path, path: Path) -> bool:
    """True if ``path`` (after symlinks) is inside the job folder and outside the harness state."""
    try:
        rel = path.resolve().relative_to(root_real)
    except (ValueError, OSError):
        return False
    # Compared case-blind: on a case-insensitive disk ".Console" is the harness folder too.
    return not (rel.parts and rel.parts[0].lower() == STATE_DIR)


def format_validation_error(source: str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see README for the keys job.toml accepts)"
        lines.append(f"{source}: key '{key}': {msg}")
    return "\n".join(lines)


def load_job_config(paths: JobPaths) -> JobConfig:
    if not paths.job_toml.exists():
        return JobConfig()
    try:
        data = tomllib.loads(paths.job_toml.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise JobError(f"{paths.job_toml}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise JobError(f"{paths.job_toml}: not UTF-8 text") from None
    try:
        return JobConfig.model_validate(data)
    except ValidationError as exc:
        raise JobError(format_validation_error(str(paths.job_toml), exc)) from None


def validate_job_folder(root: Path) -> JobPaths:
    if not root.exists():
        raise JobError(f"{root}: no such job folder")
    if not root.is_dir():
        raise JobError(f"{root}: a job is a folder with instructions.md, not a file")
    paths = JobPaths(root.resolve())
    if not paths.instructions.is_file():
        raise JobError(f"{root}: missing instructions.md (every job needs one: it is the task)")
    return paths


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "job"


def prepare_run(source: Path, runs_dir: Path, now: datetime) -> JobPaths:
    """Copy a job into a fresh run folder, so running a sample never writes into the checkout.

    The harness state of the source (if it was run in place before) is not copied:
    a new run starts clean.
    """
    src = validate_job_folder(source)
    stamp = now.strftime("%Y%m%d-%H%M%S")
    base = runs_dir / f"{_slug(src.root.name)}-{stamp}"
    dest = base
    n = 1
    while dest.exists():
        n += 1
        dest = base.with_name(f"{base.name}-{n}")
    runs_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src.root, dest, ignore=shutil.ignore_patterns(STATE_DIR, "__pycache__"), symlinks=True)
    return JobPaths(dest)
