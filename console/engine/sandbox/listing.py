"""Listing: the regular files under a folder, depth-first in name order, without opening a file."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import stat

from console.engine.sandbox.answers import FileInfo, SandboxError, _show, os_error
from console.engine.sandbox.kernel import _DIR, _LOOK, _TMP_SUFFIX, WALK_DEPTH, _is_dir, _utf8_name
from console.engine.sandbox.resolve import Resolver
from console.engine.sandbox.root import Root

# A folder with more entries than this is listed in a bounded heap of the first ones a walk can use.
BIG_FOLDER = 50_000


def _walk_order(entry: os.DirEntry[str]) -> tuple[bool, str]:
    return _is_dir(entry), entry.name


class Listing:
    """The door's listing (see :meth:`Sandbox.walk`)."""

    def __init__(self, root: Root, resolver: Resolver) -> None:
        self._root = root
        self._resolver = resolver

    def walk(self, rel: str = ".", *, limit: int = 10_000, hidden_files: bool = True,
             skip_dirs: frozenset[str] = frozenset()) -> list[FileInfo]:
        r, parts, shown = self._resolver.check(rel if rel.strip() else ".")
        out: list[FileInfo] = []
        if limit <= 0:
            return out
        try:
            if not parts:
                self._walk_dir(self._root.fd, "", 0, out, limit, hidden_files, skip_dirs)
                return out
            fd = self._resolver.open_target(parts, shown, _LOOK)
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    dfd = os.open(".", _DIR, dir_fd=fd)  # re-opens that very folder, not a name
                    try:
                        self._walk_dir(dfd, r + "/", 0, out, limit, hidden_files, skip_dirs)
                    finally:
                        os.close(dfd)
                elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    out.append(FileInfo(r, "file", st.st_size, st.st_mtime, 1))
            finally:
                os.close(fd)
        except OSError as exc:
            raise os_error(shown, exc, "listed") from None
        return out

    def _walk_dir(self, dirfd: int, prefix: str, depth: int, out: list[FileInfo], limit: int,
                  hidden_files: bool, skip_dirs: frozenset[str] = frozenset()) -> None:
        at_root = self._root.dir_key(dirfd) == self._root.key
        try:
            with os.scandir(dirfd) as it:
                # A folder's own files before its sub-folders (as os.walk lists them): the top of a
                # listing is what the agent reads first.
                head = list(itertools.islice(it, BIG_FOLDER))
                if len(head) < BIG_FOLDER:
                    entries = sorted(head, key=_walk_order)
                else:
                    # A folder of millions of entries (a command makes 40,000 a second) is not held whole in
                    # the harness's memory: only the first entries, in the listing's order, of those the loop
                    # below can use (what it skips by name or kind is left out first), with room for those it
                    # can tell only by looking (a link out, a hard-linked file, an empty folder).
                    def usable(entry: os.DirEntry[str]) -> bool:
                        name = entry.name
                        if not _utf8_name(name) or name.endswith(_TMP_SUFFIX):
                            return False
                        if _is_dir(entry):
                            return not (name.startswith(".") or (at_root and name.casefold() == self._root.state_cf)
                                        or name in skip_dirs or depth + 1 > WALK_DEPTH)
                        if name.startswith(".") and not hidden_files:
                            return False
                        with contextlib.suppress(OSError):
                            return entry.is_symlink() or entry.is_file(follow_symlinks=False)
                        return False

                    room = (limit - len(out)) * 2 + 64
                    entries = heapq.nsmallest(room, filter(usable, itertools.chain(head, it)), key=_walk_order)
        except OSError:
            return
        for entry in entries:
            if len(out) >= limit:
                return
            name = entry.name
            if not _utf8_name(name) or name.endswith(_TMP_SUFFIX):
                continue
            rel = prefix + name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if (name.startswith(".") or (at_root and name.casefold() == self._root.state_cf)
                            or name in skip_dirs):
                        continue
                    if depth + 1 > WALK_DEPTH:
                        continue
                    sub = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=dirfd)
                    try:
                        self._walk_dir(sub, rel + "/", depth + 1, out, limit, hidden_files, skip_dirs)
                    finally:
                        os.close(sub)
                    continue
                if name.startswith(".") and not hidden_files:
                    continue
                if entry.is_symlink():
                    # Listed only if a read would accept it; resolved from the root by the same rules.
                    try:
                        fd = self._resolver.open_target(rel.split("/"), _show(rel), _LOOK)
                    except SandboxError:
                        continue
                    try:
                        st = os.fstat(fd)
                    finally:
                        os.close(fd)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                else:
                    continue  # FIFOs, sockets, devices: nothing the agent can use
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    out.append(FileInfo(rel, "file", st.st_size, st.st_mtime, 1))
            except OSError:
                continue
