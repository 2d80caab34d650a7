"""Issue 17's attacks on job-declared commands, played as a hostile agent would: through ``--script``, the agent
writes a program with write_file, then calls the job's declared ``run`` command that runs it.

Each test runs the whole CLI (``agent-console run --headless --in-place --script``) and reads what the agent got
back (the ``tool_result`` events) and what the operator was told (the header, errors). With bubblewrap present,
missing, and failing for a moment.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.tools import confine
from console.engine.tools.confine import Bwrap
from tests.commands_support import PY, PY_HOME, alive

pytestmark = pytest.mark.usefixtures("bwrap")
# Each script ends with a free stop (type = "none") of a job whose plan was never done: the run ends, honestly,
# incomplete (exit 1). What these tests check is what the commands could do, and what the operator was told.
INCOMPLETE = 1

JOB_TOML = """
[guardrails.completion]
type = "none"

[[tools]]
name = "run"
description = "Run the agent's script"
command = ["sh", "evil.sh"]
timeout = {timeout}
{extra}
"""


def hostile_job(make_job, script: str, *, extra: str = "", timeout: float = 30) -> JobPaths:
    paths = make_job()
    (paths.root / "job.toml").write_text(JOB_TOML.format(timeout=timeout, extra=extra))
    return paths


def allow(caps: str) -> None:
    """The operator's config file says ``caps`` under [sandbox_limits] (the tests' own config: conftest)."""
    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(f"[sandbox_limits]\n{caps}\n")


# The tests' Python is not in the sandbox unless an extra path shows it; where it lives (a home, as pyenv's) the
# operator allows it.
ALLOW_PY = f'read_only = ["{PY_HOME}"]'


def turns(*calls_per_turn: list[tuple[str, dict[str, Any]]], end: str = "done") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"text": "", "calls": [{"name": n, "arguments": a} for n, a in calls]}
                                 for calls in calls_per_turn]
    return [*out, {"text": end}]


def play(paths: JobPaths, tmp_path: Path, script: list[dict[str, Any]], *flags: str) -> int:
    file = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    file.write_text(json.dumps(script))
    return main(["run", str(paths.root), "--headless", "--in-place", "--script", str(file), *flags])


def write_and_run(program: str, runs: int = 1) -> list[dict[str, Any]]:
    return turns([("write_file", {"path": "evil.sh", "content": program})], *([("run", {})] for _ in range(runs)))


def results(paths: JobPaths, tool: str = "run") -> list[ev.ToolResult]:
    return [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult) and e.tool == tool]


def events_of(paths: JobPaths, kind: type[ev.EventBase]) -> list[Any]:
    return [e for e in ev.read_events(paths.events) if isinstance(e, kind)]


def test_the_header_says_what_a_command_sees_and_its_bounds(make_job, tmp_path, capsys, bwrap: Bwrap) -> None:
    allow(f"network = true\n{ALLOW_PY}")
    paths = hostile_job(make_job, "", extra='[sandbox]\nmemory_mb = 512\nnetwork = true\n'
                                           f'read_only = ["{PY_HOME}"]')
    assert play(paths, tmp_path, write_and_run("echo hi")) == INCOMPLETE
    [head] = events_of(paths, ev.CommandSandbox)
    assert head.mode == "confined" and head.tool == bwrap.label and head.commands == ["run"]
    assert head.network and head.read_only == [PY_HOME] and head.limits["memory_mb"] == 512
    assert "the job folder" in head.text and "512 MB memory" in head.text and "host's network" in head.text
    assert results(paths)[0].content == "exit code 0\nhi"


def test_reading_the_operators_secrets_finds_nothing(make_job, tmp_path, monkeypatch, capsys) -> None:
    """Found: a command read the operator's ~/.ssh, the config file holding the API key, every other run's
    journal, the data dir's jobs.db, and /etc/shadow as root."""
    home = tmp_path / "operator"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    monkeypatch.setenv("HOME", str(home))
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text('openai_api_key = "sk-live-SECRET"\n')
    data = Path(os.environ["AGENT_CONSOLE_DATA_DIR"])
    # another run, with a journal, and the jobs table
    assert main(["run", str(Path(__file__).parents[2] / "sample_jobs" / "quickstart"), "--headless", "--speed",
                 "0"]) == 0
    others = list((data / "runs").glob("*/.console/checkpoint.jsonl"))
    assert others and (data / "jobs.db").exists()
    targets = [home / ".ssh" / "id_ed25519", config, others[0], data / "jobs.db", Path("/etc/shadow"), home]
    program = "".join(f'cat "{t}" 2>/dev/null && echo "READ {t}"; ls "{t}" >/dev/null 2>&1 && echo "SAW {t}"\n'
                      for t in targets) + "echo scanned\n"
    paths = hostile_job(make_job, program)
    assert play(paths, tmp_path, write_and_run(program)) == INCOMPLETE
    [result] = results(paths)
    assert result.content == "exit code 0\nscanned", result.content
    assert "SECRET" not in paths.events.read_text()


def test_a_fork_bomb_tmp_and_shm_and_the_folder_are_bounded(make_job, tmp_path, capsys) -> None:
    """Found: a command forked without bound, filled /tmp and /dev/shm (host RAM), and grew the job folder past
    max_job_mb."""
    # The forks sleep a moment and go, so the pids they held are free again for the rest of the program.
    program = ("sh -c 'i=0; while [ $i -lt 300 ]; do sleep 0.5 >/dev/null 2>&1 & i=$((i+1)); done; echo forked all' "
               "2>&1 | tail -1; sleep 1\n"
               "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1 | grep -o 'No space left on device'\n"
               "dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>&1 | grep -o 'No space left on device'\n"
               "i=0; while [ $i -lt 100 ]; do dd if=/dev/zero of=blob$i bs=1M count=1 2>/dev/null; i=$((i+1)); "
               "sleep 0.02; done; echo grew\n")
    paths = hostile_job(make_job, program, extra="[sandbox]\nprocesses = 64\ntmp_mb = 8\nshm_mb = 8\n"
                                                 "[limits]\nmax_job_mb = 20\n")
    started = time.monotonic()
    assert play(paths, tmp_path, write_and_run(program)) == INCOMPLETE
    assert time.monotonic() - started < 25
    [result] = results(paths)
    text = result.content
    assert text.startswith("stopped: the job folder grew to") and "(max_job_mb)" in text, text
    assert "Cannot fork" in text and "forked all" not in text
    assert text.count("No space left on device") == 2
    assert "grew" not in text.splitlines()[-1]


@pytest.mark.parametrize("flags", [(), ("--unconfined",)], ids=["confined", "unconfined"])
def test_a_grandchild_never_outlives_the_call_or_the_run(make_job, tmp_path, capsys, flags) -> None:
    """Found: unconfined, a setsid grandchild outlived the timeout and the run."""
    marker = f"41.{uuid.uuid4().int % 10**6:06d}"
    program = f"(setsid sh -c 'sleep {marker}' &)\n(setsid sh -c 'sleep {marker}' &) &\necho left\nsleep 60\n"
    paths = hostile_job(make_job, program, timeout=1)
    try:
        assert play(paths, tmp_path, write_and_run(program), *flags) == INCOMPLETE
        assert results(paths)[0].content.startswith("timed out after 1 s (killed)\nleft")
        assert alive(marker) == []
    finally:
        for pid in alive(marker):
            os.kill(pid, 9)


def test_host_unix_sockets_cannot_be_reached(make_job, tmp_path, capsys) -> None:
    """Found: host unix sockets outside /tmp and /run were connectable."""
    sock_dir = tmp_path / "daemon"
    sock_dir.mkdir()
    path = str(sock_dir / "api.sock")
    program = (f"{PY} -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); "
               "print('CONNECTED')\" 2>&1 | tail -1\n")
    allow(ALLOW_PY)
    paths = hostile_job(make_job, program, extra=f'[sandbox]\nread_only = ["{PY_HOME}"]\n')
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(1)
        assert play(paths, tmp_path, write_and_run(program)) == INCOMPLETE
    [result] = results(paths)
    assert "CONNECTED" not in result.content and "No such file or directory" in result.content


def test_the_default_limits_grant_no_path_of_the_home_or_etc_and_no_network(make_job, tmp_path, capsys) -> None:
    """Found: with no [sandbox_limits] in the operator's config, a job asking read_only = ["~", "/etc"] and network =
    true read ~/.ssh/id_rsa, ~/.pgpass and /etc/shadow, with the network on. Now the job is refused at the start:
    exit 2, one line naming the job's key and the config key that would allow it."""
    program = "cat /etc/shadow ~/.ssh/id_rsa; echo ran\n"
    config = os.environ["AGENT_CONSOLE_CONFIG"]
    # Every problem at once, in one line, naming the operator's config file.
    cases = (('[sandbox]\nread_only = ["~", "/etc"]\nnetwork = true\n',
              "key 'sandbox.network': the operator's config does not give jobs the network; to allow it, set network "
              f"= true under [sandbox_limits] in the config file ({config}); key 'sandbox.read_only.0': '~' is your "
              "home folder, which jobs may not read by default; to allow it, list it in read_only under "
              f"[sandbox_limits] in the config file ({config}) (read_only = [\"~\"], or true for any path); key "
              "'sandbox.read_only.1': '/etc' is the host's /etc"),
             ('[sandbox]\nread_only = ["/etc"]\n', "key 'sandbox.read_only.0': '/etc' is the host's /etc"))
    paths = make_job()
    for extra, said in cases:
        (paths.root / "job.toml").write_text(JOB_TOML.format(timeout=30, extra=extra))
        assert play(paths, tmp_path, write_and_run(program)) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err, err
        assert not paths.events.exists()


def test_an_allowed_home_shows_no_credential_and_no_socket(make_job, tmp_path, monkeypatch, capsys) -> None:
    """The same job where the operator allows any path (read_only = true): the credentials of the home stay hidden
    (~/.ssh, ~/.pgpass: the store's password, where the README puts it), /etc/shadow too, and a unix socket a host
    program serves in the home cannot be reached. What else is there still reads."""
    home = tmp_path / "operator"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- OP-KEY")
    (home / ".pgpass").write_text("db.example.net:5432:agents:agents:OP-PG-PASSWORD\n")
    (home / "notes.txt").write_text("plain notes\n")
    (home / "run").mkdir()
    monkeypatch.setenv("HOME", str(home))
    allow("read_only = true")
    sock = home / "run" / "agent.sock"
    program = (f'cat "{home}/.ssh/id_rsa" "{home}/.pgpass" /etc/shadow 2>&1; cat "{home}/notes.txt"\n'
               f"{PY} -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{sock}'); print('CONNECTED')\" "
               "2>&1 | tail -1\n")
    paths = hostile_job(make_job, program, extra=f'[sandbox]\nread_only = ["~", "/etc", "{PY_HOME}"]\n')
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock))
        server.listen(1)
        assert play(paths, tmp_path, write_and_run(program)) == INCOMPLETE
    [result] = results(paths)
    assert "OP-" not in result.content and "root:" not in result.content, result.content  # shadow: root:hash:...
    assert result.content.splitlines()[-2:] == ["plain notes", "ConnectionRefusedError: [Errno 111] Connection refused"]
    [head] = events_of(paths, ev.CommandSandbox)
    assert "no unix socket in them can be reached" in head.text and ".pgpass" in head.text


def test_without_bubblewrap_every_call_is_refused_and_the_operator_told(make_job, tmp_path, monkeypatch,
                                                                       capsys) -> None:
    """Fail closed: no sandbox, no command (and each call tries again); the header says so."""
    monkeypatch.setattr(confine, "candidates", lambda: [])
    monkeypatch.setattr(confine, "_found", {})
    program = "touch ran\n"
    paths = hostile_job(make_job, program)
    assert play(paths, tmp_path, write_and_run(program, runs=2)) == INCOMPLETE
    assert not (paths.root / "ran").exists()
    assert all(r.content.startswith("run was not run: its sandbox could not be set up") for r in results(paths))
    assert len(results(paths)) == 2
    [head] = events_of(paths, ev.CommandSandbox)
    assert head.mode == "refused" and "bubblewrap is not installed" in head.text
    errors = [e for e in events_of(paths, ev.ErrorEvent) if e.where == "sandbox"]
    assert len(errors) == 2 and all("next call tries again" in e.message for e in errors)


def test_a_bubblewrap_that_fails_for_a_moment_refuses_one_call_only(make_job, tmp_path, monkeypatch, capsys,
                                                                   bwrap: Bwrap) -> None:
    """Found: one failed probe made every command of the run unconfined for its whole life."""
    count = tmp_path / "bwrap-runs"
    flaky = tmp_path / "bwrap"
    flaky.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'bubblewrap 0.11.0'; exit 0; fi\n"
                     f'n=$(cat "{count}" 2>/dev/null || echo 0); echo $((n+1)) > "{count}"\n'
                     f'if [ "$n" -ge 2 ]; then exec "{bwrap.path}" "$@"; fi\n'
                     "echo 'bwrap: Creating new namespace failed: Resource temporarily unavailable' >&2; exit 1\n")
    flaky.chmod(0o755)
    monkeypatch.setattr(confine, "candidates", lambda: [(str(flaky), "system")])
    monkeypatch.setattr(confine, "_found", {})
    program = "echo ran >> ran.txt; echo ran\n"
    paths = hostile_job(make_job, program)
    assert play(paths, tmp_path, write_and_run(program, runs=2)) == INCOMPLETE
    first, second = results(paths)
    [head] = events_of(paths, ev.CommandSandbox)
    # The start's own probe failed (the header says so); the first call proves it again, and runs.
    assert head.mode == "refused"
    assert first.content == "exit code 0\nran" and second.content == "exit code 0\nran"
    assert (paths.root / "ran.txt").read_text() == "ran\nran\n"


def test_unconfined_only_when_the_operator_says_so_and_the_header_says_it(make_job, tmp_path, capsys) -> None:
    program = "ls /root >/dev/null 2>&1 && echo sees-everything\n"
    paths = hostile_job(make_job, program)
    assert play(paths, tmp_path, write_and_run(program), "--unconfined") == INCOMPLETE
    [head] = events_of(paths, ev.CommandSandbox)
    assert head.mode == "unconfined" and "UNCONFINED" in head.text
    assert results(paths)[0].content == "exit code 0\nsees-everything"


def test_the_deadline_cuts_a_turn_of_slow_commands(make_job, tmp_path, capsys) -> None:
    """Found: one turn of many slow command calls overran a deadline by the sum of their timeouts."""
    program = "sleep 60\n"
    paths = hostile_job(make_job, program, timeout=120)
    toml = (paths.root / "job.toml").read_text()
    (paths.root / "job.toml").write_text('[guardrails]\ndeadline = "3s"\n' + toml)
    script = turns([("write_file", {"path": "evil.sh", "content": program})], [("run", {})] * 3,
                   end="wrapping up")
    # Cut, not waited out: the first call says it was cut at the deadline, the others were not run.
    assert play(paths, tmp_path, script) == 1
    first, *rest = results(paths)
    assert first.content.startswith("cut at the job's deadline after"), first.content
    assert [r.content for r in rest] == ["run was not run: the job's time is up (its deadline passed during this "
                                         "turn); the run is winding down."] * 2
    [ended] = events_of(paths, ev.RunEnded)
    assert ended.reason == "budget_exhausted"


def test_a_second_stop_cuts_a_running_command(make_job, tmp_path, capsys) -> None:
    """Found: `agent-console stop` (twice) and SIGTERM (twice) did not cut a command that ignores SIGTERM: nothing
    read the operator's commands while a tool ran, so the run waited for the command's own end (up to its
    timeout). Now the first stop lets the turn's calls finish, the second ends this one at once."""
    import threading

    from console.engine.control import pending_commands, write_inbox

    # A sleep of its own (no other process on the machine has this command line), found among the processes:
    # its output is not in the log until it ends.
    nap = f"sleep 100.{uuid.uuid4().int % 10**6:06d}"
    program = f'trap "" TERM; echo started; {nap}\n'
    paths = hostile_job(make_job, program, timeout=120)
    sent: list[float] = []

    def applied() -> list[str]:
        return [e.detail for e in events_of(paths, ev.OperatorCommand) if e.status == "applied"]

    def wait(condition: Callable[[], object]) -> None:
        deadline = time.monotonic() + 60  # a ceiling, not a pace: each wait ends when its condition holds
        while time.monotonic() < deadline and not condition():
            time.sleep(0.02)

    def operator() -> None:
        wait(lambda: alive(nap))
        write_inbox(paths, "stop", source="cli")
        sent.append(time.monotonic())
        # The run has read the first stop (it takes a command off the inbox as it applies it; its events are
        # logged with the step) before the second is sent.
        wait(lambda: pending_commands(paths.inbox) == 0)
        write_inbox(paths, "stop", source="cli")
        sent.append(time.monotonic())

    thread = threading.Thread(target=operator, daemon=True)
    thread.start()
    code = play(paths, tmp_path, write_and_run(program))
    ended = time.monotonic()
    thread.join(5)
    assert code == 3 and len(sent) == 2
    assert ended - sent[1] < 60, ended - sent[1]  # cut, not the command's own end (100 s)
    assert not alive(nap)
    [result] = results(paths)
    assert result.content.startswith("stopped by the operator (killed)\nstarted")
    assert applied() == ["stopping after the current turn (send stop again to stop now)", "stopping now"]


