"""A job folder's paths and the small files an operator hands the harness (job.toml, the settings file): read
safely, with a :class:`JobError` of one line naming the file when they cannot be used.

Apart from :mod:`console.engine.job` (whose pydantic models check what those files say) so that a command that
only needs to find things (``agent-console jobs``: the data dir, the runs' folders, their records) starts without
building a model: pydantic's import and first model cost more CPU than the whole listing (benchmarks/cli_start.py).
"""

from __future__ import annotations

import codecs
import functools
import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.engine.text import BINARY_SAMPLE, looks_binary, safe_text

STATE_DIR = ".console"
# job.toml and the settings file are small: anything larger is a mistake (or an attack), not a config.
MAX_CONFIG_BYTES = 1 << 20


class JobError(Exception):
    """A job folder or job.toml an operator must fix; the message says what and where."""


@dataclass(frozen=True)
class JobPaths:
    root: Path

    @property
    def run_id(self) -> str:
        """The run's short id (see :mod:`console.engine.runs`)."""
        from console.engine.runs import run_id

        return run_id(self.root)

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

    @functools.cached_property
    def state(self) -> Path:
        # Remembered: joined a dozen times a turn (the journal, the state files, their temp folder).
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


def within(root_real: Path, path: Path) -> bool:
    """True if ``path`` (after symlinks) is inside the job folder and outside the harness state."""
    try:
        rel = path.resolve().relative_to(root_real)
    except (ValueError, OSError):
        return False
    # Compared case-blind: on a case-insensitive disk ".Console" is the harness folder too.
    return not (rel.parts and rel.parts[0].lower() == STATE_DIR)


def one_line(text: str, limit: int = 200) -> str:
    """``text`` safe to print on one line: control characters (newlines, escape sequences) escaped, at most
    ``limit`` characters (0: no limit). Keys, values and paths in messages come from files anyone may write.
    (:func:`console.engine.text.safe_text` decides what becomes what, for every view.)"""
    return safe_text(text, one_line=True, limit=limit)


def _why(exc: Exception) -> str:
    """The reason of an OSError without its repeated path ("Permission denied"), on one line."""
    return one_line(getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)


def read_config_text(path: Path, what: str = "") -> str | None:
    """The text of a small config file (job.toml, the settings file), None if there is none.

    Anything else an operator must fix is a :class:`JobError` with one line naming the file: a directory,
    a FIFO or device (checked before opening, and opened non-blocking, so it cannot hang), a file over
    MAX_CONFIG_BYTES, one that is not UTF-8."""
    shown = one_line(str(path), 0) + (f" ({what})" if what else "")
    return read_operator_file(path, shown, MAX_CONFIG_BYTES, "a TOML file")


def read_operator_file(path: Path, shown: str, max_bytes: int, expected: str) -> str | None:
    """The UTF-8 text of a file the operator names (a config, a replay script), None if it does not exist.

    ``shown`` names the file in the one-line :class:`JobError`; ``expected`` says what it should be."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise JobError(f"{shown}: cannot be read ({_why(exc)})") from None
    if stat.S_ISDIR(info.st_mode):
        raise JobError(f"{shown}: is a directory; it must be {expected}")
    if not stat.S_ISREG(info.st_mode):
        raise JobError(f"{shown}: is not a regular file (a FIFO, socket or device); it must be {expected}")
    if info.st_size > max_bytes:
        raise JobError(f"{shown}: too large ({info.st_size:,} bytes; at most {max_bytes:,})")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the stat and the open
                raise JobError(f"{shown}: is not a regular file; it must be {expected}")
            chunks, size = [], 0
            while size <= max_bytes:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise JobError(f"{shown}: cannot be read ({_why(exc)})") from None
    if size > max_bytes:
        raise JobError(f"{shown}: too large (over {max_bytes:,} bytes)")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobError(f"{shown}: not UTF-8 text (byte {exc.start})") from None


def parse_config_toml(text: str, path: Path, what: str = "") -> dict[str, Any]:
    """TOML ``text`` of ``path`` as a dict; a JobError with one line naming the file if it does not parse."""
    shown = one_line(str(path), 0) + (f" ({what})" if what else "")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise JobError(f"{shown}: not valid TOML: {one_line(str(exc))}") from None
    except ValueError as exc:  # an integer of over 4,300 digits
        raise JobError(f"{shown}: not usable TOML: {one_line(str(exc), 80)}") from None
    except RecursionError:
        raise JobError(f"{shown}: not valid TOML: arrays or tables nested too deeply") from None


def validate_job_folder(root: Path) -> JobPaths:
    shown = one_line(str(root), 0)
    try:
        info = os.stat(root)
    except FileNotFoundError:
        raise JobError(f"{shown}: no such job folder") from None
    except (OSError, ValueError) as exc:
        raise JobError(f"{shown}: the job folder cannot be read ({_why(exc)})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise JobError(f"{shown}: a job is a folder with instructions.md, not a file")
    paths = JobPaths(root.resolve())
    try:
        mode = os.stat(paths.instructions).st_mode
    except FileNotFoundError:
        raise JobError(f"{shown}: missing instructions.md (every job needs one: it is the task)") from None
    except OSError as exc:
        raise JobError(f"{shown}: instructions.md cannot be read ({_why(exc)})") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, socket or device)"
        raise JobError(f"{shown}: instructions.md is {kind}; it must be a Markdown file with the task")
    if os.path.islink(paths.instructions):
        # The agent reads the job's files through the sandbox, which refuses a link leading out of the folder: a
        # folder handed over with instructions.md linked elsewhere (~/.ssh/...) ran every turn without its task.
        target = os.path.realpath(paths.instructions)
        if os.path.commonpath([target, str(paths.root)]) != str(paths.root):
            raise JobError(f"{shown}: instructions.md is a symbolic link to {one_line(target, 0)}, outside the job "
                           "folder, which the agent may not read; put the task's text in the folder's own "
                           "instructions.md")
    if os.path.islink(paths.job_toml):
        # A job's definition (its model, commands, guardrails) is the folder's own: a handed folder's job.toml
        # linked elsewhere made the harness read and use whatever file it named (the operator's own config, a
        # file of another job), and name that file's keys in its errors.
        target = os.path.realpath(paths.job_toml)
        if os.path.commonpath([target, str(paths.root)]) != str(paths.root):
            raise JobError(f"{shown}: job.toml is a symbolic link to {one_line(target, 0)}, outside the job folder; "
                           "a job's definition must be the folder's own file: copy it into the folder")
    return paths


def check_instructions(paths: JobPaths) -> None:
    """A :class:`JobError` of one line when the job's instructions.md is not text the agent can read: binary by
    read_file's own test (:func:`console.engine.text.looks_binary`), or not UTF-8.

    Checked before a run starts (``run``, ``submit``): such a file was accepted, and the run went round read_file
    ("is a binary file") and todo_complete ("no read of instructions.md") until it was stuck, at the model's cost.
    Read in chunks, so a large file is never held whole."""
    shown = one_line(str(paths.root), 0)
    decoder = codecs.getincrementaldecoder("utf-8")()
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    read = 0
    try:
        fd = os.open(paths.instructions, flags)
        try:
            while chunk := os.read(fd, 1 << 16):
                if read < BINARY_SAMPLE and looks_binary(chunk[:BINARY_SAMPLE - read]):
                    at = read + chunk.index(b"\x00")
                    raise JobError(f"{shown}: instructions.md is a binary file (a NUL byte at byte {at:,}), which "
                                   "the agent cannot read; it must be a Markdown file with the task")
                pending = len(decoder.getstate()[0])  # an incomplete character's bytes, kept from the last chunk
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    raise JobError(f"{shown}: instructions.md is not UTF-8 text (byte {read - pending + exc.start:,} "
                                   "is not); it must be a Markdown file with the task, saved as UTF-8") from None
                read += len(chunk)
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                raise JobError(f"{shown}: instructions.md is not UTF-8 text (it ends within a character, at byte "
                               f"{read - pending + exc.start:,}); it must be a Markdown file with "
                               "the task, saved as UTF-8") from None
        finally:
            os.close(fd)
    except OSError as exc:
        raise JobError(f"{shown}: instructions.md cannot be read ({_why(exc)})") from None
