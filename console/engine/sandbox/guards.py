"""The guards: the operator's protected files (and what a protected link leads to), the harness folder, the
tool docs' folder, a repository's control files (:mod:`.vcs_guard`), and the kinds of file that can be read or
replaced."""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from console.engine.sandbox.answers import _LINK_REFUSED, SandboxError, _describe, os_error
from console.engine.sandbox.kernel import _LOOK, _READ
from console.engine.sandbox.resolve import Resolver
from console.engine.sandbox.root import Root
from console.engine.sandbox.vcs_guard import climb, landing_refusal, path_refusal

# Job files only the harness writes (the agent reads them), and what the agent does instead of writing one.
HARNESS_KEPT = {"experiences.md": "record an entry with record_experience(section, text)"}


class Guards:
    """Refuses what the agent must not touch, on the fd it is about to use.

    ``protected``: the operator's files at the root (job.toml, instructions.md), never written by the agent.
    """

    def __init__(self, root: Root, resolver: Resolver, protected: tuple[str, ...]) -> None:
        self._root = root
        self._resolver = resolver
        self._protected: set[tuple[int, int, str]] = {(*root.key, p.casefold()) for p in protected}
        # Files the harness writes for the agent to read (experiences.md), with what to do instead.
        self._kept = {(*root.key, name.casefold()): hint for name, hint in HARNESS_KEPT.items()}
        # A protected file that is a symlink protects the file it leads to; re-located on every write,
        # because the target (or its folder) may not exist yet and could otherwise be created.
        self._protected_links = tuple(p for p in protected if self._is_link_at_root(p))
        self._refresh_protected()

    def _is_link_at_root(self, name: str) -> bool:
        try:
            return stat.S_ISLNK(os.stat(name, dir_fd=self._root.fd, follow_symlinks=False).st_mode)
        except (OSError, ValueError):
            return False

    def _refresh_protected(self) -> None:
        for name in self._protected_links:
            try:
                dirfd, real = self._resolver.locate([name], name)
            except (SandboxError, OSError):
                continue
            try:
                st = os.fstat(dirfd)
                self._protected.add((st.st_dev, st.st_ino, real.casefold()))
            finally:
                self._root.release(dirfd)

    # -- on the agent's string ------------------------------------------------------------------------
    def file_path(self, user_path: str) -> tuple[str, list[str], str]:
        """The checked path of a file to be written (see :meth:`Resolver.check`): refused if it starts with the
        tool docs' folder or names a repository's control files (the string: :meth:`name` looks where it lands,
        and the walk's mkdir catches the ways round it), or names the root."""
        rel, parts, shown = self._resolver.check(user_path)
        kept = self._root.kept_dir
        if kept is not None and parts and parts[0].casefold() == kept[1]:
            raise SandboxError(self._root.kept_folder_refusal(shown))
        if (why := path_refusal(parts, shown)) is not None:
            raise SandboxError(why)
        if not parts:
            raise SandboxError(f"'{shown}' is a folder, not a file.")
        return rel, parts, shown

    # -- on the folder the name is in -----------------------------------------------------------------
    def harness(self, parent: int, name: str, shown: str) -> None:
        # A symlink to the root ("me -> .") puts the parent at the root although the string did not.
        if name.casefold() == self._root.state_cf and self._root.dir_key(parent) == self._root.key:
            raise SandboxError(self._root.harness_refusal(shown))

    def _real_parts(self, dirfd: int) -> list[str] | None:
        """The real components of the folder ``dirfd`` beneath the root (None if they cannot be told)."""
        if dirfd == self._root.fd:
            return []
        rel = self._resolver.proc_rel(dirfd)
        if rel is not None:
            return [] if rel == "." else rel.split("/")
        return climb(dirfd, self._root.key)

    def name(self, parent: int, name: str, shown: str) -> None:
        """Refuse writing ``name`` in the folder ``parent``: the harness's, the tool docs', the operator's files,
        a repository's control files, wherever the links the string went through led."""
        key = self._root.dir_key(parent)
        folded = name.casefold()
        if folded == self._root.state_cf and key == self._root.key:
            raise SandboxError(self._root.harness_refusal(shown))
        if self._root.in_kept_folder(parent, name):
            raise SandboxError(self._root.kept_folder_refusal(shown))
        if self._protected_links:
            self._refresh_protected()
        if (hint := self._kept.get((*key, folded))) is not None:
            raise SandboxError(f"'{shown}' is refused: the harness keeps it; read it, and {hint}.")
        if (*key, folded) in self._protected:
            raise SandboxError(f"'{shown}' is refused: it is part of the job's definition, which only the "
                               "operator may change.")
        # Where the write lands, whatever links the string went through: never a repository's control files.
        where = self._real_parts(parent)
        why = (landing_refusal(self._root.fd, where, name, shown, self._root.vcs_elsewhere) if where is not None
               else f"'{shown}' is refused: where it would be written could not be told; try again.")
        if why is not None:
            raise SandboxError(why)

    # -- on the fd ------------------------------------------------------------------------------------
    @staticmethod
    def require_regular(st: os.stat_result, shown: str, verb: str) -> None:
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

    @classmethod
    def require_replaceable(cls, st: os.stat_result, shown: str) -> None:
        if stat.S_ISLNK(st.st_mode):
            raise SandboxError(_LINK_REFUSED.format(shown=shown))
        cls.require_regular(st, shown, "written")

    # -- reading --------------------------------------------------------------------------------------
    def open_regular(self, rel: str) -> tuple[int, os.stat_result, str]:
        """(an fd open for reading on the regular file ``rel``, its stat, the path as shown), or SandboxError."""
        _, parts, shown = self._resolver.check(rel)
        try:
            fd = self._resolver.open_target(parts, shown, _READ)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
                # A socket, or a device without a driver, cannot even be opened: say what it is.
                mode = 0
                with contextlib.suppress(OSError, SandboxError):
                    look = self._resolver.open_target(parts, shown, _LOOK)
                    try:
                        mode = os.fstat(look).st_mode
                    finally:
                        os.close(look)
                if mode:
                    raise SandboxError(f"'{shown}' is {_describe(mode)}; only regular files can be read.") from None
            raise os_error(shown, exc, "read") from None
        try:
            st = os.fstat(fd)
            self.require_regular(st, shown, "read")
        except BaseException:
            os.close(fd)
            raise
        return fd, st, shown
