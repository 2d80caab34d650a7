"""The version-control rules (console.engine.vcs): which config keys are plain, read exactly as git reads them."""

from __future__ import annotations

import random
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from console.engine import vcs
from console.engine.vcs import ConfigEntry, added_programs, parse_git_config, plain_config, render_git_config

GIT_INIT = (b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
            b'[remote "origin"]\n\turl = git@example.invalid:a/b.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
            b'[branch "main"]\n\tremote = origin\n\tmerge = refs/heads/main\n[user]\n\tname = A B\n\temail = a@b\n')


def test_a_config_of_plain_keys_is_kept_byte_for_byte() -> None:
    kept = plain_config(GIT_INIT)
    assert kept.data == GIT_INIT and kept.dropped == () and not kept.changed


@pytest.mark.parametrize("text, dropped", [
    (b"[core] fsmonitor = \"sh -c 'touch x'\"\n", ("core.fsmonitor",)),  # the key on the header's line
    (b"[core]\n\tpager = less\n\tsshCommand = ssh -oProxyCommand=x\n\thooksPath = ../h\n",
     ("core.pager", "core.sshcommand", "core.hookspath")),
    (b"[Core]\n\tFSMonitor = x\n", ("core.fsmonitor",)),
    (b'[include]\n\tpath = ../evil\n[includeIf "gitdir:/"]\n\tpath = x\n', ("include.path", "includeif.gitdir:/.path")),
    (b'[filter "lfs"]\n\tclean = x %f\n[diff "x"]\n\ttextconv = y\n[alias]\n\tst = !sh\n',
     ("filter.lfs.clean", "diff.x.textconv", "alias.st")),
    (b"[core.worktree]\n\tx = 1\n[core]\n\tworktree = /home\n", ("core.worktree.x", "core.worktree")),
    (b'[submodule "s"]\n\turl = ../s\n\tupdate = !sh -c x\n[branch "m"]\n\tmergeOptions = -s evil\n',
     ("submodule.s.update", "branch.m.mergeoptions")),
    (b"[core]\n\tfsmonitor = \\\n  touch x\n", ("core.fsmonitor",)),  # a continued line
])
def test_keys_that_run_programs_are_dropped(text: bytes, dropped: tuple[str, ...]) -> None:
    kept = plain_config(GIT_INIT + text)
    assert kept.dropped == dropped
    assert kept.entries is not None and [e for e in parse_git_config(kept.data) or [] if not e.plain] == []
    assert parse_git_config(kept.data) == [e for e in kept.entries if e.plain]  # the plain keys, as they were read


@pytest.mark.parametrize("text", [b"[core]\n\tfsmonitor = \"x\\q\"\n", b"[core]\x00\n", b"[core]\r\tbare = 1\n",
                                  b"\xff[core]\n", b'[core "a\\x"]\n\tk = 1\n', b"[a.b \"c\"]\n\tk = 1\n"])
def test_what_cannot_be_read_with_certainty_is_not_plain(text: bytes) -> None:
    kept = plain_config(text)
    assert kept.dropped == (vcs.UNREADABLE,) and kept.data == b""


def test_values_survive_a_rewrite_exactly() -> None:
    entries = [ConfigEntry("remote", 'we"ird\\name', "url", ' a "b" ; # c\t\\ '),
               ConfigEntry("core", None, "bare", None)]
    assert parse_git_config(render_git_config(entries)) == entries


def test_what_a_command_added_is_told_apart_from_what_was_there() -> None:
    before = GIT_INIT + b'[filter "lfs"]\n\tclean = git-lfs clean -- %f\n'
    assert added_programs(before, before + b"[user]\n\tname = bot\n") == ()
    assert added_programs(before, before + b"[core]\n\tpager = x\n") == ("core.pager",)
    assert added_programs(before, before.replace(b"%f", b"%f && touch x")) == ("filter.lfs.clean",)
    assert added_programs(None, before) == ("filter.lfs.clean",)


def test_hooks_and_shapes_and_rebase_todos() -> None:
    assert vcs.hook_runs("pre-commit", stat.S_IFREG | 0o755) and vcs.hook_runs("x", stat.S_IFLNK | 0o777)
    assert not vcs.hook_runs("pre-commit", stat.S_IFREG | 0o644)
    assert not vcs.hook_runs("pre-commit.sample", stat.S_IFREG | 0o755)
    assert vcs.git_dir_shaped(["HEAD", "objects", "refs"]) and vcs.git_dir_shaped(["HEAD", "commondir"])
    assert not vcs.git_dir_shaped(["objects", "refs", "config"]) and not vcs.git_dir_shaped(["HEAD", "refs"])
    assert vcs.drop_exec_lines(b"pick 1 a\nexec touch x\n  x sh\nbreak\n") == b"pick 1 a\nbreak\n"
    assert vcs.drop_exec_lines(b"pick 1 a\n") is None
    assert vcs.hgrc_plain(b"[paths]\ndefault = https://x\n") and not vcs.hgrc_plain(b"[hooks]\npre-status = x\n")
    assert not vcs.hgrc_plain(b"[paths]\n%include /x\n") and not vcs.hgrc_plain(b"[paths]\na = b\n  c\n")


ATOMS = ["[core]", '[remote "o"]', "[a.B]", '[x "y\\"z"]', '[core ""]', "[Core]", '[branch "Main"] ',
         "[core] fsmonitor = x", "[include]", "[x.y.z]", '[core "a\\\\b"]', "#c", ";c", "", "  # x"]
KEYS = ["k", "Key", "fsmonitor", "url", "a-b", "hooksPath", "\tk"]
VALUES = ["v", " v ", '"a b"', 'a"b c"d', "a\\tb", "a\\nb", '"a;b"', "a;b", "a#b", ' "  " ', "x\\\ny", "x \\\n y",
          '"x\\\ny"', "é", "", "a\\\\", '\\"x\\"', "tab\tin", "a  b"]


def _random_config(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.4:
            lines.append(rng.choice(ATOMS))
        else:
            lines.append(rng.choice(KEYS) + rng.choice(["=", " = ", "\t=\t", ""]) + rng.choice(VALUES)
                         + rng.choice(["", "  ", " #c", ";c"]))
    return rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n"])


@pytest.mark.skipif(shutil.which("git") is None, reason="compares this reading with git's own")
def test_the_reading_agrees_with_gits_own(tmp_path: Path) -> None:
    """Whatever this reader reads, git reads the same keys and values (what it refuses, git may read: it is then
    not plain, which is safe)."""
    rng = random.Random(32)
    file = tmp_path / "config"
    read = 0
    for _ in range(300):
        text = _random_config(rng)
        file.write_text(text, newline="")
        done = subprocess.run(["git", "config", "-f", str(file), "--no-includes", "--list", "--null"],
                              capture_output=True, check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
        mine = parse_git_config(text.encode())
        if mine is None:
            continue
        assert done.returncode == 0, f"git could not read what this reader read: {text!r}"
        theirs = [(n.decode(), v.decode() if sep else None) for n, sep, v in
                  (item.partition(b"\n") for item in done.stdout.split(b"\0")[:-1])]
        assert [(e.name, e.value) for e in mine] == theirs, text
        read += 1
    assert read > 50  # the comparison compared something
