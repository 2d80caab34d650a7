"""The copy ``run JOB`` makes of a job folder: bounded, and carrying nothing the operator's own git would run.

A job folder from elsewhere is input to check (DESIGN.md, "The border"). Copied without bounds, a 12 KB sparse
file became 1 GB on disk, and a device node in the folder copied /dev/zero until the disk was full; copied as it
was, a ``.git/config`` with ``core.fsmonitor`` (or an executable hook) ran as the operator at their first
``git status`` in the run folder, which lives in their data dir. So the copy is a walk of its own, by file
descriptor, never following a link:

* bounded by the run's own ``max_job_mb``, counted as the run counts its folder
  (:mod:`console.engine.tools.folder_size`: each entry at least 512 bytes, a file at the larger of its size and
  its blocks, so a sparse file at its full size): measured before anything is written (a job over it is refused
  in one line), and counted again while copying (a file that grows meanwhile cannot push it past);
* regular files are copied sparse (``SEEK_DATA``/``SEEK_HOLE``: only their data is read and written, the holes
  stay holes), up to the size they had when opened; folders and links as they are (a link is copied as a link);
* named pipes, sockets and devices are skipped, one line each: nothing of a run needs them, and reading one
  blocks forever or never ends;
* in every repository of the job (:mod:`console.engine.vcs`), a config keeps its plain keys only, hooks are
  copied without their exec bit, a rebase's ``exec`` lines and a ``commondir`` or ``.git`` file naming a folder
  outside the copy are dropped, a Mercurial ``hgrc`` beyond ``[paths]`` and jj's repository config are left out;
  one line says what, for each;
* setuid and setgid bits are never copied; the harness folder (``.console``) and ``__pycache__`` are left out;
* a copy that fails leaves no run folder behind.

Stdlib only (and the rules' module).
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from console.engine.repo_files import DIR_FLAGS, Kind, control_files, make_harmless, repo_kind, seen

# What one entry costs at least, and how deep a job may nest folders: as the run's own measure of its folder
# (console.engine.tools.folder_size), so a copy the run could not hold is refused before it is made.
ENTRY_BYTES = 512
MAX_DEPTH = 256
MB = 2**20
# A copy this large says so before it starts (it may take a while).
SAY_ABOVE = 64 * MB
# Lines naming skipped or changed entries, one each, at most this many (then how many more).
MAX_LINES = 20
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class CopyError(Exception):
    """The job cannot be copied as it is; the message (one line) says why. ``needed_mb``: the max_job_mb that
    would hold it, when its size is the reason; ``in_place``: a run in place would take it as it is."""

    def __init__(self, message: str, needed_mb: int | None = None, in_place: bool = False) -> None:
        super().__init__(message)
        self.needed_mb = needed_mb
        self.in_place = in_place


def _free(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on ``folder``'s file system (None: it cannot be asked)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def megabytes(n: int, over: int | None = None) -> str:
    """``n`` bytes in MB as the operator reads a bound: to the nearest tenth, whole where that is whole; a size
    said to be ``over`` a bound is rounded up where the nearest would not read above it (so a job just over
    1024 MB never reads "1,024.0 MB, over 1024 MB")."""
    tenths = round(n * 10 / MB)
    if over is not None and tenths <= round(over * 10 / MB):  # as the bound reads, not as it is
        tenths = max(math.ceil(n * 10 / MB), round(over * 10 / MB) + 1)
    return f"{tenths // 10:,}" if tenths % 10 == 0 else f"{tenths / 10:,.1f}"


def _cost(st: os.stat_result) -> int:
    return max(st.st_size, st.st_blocks * 512, ENTRY_BYTES)


def _entries(fd: int, skip: frozenset[str]) -> list[os.DirEntry[str]]:
    with os.scandir(fd) as it:
        return sorted((e for e in it if e.name not in skip), key=lambda e: e.name)


def measure(src: str, skip: frozenset[str] = frozenset()) -> tuple[int, int, int, int]:
    """(bytes as a run counts them, files, files smaller on disk than their size, bytes the copy will take on disk)
    of the job folder ``src`` without the ``skip`` names, at any depth (a file with several links, once per link:
    the copy makes each a file). :class:`CopyError` if it nests folders deeper than a copy goes."""
    total = files = sparse = on_disk = 0

    def walk(fd: int, rel: str, depth: int) -> None:
        nonlocal total, files, sparse, on_disk
        for entry in _entries(fd, skip):
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            total += _cost(st)
            files += stat.S_ISREG(st.st_mode)
            sparse += stat.S_ISREG(st.st_mode) and st.st_blocks * 512 < st.st_size
            on_disk += st.st_blocks * 512 if stat.S_ISREG(st.st_mode) else ENTRY_BYTES
            if stat.S_ISDIR(st.st_mode):
                path = rel + entry.name
                if depth + 1 >= MAX_DEPTH:
                    raise CopyError(f"it nests folders more than {MAX_DEPTH} deep (at '{path[:200]}'), deeper "
                                    "than a copy goes", in_place=True)
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                try:
                    walk(sub, path + "/", depth + 1)
                finally:
                    os.close(sub)

    top = os.open(src, DIR_FLAGS)
    try:
        walk(top, "", 0)
    finally:
        os.close(top)
    return total, files, sparse, on_disk


@dataclass
class _Copy:
    """One copy under way: its bound, what it counted, and what it has to say."""

    dest: str
    limit: int
    skip: frozenset[str]
    total: int = 0
    lines: list[str] = field(default_factory=list)
    more: int = 0

    def line(self, text: str) -> None:
        if len(self.lines) < MAX_LINES:
            self.lines.append(text)
        else:
            self.more += 1

    def count(self, n: int, rel: str) -> None:
        self.total += n
        if self.total > self.limit:
            raise CopyError(f"it grew past its max_job_mb of {megabytes(self.limit)} MB while it was copied (at "
                            f"'{rel[:200]}'): something writes in it; let it finish, then run again")


def copy_job(src: Path, dest: Path, *, max_bytes: int, skip: tuple[str, ...] = (),
             say: Callable[[str], None] | None = None, claimed: bool = False) -> list[str]:
    """Copy the job folder ``src`` into ``dest`` (which must not exist; ``claimed``: an empty folder the caller
    just made for it) within ``max_bytes``, as a run counts them; returns one line for each entry skipped or
    changed. ``say`` is told first when the copy is large. A :class:`CopyError` (one line) when the job is over its
    bound or nests too deep, an OSError when a file cannot be read or written: then nothing is left at ``dest``
    (a claimed folder included)."""
    try:
        return _copy_job(src, dest, max_bytes, skip, say, claimed)
    except BaseException:
        if claimed:  # (a folder copy_job made itself is removed by it)
            shutil.rmtree(dest, ignore_errors=True)
        raise


def _copy_job(src: Path, dest: Path, max_bytes: int, skip: tuple[str, ...], say: Callable[[str], None] | None,
              claimed: bool) -> list[str]:
    names = frozenset(skip)
    size, files, sparse, on_disk = measure(str(src), names)
    if size > max_bytes:
        # "Smaller on disk": sparse, or compressed by the file system; the run counts them at their size.
        counted = (f" ({sparse:,} file{'s' * (sparse != 1)} smaller on disk than {'their' if sparse != 1 else 'its'} "
                   "size counted at it)" if sparse else "")
        raise CopyError(f"it holds {megabytes(size, over=max_bytes)} MB as a run counts it{counted}, over its "
                        f"max_job_mb of {megabytes(max_bytes)} MB", needed_mb=math.ceil(size / MB))
    free = _free(dest.parent)
    if free is not None and on_disk > free:
        # Copied, it would fill the disk (other programs' writes failing meanwhile) before failing itself.
        raise CopyError(f"its copy would take about {megabytes(on_disk)} MB on disk and {dest.parent} has "
                        f"{megabytes(free)} MB free", in_place=True)
    if say is not None and size >= SAY_ABOVE:
        say(f"copying {size / MB:,.0f} MB ({files:,} files) of {src} into {dest}")
    job = _Copy(str(dest), max_bytes, names)
    if not claimed:
        os.mkdir(dest, 0o700)
    try:
        top = os.open(src, DIR_FLAGS)
        try:
            out = os.open(dest, DIR_FLAGS)
            try:
                _copy_folder(job, top, out, "", 0)
                kind = repo_kind(top, os.path.basename(os.path.realpath(src)))
                if kind is not None:  # the job folder itself is a repository folder (a bare one)
                    _harmless_repo(job, out, "", kind)
                os.fchmod(out, stat.S_IMODE(os.fstat(top).st_mode) & 0o1777 | 0o700)
            finally:
                os.close(out)
        finally:
            os.close(top)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    if job.more:
        job.lines.append(f"and {job.more} more entries skipped or changed")
    return job.lines


def _copy_folder(job: _Copy, src: int, dest: int, rel: str, depth: int) -> None:
    """Copy what the folder ``src`` holds into ``dest`` (at ``rel`` in the job), then make its repositories'
    control files harmless."""
    for entry in _entries(src, job.skip):
        name = entry.name
        path = rel + name
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # gone since it was listed
        job.count(_cost(st), path)
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            if depth + 1 >= MAX_DEPTH:
                raise CopyError(f"it nests folders more than {MAX_DEPTH} deep (at '{path[:200]}'), deeper than a copy "
                                "goes", in_place=True)
            os.mkdir(name, 0o700, dir_fd=dest)  # filled first, given its own mode after
            sfd = os.open(name, DIR_FLAGS, dir_fd=src)
            try:
                dfd = os.open(name, DIR_FLAGS, dir_fd=dest)
                try:
                    _copy_folder(job, sfd, dfd, path + "/", depth + 1)
                    kind = repo_kind(sfd, name)
                    if kind is not None:
                        _harmless_repo(job, dfd, path, kind)
                    os.fchmod(dfd, stat.S_IMODE(mode) & 0o1777)
                    os.utime(dfd, ns=(st.st_atime_ns, st.st_mtime_ns))
                finally:
                    os.close(dfd)
            finally:
                os.close(sfd)
        elif stat.S_ISLNK(mode):
            target = os.readlink(name, dir_fd=src)
            os.symlink(target, name, dir_fd=dest)
            if _leaves(rel, target):
                # The agent's tools never follow a link out of the run's folder: what it names is not there for
                # the agent (a job's `notes -> ../shared/notes`, silently absent from every listing).
                job.line(f"'{path[:200]}' is a link out of the job folder (to {target[:200]}): the agent cannot read "
                         "what it names; copy that into the job folder to give it to the agent")
        elif stat.S_ISREG(mode):
            _copy_file(job, src, dest, name, path)
            if name.casefold() == ".git":
                _gitfile(job, dest, name, path)
        else:
            job.line(f"skipped '{path[:200]}': it is {_what(mode)}, and a run copies files, folders and links only")


def _leaves(rel: str, target: str) -> bool:
    """Whether a link at ``rel`` (its folder in the job, "" or ending in "/") to ``target`` names a place outside
    the job folder, by its text (the copy's link resolves where the run folder is, not where the job was)."""
    if os.path.isabs(target):
        return True
    return os.path.normpath(os.path.join(rel, target)).split(os.sep)[0] == ".."


def _what(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def _copy_file(job: _Copy, src: int, dest: int, name: str, path: str) -> None:
    """Copy one regular file, sparse: only its data (SEEK_DATA/SEEK_HOLE), up to the size it had when opened; its
    mode without setuid, setgid or sticky bits, and its times."""
    sfd = os.open(name, _READ, dir_fd=src)
    try:
        st = os.fstat(sfd)
        if not stat.S_ISREG(st.st_mode):  # replaced since it was listed
            job.line(f"skipped '{path[:200]}': it is {_what(st.st_mode)}, and a run copies files, folders and links "
                     "only")
            return
        dfd = os.open(name, _NEW, 0o600, dir_fd=dest)
        try:
            size = st.st_size
            for start, end in _data(sfd, size):
                _copy_range(sfd, dfd, start, end)
            os.ftruncate(dfd, size)
            os.fchmod(dfd, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(dfd, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _data(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The ranges of a file holding data, below ``size``: all of it where the file system cannot say."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return  # nothing but a hole from pos on
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                yield pos, size
                return
            raise
        if start >= size:
            return
        yield start, end
        pos = end


def _copy_range(src: int, dest: int, start: int, end: int) -> None:
    pos = start
    while pos < end:
        data = os.pread(src, min(_CHUNK, end - pos), pos)
        if not data:
            return  # the file shrank meanwhile
        view = memoryview(data)
        at = pos
        while view:
            n = os.pwrite(dest, view, at)
            view, at = view[n:], at + n
        pos += len(data)


def _harmless_repo(job: _Copy, fd: int, path: str, kind: Kind) -> None:
    """The repository folder copied at ``path`` (open as ``fd``) without what its control files would run."""
    for dirfd, name, where, role in control_files(fd, path, kind):
        now = seen(dirfd, name, keep=True)
        if now is None:
            continue
        what = make_harmless(dirfd, name, where, role, now, None, job.dest, outside_ok=False)
        if what:
            job.line(f"in the copy, {what}")


def _gitfile(job: _Copy, dest: int, name: str, path: str) -> None:
    """A ``.git`` file (``gitdir: ...``) naming a folder by a relative path out of the copy: such a folder is no
    longer the job's (it may be another run's), so the file is not kept."""
    found = seen(dest, name, keep=True)
    if found is None or found.data is None:
        return
    text = found.data.decode("utf-8", "replace").strip()
    if not text.startswith("gitdir:"):
        return
    target = text.removeprefix("gitdir:").strip()
    if os.path.isabs(target):
        return  # where the job's own repository is (a worktree's, a submodule's): the operator's
    base = os.path.realpath(job.dest)
    real = os.path.realpath(os.path.join(base, os.path.dirname(path), target))
    if real == base or real.startswith(base + "/"):
        return
    os.unlink(name, dir_fd=dest)
    job.line(f"in the copy, removed '{path[:200]}': it names by a relative path a folder outside the copy, which git "
             "would take for this folder's repository")
