"""Resolution: the agent's path string checked once, then opened by file descriptor beneath the job root,
by openat2(RESOLVE_BENEATH) or by a component-by-component walk that follows relative links itself."""

from __future__ import annotations

import errno
import os
import stat
from typing import Literal

from console.engine.sandbox.answers import Absent, SandboxError, _show, loop, not_folder, outside, unstable
from console.engine.sandbox.kernel import (
    _DIR,
    _DRIVE,
    _O_PATH,
    _RESOLVE_BENEATH,
    _RESOLVE_NO_MAGICLINKS,
    _RESOLVE_NO_SYMLINKS,
    _RETRIES,
    MAX_DEPTH,
    MAX_LINKS,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    _openat2,
)
from console.engine.sandbox.root import Root
from console.engine.sandbox.vcs_guard import landing_refusal

CHECKED_KEPT = 256  # path strings whose check is remembered (see check)


class Resolver:
    """Opens what a checked path names, never leaving the job root nor landing in the harness folder."""

    def __init__(self, root: Root) -> None:
        self._root = root
        self._checked: dict[str, tuple[str, tuple[str, ...], str]] = {}

    # -- the string --------------------------------------------------------------------------------
    def check(self, user_path: str) -> tuple[str, list[str], str]:
        """(the normalised relative path, its components, the path as a message may show it), or SandboxError."""
        if self._root.fd < 0:
            raise SandboxError("the job folder is closed; nothing can be read or written")
        # What the string says depends on the string alone: the harness's own paths (main_plan.md, looked at twice a
        # turn) are checked once. A refused string is checked again each time. Each caller gets its own parts.
        known = self._checked.get(user_path)
        if known is not None:
            return known[0], list(known[1]), known[2]
        rel, parts, shown = self._check_string(user_path)
        if len(self._checked) >= CHECKED_KEPT:
            self._checked.clear()
        self._checked[user_path] = (rel, tuple(parts), shown)
        return rel, parts, shown

    def _check_string(self, user_path: str) -> tuple[str, list[str], str]:
        raw = user_path.strip()
        if not raw:
            raise SandboxError("the path is empty; give a path relative to the job folder, e.g. 'notes.md'")
        shown = _show(raw)
        if "\x00" in raw:
            raise SandboxError(f"'{shown}' is refused: it contains a NUL character; give a plain relative path.")
        if raw.startswith(("/", "\\", "~")) or _DRIVE.match(raw):
            raise SandboxError(f"'{shown}' is refused: absolute paths are not allowed. "
                               "Use a path relative to the job folder.")
        try:
            size = len(raw.encode("utf-8"))
        except UnicodeEncodeError:
            raise SandboxError(f"'{shown}' is refused: it contains a character that cannot be part of a file "
                               "name (a lone surrogate); use plain text.") from None
        if size > MAX_PATH_BYTES:
            raise SandboxError(f"'{raw[:80]}...' is refused: a path may be at most {MAX_PATH_BYTES} bytes long.")
        parts = [p for p in raw.replace("\\", "/").split("/") if p and p != "."]
        if ".." in parts:
            raise SandboxError(f"'{shown}' is refused: '..' would leave the job folder. Stay inside it.")
        for p in parts:
            if len(p) > MAX_NAME_BYTES // 4 and len(p.encode("utf-8")) > MAX_NAME_BYTES:
                raise SandboxError(f"'{raw[:80]}...' is refused: a file name may be at most 255 bytes long.")
        if len(parts) > MAX_DEPTH:
            raise SandboxError(f"'{shown[:80]}...' is refused: it is nested more than {MAX_DEPTH} folders deep.")
        if parts and parts[0].casefold() == self._root.state_cf:
            raise SandboxError(self._root.harness_refusal(shown))
        return "/".join(parts) or ".", parts, shown

    # -- resolution -------------------------------------------------------------------------------------
    def open_target(self, parts: list[str], shown: str, flags: int) -> int:
        """An fd on what ``parts`` names, symlinks beneath the root followed, opened with ``flags``."""
        if not parts:
            return os.open(".", flags, dir_fd=self._root.fd)
        # One name at the root is one openat(O_NOFOLLOW) either way, and cheaper without ctypes.
        if self._root.uses_openat2 and len(parts) > 1:
            fd = self._o2_open("/".join(parts), flags, shown)
            if fd >= 0:
                return fd
        return self._manual(parts, shown, "open", flags)[0]

    def open_parent(self, parts: list[str], shown: str, *, create: bool) -> tuple[int, str]:
        """(fd of the folder holding the final name, final name); the final name is not looked at.

        The fd may be the root fd: release it with ``Root.release``.
        """
        if len(parts) == 1:
            return self._root.fd, parts[0]
        if self._root.uses_openat2:
            fd = self._o2_open("/".join(parts[:-1]), _DIR, shown)
            if fd >= 0:
                return fd, parts[-1]
        return self._manual(parts, shown, "parent", create=create)

    def locate(self, parts: list[str], shown: str) -> tuple[int, str]:
        """As :meth:`open_parent`, but a final symlink is followed first: where a write through it lands."""
        return self._manual(parts, shown, "locate")

    def _o2_open(self, rel: str, flags: int, shown: str) -> int:
        """An fd via openat2, or -1 to let the manual walk decide (it words every other refusal)."""
        path = os.fsencode(rel)
        # First without symlinks: then the fd is where the checked string says, and /proc need not be asked.
        resolve = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS
        for _ in range(_RETRIES):
            fd = _openat2(self._root.fd, path, flags, resolve)
            if fd >= 0:
                if resolve & _RESOLVE_NO_SYMLINKS:
                    return fd
                where = self.proc_rel(fd)
                if where is None:  # the root moved or the file went away: the manual walk copes with both
                    os.close(fd)
                    return -1
                if where.split("/", 1)[0].casefold() == self._root.state_cf:
                    os.close(fd)
                    raise SandboxError(self._root.harness_refusal(shown))
                return fd
            err = -fd
            if err in (errno.EAGAIN, errno.EINTR):
                continue  # RESOLVE_BENEATH asks for a retry when a rename raced the lookup
            if err == errno.ELOOP and resolve & _RESOLVE_NO_SYMLINKS:
                resolve = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS
                continue
            if err == errno.EXDEV:
                raise SandboxError(outside(shown))
            if err == errno.ELOOP:
                raise SandboxError(loop(shown))
            return -1
        return -1

    def proc_rel(self, fd: int) -> str | None:
        """Where ``fd`` is beneath the root as the kernel tells it ("." for the root), or None."""
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        prefix = self._root.prefix
        if real == prefix[:-1] or real == prefix:
            return "."
        return real[len(prefix):] if real.startswith(prefix) else None

    def _manual(self, parts: list[str], shown: str, mode: Literal["open", "parent", "locate"],
                flags: int = 0, create: bool = False) -> tuple[int, str]:
        """Resolve ``parts`` one component at a time from the root fd, following relative symlinks here.

        mode "open": (fd of the target opened with ``flags``, "").
        mode "parent": (fd of the folder holding the final name, the final name), final name not looked at.
        mode "locate": as "parent", but a final symlink is followed first: where a write through it lands.
        Each folder is opened with O_NOFOLLOW from the fd of the one before, and ``..`` pops back to the fd
        we came from, so a path can never be re-read as a string, and never climb above the root.
        """
        root = self._root.fd
        stack = [root]
        where: list[str] = []
        todo = parts[::-1]
        links = retries = 0
        try:
            while todo:
                name = todo.pop()
                if not name or name == ".":
                    continue
                if name == "..":
                    if len(stack) == 1:
                        raise SandboxError(outside(shown))
                    os.close(stack.pop())
                    where.pop()
                    continue
                if len(stack) == 1 and name.casefold() == self._root.state_cf:
                    raise SandboxError(self._root.harness_refusal(shown))
                dirfd = stack[-1]
                last = not todo
                not_dir = False
                if last and mode == "parent":
                    return stack.pop(), name
                if last and mode == "locate":
                    try:
                        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                    except FileNotFoundError:
                        return stack.pop(), name  # absent: a write would create it right here
                    if not stat.S_ISLNK(st.st_mode):
                        return stack.pop(), name
                elif last:
                    try:
                        fd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=dirfd)
                    except FileNotFoundError:
                        raise Absent(f"'{shown}' does not exist. Use list_files to see what is there.") from None
                    except OSError as exc:
                        # ELOOP: a symlink. ENOTDIR (O_DIRECTORY asked): a symlink or not a folder.
                        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                            raise
                        not_dir = exc.errno == errno.ENOTDIR
                    else:
                        # O_PATH|O_NOFOLLOW opens a symlink itself instead of failing with ELOOP.
                        if not (flags & _O_PATH) or not stat.S_ISLNK(os.fstat(fd).st_mode):
                            return fd, ""
                        os.close(fd)
                else:
                    try:
                        fd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=dirfd)
                    except FileNotFoundError:
                        if not create:
                            missing = "/".join([*where, name])
                            raise Absent(f"'{shown}' does not exist: there is no folder '{_show(missing)}'. "
                                          "Use list_files to see what is there.") from None
                        if self._root.in_kept_folder(dirfd, name):  # a folder made in it (or it, made again)
                            raise SandboxError(self._root.kept_folder_refusal(shown)) from None
                        # Never a folder of a repository's control files, nor one completing a git directory's
                        # shape (the write itself would be refused, but the folder would stay).
                        if (why := landing_refusal(root, where, name, shown,
                                                   self._root.vcs_elsewhere)) is not None:
                            raise SandboxError(why) from None
                        try:
                            os.mkdir(name, 0o777, dir_fd=dirfd)
                        except FileExistsError:
                            retries = self._bump(retries, shown)
                        todo.append(name)
                        continue
                    except NotADirectoryError:
                        not_dir = True  # O_DIRECTORY|O_NOFOLLOW says ENOTDIR for a symlink too
                    else:
                        if len(stack) > MAX_DEPTH:
                            os.close(fd)
                            raise SandboxError(f"'{shown}' is refused: it is nested more than {MAX_DEPTH} "
                                               "folders deep.")
                        stack.append(fd)
                        where.append(name)
                        continue
                # The name is a symlink (or was a moment ago), or something that is not a folder.
                try:
                    target = os.readlink(name, dir_fd=dirfd)
                except OSError as exc:
                    if exc.errno == errno.EINVAL and (not last or not_dir):
                        raise not_folder(shown, dirfd, name, where) from None
                    if exc.errno not in (errno.EINVAL, errno.ENOENT):
                        raise
                    retries = self._bump(retries, shown)  # swapped under us: look again
                    todo.append(name)
                    continue
                links += 1
                if links > MAX_LINKS:
                    raise SandboxError(loop(shown))
                if target.startswith("/"):
                    raise SandboxError(outside(shown))
                todo.extend(reversed(target.split("/")))
            if mode != "open":
                raise Absent(f"'{shown}' does not exist. Use list_files to see what is there.")
            # A symlink that ends in '.' or '..': the target is the folder we hold.
            return os.open(".", flags & ~os.O_NOFOLLOW, dir_fd=stack[-1]), ""
        finally:
            for fd in stack:
                if fd != root:
                    os.close(fd)

    def _bump(self, retries: int, shown: str) -> int:
        if retries >= _RETRIES:
            raise SandboxError(unstable(shown))
        return retries + 1
