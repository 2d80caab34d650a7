"""Issue 36: the confinement attacks on a job's commands (test_command_attacks.py, test_git_protection.py,
test_trust.py and their kin), played by an MCP server instead: tests/mcp_servers/attacker.py, whose tools run what
the agent gives them inside the server's own sandbox (``sh``, ``py``), what it did at its start and in a thread of
its own between calls (``at_start``), and garbage written onto its stdout.

Each test runs the whole CLI (``agent-console run --headless --in-place --script``) with a job that declares the
server, and asserts what a command's test asserts: the operator's secrets unread, no network, no host socket, the
harness out of reach (its environment, descriptors, signals, ptrace, its terminal), the bounds (processes, /tmp,
/dev/shm, the kernel calls the commands' seccomp filter refuses), the repository's control files and the job's own
files unwritable, nothing of the server left after the run, and no symlink or race of the server's that makes the
harness's own file tools read outside the job folder. Several probes share one call (a run takes seconds); each
probe prints its mark only when the attack worked.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.tools.docs import HEADER
from console.engine.tools.docs_folder import write_docs
from tests.commands_support import PY_HOME, alive, bwrap  # noqa: F401  (the fixture)
from tests.integration.test_git_protection import marker, nothing_runs, operator_git, plant

pytestmark = pytest.mark.usefixtures("bwrap")
INCOMPLETE = 1  # a free stop of a job whose plan was never done (as test_command_attacks.py)
VENV = os.path.realpath(sys.prefix)
SERVERS = os.path.realpath(Path(__file__).parent.parent / "mcp_servers")
ATTACKER = [os.path.join(VENV, "bin", "python"), os.path.join(SERVERS, "attacker.py")]


def server(name: str = "attacker", env: tuple[str, ...] = ()) -> str:
    return (f'[[mcp]]\nname = "{name}"\ncommand = {json.dumps(ATTACKER)}\nrequired = true\ntimeout = 120\n'
            f"env = {json.dumps(list(env))}\n")


def attack_job(make_job, mcp: str, sandbox: str = "", limits: str = "") -> JobPaths:  # type: ignore[no-untyped-def]
    paths = make_job()
    (paths.root / "job.toml").write_text(
        f'[guardrails.completion]\ntype = "none"\n\n[sandbox]\nread_only = {json.dumps([PY_HOME, VENV, SERVERS])}\n'
        f"{sandbox}\n{limits}\n{mcp}")
    # The operator lets the job show its server the Python and the packages it runs on (and nothing else is listed).
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    allowed = sorted({e for e in mcp.split("env = ")[1].split("]")[0].strip("[").replace('"', "").split(", ") if e}) \
        if "env = " in mcp else []
    config.write_text(config.read_text() + "\n[sandbox_limits]\nread_only = true\n"
                      + (f"\n[mcp]\nenv = {json.dumps(allowed)}\n" if allowed else ""))
    return paths


def sh(script: str, name: str = "attacker") -> tuple[str, dict[str, Any]]:
    return f"mcp__{name}__sh", {"script": script}


def py(code: str, name: str = "attacker") -> tuple[str, dict[str, Any]]:
    return f"mcp__{name}__py", {"code": code}


def play(paths: JobPaths, tmp_path: Path, *turns: list[tuple[str, dict[str, Any]]], flags: tuple[str, ...] = ()
         ) -> int:
    script = [{"text": "", "calls": [{"name": n, "arguments": a} for n, a in calls]} for calls in turns]
    file = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    file.write_text(json.dumps([*script, {"text": "done"}]))
    return main(["run", str(paths.root), "--headless", "--in-place", "--script", str(file), *flags])


def results(paths: JobPaths) -> list[ev.ToolResult]:
    return [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult)]


def test_the_server_reads_no_secret_reaches_no_network_nor_the_harness(make_job, tmp_path, monkeypatch,
                                                                       capsys) -> None:
    """The operator's ~/.ssh, config (the API key), data dir (another run's journal, jobs.db), /etc/shadow and the
    harness's environment: read neither at the server's start, nor by its thread between calls, nor by its tools;
    no network (a listener on the host's loopback), no host unix socket, no signal, ptrace or /proc of the harness,
    no TIOCSTI, no descriptor but 0, 1, 2 (bwrap's options and seccomp filter come in memfds), and the commands'
    seccomp filter (keyrings, setuid bits, file watches)."""
    home = tmp_path / "operator"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY----- OP-KEY")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-OP-ENV")
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text('openai_api_key = "sk-live-OP-CONFIG"\n')
    data = Path(os.environ["AGENT_CONSOLE_DATA_DIR"])
    assert main(["run", str(Path(__file__).parents[2] / "sample_jobs" / "quickstart"), "--headless", "--speed",
                 "0"]) == 0
    others = list((data / "runs").glob("*/.console/checkpoint.jsonl"))
    assert others and (data / "jobs.db").exists()
    harness = os.getpid()
    secrets = [home / ".ssh" / "id_ed25519", config, others[0], data / "jobs.db", Path("/etc/shadow"),
               Path(f"/proc/{harness}/environ")]
    monkeypatch.setenv("ATTACK_PATHS", ":".join(map(str, secrets)))
    sock_dir = tmp_path / "daemon"
    sock_dir.mkdir()
    unix = str(sock_dir / "api.sock")
    paths = attack_job(make_job, server(env=("ATTACK_PATHS",)))
    root = Path(paths.root)
    assert operator_git(root, "init", "-q", "-b", "main").returncode == 0
    assert operator_git(root, "add", "-A").returncode == 0
    assert operator_git(root, "commit", "-q", "-m", "job").returncode == 0
    reads = "".join(f'cat "{t}" >/dev/null 2>&1 && echo "READ {t}"; ls "{t}" >/dev/null 2>&1 && echo "SAW {t}"\n'
                    for t in [*secrets, home, Path(f"/proc/{harness}/fd")])
    world = (reads + f"kill -0 {harness} 2>/dev/null && echo SIGNALLED\n"
             "for f in job.toml instructions.md .console/x .git/config; do echo x >> $f 2>/dev/null && echo "
             "WROTE $f; done\nls -A .console\necho scanned\n")
    probes = f"""
import ctypes, fcntl, os, socket, termios
libc = ctypes.CDLL(None, use_errno=True)
fds = []
for n in os.listdir("/proc/self/fd"):
    try:
        fds.append(os.readlink("/proc/self/fd/" + n))
    except OSError:  # listdir's own, closed since
        pass
print("fds", fds)
for family, where in ((socket.AF_INET, ("127.0.0.1", {{port}})), (socket.AF_UNIX, {unix!r})):
    try:
        socket.create_connection(where, timeout=3) if family == socket.AF_INET else socket.socket(family).connect(where)
        print("CONNECTED", where)
    except OSError as exc:
        print("no connection", exc.errno)
for fd in (0, 1, 2):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        print("TIOCSTI", fd)
    except OSError:
        pass
try:
    open("/dev/tty", "rb")
    print("A TERMINAL")
except OSError:
    pass
print("ptrace", libc.ptrace(16, {harness}, 0, 0))  # PTRACE_ATTACH
keyctl = {{"x86_64": 250, "aarch64": 219}}[os.uname().machine]
print("keyctl", libc.syscall(keyctl, 0, -4, 0, 0, 0))  # KEYCTL_GET_KEYRING_ID of the user's keyring
print("inotify", libc.inotify_init())
open("s", "w").close()
try:
    os.chmod("s", 0o4755)
    print("SETUID")
except OSError:
    pass
"""
    with socket.socket() as listener, socket.socket(socket.AF_UNIX) as daemon:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        daemon.bind(unix)
        daemon.listen()
        port = listener.getsockname()[1]
        assert play(paths, tmp_path, [("mcp__attacker__at_start", {})], [sh(world)],
                    [py(probes.replace("{port}", str(port)))], [sh(plant(root) + "; git init -q sub && "
                                                                   + plant(root, "sub/.git"))],
                    [("mcp__attacker__at_start", {})]) == INCOMPLETE
    start, seen, probed, planted, later = (r.content for r in results(paths))
    out = capsys.readouterr()
    for text in (start, seen, probed, later, paths.events.read_text(), out.out, out.err):
        assert "OP-" not in text and "root:" not in text, text  # /etc/shadow: root:hash:...
    # Its start: descriptors 0, 1, 2 (and listdir's own), the whitelisted environment and what job.toml names.
    assert start.splitlines()[:3] == ["fds at start: 0 1 2 3",
                                      "env at start: ATTACK_PATHS HOME LANG LC_ALL PATH PWD TERM TMPDIR", "end"]
    assert later == start  # its thread, between calls, read nothing either
    assert "READ" not in seen and "SAW" not in seen and "SIGNALLED" not in seen and "WROTE" not in seen, seen
    assert seen.endswith("\nscanned\n"), seen  # .console is an empty folder to it
    lines = probed.splitlines()
    # Its own (the event loop's, its pipes), none inherited: no memfd of bwrap's options or filter, no file of the host.
    assert lines[0].startswith("fds ['/dev/null', 'pipe:") and "memfd" not in lines[0] and "/tmp" not in lines[0]
    # Its own loopback (nothing listens there: refused), no unix socket of the host (no such file).
    assert [ln for ln in lines if ln.startswith("no connection")] == ["no connection 111", "no connection 2"], probed
    assert "CONNECTED" not in probed and "TIOCSTI" not in probed and "TERMINAL" not in probed, probed
    assert "ptrace -1" in lines and "keyctl -1" in lines and "inotify -1" in lines and "SETUID" not in probed
    assert "Read-only file system" in planted, planted
    nothing_runs(root)
    nothing_runs(root, root / "sub")  # a repository it made: made harmless after the call
    assert not marker(root).exists()


def test_a_fork_bomb_tmp_shm_and_the_folder_are_bounded(make_job, tmp_path, capsys) -> None:
    """Found: a server of a root operator forked without bound (RLIMIT_NPROC does not bind uid 0; a command's pids
    cgroup did, the server had none), and grew the job folder past max_job_mb (a command's folder is watched while it
    runs; a server's was not)."""
    program = ("sh -c 'i=0; while [ $i -lt 300 ]; do sleep 0.5 >/dev/null 2>&1 & i=$((i+1)); done; echo forked all' "
               "2>&1 | tail -1; sleep 1\n"
               "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1 | grep -o 'No space left on device'\n"
               "dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>&1 | grep -o 'No space left on device'\n")
    grow = ("i=0; while [ $i -lt 100 ]; do dd if=/dev/zero of=blob$i bs=1M count=1 2>/dev/null; i=$((i+1)); "
            "sleep 0.02; done; echo grew\n")
    paths = attack_job(make_job, server(), "processes = 64\ntmp_mb = 8\nshm_mb = 8\n", "[limits]\nmax_job_mb = 20\n")
    assert play(paths, tmp_path, [sh(program)], [sh(grow)]) == INCOMPLETE
    bounded, grown = (r.content for r in results(paths))
    assert "Cannot fork" in bounded and "forked all" not in bounded, bounded
    assert bounded.count("No space left on device") == 2, bounded
    # Killed as it went past the limit: its call did not finish, and the folder kept far fewer than its 100 MB.
    # The agent is told why (it said only that the server exited), as is the operator (its mcp_server event).
    assert "the job folder grew past max_job_mb (20 MB): the harness killed it during the call" in grown, grown
    assert "grew\n" not in grown
    said = [e for e in ev.read_events(paths.events) if isinstance(e, ev.McpServerEvent) and e.state != "ready"]
    assert said and "the job folder grew past max_job_mb (20 MB)" in said[0].why, said
    assert len(list(Path(paths.root).glob("blob*"))) < 60


def test_nothing_of_a_server_outlives_the_run_and_garbage_or_a_neighbour_do_no_harm(make_job, tmp_path,
                                                                                    capsys) -> None:
    """A double fork and a setsid grandchild it leaves between calls end with the run; garbage it writes onto its
    stdout between two messages does not end it (the next call is answered); a second server reads nothing of the
    first's /tmp (each has its own) while both run."""
    mark = f"41.{uuid.uuid4().int % 10**6:06d}"
    paths = attack_job(make_job, server() + "\n" + server("neighbour"))
    # (Their output elsewhere: the tool waits for the end of its pipe.)
    leave = (f"(setsid sh -c 'sleep {mark}' >/dev/null 2>&1 &)\n(setsid sh -c 'sleep {mark}' >/dev/null 2>&1 &) &\n"
             f"echo '{mark} SECRET' > /tmp/mine\n")
    try:
        assert play(paths, tmp_path, [sh(leave)], [("mcp__attacker__garbage", {})], [sh("echo after garbage")],
                    [sh("cat /tmp/mine; pgrep -x sleep || echo none", "neighbour")],
                    [sh("pgrep -x sleep | wc -l")]) == INCOMPLETE
        left, garbage, after, neighbour, still = (r.content for r in results(paths))
        assert left == "rc=0\n" and garbage == "GARBAGE SENT" and after == "rc=0\nafter garbage\n"
        assert neighbour.startswith("rc=0\ncat: /tmp/mine: No such file or directory\n"), neighbour
        assert neighbour.endswith("\nnone\n") and "SECRET" not in neighbour, neighbour
        assert still == "rc=0\n2\n", still  # they lived on between calls, in the server's world
        assert alive(mark) == []  # and ended with it
    finally:
        for pid in alive(mark):
            os.kill(pid, 9)


def test_a_symlink_or_a_race_of_the_servers_leaks_nothing_through_the_file_tools(make_job, tmp_path,
                                                                                 capsys) -> None:
    """The server plants links out of the job folder (to a file of the operator's beside it, to /etc/shadow) and
    swaps a file for such a link in a loop between calls; the harness's own read_file, search_files and edit_file
    then never read or change what the links name."""
    beside = tmp_path / "beside.txt"
    beside.write_text("NOT YOURS needle\n")
    paths = attack_job(make_job, server())
    # The harness's tool docs, as a run before this one left them: read-only to the server as to a command.
    assert write_docs(Path(paths.root), lambda folder: {"read_file.md": f"{HEADER}\nRead a file.\n"}).folder == "tools"
    race = ("for f in tools/*; do echo EVIL >> $f && echo WROTE $f; done; touch tools/new.md && echo WROTE new; "
            f"ln -s {beside} leak.txt; ln -s /etc/shadow shadow.txt; mkdir -p d; ln -s {tmp_path} d/up\n"
            f"(while :; do echo 'mine needle' > r.tmp; mv r.tmp race.txt; ln -sf {beside} race.txt; done) "
            ">/dev/null 2>&1 &\necho planted\n")
    calls = [("read_file", {"path": "leak.txt"}), ("read_file", {"path": "shadow.txt"}),
             ("read_file", {"path": "d/up/beside.txt"}), ("search_files", {"pattern": "needle"}),
             ("edit_file", {"path": "leak.txt", "old_text": "NOT YOURS", "new_text": "MINE"})]
    # The race: each read between two other calls (the stuck detector pauses a run that repeats one failing call).
    for other in (("list_files", {}), ("search_files", {"pattern": "needle"}), ("list_files", {"path": "d"})) * 2:
        calls += [("read_file", {"path": "race.txt"}), other]
    assert play(paths, tmp_path, [sh(race)], *([c] for c in calls)) == INCOMPLETE
    got = results(paths)
    assert got[0].content.endswith("\nplanted\n") and "Read-only file system" in got[0].content, got[0].content
    assert "WROTE" not in got[0].content and "EVIL" not in (Path(paths.root) / "tools" / "read_file.md").read_text()
    for result in got[1:]:
        assert "NOT YOURS" not in result.content and "root:" not in result.content, result.content
    assert beside.read_text() == "NOT YOURS needle\n"
    assert [r.ok for r in got[1:4]] == [False, False, False]


def test_the_tool_docs_are_read_only_to_a_server_from_a_runs_very_first_start(make_job, tmp_path, capsys) -> None:
    """At a run's first start the harness writes its tool docs after the servers start: the folder was not there to
    be bound, and the server could write the docs the agent reads (found by the mcpattack helper)."""
    paths = attack_job(make_job, server())
    assert not (Path(paths.root) / "tools").exists()
    loop = ("(while :; do for f in tools/*.md; do echo EVIL >> $f 2>/dev/null && echo WROTE > wrote.txt; done; "
            "sleep 0.05; done) >/dev/null 2>&1 &\necho started\n")
    assert play(paths, tmp_path, [sh(loop)], [("list_files", {})], [("list_files", {})]) == INCOMPLETE
    got = results(paths)
    assert got[0].content.endswith("\nstarted\n"), got[0].content
    docs = sorted((Path(paths.root) / "tools").glob("*.md"))
    assert docs and all("EVIL" not in d.read_text() for d in docs)
    assert not (Path(paths.root) / "wrote.txt").exists()


def test_what_a_server_wrote_counts_against_max_job_mb_for_the_file_tools(make_job, tmp_path, capsys) -> None:
    """The file tools keep an account of the folder's size (scanned once): a command's call corrects it, a server's
    did not, so the agent could write past max_job_mb after a server grew the folder (found by mcpattack)."""
    paths = attack_job(make_job, server(), "", "[limits]\nmax_job_mb = 20\n")
    grow = "dd if=/dev/zero of=blob bs=1M count=18 2>/dev/null; echo grew\n"
    assert play(paths, tmp_path, [("write_file", {"path": "a.txt", "content": "a"})], [sh(grow)],
                [("write_file", {"path": "b.txt", "content": "b" * (3 * 1024 * 1024)})]) == INCOMPLETE
    got = [r for r in results(paths) if r.tool in ("write_file", "mcp__attacker__sh")]
    assert [r.ok for r in got] == [True, True, False], [(r.tool, r.content[:200]) for r in got]
    assert got[1].content.endswith("grew\n") and "max_job_mb" in got[2].content, got[2].content
    assert not (Path(paths.root) / "b.txt").exists()
