"""Version-control files that run programs: what in a job folder the operator's own git (or Mercurial, or jj)
would execute, and how such a file is made harmless.

Why: an agent that can write ``.git/config`` sets ``core.fsmonitor = "sh -c ..."``, and the operator's next
``git status`` (or a shell prompt with git integration, on ``cd`` alone) runs it as the operator, outside every
sandbox. The same holds for a hook, ``core.pager``, ``core.sshCommand``, a filter, ``include.path``, a nested
repository, a ``.git`` file pointing at a folder the agent made, or a folder merely shaped like a git directory
(``HEAD``, ``objects/``, ``refs/``: git takes it for a bare repository when the operator cds into it, the
embedded-bare-repository attack behind git's ``safe.bareRepository``), and for Mercurial's ``hgrc`` (hooks,
extensions) and jj's repository config.

The rules, shared by the file tools' guard (:mod:`console.engine.sandbox.vcs_guard`), the commands' world and
its look after each call (:mod:`console.engine.tools.repos`) and the copy ``run JOB`` makes
(:mod:`console.engine.run_copy`):

* a folder named ``.git``, ``.hg`` or ``.jj`` (in any case: on a case-insensitive disk ``.GIT`` is ``.git``),
  and a folder shaped like a git directory (:func:`git_dir_shaped`), hold a repository's control files;
* a git config may hold only plain keys (:data:`PLAIN_KEYS`: the repository's format, remotes, branches,
  submodules' URLs, the identity); every other key (``core.fsmonitor``, ``core.hooksPath``, ``core.pager``,
  ``include.path``, ``filter.*``, ``alias.*``...) either runs a program or can pull in a file that does.
  :func:`plain_config` parses git's syntax strictly (what it cannot read with certainty is not plain) and
  writes what it keeps anew from the keys it read, never the file's own bytes: a difference between this
  reading and git's can lose a key, never smuggle one in;
* a hook runs when it is executable (or a link) and not ``*.sample``: :func:`hook_runs`;
* a Mercurial ``hgrc`` is plain when it holds nothing but ``[paths]``; jj's repository config never is.

Stdlib only and free of console.* imports: the sandbox, below everything, uses it.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable
from dataclasses import dataclass

# Folders whose content a version-control program reads and acts on, compared case-blind.
VCS_FOLDERS = frozenset({".git", ".hg", ".jj"})
# What makes a folder a git directory (git's is_git_directory): HEAD, and objects/ and refs/ in it or in the
# folder its ``commondir`` file names.
SHAPE_NAMES = ("HEAD", "objects", "refs", "commondir")
# The files of a git directory that say what to run: its config, the worktree's config, its hooks, and the
# file naming the directory that holds the shared config and hooks.
CONFIG_NAMES = ("config", "config.worktree")
HOOKS = "hooks"
# Where git keeps a rebase or cherry-pick in progress: their to-do lists may hold ``exec`` lines, which
# ``git rebase --continue`` runs.
SEQUENCER_TODOS = ("rebase-merge/git-rebase-todo", "sequencer/todo")
# And the files that name a merge strategy (a program: git-merge-NAME) or options for it: removed when a command
# made or changed them (the rebase then goes on with the default strategy).
SEQUENCER_OPTIONS = ("rebase-merge/strategy", "rebase-merge/strategy_opts", "sequencer/opts")
HGRC = ("hgrc",)  # in .hg/
JJ_CONFIG = ("repo", "config.toml")  # in .jj/
# A config, hook list or to-do list larger than this is not read: it is not plain.
MAX_CONTROL_BYTES = 1 << 20

# section: (whether its keys sit under a subsection, its plain keys), all lower-case as git compares them.
PLAIN_KEYS: dict[str, tuple[bool, frozenset[str]]] = {
    "core": (False, frozenset({"repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase",
                               "symlinks", "precomposeunicode"})),
    "extensions": (False, frozenset({"objectformat", "refstorage", "worktreeconfig"})),
    "user": (False, frozenset({"name", "email"})),
    "remote": (True, frozenset({"url", "pushurl", "fetch"})),
    # Not mergeOptions: a merge strategy names a program (git-merge-NAME).
    "branch": (True, frozenset({"remote", "pushremote", "merge", "rebase", "description"})),
    # Not update: "!command" runs a program.
    "submodule": (True, frozenset({"url", "active"})),
}


def is_vcs_folder(name: str) -> bool:
    return name.casefold() in VCS_FOLDERS


def git_dir_shaped(names: Iterable[str]) -> bool:
    """Whether a folder holding ``names`` is taken by git for a git directory: ``HEAD``, and ``objects`` and
    ``refs`` (or a ``commondir`` naming the folder that holds them)."""
    have = set(names)
    return "HEAD" in have and ("commondir" in have or {"objects", "refs"} <= have)


def hook_runs(name: str, mode: int) -> bool:
    """Whether git would run the entry ``name`` of a hooks folder: an executable file or a link (git follows it
    to whatever it leads to), unless it is a ``.sample``."""
    if name.endswith(".sample"):
        return False
    return stat.S_ISLNK(mode) or (stat.S_ISREG(mode) and bool(mode & 0o111))


# -- git's config -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigEntry:
    section: str  # lower-case
    subsection: str | None  # as written (git compares it case-sensitively), None without one
    key: str  # lower-case
    value: str | None  # None: the key alone, which git reads as true

    @property
    def name(self) -> str:
        return ".".join(p for p in (self.section, self.subsection, self.key) if p is not None)

    @property
    def plain(self) -> bool:
        rule = PLAIN_KEYS.get(self.section)
        if rule is None:
            return False
        with_sub, keys = rule
        return (self.subsection is not None) == with_sub and self.key in keys


class _Bad(Exception):
    """Not git config syntax this reader is sure of."""


_SPACE = " \t\n\r"  # git's isspace (sane_ctype): not \v or \f


def _keychar(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


class _Reader:
    """git's config.c parser, character for character, strict where git is lenient or version-dependent."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def next(self) -> str:
        """The next character; "" at the end (git's get_next_char gives a newline there, and so do the callers)."""
        if self.i >= len(self.text):
            self.i += 1
            return ""
        c = self.text[self.i]
        self.i += 1
        return c

    def entries(self) -> list[ConfigEntry]:
        out: list[ConfigEntry] = []
        section: str | None = None
        subsection: str | None = None
        while True:
            c = self.next()
            if c == "":
                return out
            if c in _SPACE:
                continue
            if c in "#;":
                while (c := self.next()) not in ("\n", ""):
                    pass
                continue
            if c == "[":
                section, subsection = self.header()
                continue
            if not (c.isascii() and c.isalpha()) or section is None:
                raise _Bad
            key = c
            while _keychar(c := self.next()):
                key += c
            while c in (" ", "\t"):
                c = self.next()
            if c in ("\n", ""):
                value = None
            elif c == "=":
                value = self.value()
            else:
                raise _Bad
            out.append(ConfigEntry(section, subsection, key.lower(), value))

    def header(self) -> tuple[str, str | None]:
        name = ""
        while True:
            c = self.next()
            if c == "]":
                break
            if c in (" ", "\t"):
                if "." in name:
                    raise _Bad  # [a.b "c"]: read differently by git's versions
                return self._section(name), self.subsection()
            if not (_keychar(c) or c == "."):
                raise _Bad
            name += c.lower()
        if "." in name:  # the old [section.subsection] form: the subsection is lower-cased
            section, _, sub = name.partition(".")
            if not sub:
                raise _Bad
            return self._section(section), sub
        return self._section(name), None

    @staticmethod
    def _section(name: str) -> str:
        if not name or name.startswith("-"):
            raise _Bad
        return name

    def subsection(self) -> str:
        c = self.next()
        while c in (" ", "\t"):
            c = self.next()
        if c != '"':
            raise _Bad
        sub = ""
        while True:
            c = self.next()
            if c in ("\n", ""):
                raise _Bad
            if c == '"':
                break
            if c == "\\":
                c = self.next()
                if c not in ('"', "\\"):
                    raise _Bad  # other escapes: git's versions differ
            sub += c
        if self.next() != "]":
            raise _Bad
        return sub

    def value(self) -> str:
        out: list[str] = []
        quote = comment = False
        # Unquoted white space between words: git keeps it as spaces (up to 2.4x) or as it is (later), so a run
        # of it is remembered and written only when a word follows; a tab there reads differently by version.
        spaces = ""
        while True:
            c = self.next()
            if c in ("\n", ""):
                if quote:
                    raise _Bad
                return "".join(out)
            if comment:
                continue
            if c in _SPACE and not quote:
                if out:
                    spaces += c
                continue
            if not quote and c in ";#":
                comment = True
                continue
            if spaces:
                if spaces.strip(" "):
                    raise _Bad
                out.append(spaces)
                spaces = ""
            if c == "\\":
                c = self.next()
                if c in ("\n", ""):
                    continue  # a line continued
                escaped = {"t": "\t", "b": "\b", "n": "\n", "\\": "\\", '"': '"'}.get(c)
                if escaped is None:
                    raise _Bad
                out.append(escaped)
                continue
            if c == '"':
                quote = not quote
                continue
            out.append(c)


def parse_git_config(data: bytes) -> list[ConfigEntry] | None:
    """The entries of a git config file in their order, or None if it is not git config syntax this reader is
    sure of (not UTF-8, a NUL, a lone carriage return, an escape git's versions read differently...)."""
    if len(data) > MAX_CONTROL_BYTES:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if "\x00" in text or "\r" in text:
        return None
    try:
        return _Reader(text).entries()
    except _Bad:
        return None


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace(
        "\b", "\\b") + '"'


def render_git_config(entries: Iterable[ConfigEntry]) -> bytes:
    """A git config holding exactly ``entries`` (every value quoted, so spaces, ``#`` and ``;`` stay its own)."""
    lines: list[str] = []
    current: tuple[str, str | None] | None = None
    for e in entries:
        if (e.section, e.subsection) != current:
            current = (e.section, e.subsection)
            if e.subsection is None:
                lines.append(f"[{e.section}]")
            else:
                sub = e.subsection.replace("\\", "\\\\").replace('"', '\\"')
                lines.append(f'[{e.section} "{sub}"]')
        lines.append(f"\t{e.key}" if e.value is None else f"\t{e.key} = {_quoted(e.value)}")
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


@dataclass(frozen=True)
class PlainConfig:
    """What :func:`plain_config` made of a config."""

    data: bytes  # the config to keep: the original bytes when all of it is plain, else only its plain keys
    dropped: tuple[str, ...]  # the names of the keys left out ("core.fsmonitor"); ("(unreadable)",) if unread
    entries: tuple[ConfigEntry, ...] | None  # what was read, None if it could not be

    @property
    def changed(self) -> bool:
        return bool(self.dropped)


UNREADABLE = "(all of it: not git config syntax that can be read with certainty)"


def plain_config(data: bytes) -> PlainConfig:
    """``data`` (a git config) with only its plain keys: the same bytes when it holds nothing else."""
    entries = parse_git_config(data)
    if entries is None:
        return PlainConfig(b"", (UNREADABLE,), None)
    dropped = [e.name for e in entries if not e.plain]
    if not dropped:
        return PlainConfig(data, (), tuple(entries))
    kept = render_git_config(e for e in entries if e.plain)
    return PlainConfig(kept, tuple(dict.fromkeys(dropped)), tuple(entries))


def added_programs(before: bytes | None, after: bytes) -> tuple[str, ...]:
    """The keys of ``after`` (a git config) that are not plain and were not in ``before`` (the same config before
    a command ran, None if there was none): what that command added that could run a program. A config that
    cannot be read with certainty answers ``(UNREADABLE,)``, unless it is ``before`` unchanged."""
    if before is not None and before == after:
        return ()
    now = parse_git_config(after)
    if now is None:
        return (UNREADABLE,)
    was = set(parse_git_config(before) or ()) if before is not None else set()
    return tuple(dict.fromkeys(e.name for e in now if not e.plain and e not in was))


def drop_exec_lines(todo: bytes) -> bytes | None:
    """A rebase or cherry-pick to-do list without its ``exec`` (``x``) lines, which ``git rebase --continue``
    would run; None when it has none."""
    lines = todo.split(b"\n")
    kept = [ln for ln in lines if (ln.split() or [b""])[0] not in (b"exec", b"x")]
    return None if len(kept) == len(lines) else b"\n".join(kept)


# -- Mercurial ----------------------------------------------------------------------------------------------------
def hgrc_plain(data: bytes) -> bool:
    """Whether a Mercurial ``.hg/hgrc`` holds nothing but ``[paths]`` (its other sections name hooks, extensions,
    merge tools, pagers, editors and aliases, which run programs); ``%include`` and continued lines are not."""
    if len(data) > MAX_CONTROL_BYTES:
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if raw[0] in " \t" or line.startswith("%"):
            return False
        if line.startswith("["):
            if not line.endswith("]"):
                return False
            section = line[1:-1].strip().lower()
            continue
        if section != "paths" or "=" not in line:
            return False
    return True
