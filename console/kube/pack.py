"""The job folder on its way to the pod: a gzip'd tar small enough for a ConfigMap, and its unpacking there.

The pod's init container unpacks the archive onto the volume once: if the run folder is already there (a pod
replaced after an eviction, a kill or a node's loss), it is left as it is, so the run resumes instead of starting
over. The unpacking goes to a temporary folder beside the run folder and is renamed into place when complete:
an init container killed half-way leaves no half-made run folder, and the next one unpacks again.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from console.engine.job_files import STATE_DIR, one_line

if sys.version_info >= (3, 11, 4) or TYPE_CHECKING:
    import tarfile
else:
    # Extraction filters (PEP 706: the "data" filter that unpack_job relies on) came in 3.11.4; before it (Debian
    # 12's python3 is 3.11.2) the same tarfile module, backported (the backports.tarfile dependency for those
    # Pythons). The whole module, not its filter alone: the filter's checks are tied to its own TarInfo and errors.
    from backports import tarfile

ARCHIVE_NAME = "job.tar.gz"
# A ConfigMap holds at most 1 MiB (etcd's object limit), and binaryData is base64 (4/3 larger) beside the object's
# other fields: the archive may take 700 KiB.
MAX_ARCHIVE_BYTES = 700 * 1024
# What the archive may unpack to (a gzip bomb in a ConfigMap someone else edited must not fill the volume).
MAX_UNPACKED_BYTES = 256 << 20
MAX_MEMBERS = 20_000
SKIPPED = (STATE_DIR, "__pycache__")  # as a fresh run folder (console.engine.job.prepare_run): no harness state
MIN_SECRET_CHARS = 8  # shorter values would match by chance (and are no real key)


class PackError(ValueError):
    """The job folder cannot go to the cluster as it is: one line saying why (never a secret's value)."""


def _files(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED)
        here = Path(dirpath)
        out.extend(here / d for d in dirnames)
        out.extend(here / f for f in sorted(filenames))
    return out


def pack_job(root: Path, secrets: Iterable[tuple[str, str]] = ()) -> bytes:
    """The job folder as a reproducible gzip'd tar (sorted, owner 0, gzip without a timestamp).

    ``secrets`` are (what it is, its value): a file holding one of the values is refused, naming the file and
    what it holds, never the value (the archive goes into a ConfigMap, which anyone who may read the namespace
    reads)."""
    needles = [(what, value.encode()) for what, value in secrets if len(value) >= MIN_SECRET_CHARS]
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w",
                                                                             format=tarfile.PAX_FORMAT) as tar:
        for path in _files(root):
            rel = path.relative_to(root).as_posix()
            info = path.lstat()
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                raise PackError(f"{one_line(rel)}: not a regular file, folder or link (a FIFO, socket or device): "
                                "it cannot be sent to the cluster")
            if stat.S_ISLNK(info.st_mode):
                target = os.readlink(path)
                inside = not os.path.isabs(target) and os.path.normpath(
                    os.path.join(os.path.dirname(rel), target)).split(os.sep)[0] != ".."
                if not inside:
                    # The pod's unpacking refuses it (a link out of the run folder): said here, before anything is made.
                    raise PackError(f"{one_line(rel)}: a link that leads out of the job folder; copy what it names "
                                    "into the job instead")
            elif stat.S_ISREG(info.st_mode) and info.st_size > MAX_UNPACKED_BYTES:
                raise PackError(f"{one_line(rel)}: {info.st_size >> 20:,} MiB; a job sent to the cluster carries "
                                f"at most {MAX_ARCHIVE_BYTES // 1024} KiB compressed")
            member = tar.gettarinfo(str(path), arcname=rel)
            member.uid = member.gid = 0
            member.uname = member.gname = ""
            member.mode = 0o755 if member.isdir() else 0o644 | (member.mode & 0o111)
            if member.isreg():
                data = path.read_bytes()
                for what, needle in needles:
                    if needle in data:
                        raise PackError(f"{one_line(rel)} holds the value of {what}: it would be uploaded to the "
                                        "cluster in a ConfigMap; remove it from the job (the pod reads the key "
                                        "from the Secret)")
                tar.addfile(member, io.BytesIO(data))
            else:
                tar.addfile(member)
            if buf.tell() > MAX_ARCHIVE_BYTES:  # a big folder stops here, not after it is all read
                raise PackError(_too_big(buf.tell()))
    archive = buf.getvalue()
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise PackError(_too_big(len(archive)))
    return archive


def _too_big(size: int) -> str:
    return (f"the job folder is over {size // 1024:,} KiB compressed; a ConfigMap carries at most "
            f"{MAX_ARCHIVE_BYTES // 1024} KiB (larger jobs are not supported yet: trim what the job carries)")


def unpack_job(archive: Path, dest: Path) -> str:
    """Unpack ``archive`` to ``dest`` unless ``dest`` is there already; what was done, as one line."""
    if dest.is_dir():
        return f"{dest} is on the volume: the run resumes from it"
    tmp = dest.with_name(f".{dest.name}.unpacking")
    shutil.rmtree(tmp, ignore_errors=True)  # an earlier init container killed half-way
    with tarfile.open(archive, mode="r:gz") as tar:
        members = tar.getmembers()
        if len(members) > MAX_MEMBERS or sum(m.size for m in members) > MAX_UNPACKED_BYTES:
            raise PackError(f"{archive}: more than {MAX_MEMBERS} files or {MAX_UNPACKED_BYTES >> 20} MiB unpacked")
        tmp.mkdir(parents=True, mode=0o700)
        # The "data" filter refuses absolute paths, "..", links leading out, devices; and drops set-id bits.
        tar.extractall(tmp, members=members, filter="data")
    os.replace(tmp, dest)
    return f"unpacked the job ({len(members)} entries) to {dest}"


def main(argv: list[str] | None = None) -> int:
    """``python -m console.kube.pack ARCHIVE DEST``: the init container's command."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m console.kube.pack ARCHIVE DEST", file=sys.stderr)
        return 2
    try:
        print(unpack_job(Path(args[0]), Path(args[1])), flush=True)
    except (OSError, tarfile.TarError, PackError) as exc:
        print(f"agent-console: cannot unpack the job: {one_line(str(exc))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
