"""The operator's seal: how this operator's harness tells its own records in a run folder from anything else there.

A job folder from elsewhere (a colleague's, a repository, a shared drive) may hold a ``.console/`` of its own: a
launch record naming another endpoint or ``unconfined``, a store id naming another run of the shared store, a
store-behind marker rewriting another run's row. None of it is this operator's, so none of it may be believed.

Each record the harness later trusts (``launch.json``, ``store-id``, ``store-behind.json``) carries a MAC
(HMAC-SHA256) of its own content inside the same atomic write, keyed by a secret of this operator: 32 random bytes
in the private data dir (``DATA/keys/seal.key``, 0600 in a 0700 folder, made once). The MAC also covers what the
record is and the folder it is for (its real path), so a record of one of the operator's runs copied into another
folder (or a store id into another run) does not hold there. One file, one MAC, one write: a kill -9 between two
files never makes the operator's own run look foreign. Nobody without the data dir can make a seal; a data dir
wiped (a new key) makes every sealed folder foreign, as another operator's are.

The runs made before seals existed are the operator's too, and their records have none. When the key is made, the
folders the data dir's own jobs table (``jobs.db``: written only by this operator's harness) knew then, and the run
folders ``run JOB`` made in its ``runs/`` (copies made without any .console/), are listed beside it
(``DATA/keys/legacy.json``); a record without a seal is believed in those folders only, each is sealed at its next
resume and dropped from the list (a shared store's rows are not asked: other machines write them). Why that is safe
enough: a folder at one of those paths replaced since by a job from elsewhere, before its resume, would be believed
once; the operator ran a job in that very folder before the upgrade, and the window closes at its first resume. Runs
started since the key exists are never on the list, so a job downloaded again to the folder of one of them is not.

The engine is given the data dir; it never reads settings.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import stat
from pathlib import Path
from typing import Any

from console.engine.atomic import PRIVATE_FILE, atomic_write_text, fsync_dir, private_dir

KEYS = "keys"  # in the data dir
KEY_NAME = "seal.key"
LEGACY_NAME = "legacy.json"
KEY_BYTES = 32
JOBS_DB = "jobs.db"  # the embedded jobs table, in the data dir (console.engine.store.embedded)
RUNS = "runs"  # the run folders `run JOB` makes, in the data dir
FIELD = "seal"  # the MAC's field in a sealed JSON record
_DOMAIN = b"agent-console seal 1\0"
_NO_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS)


class SealError(OSError):
    """The operator's key cannot be read or made: one line saying why and what to do."""

    def __str__(self) -> str:
        return str(self.strerror)


def canonical(data: dict[str, Any]) -> bytes:
    """A JSON record as the MAC sees it: every field but the MAC's, sorted, compact (the same bytes whoever wrote
    the file, and whatever its spacing)."""
    return json.dumps({k: v for k, v in data.items() if k != FIELD}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode()


def folder_of(folder: str | os.PathLike[str]) -> bytes:
    """The folder a record is for, as the MAC sees it: its real path."""
    return os.path.realpath(os.fspath(folder)).encode("utf-8", "surrogateescape")


def read_record(path: Path, limit: int) -> bytes | None:
    """A record's bytes (at most ``limit``), read without following a link or waiting on a pipe; None when there
    is no regular file there or it cannot be read (a record that is not one is none)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


class Seal:
    """This operator's key (see the module): makes and checks the MACs of the harness's records."""

    def __init__(self, data_dir: Path, key: bytes) -> None:
        self.data_dir = data_dir
        self._key = key

    def __repr__(self) -> str:  # never the key
        return f"Seal({self.data_dir})"

    @classmethod
    def of(cls, data_dir: Path) -> Seal:
        """The key of the data dir ``data_dir``, made (with its list of earlier runs) the first time."""
        folder = Path(data_dir) / KEYS
        path = folder / KEY_NAME
        key = _read_key(path)
        if key is None:
            _make_key(Path(data_dir), folder, path)
            key = _read_key(path)
            if key is None:
                raise SealError(errno.EIO, f"{path}: the operator's key was made but cannot be read back")
        return cls(Path(data_dir), key)

    @property
    def folder(self) -> Path:
        return self.data_dir / KEYS

    def mac(self, kind: str, folder: str | os.PathLike[str], body: bytes) -> str:
        message = b"".join((_DOMAIN, kind.encode(), b"\0", folder_of(folder), b"\0", body))
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def holds(self, kind: str, folder: str | os.PathLike[str], body: bytes, mac: object) -> bool:
        """Whether ``mac`` is this operator's MAC of ``body`` as a ``kind`` record of ``folder``."""
        if not isinstance(mac, str) or len(mac) != 64:
            return False
        return hmac.compare_digest(self.mac(kind, folder, body), mac)

    def sealed_json(self, kind: str, folder: str | os.PathLike[str], data: dict[str, Any]) -> str:
        """The text of ``data`` with its MAC (the field :data:`FIELD`), to write in one atomic write."""
        plain = {k: v for k, v in data.items() if k != FIELD}
        return json.dumps({**plain, FIELD: self.mac(kind, folder, canonical(plain))}, indent=1, ensure_ascii=False)

    def opens(self, kind: str, folder: str | os.PathLike[str], data: dict[str, Any]) -> bool:
        """Whether the JSON record ``data`` (as read) carries this operator's MAC for ``folder``."""
        return self.holds(kind, folder, canonical(data), data.get(FIELD))

    # -- the runs made before seals existed ------------------------------------------------------------------
    def earlier(self, folder: str | os.PathLike[str]) -> bool:
        """Whether ``folder`` held a run of this operator before the key was made (see the module)."""
        return folder_of(folder).decode("utf-8", "surrogateescape") in self._legacy()

    def adopted(self, folder: str | os.PathLike[str]) -> None:
        """``folder``'s records are sealed now: a record without a seal is never believed there again."""
        listed = self._legacy()
        where = folder_of(folder).decode("utf-8", "surrogateescape")
        if where in listed:
            with contextlib.suppress(OSError):
                atomic_write_text(self.folder / LEGACY_NAME, json.dumps({"paths": sorted(listed - {where})}),
                                  tmp_dir=self.folder)

    def _legacy(self) -> set[str]:
        try:
            with open(self.folder / LEGACY_NAME, "rb") as fh:
                data = json.loads(fh.read(64 << 20))
            paths = data.get("paths") if isinstance(data, dict) else None
        except (OSError, ValueError, RecursionError):
            return set()
        return {p for p in paths if isinstance(p, str)} if isinstance(paths, list) else set()


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SealError(exc.errno or errno.EIO, f"{path}: the operator's key cannot be read "
                        f"({exc.strerror or exc})") from None
    try:
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise SealError(errno.EINVAL, f"{path}: not an operator's key ({len(key)} bytes, not {KEY_BYTES}): move it "
                        "aside and a new one is made (the run folders sealed with it are then foreign)")
    return key


def _recorded(db_path: Path) -> list[str]:
    """Every run folder the data dir's jobs table knows ([] when there is none or it cannot be read). Read only
    (nothing is made), here rather than through console.engine.store, which seals its own records with this."""
    if not db_path.is_file():
        return []
    try:
        db = sqlite3.connect(f"{db_path.absolute().as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            return [p for (p,) in db.execute("SELECT path FROM jobs") if isinstance(p, str)]
        finally:
            db.close()
    except (sqlite3.Error, OSError):
        return []


def _copies(runs: Path) -> list[str]:
    """The run folders ``run JOB`` made in the data dir's ``runs/`` (the operator's only; each copy made without a
    .console/, so whatever .console/ one holds is the harness's): the runs of a shared store's operator, whose
    jobs table is not on this machine."""
    try:
        with os.scandir(runs) as it:
            return [e.path for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _make_key(data_dir: Path, folder: Path, path: Path) -> None:
    """The list of earlier runs first, then the key, which appears whole or not at all (a hard link of a complete
    temp file: the first of two processes making it at once wins, the other reads it)."""
    problem = private_dir(folder)
    if problem is not None:
        raise SealError(errno.EACCES, f"the operator's key cannot be kept: {problem}")
    found = [*_recorded(data_dir / JOBS_DB), *_copies(data_dir / RUNS)]
    earlier = sorted({folder_of(p).decode("utf-8", "surrogateescape") for p in found})
    try:
        atomic_write_text(folder / LEGACY_NAME, json.dumps({"paths": earlier}), tmp_dir=folder)
        tmp = folder / f".{KEY_NAME}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: its key is the one
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            # A file system without hard links: a rename, which would replace a key another process made in the
            # same instant (the first use of a data dir): that process's first seals would then not hold.
            if not path.exists():
                os.rename(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        fsync_dir(folder)
    except OSError as exc:
        raise SealError(exc.errno or errno.EIO, f"{path}: the operator's key cannot be made "
                        f"({exc.strerror or exc})") from None
