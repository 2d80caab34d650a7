"""The guards: the operator's protected files (and what a protected link leads to), the harness folder, the
tool docs' folder, a repository's control files (:mod:`.vcs_guard`), and the kinds of file that can be read or
replaced."""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from console.engine.repo_files import outside_paths
from console.engine.sandbox.answers import _LINK_REFUSED, SandboxError, _describe
from console.engine.sandbox.kernel import _DIR, _LOOK, _READ
from console.engine.sandbox.resolve import _Resolver
from console.engine.sandbox.vcs_guard import climb, landing_refusal, path_refusal


class _Guards(_Resolver):
    """Refuses what the agent must not touch, on the fd it is about to use."""

    def _is_link_at_root(self, name: str) -> bool:
        try:
            return stat.S_ISLNK(os.stat(name, dir_fd=self._root_fd, follow_symlinks=False).st_mode)
        except (OSError, ValueError):
            return False

    def _refresh_protected(self) -> None:
        for name in self._protected_links:
            try:
                dirfd, real = self._manual([name], name, "locate")
            except (SandboxError, OSError):
                continue
            try:
                st = os.fstat(dirfd)
                self._protected.add((st.st_dev, st.st_ino, real.casefold()))
            finally:
                self._close(dirfd)

    def _guard_harness(self, parent: int, name: str, shown: str) -> None:
        # A symlink to the root ("me -> .") puts the parent at the root although the string did not.
        if name.casefold() == self._state_cf and self._dir_key(parent) == self._root_key:
            raise SandboxError(self._harness(shown))

    def _guard_kept_folder(self, parts: list[str], shown: str) -> None:
        """A write whose path starts with the tool docs' folder (the string; _guard_name and the walk's mkdir
        catch the ways round it, a symlink to it or into it)."""
        if self._kept_dir is not None and parts and parts[0].casefold() == self._kept_dir[1]:
            raise SandboxError(self._kept_folder_refusal(shown))

    def _guard_vcs_path(self, parts: list[str], shown: str) -> None:
        """A write whose path names a repository's control files (the string; _guard_name looks where it lands)."""
        if (why := path_refusal(parts, shown)) is not None:
            raise SandboxError(why)

    def _repo_elsewhere(self) -> tuple[tuple[str, ...], ...]:
        """What the job folder's repository has git read or run from outside its .git (see repo_files)."""
        try:
            fd = os.open(".git", _DIR | os.O_NOFOLLOW, dir_fd=self._root_fd)
        except OSError:
            return ()
        try:
            return tuple(tuple(p.split("/")) for p in outside_paths(str(self.root), ".git", fd))
        finally:
            os.close(fd)

    def _real_parts(self, dirfd: int) -> list[str] | None:
        """The real components of the folder ``dirfd`` beneath the root (None if they cannot be told)."""
        if dirfd == self._root_fd:
            return []
        rel = self._proc_rel(dirfd)
        if rel is not None:
            return [] if rel == "." else rel.split("/")
        return climb(dirfd, self._root_key)

    def _guard_name(self, parent: int, name: str, shown: str) -> None:
        key = self._dir_key(parent)
        folded = name.casefold()
        if folded == self._state_cf and key == self._root_key:
            raise SandboxError(self._harness(shown))
        if self._in_kept_folder(parent, name):
            raise SandboxError(self._kept_folder_refusal(shown))
        if self._protected_links:
            self._refresh_protected()
        if (hint := self._kept.get((*key, folded))) is not None:
            raise SandboxError(f"'{shown}' is refused: the harness keeps it; read it, and {hint}.")
        if (*key, folded) in self._protected:
            raise SandboxError(f"'{shown}' is refused: it is part of the job's definition, which only the "
                               "operator may change.")
        # Where the write lands, whatever links the string went through: never a repository's control files.
        where = self._real_parts(parent)
        why = (landing_refusal(self._root_fd, where, name, shown, self._vcs_elsewhere) if where is not None
               else f"'{shown}' is refused: where it would be written could not be told; try again.")
        if why is not None:
            raise SandboxError(why)

    def _require_regular(self, st: os.stat_result, shown: str, verb: str) -> None:
        """Checks made on an open fd: only a regular file with a single link may be used."""
        mode = st.st_mode
        if stat.S_ISREG(mode):
            if st.st_nlink > 1:
                raise SandboxError(f"'{shown}' has several hard links (it may be a file outside the job folder); "
                                   "it cannot be used.")
            return
        if stat.S_ISDIR(mode):
            if verb == "read":
                raise SandboxError(f"'{shown}' is a folder; use list_files to see its content.")
            raise SandboxError(f"'{shown}' is a folder, not a file.")
        raise SandboxError(f"'{shown}' is {_describe(mode)}; only regular files can be {verb}.")

    def _require_replaceable(self, st: os.stat_result, shown: str) -> None:
        if stat.S_ISLNK(st.st_mode):
            raise SandboxError(_LINK_REFUSED.format(shown=shown))
        self._require_regular(st, shown, "written")

    # -- reading and listing ------------------------------------------------------------------------
    def _open_regular(self, rel: str) -> tuple[int, os.stat_result, str]:
        _, parts, shown = self._check(rel)
        try:
            fd = self._open_target(parts, shown, _READ)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
                # A socket, or a device without a driver, cannot even be opened: say what it is.
                mode = 0
                with contextlib.suppress(OSError, SandboxError):
                    look = self._open_target(parts, shown, _LOOK)
                    try:
                        mode = os.fstat(look).st_mode
                    finally:
                        os.close(look)
                if mode:
                    raise SandboxError(f"'{shown}' is {_describe(mode)}; only regular files can be read.") from None
            raise self._os_error(shown, exc, "read") from None
        try:
            st = os.fstat(fd)
            self._require_regular(st, shown, "read")
        except BaseException:
            os.close(fd)
            raise
        return fd, st, shown
