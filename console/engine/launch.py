"""How a run was started, recorded in its state so that every resume is the same run.

``.console/launch.json`` holds what the operator chose when the run began (provider, model, base URL,
context window, restart policy, turn and session limits, the turns a restart carries, whether the prompts carry
working memory and the find_files tool (seed 003), the demo model's pace,
a replay script,
``--unconfined``, the notification targets, whether the run's end is told and how often an unanswered need is
told again) and, for the record, the budgets job.toml gave it. It never
holds a key: keys stay in the environment or the config file and are read again by each process.

Every resume (``run --in-place``, ``resume ID``, the fleet, a runner after a crash) starts from it; a flag
given at resume overrides it, is written back, and is told in the run's ``launch_settings`` event. Changing
the provider or the model of a run needs an explicit ``--switch-model``.

The notification targets are Apprise URLs, which often carry a token: the file is the operator's only
(0600 in a 0700 folder), and what events and views show of a URL is its scheme and host (:func:`shown_url`).

The record is believed only when it is this operator's: sealed with their key for this folder (console.engine.seal),
or without a seal in a folder of one of their runs from before seals existed. A record shipped with a job folder is
another's (:class:`ForeignRecord`): nothing in it is used (console.engine.provenance says what a run does then).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from console.engine.atomic import atomic_write_text
from console.engine.job_files import JobPaths

# The record on disk and whether it is believed live apart (no pydantic there); the names callers use, from here too.
from console.engine.launch_record import SEAL_KIND as SEAL_KIND
from console.engine.launch_record import ForeignRecord as ForeignRecord
from console.engine.launch_record import LaunchError as LaunchError
from console.engine.launch_record import UnreadableRecord as UnreadableRecord
from console.engine.launch_record import Whose as Whose
from console.engine.launch_record import _first as _first
from console.engine.launch_record import launch_path as launch_path
from console.engine.launch_record import open_record as open_record
from console.engine.run_setting_check import setting_field

# What a resume keeps, from the run settings' table: RESUMED (what a resume takes from the record when no flag says
# otherwise; the record's field = the setting's name), IDENTITY (changing these makes it another model's run: only
# with --switch-model) and ADDED_LATER (what a record from an older version may lack: None, the run then took the
# settings' value, which is written down at the resume, not changed by it).
from console.engine.run_setting_specs import ADDED_LATER as ADDED_LATER
from console.engine.run_setting_specs import IDENTITY as IDENTITY
from console.engine.run_setting_specs import MAX_RESTARTS, SPECS
from console.engine.run_setting_specs import RESUMED as RESUMED
from console.engine.seal import Seal
from console.engine.url_secrets import shown_url as shown_url_secret

# 2: max_restarts counts sessions, as seed 004 does (a context full in session N >= max_restarts ends the run);
# version 1 counted restarts, so a version 1 record's max_restarts is read as one more (the same run).
LAUNCH_VERSION = 2


class Launch(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    version: int = LAUNCH_VERSION
    provider: str
    model: str
    base_url: str | None = None
    context_window: int | None = None
    max_turns: int | None = None
    max_restarts: int | None = setting_field("max_restarts", optional=True)
    auto_restart: bool | None = None
    # None: a record from before it was recorded (the run's settings decide, as they did then).
    carryover_turns: int | None = setting_field("carryover_turns", optional=True)
    # What the prompts carry (seed 003): working memory, the find_files tool. Kept so that a resume shapes its
    # prompts as the run began, whatever the config file says by then (None: a record from before they were).
    requires_context: bool | None = None
    file_index: bool | None = None
    compact_at: int | None = setting_field("compact_at", optional=True)
    speed: float | None = None
    unconfined: bool = False
    script: str | None = None
    notify: tuple[str, ...] = ()
    # [notify] on_end and remind_minutes as the run began: who is told, and how often while nobody answers, is
    # the run's as its targets are (None: a record from before they were recorded; the settings then decide).
    notify_on_end: bool | None = None
    notify_remind: tuple[float, ...] | None = None
    # job.toml's budgets when the run was started (for the record: job.toml stays the definition).
    budgets: dict[str, Any] = Field(default_factory=dict)
    context_window_source: str = ""
    started_at: datetime | None = None
    # The jobs store the run was started with, as it may be shown (its URL without the password;
    # "embedded" for the default). None: a record from before it was recorded. A resume checks it
    # (store_change): a run's events and commands stay in one store.
    store: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _sessions_not_restarts(cls, data: Any) -> Any:
        """A version 1 record counted restarts: N restarts are N + 1 sessions, so its run resumes alike."""
        # A record without a version is one being made now (every written record has its version).
        version = data.get("version", LAUNCH_VERSION) if isinstance(data, dict) else LAUNCH_VERSION
        if isinstance(data, dict) and isinstance(version, int) and version < 2:
            mr = data.get("max_restarts")
            data = {**data, "version": LAUNCH_VERSION}  # read once as version 1: never again (no double + 1)
            if isinstance(mr, int) and not isinstance(mr, bool) and 0 <= mr < MAX_RESTARTS:
                data["max_restarts"] = mr + 1
        return data

    def flags(self) -> dict[str, Any]:
        """The record as the flags of a resume."""
        return {name: getattr(self, name) for name in RESUMED}


# Every setting a resume keeps is a field of the record: a setting the table says is kept, and the record lacks,
# fails here, at import.
if missing := [name for name in RESUMED if name not in Launch.model_fields]:
    raise RuntimeError(f"the launch record lacks {missing}, which console/engine/run_setting_specs.py says a resume "
                       "keeps")


def kept_settings(rs: object) -> dict[str, Any]:
    """The run's resolved settings (RunSettings) a resume keeps, by the table, as the record holds them: all but the
    flags of one run (--script, --unconfined) and the notification targets, which the caller has."""
    return {s.name: getattr(rs, s.name) for s in SPECS if s.resume != "no" and s.config_key == s.name}


def open_launch(paths: JobPaths, seal: Seal) -> tuple[Launch, Whose] | None:
    """The run's record and why it is believed (:func:`console.engine.launch_record.open_record`), checked as a
    Launch. None if the folder has none. :class:`ForeignRecord` if it is not this operator's; LaunchError if it
    does not read."""
    opened = open_record(paths, seal)
    if opened is None:
        return None
    doc, whose = opened
    try:
        return Launch.model_validate(doc), whose
    except (ValueError, RecursionError, ValidationError) as exc:
        raise LaunchError(f"{launch_path(paths)}: not a launch record ({_first(exc)})") from None


def read_launch(paths: JobPaths, seal: Seal) -> Launch | None:
    """The run's record if it is this operator's (:func:`open_launch`), None if it has none (a run from before
    records existed, or a fresh job folder). :class:`ForeignRecord` if it is another's; LaunchError if it does not
    read."""
    opened = open_launch(paths, seal)
    return opened[0] if opened is not None else None


def begun(paths: JobPaths) -> bool:
    """Whether the run in ``paths`` has begun: its event log has a line. A sealed record in a folder whose run has
    not begun is a start its starter wrote (``run --detach`` writes it before it hands the run to a runner, so that
    `jobs` lists the run and `resume ID` finds it whatever happens to the runner): the process that takes the run
    starts it as a new run, not as a resume."""
    try:
        return paths.events.stat().st_size > 0
    except OSError:
        return False


def write_launch(paths: JobPaths, launch: Launch, seal: Seal) -> None:
    """The record, sealed (its MAC inside the same atomic write)."""
    text = seal.sealed_json(SEAL_KIND, paths.root, json.loads(launch.model_dump_json()))
    atomic_write_text(launch_path(paths), text, tmp_dir=paths.state / "tmp")


def shown_url(url: str) -> str:
    """What the engine alone may show of a notification URL: its scheme (a host may itself be a token, as
    Telegram's and Slack's are; the outer layer shows more through Apprise's own masking)."""
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        return "(a URL)"
    return f"{scheme}://…" if scheme.isalnum() else "(a URL)"


def describe(name: str, value: Any) -> str:
    """A setting's value as a view shows it (never a notification URL's token)."""
    if name == "notify":
        return ", ".join(shown_url(u) for u in value) or "none"
    if value is None:
        return "default"
    if name == "base_url":
        return shown_url_secret(str(value))
    return str(value)


# Resumed from the record, never changed by a resume (no flag sets them): recorded at a resume of an older record.
NOTIFY_KEPT = ("notify_on_end", "notify_remind")


def changes(old: Launch, new: Launch) -> list[str]:
    """``"model: gpt-4.1 -> gpt-4.1-mini"`` for each setting a resume changed."""
    return [f"{name}: {describe(name, getattr(old, name))} -> {describe(name, getattr(new, name))}"
            for name in (*RESUMED, *NOTIFY_KEPT) if getattr(old, name) != getattr(new, name)
            and not ((name in ADDED_LATER or name in NOTIFY_KEPT) and getattr(old, name) is None)]


def notify_timing(recorded: Launch | None, on_end: bool, remind: tuple[float, ...]) -> tuple[bool, tuple[float, ...]]:
    """[notify] on_end and remind_minutes for a run: as it began (its record), else the settings' now."""
    if recorded is None:
        return on_end, remind
    return (on_end if recorded.notify_on_end is None else recorded.notify_on_end,
            remind if recorded.notify_remind is None else recorded.notify_remind)


def identity_change(old: Launch, given: dict[str, Any]) -> list[str]:
    """The flags given at resume that would make the run another model's: ``["--provider openai (was
    scripted)"]``; a flag equal to the record is no change."""
    out = []
    for name in IDENTITY:
        value = given.get(name)
        if value is not None and value != getattr(old, name):
            out.append(f"--{name.replace('_', '-')} {value} (the run was started with {getattr(old, name)})")
    return out


def store_change(old: Launch, shown: str) -> str:
    """Why resuming with the store ``shown`` (shown_store_url of the setting) is refused ("" if it is not): the
    run's events and commands live in the store it was started with."""
    if old.store is None or old.store == shown:
        return ""
    return (f"this run was started with the store {old.store}; resuming it with {shown} would split its events "
            f"and commands between two stores: set AGENT_CONSOLE_STORE (or the config's store) back to it")


@dataclass(frozen=True)
class LaunchStart:
    """What a process starting a run hands the supervisor: the record to keep (written once the run's lock is
    held, never by a process that would be refused; sealed with ``seal``) and what the ``launch_settings`` event
    says."""

    record: Launch
    seal: Seal
    source: Literal["start", "resume"] = "start"
    changes: tuple[str, ...] = ()
    by: str = ""
    # The notification URLs as views may show them (the caller masks them with Apprise, which knows where
    # each service keeps its token); None: only the scheme is shown.
    shown_notify: tuple[str, ...] | None = None

    def event_fields(self) -> dict[str, Any]:
        r = self.record
        # The base URL as it may be shown (its user-info and secret query values hidden): the record keeps it whole
        # for the provider's call and a resume; the event reaches the log, the journal and a shared store.
        return {"source": self.source, "provider": r.provider, "model": r.model,
                "base_url": shown_url_secret(r.base_url) or None,
                "context_window": r.context_window or 0, "auto_restart": bool(r.auto_restart),
                "max_restarts": r.max_restarts or 0, "max_turns": r.max_turns or 0, "unconfined": r.unconfined,
                "notify": list(self.shown_notify) if self.shown_notify is not None else
                [shown_url(u) for u in r.notify], "budgets": dict(r.budgets),
                "changes": list(self.changes), "by": self.by}
