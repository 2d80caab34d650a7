"""A job on disk: its folder layout, its job.toml, and fresh run folders.

A job is a folder with ``instructions.md`` and an optional ``job.toml``. The
harness keeps its own state in ``JOB/.console/`` so the agent's files and the
harness's files never mix.
"""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import os
import re
import stat
import types
import typing
import urllib.parse
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# The folder's paths and the reading of the operator's small files live apart (console.engine.job_files: no
# pydantic there, so `jobs` starts fast); every name is still importable from here.
from console.engine.job_files import MAX_CONFIG_BYTES as MAX_CONFIG_BYTES
from console.engine.job_files import STATE_DIR as STATE_DIR
from console.engine.job_files import JobError as JobError
from console.engine.job_files import JobPaths as JobPaths
from console.engine.job_files import _why as _why
from console.engine.job_files import one_line as one_line
from console.engine.job_files import parse_config_toml as parse_config_toml
from console.engine.job_files import read_config_text as read_config_text
from console.engine.job_files import read_operator_file as read_operator_file
from console.engine.job_files import validate_job_folder as validate_job_folder
from console.engine.job_files import within as within
from console.engine.run_copy import CopyError, copy_job
from console.engine.run_setting_check import check_fields, setting_field

# The bounds of the numbers an operator may set are the run settings' table's.
from console.engine.run_setting_specs import JOB_KEYS, MAX_CONTEXT_WINDOW, MAX_MEGABYTES
from console.engine.url_secrets import scrub_url

MAX_URL_CHARS = 2048


def validate_base_url(value: str) -> str:
    """``value`` if it is a usable API base URL (http or https, with a host); ValueError saying why if not.

    Shared by job.toml's [model] base_url, the settings and the --base-url flag, so a bad URL is refused
    at start-up with the key's name instead of failing inside an SDK with a traceback."""
    if len(value) > MAX_URL_CHARS:
        raise ValueError(f"a URL of at most {MAX_URL_CHARS} characters is expected, not {len(value)}")
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise ValueError("a URL has no spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(value)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in 0-65535
    except ValueError as exc:  # the parser's words may quote a part of the URL: never its password
        raise ValueError(f"not a valid URL ({scrub_url(str(exc), value)})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError("the URL must start with http:// or https:// (e.g. http://127.0.0.1:11434/v1)")
    if not host:
        raise ValueError("the URL has no host (e.g. http://127.0.0.1:11434/v1)")
    if not host.isascii():
        raise ValueError("the URL's host is not ASCII; write an international name in its xn-- (punycode) form")
    if all(ch in "0123456789." for ch in host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"not a valid URL ('{one_line(host, 60)}' is not an IPv4 address)") from None
    hostinfo = parts.netloc.rpartition("@")[2]
    if "[" in hostinfo or "]" in hostinfo:
        inside, _, after = hostinfo.removeprefix("[").partition("]")
        try:
            if not hostinfo.startswith("[") or not (after == "" or after.startswith(":")):
                raise ValueError
            ipaddress.IPv6Address(inside.split("%", 1)[0])
        except ValueError:
            raise ValueError(f"not a valid URL ('{one_line(hostinfo, 60)}' is not an [IPv6 address])") from None
    return value


class StrictSection(BaseModel):
    # strict: a TOML value of the wrong type is an error, never coerced ("yes" is not a bool, "10" not an
    # int, true not a float; an int is still accepted for a float). inf and nan are refused too.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class ModelPrice(StrictSection):
    """``[prices."MODEL"]`` (job.toml or the config file): US dollars per million tokens, and the window."""

    input: float | None = Field(default=None, ge=0, lt=1e6)
    output: float | None = Field(default=None, ge=0, lt=1e6)
    cached_input: float | None = Field(default=None, ge=0, lt=1e6)
    cache_write: float | None = Field(default=None, ge=0, lt=1e6)
    context_window: int | None = Field(default=None, gt=0, le=MAX_CONTEXT_WINDOW)

    @model_validator(mode="after")
    def _both(self) -> ModelPrice:
        if (self.input is None) != (self.output is None):
            raise ValueError("give both input and output (US dollars per million tokens), or neither")
        return self


class ModelSection(StrictSection):
    # A provider registry name (scripted, openai, anthropic, ...): checked against the registry when the run's
    # settings are resolved (the engine does not know the providers).
    provider: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    name: str | None = None
    base_url: str | None = None
    speed: float | None = setting_field("speed", optional=True)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else validate_base_url(value)


class ContextSection(StrictSection):
    window: int | None = setting_field("context_window", optional=True)
    soft_threshold: float | None = setting_field("soft_threshold", optional=True)
    hard_threshold: float | None = setting_field("hard_threshold", optional=True)
    summary: Literal["deterministic", "llm"] | None = None
    # Whole turns a restart carries into the next session (seed 004; None: the settings' value, 3 by default).
    carryover_turns: int | None = setting_field("carryover_turns", optional=True)
    # Working memory in the prompts (seed 003's toggle; None: the settings' value, on by default): the last tasks
    # by intent and the active blockers. Off: the prompts carry none of it (seed 003's "legacy prompts").
    requires_context: bool | None = None
    # The file catalogue and its find_files tool (seed 003, phase 2; None: the settings' value, off by default).
    file_index: bool | None = None
    # In-place compaction's threshold, in tokens (None: the settings' value; 0: only at phase boundaries and
    # restarts). See console.engine.context.pressure.
    compact_at: int | None = setting_field("compact_at", optional=True)

    @model_validator(mode="after")
    def _ordered(self) -> ContextSection:
        if self.soft_threshold and self.hard_threshold and self.soft_threshold >= self.hard_threshold:
            raise ValueError("soft_threshold must be below hard_threshold")
        return self


class LimitsSection(StrictSection):
    max_turns: int | None = setting_field("max_turns", optional=True)
    max_restarts: int | None = setting_field("max_restarts", optional=True)
    auto_restart: bool | None = None
    # The most one tool call may write, and the most the job folder may hold, in MB (None: the settings' value).
    max_write_mb: float | None = setting_field("max_write_mb", optional=True)
    max_job_mb: float | None = setting_field("max_job_mb", optional=True)


# Each section holds the settings the table gives it ([model], [context], [limits]: console.engine.run_setting_specs),
# with their types and bounds: a setting added to one and not the other fails here, at import.
for _section in (ModelSection, ContextSection, LimitsSection):
    check_fields(_section, JOB_KEYS[_section.__name__.removesuffix("Section").lower()], optional=True)
del _section


def written_key(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """The key as the file writes it: pydantic's location of an error, without what it adds of its own (the
    tag of a union's member: ``guardrails.feedback.0.static.on_file_created``), found by following ``data``, the
    file's values; where the file has nothing more to follow, the rest is kept as it is."""
    out: list[Any] = []
    for n, part in enumerate(loc):
        if isinstance(data, dict):
            if part in data:
                out.append(part)
                data = data[part]
                continue
            if data.get("type") == part or (n + 1 < len(loc) and loc[n + 1] in data):
                continue  # a step the file does not write (a union member's tag): the next one is the file's
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            out.append(part)
            data = data[part]
            continue
        return (*out, *loc[n:])
    return tuple(out)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The one model an annotation holds (``X``, ``X | None``, ``list[X]``, ``dict[str, X]``), else None (a
    union of several models: which one is meant is not known here)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _model_of(args[0])
    if origin in (typing.Union, types.UnionType):
        models = [m for m in map(_model_of, args) if m is not None]
        return models[0] if len(models) == 1 else None
    if origin in (list, tuple, dict) and args:
        return _model_of(args[-1] if origin is dict else args[0])
    return None


def known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys ``model`` accepts at the place of the key ``loc`` (pydantic's location of an unknown key);
    [] where that place cannot be followed (a union's member)."""
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if current is None:
            return []
        if isinstance(part, int) or part not in current.model_fields:
            continue  # a list's index or a dict's key: the model of its items is already the current one
        current = _model_of(current.model_fields[part].annotation)
    if current is None:
        return []
    return [f.alias or name for name, f in current.model_fields.items()]


def did_you_mean(key: Any, known: list[str], where: str = "") -> str:
    """``did you mean 'context.window'?`` for the known key closest to ``key`` (a typo; ``where``: the dotted
    place of both), else nothing."""
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6) if known else []
    return f"did you mean '{where}{one_line(close[0], 80)}'? " if close else ""


def format_validation_error(source: str, exc: ValidationError,
                            keys: str | Callable[[tuple[Any, ...]], str] = "docs/job.md lists job.toml's keys",
                            data: Any = None, model: type[BaseModel] | None = None) -> str:
    """One line naming ``source`` and each bad key, e.g. ``job.toml: key 'limits.max_turns': ...``. ``data``:
    the file's values, to name each key as the file writes it (see :func:`written_key`); ``model``: the model
    validated, whose closest key an unknown one is offered (``did you mean 'context'?``)."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = written_key(tuple(err["loc"]), data) if data is not None else err["loc"]
        key = ".".join(one_line(str(p), 80) for p in loc) or "(top level)"
        msg = one_line(err["msg"]).removeprefix("Value error, ")  # pydantic's prefix says nothing to a reader
        if err["type"] == "extra_forbidden":  # the keys accepted there (``keys`` of the key's place, if it says)
            guess = did_you_mean(loc[-1], known_keys(model, tuple(err["loc"])), key.rpartition(".")[0] + "." * (
                len(loc) > 1)) if model and loc else ""
            msg = f"unknown key ({guess or 'check the spelling; '}{keys(tuple(loc)) if callable(keys) else keys})"
        parts.append(f"key '{key}': {msg}")
    if len(parts) > 5:
        parts[5:] = [f"and {len(parts) - 5} more"]
    return f"{one_line(source, 0)}: " + "; ".join(parts)


# In every run's .console/: its version control leaves it alone. A job run in place in a repository would
# otherwise offer .console/ to `git add -A` (launch.json keeps the endpoint the run calls, credentials in its URL
# included; events.jsonl the whole conversation). "*" ignores the file itself too, as a venv's does.
GITIGNORE = ".gitignore"
GITIGNORE_TEXT = b"# agent-console: a run's own state, never committed\n*\n"


def keep_out_of_version_control(paths: JobPaths) -> None:
    """Make ``.console/.gitignore`` hold :data:`GITIGNORE_TEXT`, written after the run's record (so it is never
    what makes a folder look like a start: console.engine.provenance). Whatever is there otherwise (other text,
    a FIFO, a link, a hard link to another file) is replaced by one rename of a new file from ``.console/tmp``:
    never opened for writing, so never waited on or written through. Never raises: a folder that cannot take it
    still runs."""
    target = paths.state / GITIGNORE
    with contextlib.suppress(OSError):
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 4096) == GITIGNORE_TEXT:
                return
        finally:
            os.close(fd)
    try:
        tmp_dir = paths.state / "tmp"
        tmp_dir.mkdir(mode=0o700, exist_ok=True)
        tmp = tmp_dir / f"{GITIGNORE}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, GITIGNORE_TEXT)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        pass


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "job"


def prepare_run(source: Path, runs_dir: Path, now: datetime, *, max_job_mb: float = 1024.0,
                say: Callable[[str], None] | None = None) -> JobPaths:
    """Copy a job into a fresh run folder, so running a sample never writes into the checkout.

    The harness state of the source (if it was run in place before) is not copied: a new run starts clean. The
    copy is bounded by ``max_job_mb`` (the run's own) and carries nothing its repositories would run
    (:mod:`console.engine.run_copy`); ``say`` gets one line for each entry skipped or changed, and a line before
    a large copy. A :class:`JobError` when the job is over its bound; OSError when a file cannot be copied.
    """
    src = validate_job_folder(source)
    stamp = now.strftime("%Y%m%d-%H%M%S")
    base = runs_dir / f"{_slug(src.root.name)}-{stamp}"
    runs_dir.mkdir(parents=True, exist_ok=True)
    dest, n = base, 1
    while True:
        # Claimed by making it (never looked at, then made): runs of one job started in the same second by
        # processes of their own (a script's `run --detach`, the fleet, serve) each take a folder of their own.
        try:
            os.mkdir(dest, 0o700)
            break
        except FileExistsError:
            n += 1
            dest = base.with_name(f"{base.name}-{n}")
    try:
        # A copy that fails half-way (a file it cannot read, a full disk) leaves no stray run folder.
        lines = copy_job(src.root, dest, max_bytes=int(max_job_mb * 2**20), skip=(STATE_DIR, "__pycache__"),
                         say=say, claimed=True)
    except CopyError as exc:
        # A run in place is held to the same bound (its writes are refused past it): the way on is a larger bound
        # or a smaller job, never --in-place.
        toml = src.root / "job.toml"
        where = (f"in {one_line(str(toml), 0)}" if toml.exists() else
                 f"in a job.toml beside its instructions.md ({one_line(str(toml), 0)})")
        # The number as job.toml takes it (no thousands separator); one over the most a job may set is no way on.
        fix = (f"; set max_job_mb under [limits] {where} to {exc.needed_mb} or more, or make the job smaller"
               if exc.needed_mb is not None and exc.needed_mb <= MAX_MEGABYTES else
               "; make the job smaller" if exc.needed_mb is not None else
               f"; run it where it is: agent-console run --in-place {one_line(str(source), 0)}" if exc.in_place else "")
        raise JobError(f"{one_line(str(source), 0)}: cannot be copied to a run folder: {exc}{fix}") from None
    if os.path.lexists(src.state):  # a run of it before, or a .console/ that came with the folder: said, not used
        lines.insert(0, f"left out {STATE_DIR}/: the job's own harness state (of a run in place, or one it came "
                        "with); this run starts clean and uses nothing of it")
    for line in lines:
        if say is not None:
            say(line)
    return JobPaths(dest)
