"""Issue 32, point 2: the agent plants nothing the operator's own git runs. Found at 2f229d8: with its file tools
alone the agent appended ``[core] fsmonitor = "sh -c '...'"`` to ``.git/config`` of a repository job, and the
operator's next ``git status`` ran it as the operator, outside every sandbox; commands could drop executable
hooks, set ``core.pager``, ``core.sshCommand``, filters, or make a repository of their own anywhere in the folder.

Each attack is played as it was found (a command through the registry, confined and unconfined, or the whole CLI
with ``--script``), then the operator's git is run in the folder with a marker file that any program it ran would
make: the marker must not appear.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.tools import repos
from console.engine.tools.limits import CommandWorld
from tests.commands_support import CONFINED, UNCONFINED, call

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the operator's git is what these attacks aim at")
GIT = shutil.which("git") or "git"
ENV = {"GIT_AUTHOR_NAME": "agent", "GIT_AUTHOR_EMAIL": "agent@example.invalid", "GIT_COMMITTER_NAME": "agent",
       "GIT_COMMITTER_EMAIL": "agent@example.invalid"}


def operator_git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The operator's git in ``folder``: their own environment (a HOME of the test's), no sandbox."""
    env = {"PATH": os.environ["PATH"], "HOME": str(folder.parent / "operator-home"), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CEILING_DIRECTORIES": str(folder.parent), **ENV}
    Path(env["HOME"]).mkdir(exist_ok=True)
    return subprocess.run([GIT, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=False)


def repo_job(make_rt, config: str = ""):  # type: ignore[no-untyped-def]
    rt = make_rt(files={"README.md": "hello\n"})
    root = Path(rt.paths.root)
    assert operator_git(root, "init", "-q", "-b", "main").returncode == 0
    if config:
        with open(root / ".git" / "config", "a") as fh:
            fh.write(config)
    assert operator_git(root, "add", "README.md").returncode == 0
    assert operator_git(root, "commit", "-q", "-m", "first").returncode == 0
    return rt, root


def marker(root: Path) -> Path:
    return root.parent / "PWNED"


def plant(root: Path, where: str = ".git") -> str:
    """A shell program planting, in the repository folder ``where``, every way git runs a program."""
    m = marker(root)
    return (f"printf '[core]\\n\\tfsmonitor = \"touch {m}; false\"\\n\\tpager = \"touch {m}; cat\"\\n"
            f"\\thooksPath = ../h\\n[include]\\n\\tpath = ../evil.cfg\\n' >> {where}/config; "
            f"mkdir -p {where}/hooks && printf '#!/bin/sh\\ntouch {m}\\n' > {where}/hooks/post-checkout; "
            f"chmod +x {where}/hooks/post-checkout; printf '#!/bin/sh\\ntouch {m}\\n' > {where}/hooks/pre-commit; "
            f"chmod +x {where}/hooks/pre-commit; echo planted")


def nothing_runs(root: Path, folder: Path | None = None) -> None:
    """The operator's everyday git in ``folder`` (default the job folder) runs nothing of the agent's."""
    folder = folder or root
    for args in (("status",), ("log", "-1", "--oneline"), ("diff",), ("checkout", "-q", "-b", "operator"),
                 ("commit", "-q", "--allow-empty", "-m", "operator's")):
        operator_git(folder, *args)
    assert not marker(root).exists(), f"the operator's git ran the agent's program in {folder}"


@pytest.fixture(params=["confined", "unconfined"])
def world(request: pytest.FixtureRequest) -> CommandWorld:
    if request.param == "confined":
        request.getfixturevalue("bwrap")
        return CONFINED
    return UNCONFINED


def test_a_command_cannot_plant_in_the_repository_it_runs_in(make_rt, bwrap) -> None:  # type: ignore[no-untyped-def]
    """Found: a command appended fsmonitor to .git/config and dropped executable hooks. Confined, .git is read-only
    (git status, log and diff still work); what it could not write it says."""
    rt, root = repo_job(make_rt)
    config = (root / ".git" / "config").read_bytes()
    out = call(rt, ["sh", "-c", plant(root) + "; git status --short; git log --oneline | wc -l"], CONFINED,
               env=ENV)
    assert "Read-only file system" in out.content and "planted" in out.content, out.content
    assert out.content.rstrip().endswith("1"), out.content  # git log saw the history
    assert (root / ".git" / "config").read_bytes() == config
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    nothing_runs(root)


def test_unconfined_what_a_command_plants_in_the_repository_is_undone(make_rt) -> None:  # type: ignore[no-untyped-def]
    """--unconfined has no read-only .git: the look after the call puts the config back and unsets the hooks."""
    rt, root = repo_job(make_rt, "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n")
    (root / ".git" / "hooks" / "pre-push").write_text("#!/bin/sh\nexit 0\n")  # the operator's own hook
    (root / ".git" / "hooks" / "pre-push").chmod(0o755)
    config = (root / ".git" / "config").read_bytes()
    out = call(rt, ["sh", "-c", plant(root)], UNCONFINED)
    assert out.content.startswith("exit code 0\nplanted\n[made harmless, as git would run it on the operator's "
                                  "machine: put '.git/config' back as it was before the call: the call added "
                                  "core.fsmonitor, core.pager, core.hookspath, include.path, which can run a "
                                  "program on the operator's machine"), out.content
    assert "made '.git/hooks/post-checkout' not executable" in out.content
    assert (root / ".git" / "config").read_bytes() == config  # the operator's lfs filter kept, nothing added
    assert not os.access(root / ".git" / "hooks" / "pre-commit", os.X_OK)
    assert os.access(root / ".git" / "hooks" / "pre-push", os.X_OK)  # there before the call: the operator's
    nothing_runs(root)


@pytest.mark.parametrize("layout", ["git init", "bare", "gitfile", "GIT case", "worktree commondir"])
def test_a_repository_a_command_makes_runs_nothing(make_rt, world, layout: str) -> None:  # type: ignore[no-untyped-def]
    """A command can make a repository anywhere in its folder: `git init sub`, a bare one (HEAD, objects/, refs/:
    git takes it for one on cd), a `.git` file naming a folder it made, `.GIT`. Whatever it plants there is made
    harmless after the call, and said."""
    rt, root = repo_job(make_rt)
    if layout == "git init":
        where, folder = "sub/.git", "sub"
        make = "git init -q sub"
    elif layout == "bare":
        where, folder = "vendor/lib.git", "vendor/lib.git"
        make = "git init -q --bare vendor/lib.git"
    elif layout == "gitfile":
        where, folder = "store", "sub"
        make = "git init -q --bare store && mkdir sub && echo 'gitdir: ../store' > sub/.git"
    elif layout == "GIT case":
        where, folder = "sub/.GIT", "sub/.GIT"
        make = "git init -q --bare sub/.GIT"
    else:  # a linked worktree's git directory, whose shared config sits in the folder its commondir names
        where, folder = "shared", "wt"
        make = ("git init -q --bare shared && mkdir -p wt/.git && echo ref: refs/heads/main > wt/.git/HEAD && "
                "echo ../../shared > wt/.git/commondir")
    out = call(rt, ["sh", "-c", f"{make} && {plant(root, where)}"], world, env=ENV)
    assert out.ok and "[made harmless, as git would run it on the operator's machine: " in out.content, out.content
    assert "core.fsmonitor" in out.content and "not executable" in out.content
    config = (root / where / "config").read_text()
    assert "fsmonitor" not in config and "pager" not in config and "include" not in config
    assert not os.access(root / where / "hooks" / "post-checkout", os.X_OK)
    nothing_runs(root, root / folder)
    nothing_runs(root)


def test_commondir_naming_a_folder_the_file_tools_could_fill_is_removed(make_rt, world) -> None:  # type: ignore[no-untyped-def]
    """A git directory whose commondir names a folder that is no repository yet: the file tools could later give
    that folder objects/, refs/ and a config (no HEAD: not a shape they refuse), which git would then read."""
    rt, root = repo_job(make_rt)
    out = call(rt, ["sh", "-c", "mkdir -p wt/.git && echo ref: refs/heads/main > wt/.git/HEAD && "
                                "echo ../../later > wt/.git/commondir"], world)
    assert "removed 'wt/.git/commondir': it names a folder that is no git directory" in out.content, out.content
    assert not (root / "wt" / ".git" / "commondir").exists()


def test_commit_mode_commits_but_plants_nothing(make_rt, bwrap) -> None:  # type: ignore[no-untyped-def]
    """[sandbox] git = "commit": commits and branches work; the config, hooks/ and info/ stay read-only, and a
    rebase left with an exec line has it dropped."""
    rt, root = repo_job(make_rt)
    world = CommandWorld(read_only=CONFINED.read_only, git="commit")
    m = marker(root)
    out = call(rt, ["sh", "-c", "echo more >> README.md && git commit -qam second && git checkout -qb topic && "
                                f"git log --oneline | wc -l; {plant(root)}; mkdir -p .git/rebase-merge && "
                                f"printf 'pick 1234567 x\\nexec touch {m}\\nx touch {m}\\n' > "
                                ".git/rebase-merge/git-rebase-todo"], world, env=ENV)
    assert out.content.startswith("exit code 0\n2\n"), out.content
    assert "Read-only file system" in out.content and not (root / ".git" / "hooks" / "pre-commit").exists()
    assert "fsmonitor" not in (root / ".git" / "config").read_text()
    assert "dropped the exec lines of '.git/rebase-merge/git-rebase-todo'" in out.content
    assert (root / ".git" / "rebase-merge" / "git-rebase-todo").read_text() == "pick 1234567 x\n"
    assert operator_git(root, "log", "--oneline").stdout.count("\n") == 2
    shutil.rmtree(root / ".git" / "rebase-merge")
    nothing_runs(root)


def test_config_mode_keeps_plain_keys_and_undoes_the_rest(make_rt, bwrap) -> None:  # type: ignore[no-untyped-def]
    """[sandbox] git = "config": a command sets the repository's identity and remote; a call that also adds a key
    that runs a program has its config change undone whole, and a config made a link is put back."""
    rt, root = repo_job(make_rt)
    world = CommandWorld(read_only=CONFINED.read_only, git="config")
    out = call(rt, ["git", "remote", "add", "origin", "https://example.invalid/x.git"], world)
    assert out.ok and "made harmless" not in out.content, out.content
    assert "example.invalid" in (root / ".git" / "config").read_text()
    kept = (root / ".git" / "config").read_bytes()
    out = call(rt, ["sh", "-c", f"git config user.name bot && git config core.sshCommand 'touch {marker(root)}'"],
               world)
    assert "put '.git/config' back as it was before the call: the call added core.sshcommand" in out.content
    assert (root / ".git" / "config").read_bytes() == kept
    out = call(rt, ["sh", "-c", "cp .git/config mine.cfg && ln -sf ../mine.cfg .git/config"], world)
    assert "put '.git/config' back as it was before the call, a file (a command made it a link)" in out.content
    assert (root / ".git" / "config").read_bytes() == kept and not (root / ".git" / "config").is_symlink()
    nothing_runs(root)


def test_the_record_of_an_interrupted_call_is_enough_to_sweep(make_rt) -> None:  # type: ignore[no-untyped-def]
    """A call a crash interrupted is not run again, but what it may have left is looked at against its record."""
    _rt, root = repo_job(make_rt)
    before = repos.survey(str(root))
    record = json.loads(json.dumps(before.record()))  # as the journal keeps it
    subprocess.run(["sh", "-c", plant(root) + " >/dev/null"], cwd=root, check=True)
    swept = repos.sweep(str(root), repos.Repos.from_record(record))
    assert any("removed core.fsmonitor" in d and "'.git/config'" in d for d in swept.done), swept.done
    config = (root / ".git" / "config").read_text()
    assert "fsmonitor" not in config and "repositoryformatversion" in config  # its plain keys kept
    nothing_runs(root)


def test_the_attack_as_found_through_the_whole_cli(make_job, tmp_path, capsys, bwrap) -> None:  # type: ignore[no-untyped-def]
    """The replay: a repository job run in place; the agent appends fsmonitor to .git/config with append_file and
    write_file, then calls a declared command that appends it again and drops a hook. The operator's git status
    afterwards runs nothing, and the header says what commands may change in the repository."""
    paths = make_job()
    root = Path(paths.root)
    (root / "job.toml").write_text('[guardrails.completion]\ntype = "none"\n\n[[tools]]\nname = "tweak"\n'
                                   'description = "tweak the repo"\ncommand = ["sh", "tweak.sh"]\n')
    assert operator_git(root, "init", "-q", "-b", "main").returncode == 0
    assert operator_git(root, "add", "-A").returncode == 0
    assert operator_git(root, "commit", "-q", "-m", "job").returncode == 0
    m = marker(root)
    fsmonitor = f"[core] fsmonitor = \"sh -c 'touch {m}; false'\"\n"
    calls = [("append_file", {"path": ".git/config", "content": fsmonitor}),
             ("write_file", {"path": ".git/hooks/pre-commit", "content": f"#!/bin/sh\ntouch {m}\n"}),
             ("write_file", {"path": "tweak.sh", "content": plant(root)})]
    script = [{"text": "", "calls": [{"name": n, "arguments": a} for n, a in calls]},
              {"text": "", "calls": [{"name": "tweak", "arguments": {}}]}, {"text": "done"}]
    file = tmp_path / "script.json"
    file.write_text(json.dumps(script))
    assert main(["run", str(root), "--headless", "--in-place", "--script", str(file)]) == 1
    append, hook, written, tweak = [e.content for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult)]
    assert append.startswith("append_file failed: '.git/config' is refused: a folder named .git is a repository's "
                             "control folder, whose config and hooks the operator's version control (git) runs on "
                             "their machine"), append
    assert hook.startswith("write_file failed: '.git/hooks/pre-commit' is refused: a folder named .git is"), hook
    assert written.startswith("Created tweak.sh") and "Read-only file system" in tweak, tweak
    [head] = [e for e in ev.read_events(paths.events) if isinstance(e, ev.CommandSandbox)]
    assert "every repository's .git folder read-only" in head.text and "made harmless" in head.text
    assert "fsmonitor" not in (root / ".git" / "config").read_text()
    nothing_runs(root)


def test_the_runs_own_state_is_never_offered_to_a_commit(make_job, capsys) -> None:  # type: ignore[no-untyped-def]
    """A job run in place in a repository: `git add -A` stages the agent's work, never .console/ (its launch record
    keeps the endpoint the run calls, a password in its URL included; its event log, the whole conversation)."""
    paths = make_job()
    root = Path(paths.root)
    assert operator_git(root, "init", "-q", "-b", "main").returncode == 0
    url = "http://user:s3cret@127.0.0.1:9/v1"
    assert main(["run", str(root), "--headless", "--in-place", "--max-turns", "2", "--base-url", url]) in (0, 1)
    assert "s3cret" in (root / ".console" / "launch.json").read_text()  # kept for a resume, 0600
    assert operator_git(root, "add", "-A").returncode == 0
    staged = operator_git(root, "diff", "--cached", "--name-only").stdout.split()
    assert staged and not [f for f in staged if f.startswith(".console")], staged
    assert operator_git(root, "status", "--porcelain", "--ignored").stdout.count(".console/") == 1  # ignored


def test_the_opt_in_is_a_checked_key_and_the_header_says_it(make_job, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from console.engine.tools.limits import SandboxCaps, SandboxSection, describe_world, resolve_world

    for mode, said in (("read-only", "every repository's .git folder read-only"),
                       ("commit", "writable for commits (job.toml's [sandbox] git = \"commit\"), but for their "
                                  "config, hooks/ and info/, read-only"),
                       ("config", "but for their hooks/ and info/, read-only")):
        world = resolve_world(SandboxSection(git=mode), SandboxCaps(), max_job_mb=1024)
        assert world.git == mode and said in describe_world(world)
        assert "what a repository would run on your machine (a config key, a hook) is made harmless" in \
            describe_world(world)
    paths = make_job()
    (Path(paths.root) / "job.toml").write_text('[sandbox]\ngit = "yes"\n')
    assert main(["run", str(paths.root), "--headless", "--in-place"]) == 2
    assert "key 'sandbox.git': Input should be 'read-only', 'commit' or 'config'" in capsys.readouterr().err


def test_a_job_folder_that_is_a_bare_repository_keeps_its_harness_folder_hidden(make_rt, bwrap) -> None:  # type: ignore[no-untyped-def]
    """A job folder shaped as a git directory is not bound whole again (that would show .console to the command):
    its config and hooks are bound one by one."""
    rt = make_rt(files={"HEAD": "ref: refs/heads/main\n", "objects/.keep": "", "refs/.keep": "", "config": "[core]\n"})
    root = Path(rt.paths.root)
    (root / ".console" / "secret").parent.mkdir(exist_ok=True)
    (root / ".console" / "secret").write_text("harness state")
    out = call(rt, ["sh", "-c", "ls -A .console; echo '[core] pager = x' >> config; echo done"], CONFINED)
    assert "secret" not in out.content and "Read-only file system" in out.content, out.content
    assert (root / "config").read_text() == "[core]\n"


def test_hooks_the_repository_keeps_elsewhere_in_the_folder_are_read_only(make_rt, world) -> None:  # type: ignore[no-untyped-def]
    """.git/hooks a link to githooks/, core.hooksPath = .husky/_: a command cannot change what git runs there."""
    rt, root = repo_job(make_rt)
    (root / "githooks").mkdir()
    (root / "githooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (root / "githooks" / "pre-commit").chmod(0o755)
    shutil.rmtree(root / ".git" / "hooks")
    os.symlink("../githooks", root / ".git" / "hooks")
    (root / ".husky" / "_").mkdir(parents=True)
    assert operator_git(root, "config", "core.hooksPath", ".husky/_").returncode == 0
    m = marker(root)
    out = call(rt, ["sh", "-c", f"printf 'touch {m}\\n' >> githooks/pre-commit; "
                                f"printf '#!/bin/sh\\ntouch {m}\\n' > .husky/_/post-checkout; echo tried"], world)
    if world.unconfined:  # no sandbox: only the look after the call, which leaves the operator's files as they are
        return
    assert out.content.count("Read-only file system") == 2, out.content
    assert (root / "githooks" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
    nothing_runs(root)


def test_a_repository_planted_deeper_than_any_window_is_swept(make_rt) -> None:  # type: ignore[no-untyped-def]
    """The look after a call has no depth at which a repository escapes it (it stopped at 256 levels, and the call
    then failed with what it planted left in place): one made 300 folders deep is found and made harmless, with the
    walk holding a few levels open at a time (console.engine.tools.folder_walk)."""
    _rt, root = repo_job(make_rt)
    before = repos.survey(str(root))
    deep = root.joinpath(*["d"] * 300)
    deep.mkdir(parents=True)
    assert operator_git(deep, "init", "-q").returncode == 0
    subprocess.run(["sh", "-c", plant(root, ".git") + " >/dev/null"], cwd=deep, check=True)
    swept = repos.sweep(str(root), before)
    assert swept.problem == "" and any("removed core.fsmonitor" in d for d in swept.done), swept
    assert "fsmonitor" not in (deep / ".git" / "config").read_text()
    nothing_runs(root, deep)
