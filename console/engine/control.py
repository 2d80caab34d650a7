"""Operator commands: one control API, in-process or through the job's inbox on disk.

The console calls :meth:`ControlChannel.submit`; another shell (``agent-console
approve JOB``) drops a JSON file into ``JOB/.console/inbox/``. The engine
drains both at turn boundaries (and while paused or waiting for an approval),
so every command is applied at a point where the conversation is whole, and
every command yields ``operator_command`` events (received, then applied or
rejected), which is how the sender learns what happened.

The inbox is read as untrusted input: whatever lies there (a folder, a pipe, a
link, a huge file, bytes that are not UTF-8, a name that is not a command's, a
file of another user, thousands of them) is moved aside as ``NAME.rejected`` and
reported once, and never stands in front of a valid command, which is applied in
the order it was sent. The inbox is bounded: :func:`write_inbox` refuses past
:data:`MAX_PENDING` unread commands, and only the newest :data:`KEEP_REJECTED`
rejected files are kept.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import secrets
import shutil
import stat
import threading
import time
import uuid
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from console.engine import doorbell as bell
from console.engine.atomic import TMP_SUFFIX, atomic_write_text, private_dir
from console.engine.commands import AnyCommand, CommandError, CommandModel, CommandName, describe, parse_command
from console.engine.doorbell import LOOK
from console.engine.job_files import JobPaths
from console.engine.run_lock import ACQUIRE_PATIENCE, RunLock
from console.engine.text import safe_text

__all__ = ["ACQUIRE_PATIENCE", "Command", "ControlChannel", "InboxFull", "RunLock", "make_command", "write_inbox"]

# How often the engine looks at the inbox while a model is streaming.
POLL_INTERVAL = 0.2
# While the run's inbox is missing (it is made by the first command), how often the run's folder is looked at: a
# folder deleted or moved away under a running run leaves it writing into files nobody will read, its agent's tools
# failing, and no inbox any operator command can reach. The run is stopped then, as by a signal (FOLDER_GONE).
FOLDER_LOOK = 2.0
FOLDER_GONE = "its folder's removal"
# The sources of a stop a signal sent (the command-line run's handlers), or the run's folder gone from under it: the
# run ends interrupted, not stopped by its operator (console.engine.operator).
SIGNALS = frozenset({"Ctrl+C", "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", FOLDER_GONE})
# The inbox is looked at by one stat of its folder first, and listed only when that changed since the last listing
# (a command written, renamed in, removed: each sets the folder's mtime and ctime), or RELIST seconds after it: an
# open, two reads of the folder and a close on every look cost a run more CPU than anything else it does while it
# waits for its model (issue 37). A listing is trusted to be the last one needed only when the folder's mtime was
# MTIME_SLACK older than the look: a file system stamps a change with a clock coarser than the wall's (a jiffy, or a
# whole second on some), so a change right after a look could carry the mtime the look saw.
RELIST = 10.0
MTIME_SLACK_NS = 2_000_000_000
# Commands read per look at the inbox (a flood waits for the next look instead of stalling a turn).
MAX_INBOX = 100
# Inbox entries handled per look, commands and junk alike: ten thousand junk files are moved aside over a few
# looks; none of them counts against MAX_INBOX, so none can stand in front of a command.
MAX_INBOX_WORK = 1000
# Unread commands the inbox may hold: write_inbox refuses more (a script sending `pause` in a loop to a job
# no process runs would otherwise fill the disk).
MAX_PENDING = 1000
# Rejected files kept in the inbox for the operator to look at; beyond this many the oldest are deleted.
KEEP_REJECTED = 100
REJECTED = ".rejected"
# Rejected files reported one by one per look; the rest of that look's are counted in one more line.
REPORT_EACH = 20
MAX_COMMAND_BYTES = 64 * 1024
# A temp file of write_inbox older than this was left by a writer that was killed: it is removed.
STALE_TEMP_SECONDS = 120.0


class Command(BaseModel):
    """One command on its way to a run: the typed command (:mod:`console.engine.commands`) in an envelope
    saying who sent it, when, and to which run. On disk (an inbox file) and in ``operator_command`` events the
    command is ``command`` (its kind) and ``args``; both are checked against the typed union when read, so a
    file that names no command, carries an argument no command has, or a text too long is no Command."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12], min_length=1, max_length=64)
    command: CommandName
    args: dict[str, Any] = Field(default_factory=dict)
    source: str = Field(default="api", max_length=64)
    issued_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    # The run (RunLock's id) that was running when the command was sent; None: no run was.
    run: str | None = Field(default=None, max_length=64)
    _body: AnyCommand = PrivateAttr()

    @model_validator(mode="after")
    def _typed(self) -> Command:
        self._body = parse_command(self.command, self.args)  # a CommandError is a ValueError: invalid
        self.args = self._body.args()
        return self

    @property
    def body(self) -> AnyCommand:
        """The typed command: what the engine dispatches on."""
        return self._body


def make_command(command: str | AnyCommand, args: dict[str, Any] | None = None, **envelope: Any) -> Command:
    """A :class:`Command` of a typed command, or of a name and its arguments; :class:`CommandError` if they are
    no command (never a half-checked one)."""
    if isinstance(command, CommandModel):
        if args:
            raise CommandError(f"{command.kind}: arguments given twice")
        body: AnyCommand = command  # every CommandModel is a member of the union
    else:
        body = parse_command(command, args)
    try:
        return Command(command=body.kind, args=body.args(), **envelope)
    except ValidationError as exc:
        raise CommandError(f"{body.kind}: {describe(exc)}") from None


def write_inbox(paths: JobPaths, command: str | AnyCommand, args: dict[str, Any] | None = None, source: str = "cli",
                run: str | None = None, command_id: str | None = None) -> Command:
    """Queue a command for a run from another process. Atomic: the engine never reads half a file.

    The command is addressed to the run that holds the job's lock now (``run`` overrides), so a stop that
    arrives as that run ends is discarded by the next run instead of stopping it. :class:`CommandError` (before
    anything is written) for a command that is none."""
    holder = RunLock(paths).holder_info()
    if run is None:
        run = holder.get("run") if holder is not None else None
        run = run if isinstance(run, str) and 0 < len(run) <= 64 else None
    # command_id: the shared store's id of the command (the store's link dedupes a redelivery by it).
    cmd = make_command(command, args, source=source, run=run, **({"id": command_id} if command_id else {}))
    # A run reads the inbox at every turn boundary, clearing MAX_INBOX_WORK entries a look: only with none
    # reading can commands pile up (never a reason to refuse a stop to a run flooded with junk).
    if holder is None and (waiting := pending_commands(paths.inbox)) >= MAX_PENDING:
        raise InboxFull(errno.ENOSPC, f"{waiting} files wait unread in {paths.inbox} (at most {MAX_PENDING}) and no "
                        "process runs the job to read them: run it, or delete the ones not wanted")
    for folder in (paths.state, paths.inbox):  # made (or kept) the operator's only: 0700
        private_dir(folder, follow=False)
    name = f"{time.time_ns():020d}-{cmd.id}.json"
    atomic_write_text(paths.inbox / name, cmd.model_dump_json(), durable=False)
    bell.ring(paths.state / bell.NAME)  # the run looks now, not at its next look (see console.engine.doorbell)
    return cmd


class InboxFull(OSError):
    """The inbox holds :data:`MAX_PENDING` unread commands already; the message says so."""

    def __str__(self) -> str:
        return str(self.strerror)


def pending_commands(inbox: Path) -> int:
    """How many files in ``inbox`` wait to be read (rejected files and temp files left out)."""
    try:
        names = os.listdir(inbox)
    except OSError:
        return 0
    return sum(1 for n in names if not n.startswith(".") and not n.endswith(REJECTED))


def shown_name(name: str, limit: int = 120) -> str:
    """A file name as one line of plain text: bytes that are not UTF-8 as ``\\xff``, control characters as
    escapes (a name is not trusted to be printable), cut at ``limit`` characters."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = safe_text(text, one_line=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _not_a_command(name: str, st: os.stat_result) -> str | None:
    """Why the inbox entry ``name`` (its lstat/fstat ``st``) cannot be a command file, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link, not a command file"
    if stat.S_ISDIR(st.st_mode):
        return "a folder, not a command file"
    if not stat.S_ISREG(st.st_mode):
        return "a named pipe, socket or device, not a command file"
    if st.st_uid != os.geteuid():
        return (f"owned by uid {st.st_uid}, not by the user running this job (uid {os.geteuid()}): refused "
                "(a command must come from the job's own user)")
    if st.st_nlink > 1:
        return "a hard link to another file, not a command file"
    if name.startswith(".") or not name.endswith(".json"):
        return "not a command file (their names end in .json)"
    if st.st_size > MAX_COMMAND_BYTES:
        return f"{st.st_size} bytes, more than the {MAX_COMMAND_BYTES} a command may have"
    return None


class ControlChannel:
    """Thread-safe command intake. ``poll`` returns new commands in arrival order."""

    def __init__(self, inbox: Path | None = None) -> None:
        self.inbox = inbox
        self._queue: queue.Queue[Command] = queue.Queue()
        self._last_poll = 0.0
        self.wake = threading.Event()
        # One line per inbox file that was not a command (each reported once; the engine empties the list).
        self.invalid: list[str] = []
        # The run reading this inbox (RunLock's id); run-scoped commands sent to another run are stale.
        self.run_id: str | None = None
        self.stale: list[Command] = []
        # Inbox entries that could be neither moved aside nor removed: reported once, then passed over.
        self._ignored: set[str] = set()
        # The run folder (the inbox's grandparent), held open from the channel's making (its inode cannot be
        # another folder's while it is held), and when it was last looked at; ``gone`` says once it is no longer
        # at its path (see FOLDER_LOOK).
        self._folder = self._hold_folder()
        self._folder_at = time.monotonic()
        # Rung by a command's sender and by this process (listen(): the run that holds the job; None otherwise).
        self.doorbell: bell.Doorbell | None = None
        self.gone: str | None = None
        # The inbox folder as its last trusted listing saw it (see RELIST), and when that listing was made.
        self._listed: tuple[int, int, int, int, int, int] | None = None
        self._listed_at = 0.0
        self._listed_all = True  # the last listing went through every entry (not cut by MAX_INBOX or MAX_INBOX_WORK)

    def listen(self) -> None:
        """Open the run's doorbell (the process holding the job's lock, once): its waits then wake when a command
        comes, and look by themselves every :data:`LOOK` only. Without one (no inbox, or it cannot be made)
        they look every :data:`POLL_INTERVAL`, as before."""
        if self.doorbell is None and self.inbox is not None:
            self.doorbell = bell.Doorbell.open(self.inbox.parent / bell.NAME)

    def close(self) -> None:
        """Close the doorbell (the run ends); a later ring reaches nobody, and its sender does not mind."""
        door, self.doorbell = self.doorbell, None
        if door is not None:
            door.close()

    @property
    def look_every(self) -> float:
        """Seconds between a waiting run's own looks at its inbox (see :meth:`listen`)."""
        return LOOK if self.doorbell is not None else POLL_INTERVAL

    def submit(self, command: str | AnyCommand, args: dict[str, Any] | None = None, source: str = "console") -> Command:
        """Queue a command in-process; :class:`CommandError` (nothing queued) for one that is no command."""
        cmd = make_command(command, args, source=source)
        self._queue.put(cmd)
        self.wake.set()
        if (door := self.doorbell) is not None:
            door.ring()  # the loop waits on the doorbell, not on ``wake``, once it has one
        return cmd

    def idle(self) -> bool:
        """Nothing to hand over now: no command submitted in-process, the inbox not due for a look (``poll`` with
        ``force`` False would return nothing), nothing to report. Read on every streamed item: a few attribute
        reads, where a poll costs a queue drain and a clock read."""
        return (not self._queue.qsize() and time.monotonic() - self._last_poll < POLL_INTERVAL
                and not self.invalid and not self.stale
                and not (self.doorbell is not None and self.doorbell.operator_rang))

    def take_submitted(self) -> list[Command]:
        """The in-process commands not yet taken (the inbox's are left for the run's next process)."""
        out: list[Command] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def poll(self, force: bool = True) -> list[Command]:
        """Commands submitted in-process (always) and from the inbox (rate-limited unless ``force``)."""
        out: list[Command] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                break
        now = time.monotonic()
        rang = self.doorbell is not None and self.doorbell.operator_rang
        if force or rang or now - self._last_poll >= POLL_INTERVAL:
            self._last_poll = now
            if rang and self.doorbell is not None:
                self.doorbell.operator_rang = False  # cleared before the look: a ring during it is looked at again
            out += self._drain_inbox()
        return out

    def _drain_inbox(self) -> list[Command]:
        if self.inbox is None:
            return []
        wall, now = time.time_ns(), time.monotonic()
        try:
            st = os.stat(self.inbox, follow_symlinks=False)
        except OSError:
            return self._folder_gone()  # no inbox yet, or no folder any more
        seen = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink, st.st_size)
        if seen == self._listed and now - self._listed_at < RELIST:
            return []  # nothing written, renamed or removed in it since its last listing
        self._listed = None
        try:
            # By descriptor, and never through a link: every name below is looked up in this very folder.
            dfd = os.open(self.inbox, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            # Not a folder (the next run's start moves it aside), or no folder any more.
            return self._folder_gone()
        self._listed_all = True
        try:
            out = self._drain(dfd)
        finally:
            os.close(dfd)
        if self._listed_all and st.st_mtime_ns < wall - MTIME_SLACK_NS:
            # The stat came before the listing: a change since is a later stamp (and a change the drain made, a
            # command removed, one more listing). Left untrusted, the next look lists again.
            self._listed, self._listed_at = seen, now
        return out

    def _hold_folder(self) -> int | None:
        """A descriptor of the run folder (O_PATH: it reads nothing), closed with the channel; None when there is no
        inbox to tell the folder by, or no folder."""
        if self.inbox is None:
            return None
        try:
            fd = os.open(self.inbox.parent.parent, getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        weakref.finalize(self, os.close, fd)
        return fd

    def _folder_gone(self) -> list[Command]:
        """A stop (source FOLDER_GONE), once, when the run's folder was deleted, or moved away (whatever is at its
        path now is another); looked at every FOLDER_LOOK seconds at most (two stats, while there is no inbox)."""
        now = time.monotonic()
        if self.gone is not None or self._folder is None or now - self._folder_at < FOLDER_LOOK:
            return []
        self._folder_at = now
        assert self.inbox is not None
        try:
            held = os.fstat(self._folder)
            if held.st_nlink > 0:  # not deleted: is it still the folder at the run's path?
                st = os.stat(self.inbox.parent.parent)
                if (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino):
                    return []
        except FileNotFoundError:
            pass
        except OSError:
            return []  # cannot be told (a permission, a stale handle): not gone
        self.gone = f"its folder {self.inbox.parent.parent} was deleted or moved away"
        return [make_command("stop", source=FOLDER_GONE)]

    def _drain(self, dfd: int) -> list[Command]:
        try:
            names = sorted(os.listdir(dfd))
        except OSError:
            return []
        self._ignored &= set(names)
        out: list[Command] = []
        rejected: list[str] = []
        reports: list[str] = []
        work = 0
        for name in names:
            if name.endswith(REJECTED):
                rejected.append(name)
                continue
            if name in self._ignored:
                continue
            if len(out) >= MAX_INBOX or work >= MAX_INBOX_WORK:
                self._listed_all = False  # the next look lists again, whatever the folder's stat says
                break  # the rest at the next look (a few tenths of a second later), still in order
            work += 1
            if name.startswith(".") and name.endswith(TMP_SUFFIX):
                self._old_temp(dfd, name)  # a command being written (atomic_write_text's temp file)
                continue
            data, why = self._read(dfd, name)
            cmd = None
            if why is None and data is not None:
                try:
                    cmd = Command.model_validate_json(data)
                except ValidationError as exc:
                    err = exc.errors(include_url=False, include_input=False)[0]
                    at = ".".join(str(p) for p in err["loc"])[:60]
                    msg = err["msg"].removeprefix("Value error, ")
                    why = f"not a command: {msg[:200]}{f' at {at}' if at else ''}"
                except (ValueError, RecursionError) as exc:
                    why = f"not a command: {(str(exc).splitlines() or [type(exc).__name__])[0][:200]}"
            if why is not None:
                # Kept for the operator to look at (never applied), out of the way of the commands behind it.
                moved = self._set_aside(dfd, name)
                if moved:
                    rejected.append(moved)
                reports.append(f"{shown_name(name)}: {why}; {self._where(name, moved)}")
                continue
            if cmd is None:
                continue  # gone meanwhile
            try:
                os.unlink(name, dir_fd=dfd)
            except FileNotFoundError:
                pass
            except OSError:
                self._ignored.add(name)  # read once, applied once: never read again while it stays
            if cmd.run is not None and cmd.run != self.run_id:
                # Sent to a run that ended before reading it (a stop during a stall): not for this run.
                self.stale.append(cmd)
                continue
            out.append(cmd)
        self.invalid += reports[:REPORT_EACH]
        if len(reports) > REPORT_EACH:
            self.invalid.append(f"and {len(reports) - REPORT_EACH} more files in the inbox that were not commands, "
                                f"moved aside as *{REJECTED}")
        if len(rejected) > KEEP_REJECTED:
            self._prune(dfd, rejected)
        return out

    @staticmethod
    def _read(dfd: int, name: str) -> tuple[bytes | None, str | None]:
        """(the bytes of a command file, None), (None, why it is not one), or (None, None) if it is gone.

        Looked at before it is opened: a pipe, a socket or a device is never opened, a link never followed,
        a huge file never read, a file of another user never trusted."""
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            return None, f"cannot be looked at ({exc.strerror or exc})"
        if why := _not_a_command(name, st):
            return None, why
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            return None, ("a symbolic link, not a command file" if exc.errno == errno.ELOOP
                          else f"cannot be opened ({exc.strerror or exc})")
        try:
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) and (why := _not_a_command(name, fst)):
                return None, why  # replaced between the look and the open
            chunks, size = [], 0
            while size <= MAX_COMMAND_BYTES:
                chunk = os.read(fd, MAX_COMMAND_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as exc:
            return None, f"cannot be read ({exc.strerror or exc})"
        finally:
            os.close(fd)
        if size > MAX_COMMAND_BYTES:
            return None, f"grew past the {MAX_COMMAND_BYTES} bytes a command may have while it was read"
        return b"".join(chunks), None

    def _set_aside(self, dfd: int, name: str) -> str | None:
        """Rename ``name`` to ``NAME.rejected`` (never over another file); the new name, or None."""
        stem = name.removesuffix(".json") if name.endswith(".json") else name
        candidates = [f"{stem}{REJECTED}", *(f"{stem}.{n}{REJECTED}" for n in range(2, 6)),
                      f"{time.time_ns():020d}-{secrets.token_hex(4)}{REJECTED}"]
        for dest in candidates:
            try:
                os.stat(dest, dir_fd=dfd, follow_symlinks=False)
                continue  # taken: a rename would replace it
            except FileNotFoundError:
                pass
            except OSError:
                continue  # a name too long, say: the next candidate is short
            try:
                os.rename(name, dest, src_dir_fd=dfd, dst_dir_fd=dfd)
                return dest
            except OSError as exc:
                if exc.errno == errno.ENAMETOOLONG:
                    continue
                break
        try:
            os.unlink(name, dir_fd=dfd)  # not kept, but out of the way
        except OSError:
            self._ignored.add(name)
        return None

    def _where(self, name: str, moved: str | None) -> str:
        if moved is not None:
            return f"moved aside as inbox/{shown_name(moved)}"
        if name in self._ignored:
            return "it can be neither moved nor removed, and is passed over from now on"
        return "removed (it could not be moved aside)"

    @staticmethod
    def _old_temp(dfd: int, name: str) -> None:
        """Remove a temp file a killed writer left (a live writer renames its own within milliseconds)."""
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and time.time() - st.st_mtime > STALE_TEMP_SECONDS:
                os.unlink(name, dir_fd=dfd)
        except OSError:
            pass

    @staticmethod
    def _prune(dfd: int, rejected: list[str]) -> None:
        """Keep the newest KEEP_REJECTED rejected files (by when they were moved aside: a rename sets ctime)."""
        aged = []
        for name in rejected:
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                aged.append((st.st_ctime_ns, name, stat.S_ISDIR(st.st_mode)))
        aged.sort()
        for _ctime, name, is_dir in aged[: max(0, len(aged) - KEEP_REJECTED)]:
            with contextlib.suppress(OSError):
                if is_dir:
                    shutil.rmtree(name, dir_fd=dfd)
                else:
                    os.unlink(name, dir_fd=dfd)

    def wait(self, seconds: float) -> None:
        """Sleep until a command arrives in-process (or, with a doorbell, is rung) or ``seconds`` pass (the inbox
        is polled by the caller)."""
        if (door := self.doorbell) is not None:
            door.wait(seconds)
            self.wake.clear()
            return
        self.wake.wait(seconds)
        self.wake.clear()
