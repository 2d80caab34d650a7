"""Real MCP servers no one here wrote, run as a job runs them:

- ``mcp-server-git`` (PyPI, in the test extra) over stdio, confined, on a git repository in the job folder: it reads
  the repository, but the job's ``.git`` is read-only to it (as to the job's commands: nothing planted in
  ``.git/config`` or a hook that the operator's git would later run), and the operator's ``~/.gitconfig`` is not
  its world (an empty HOME);
- ``@modelcontextprotocol/server-everything`` (npm) run by the machine's Node, over stdio (confined) and over
  streamable HTTP (on 127.0.0.1, reached through the operator's allowed URL). It is not installed by the tests
  (they never touch the internet): ``tests/mcp_servers/install_everything.sh DIR`` installs it into DIR, and
  ``TEST_MCP_NPM_PREFIX=DIR`` points the tests at it. Without it these tests are skipped with the reason;
  with the variable set and the server missing they fail (it was meant to be there).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine.job import JobPaths
from console.engine.tools.confine import Bwrap
from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.mcp.client import StdioServer, start_servers
from console.mcp.http import HttpServer
from tests.commands_support import PY_HOME, bwrap  # noqa: F401  (the fixture)

VENV = os.path.realpath(sys.prefix)
WORLD = CommandWorld(read_only=(PY_HOME, VENV))
GIT = shutil.which("git")


def _git(root: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    return subprocess.run([GIT or "git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


@pytest.fixture
def repo(make_job) -> JobPaths:  # type: ignore[no-untyped-def]
    if GIT is None:
        pytest.skip("git is not installed")
    job: JobPaths = make_job()
    _git(job.root, "init", "-q", "-b", "main")
    (job.root / "notes.txt").write_text("first\n")
    _git(job.root, "add", "notes.txt")
    _git(job.root, "commit", "-q", "-m", "the first commit of the job")
    return job


@pytest.fixture
def git_server(repo: JobPaths, bwrap: Bwrap) -> Iterator[StdioServer]:  # noqa: F811
    config = McpServerConfig(name="git", command=[os.path.join(VENV, "bin", "mcp-server-git"), "--repository",
                                                  str(repo.root.resolve())], required=True)
    (server,), problems = start_servers([config], str(repo.root), WORLD)
    assert problems == []
    try:
        yield server
    finally:
        server.close()


def test_mcp_server_git_reads_the_jobs_repository(repo: JobPaths, git_server: StdioServer) -> None:
    names = {t.name for t in git_server.tools}
    assert {"git_status", "git_log", "git_commit", "git_add", "git_create_branch"} <= names
    where = str(repo.root.resolve())
    log = git_server.call("git_log", {"repo_path": where}, 30)
    assert log.ok and "the first commit of the job" in log.text
    (repo.root / "notes.txt").write_text("first\nsecond\n")
    diff = git_server.call("git_diff_unstaged", {"repo_path": where}, 30)
    assert diff.ok and "+second" in diff.text


def test_mcp_server_git_cannot_change_the_jobs_git_nor_read_the_operators_gitconfig(
        repo: JobPaths, git_server: StdioServer) -> None:
    where = str(repo.root.resolve())
    git_dir = repo.root / ".git"
    before = {p.relative_to(git_dir): p.read_bytes() for p in git_dir.rglob("*") if p.is_file()}
    head = _git(repo.root, "rev-parse", "HEAD")
    (repo.root / "new.txt").write_text("new\n")
    # Staging, committing, a branch: each writes into .git, which is read-only to the server.
    added = git_server.call("git_add", {"repo_path": where, "files": ["new.txt"]}, 30)
    committed = git_server.call("git_commit", {"repo_path": where, "message": "planted"}, 30)
    branched = git_server.call("git_create_branch", {"repo_path": where, "branch_name": "planted"}, 30)
    assert not added.ok and not committed.ok and not branched.ok
    assert "Read-only file system" in added.text + committed.text + branched.text
    after = {p.relative_to(git_dir): p.read_bytes() for p in git_dir.rglob("*") if p.is_file()}
    assert after == before  # .git/config, the hooks, the refs, the index: as they were
    assert _git(repo.root, "rev-parse", "HEAD") == head and "planted" not in _git(repo.root, "branch")
    # The operator's ~/.gitconfig (the test's HOME): a setting the server's git would obey if it read it, and a
    # command (core.fsmonitor) it would run. Neither: its HOME is an empty one of its own.
    home = Path(os.environ["HOME"])
    marker = repo.root / "fsmonitor-ran"
    (home / ".gitconfig").write_text(f"[status]\n\tshowUntrackedFiles = no\n[core]\n\tfsmonitor = touch {marker}\n")
    status = git_server.call("git_status", {"repo_path": where}, 30)
    assert status.ok and "new.txt" in status.text  # untracked files shown: the operator's setting not read
    assert not marker.exists()


# -- @modelcontextprotocol/server-everything (npm) --------------------------------------------------------------
NPM_PREFIX = os.environ.get("TEST_MCP_NPM_PREFIX", "")
EVERYTHING = Path(NPM_PREFIX, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
NODE = shutil.which("node")


@pytest.fixture
def everything() -> Path:
    why = ("@modelcontextprotocol/server-everything is not installed: run tests/mcp_servers/install_everything.sh "
           "DIR and set TEST_MCP_NPM_PREFIX=DIR")
    if NODE is None:
        why = "node is not installed"
    elif NPM_PREFIX and EVERYTHING.is_file():
        return EVERYTHING
    if NPM_PREFIX:  # it was meant to be there
        pytest.fail(why)
    pytest.skip(why)


def node_world(index: Path) -> CommandWorld:
    assert NODE is not None
    node_home = str(Path(os.path.realpath(NODE)).parent.parent)  # /usr for /usr/bin/node
    package = str(index.parent.parent.parent.parent.resolve())  # node_modules' folder
    extra = tuple(p for p in (node_home, package) if not p.startswith(("/usr", "/bin", "/lib")))
    return CommandWorld(read_only=extra)


def test_server_everything_over_stdio_confined(make_job, everything: Path, bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job()
    assert NODE is not None
    config = McpServerConfig(name="every", command=[NODE, str(everything.resolve()), "stdio"], required=True)
    (server,), _ = start_servers([config], str(job.root), node_world(everything))
    try:
        names = {t.name for t in server.tools}
        assert {"echo", "get-sum"} <= names
        assert server.call("echo", {"message": "hello \x1b[2J"}, 30).text == "Echo: hello \x1b[2J"
        assert "42" in server.call("get-sum", {"a": 40, "b": 2}, 30).text
        assert server.confined_by and "UNCONFINED" not in server.confined_by
    finally:
        server.close()


def test_server_everythings_question_is_taken_as_a_form_and_answered(make_job, everything: Path,
                                                                    bwrap: Bwrap) -> None:  # noqa: F811
    """Its trigger-elicitation-request tool (offered only to a client that advertises elicitation) asks a form of
    thirteen fields (strings with formats, numbers in bounds, enums titled and not, multi-select ones): taken whole as
    a flat form, and an answer checked against it is accepted by the server's own validation."""
    from console.engine.questions import check_answer, parse_form
    from console.engine.tools.mcp_elicitation import Elicit, ElicitAnswer, ElicitAsk

    job = make_job()
    assert NODE is not None
    config = McpServerConfig(name="every", command=[NODE, str(everything.resolve()), "stdio"], elicitation=True)
    (server,), _ = start_servers([config], str(job.root), node_world(everything))
    asked: list[list[str]] = []

    def answer(request: ElicitAsk, over: object) -> ElicitAnswer:
        fields = parse_form(request.schema)
        asked.append([f.line() for f in fields])
        values = {"name": "Ada Lovelace", "check": "yes", "email": "ada@example.org", "integer": "7",
                  "untitledMultipleSelectEnum": "Piano,Violin", "titledSingleSelectEnum": "hero-3"}
        return ElicitAnswer("accept", check_answer(fields, values))

    try:
        assert "trigger-elicitation-request" in {t.name for t in server.tools}
        got = server.call("trigger-elicitation-request", {}, 30, elicit=Elicit(answer, 30))
    finally:
        server.close()
    (lines,) = asked
    assert len(lines) == 13 and lines[0] == "name (string, required): String - Your full, legal name"
    assert "untitledMultipleSelectEnum (some of Guitar, Piano, Violin, Drums, Bass, comma-separated, 1..3 of them, " \
           "default Guitar)" in lines[9]
    assert got.ok and "User provided the requested information" in got.text, got.text
    assert "- Name: Ada Lovelace" in got.text and "- Favorite Integer: 7" in got.text
    assert '"Piano"' in got.text and '"hero-3"' in got.text


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_server_everything_over_streamable_http(tmp_path: Path, everything: Path) -> None:
    assert NODE is not None
    port = _port()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PORT": str(port)}
    proc = subprocess.Popen([NODE, str(everything), "streamableHttp"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"server-everything did not start: {proc.stderr.read()[-500:]!r}")  # type: ignore[union-attr]
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        server = HttpServer(McpServerConfig(name="every", url=url), [url], {})
        try:
            assert "echo" in {t.name for t in server.tools}
            assert server.call("echo", {"message": "over http"}, 30).text == "Echo: over http"
        finally:
            server.close()
    finally:
        proc.kill()
        proc.wait(10)
