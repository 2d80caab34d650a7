"""MCP servers in whole runs: a real one no one here wrote (mcp-server-time, from PyPI) and a hostile one of ours
(tests/mcp_servers/hostile.py), each started confined as the job's commands are, their tools called by the scripted
model through the one gate (policies, the journal, the events).

The servers run with bubblewrap: without it these tests are skipped with the reason, except in CI (CI=true), where
a missing bwrap fails them (tests/commands_support.py's fixture)."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.engine.tools.confine import Bwrap
from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_tools import McpUnavailable
from console.mcp.client import StdioServer, start_servers
from console.mcp.world import McpStartError
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.commands_support import PY_HOME, bwrap  # noqa: F401  (the fixture)
from tests.conftest import Recording, run_settings

VENV = os.path.realpath(sys.prefix)
SERVERS = os.path.realpath(Path(__file__).parent.parent / "mcp_servers")
# What a confined server sees beyond the job folder and the toolchain: the Python it runs on and the packages.
WORLD = CommandWorld(read_only=(PY_HOME, VENV, SERVERS))
TIME = McpServerConfig(name="time", command=[os.path.join(VENV, "bin", "mcp-server-time"), "--local-timezone",
                                             "UTC"], required=True)
HOSTILE = McpServerConfig(name="hostile", command=[os.path.join(VENV, "bin", "python"),
                                                   os.path.join(SERVERS, "hostile.py")], max_output_kb=8)


@pytest.fixture
def job(make_job) -> JobPaths:  # type: ignore[no-untyped-def]
    return make_job()


class Started(dict[str, StdioServer]):
    """The servers a test asked for by name (``time``, ``hostile``), each started, confined, the first time: most
    tests use the hostile one only (starting the time server too was a confined process of its own for nothing)."""

    def __init__(self, root: str) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> StdioServer:
        (server,), problems = start_servers([{TIME.name: TIME, HOSTILE.name: HOSTILE}[name]], self.root, WORLD)
        assert problems == []
        self[name] = server
        return server


@pytest.fixture
def served(job: JobPaths, bwrap: Bwrap) -> Iterator[Started]:  # noqa: F811
    servers = Started(str(job.root))
    try:
        yield servers
    finally:
        for s in servers.values():
            s.close()


def run(job: JobPaths, servers: list[StdioServer], script: list[T], clock: FakeClock, tmp_path: Path,
        **settings: Any) -> Recording:
    provider = Recording(clock=clock, script=script)
    sup = Supervisor(job, run_settings(**settings), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"),
                     mcp=servers)
    sup.run()
    return provider


def events(job: JobPaths) -> list[ev.EventBase]:
    return list(ev.read_events(job.events))


def results(job: JobPaths) -> list[ev.ToolResult]:
    return [e for e in events(job) if isinstance(e, ev.ToolResult)]


NOW = "mcp__time__get_current_time"


def test_the_time_servers_tool_is_called_through_the_gate(job, served, clock, tmp_path) -> None:
    # The job's own policy governs the MCP tool as any other: denied before list_files, allowed after it.
    policy = GuardrailsConfig.model_validate({"policies": [{"type": "sequential",
                                                            "dependencies": {NOW: ["list_files"]}}]})
    script = [T(calls=[C(name=NOW, arguments={"timezone": "Asia/Tokyo"})]), T(calls=[C(name="list_files")]),
              T(calls=[C(name=NOW, arguments={"timezone": "Asia/Tokyo"})]), T(calls=[C(name=NOW, arguments={})]),
              T(error="end of script")]
    provider = run(job, [served["time"]], script, clock, tmp_path, guardrails=policy)
    offered = {t.name: t for t in provider.requests[0].tools}
    assert NOW in offered and "mcp__time__convert_time" in offered
    assert offered[NOW].parameters["required"] == ["timezone"]  # the server's own schema
    evs = events(job)
    (denied,) = [e for e in evs if isinstance(e, ev.ToolDenied)]
    assert (denied.tool, denied.policy) == (NOW, "sequential")
    got = [(r.tool, r.ok) for r in results(job)]
    assert got == [(NOW, False), ("list_files", True), (NOW, True), (NOW, False)]  # a denial is its result too
    answer = json.loads(next(r for r in results(job) if r.tool == NOW and r.ok).content)
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")
    # Arguments the server's schema refuses never reach it: the agent is told what is wrong.
    bad = [r for r in results(job) if r.tool == NOW and not r.ok][-1]
    assert "Invalid arguments for mcp__time__get_current_time" in bad.content and "timezone" in bad.content
    # The agent got the answer as the call's result.
    seen = provider.requests[3].messages[-1]
    assert seen.role == "tool" and "Asia/Tokyo" in seen.content


def test_a_hostile_servers_tools_are_offered_only_when_safe(job, served, clock, tmp_path) -> None:
    provider = run(job, [served["hostile"]], [T(error="end of script")], clock, tmp_path)
    offered = {t.name: t for t in provider.requests[0].tools}
    mine = sorted(n for n in offered if n.startswith("mcp__"))
    # Escapes and markup in names, a schema nested 40 deep, a schema of 140 KB: none is offered.
    assert mine == ["mcp__hostile__connect", "mcp__hostile__content", "mcp__hostile__die", "mcp__hostile__hang",
                    "mcp__hostile__huge", "mcp__hostile__linger", "mcp__hostile__read", "mcp__hostile__sample",
                    "mcp__hostile__write"]
    description = offered["mcp__hostile__read"].description
    assert "\x1b" not in description and "\x07" not in description and len(description) <= 1024
    assert "\\x1b]52" in description  # shown, escaped
    said = [e.message for e in events(job) if isinstance(e, ev.ErrorEvent) and e.where == "mcp"]
    assert len(said) == 4 and all("\x1b" not in m and "\x07" not in m for m in said)
    assert any("nests deeper than 12 levels" in m for m in said)
    assert any("more than the 16,384 allowed" in m for m in said)
    assert sum("not offered: its name" in m for m in said) == 2


def test_a_huge_result_is_cut_to_the_servers_bound(job, served, clock, tmp_path) -> None:
    run(job, [served["hostile"]], [T(calls=[C(name="mcp__hostile__huge")]), T(error="end of script")], clock,
        tmp_path)
    (got,) = results(job)
    assert got.ok and len(got.content) < 8 * 1024 + 200
    assert got.content.startswith("HHHH") and got.content.rstrip().endswith("characters]")
    assert "result truncated: showed 8,192 of 3,000,023 characters" in got.content


def test_the_server_cannot_read_the_operators_home_nor_reach_the_network(job, served, clock, tmp_path) -> None:
    home = Path(os.environ["HOME"])  # the test's own HOME (tests/conftest.py), never the operator's
    (home / ".ssh").mkdir(exist_ok=True)
    key = home / ".ssh" / "id_ed25519"
    key.write_text("PRIVATE KEY\n")
    beside = tmp_path / "beside.txt"  # a file of the operator's next to the job folder
    beside.write_text("NOT YOURS\n")
    with socket.socket() as listener:  # a server on the host's loopback, which the harness itself can reach
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        script = [T(calls=[C(name="mcp__hostile__read", arguments={"path": str(key)})]),
                  T(calls=[C(name="mcp__hostile__read", arguments={"path": str(beside)})]),
                  T(calls=[C(name="mcp__hostile__read", arguments={"path": "~/.ssh/id_ed25519"})]),
                  T(calls=[C(name="mcp__hostile__connect", arguments={"host": "127.0.0.1", "port": port})]),
                  T(calls=[C(name="mcp__hostile__read", arguments={"path": str(job.root / "instructions.md")})]),
                  T(error="end of script")]
        run(job, [served["hostile"]], script, clock, tmp_path)
    got = results(job)
    assert [r.ok for r in got] == [False, False, False, False, True]
    assert all("PRIVATE KEY" not in r.content and "NOT YOURS" not in r.content for r in got)
    assert "No such file" in got[0].content and "No such file" in got[1].content
    assert "CONNECTED" not in got[3].content and "refused" in got[3].content
    assert got[4].content.startswith("READ:# Test job")  # the job folder is its world


def test_a_required_server_that_does_not_start_refuses_the_run_in_one_line(job, bwrap) -> None:  # noqa: F811
    gone = McpServerConfig(name="gone", command=["/usr/bin/python3", "-c", "import sys; sys.exit('no token\\x1b[2J')"],
                           required=True)
    with pytest.raises(McpStartError) as caught:
        start_servers([HOSTILE, gone], str(job.root), WORLD, start_seconds=20)
    line = str(caught.value)
    assert "\n" not in line and line.startswith("MCP server gone did not start: it exited")
    assert "(its last words: no token\\x1b[2J)" in line and "\x1b" not in line  # escaped
    assert "required" in line


def mcp_states(job: JobPaths) -> list[tuple[str, str]]:
    return [(e.server, e.state) for e in events(job) if isinstance(e, ev.McpServerEvent)]


def test_an_optional_server_that_does_not_start_is_said_once_and_its_tools_answer_unavailable(
        job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    dies = ["/usr/bin/python3", "-c", "import sys; sys.exit('no token\\x1b[2J')"]
    named = McpServerConfig(name="gone", command=dies, tools=["lookup"])
    unnamed = McpServerConfig(name="vague", command=dies)
    servers, problems = start_servers([named, unnamed], str(job.root), WORLD, start_seconds=20)
    try:
        assert [p.split(":")[0] for p in problems] == ["MCP server gone did not start",
                                                       "MCP server vague did not start"]
        assert "its tools answer that it is unavailable" in problems[0] and "none is offered" in problems[1]
        script = [T(calls=[C(name="mcp__gone__lookup", arguments={"q": "x"})]),
                  T(calls=[C(name="mcp__gone__lookup", arguments={})]), T(error="end of script")]
        provider = run(job, servers, script, clock, tmp_path)
    finally:
        for s in servers:
            s.close()
    offered = {t.name: t for t in provider.requests[0].tools}
    assert "mcp__gone__lookup" in offered and "did not start" in offered["mcp__gone__lookup"].description
    assert not any(n.startswith("mcp__vague__") for n in offered)
    # Said once each (not at every call), escaped; the calls answer "unavailable", never sent.
    said = [e for e in events(job) if isinstance(e, ev.McpServerEvent)]
    assert [(e.server, e.state, e.tools, e.known) for e in said] == [
        ("gone", "unavailable", ["mcp__gone__lookup"], True), ("vague", "unavailable", [], False)]
    assert all("no token\\x1b[2J" in e.why and "\x1b" not in e.why for e in said)
    got = results(job)
    assert [r.ok for r in got] == [False, False]
    assert all("mcp__gone__lookup is unavailable: MCP server gone did not start" in r.content
               and "It was not run" in r.content for r in got)


def test_an_env_variable_comes_from_the_operators_environment_only(job, bwrap) -> None:  # noqa: F811
    needs = TIME.model_copy(update={"env": ["MCP_TEST_TOKEN"]})
    with pytest.raises(McpStartError, match="MCP server time: the operator's environment has no MCP_TEST_TOKEN"):
        start_servers([needs], str(job.root), WORLD, environ={})


def holding(token: str) -> list[int]:
    """The host's processes whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if token.encode() in fh.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_the_servers_whole_tree_ends_with_it(served) -> None:
    token = f"linger-{uuid.uuid4().hex}"
    server = served["hostile"]
    assert server.call("linger", {"token": token}, 30).text == "LEFT"
    assert holding(token)  # a process of its own session, in the server's sandbox
    server.close()
    deadline = time.monotonic() + 30  # the kernel ends a pid namespace's processes as it can: waited on, not timed
    while holding(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert holding(token) == []


def test_a_server_that_hangs_then_dies_mid_call_is_a_result_each_time_not_a_crash(job, bwrap, clock,  # noqa: F811
                                                                                    tmp_path) -> None:
    quick = HOSTILE.model_copy(update={"timeout": 2.0})
    servers, _ = start_servers([quick], str(job.root), WORLD)
    try:
        script = [T(calls=[C(name="mcp__hostile__hang")]), T(calls=[C(name="mcp__hostile__read",
                                                                       arguments={"path": "instructions.md"})]),
                  T(calls=[C(name="mcp__hostile__die")]), T(calls=[C(name="mcp__hostile__huge")]),
                  T(error="end of script")]
        run(job, servers, script, clock, tmp_path)
    finally:
        for s in servers:
            s.close()
    got = results(job)
    assert [(r.tool.removeprefix("mcp__hostile__"), r.ok) for r in got] == [
        ("hang", False), ("read", True), ("die", False), ("huge", False)]
    assert "unavailable: no answer within 2 s" in got[0].content  # the server lives on after a call that hung
    assert all("is unavailable" in r.content and "Traceback" not in r.content for r in got[2:])
    # Restarted once after it died; its list changed then (huge is no longer listed): huge answers "unavailable".
    assert "the server exited during the call (it was restarted)" in got[2].content
    assert "no longer offers this tool" in got[3].content and "It was not run" in got[3].content
    assert mcp_states(job) == [("hostile", "ready"), ("hostile", "restarted")]


def test_a_server_that_dies_is_restarted_once_confined_as_at_start_then_unavailable(job, bwrap, clock,  # noqa: F811
                                                                                      tmp_path) -> None:
    servers, _ = start_servers([HOSTILE], str(job.root), WORLD)
    first_confinement = servers[0].confined_by
    read = C(name="mcp__hostile__read", arguments={"path": "instructions.md"})
    connect = C(name="mcp__hostile__connect", arguments={"host": "127.0.0.1", "port": 9})
    try:
        script = [T(calls=[C(name="mcp__hostile__die")]), T(calls=[read]), T(calls=[connect]),
                  T(calls=[C(name="mcp__hostile__die")]), T(calls=[read]), T(error="end of script")]
        provider = run(job, servers, script, clock, tmp_path)
    finally:
        for s in servers:
            s.close()
    assert not any(t.name == "mcp__hostile__fresh" for r in provider.requests for t in r.tools)  # not offered mid-run
    got = results(job)
    assert [(r.tool.removeprefix("mcp__hostile__"), r.ok) for r in got] == [
        ("die", False), ("read", True), ("connect", False), ("die", False), ("read", False)]
    assert got[1].content.startswith("READ:# Test job")  # served by the restarted server
    assert "no longer offers this tool" in got[2].content  # its schema changed: not sent with the old arguments
    assert "it is unavailable for the rest of the run" in got[3].content
    assert "is unavailable" in got[4].content and "It was not run" in got[4].content
    states = [e for e in events(job) if isinstance(e, ev.McpServerEvent)]
    assert [e.state for e in states] == ["ready", "restarted", "unavailable"]
    restarted = states[1]
    assert restarted.confined == first_confinement and "bubblewrap" in restarted.confined.lower()
    assert "it exited during a call of die" in restarted.why and "dying \\x1b[31mnow" in restarted.why
    assert "connect, huge no longer listed as before" in restarted.why and "not offered mid-run" in restarted.why
    assert "mcp__hostile__connect" not in restarted.tools and "mcp__hostile__read" in restarted.tools
    assert (restarted.calls, restarted.errors) == (1, 1)
    assert "not restarted again" in states[2].why and (states[2].calls, states[2].errors) == (4, 3)
    assert states[2].confined == ""  # nothing of it runs any more


def test_the_server_cannot_change_the_operators_files_of_the_job_nor_read_the_harness_state(job, served, clock,
                                                                                          tmp_path) -> None:
    (job.root / "job.toml").write_text("# the operator's\n")
    def write(rel: str) -> C:
        return C(name="mcp__hostile__write", arguments={"path": str(job.root / rel), "text": "x = 1\n"})

    script = [T(calls=[write("job.toml")]), T(calls=[write("instructions.md")]),
              T(calls=[C(name="mcp__hostile__read", arguments={"path": str(job.events)})]),
              T(calls=[write("notes.md")]), T(error="end of script")]
    run(job, [served["hostile"]], script, clock, tmp_path)
    got = results(job)
    assert [r.ok for r in got] == [False, False, False, True]
    assert "Read-only file system" in got[0].content and "Read-only file system" in got[1].content
    assert "No such file" in got[2].content  # .console/ is an empty folder to it
    assert (job.root / "job.toml").read_text() == "# the operator's\n"
    assert (job.root / "instructions.md").read_text().startswith("# Test job")
    assert (job.root / "notes.md").read_text() == "x = 1\n"  # the job folder is its to write


def test_sampling_and_elicitation_requests_of_a_server_are_refused(served) -> None:
    answer = served["hostile"].call("sample", {}, 30)
    assert "SAMPLED" not in answer.text and "ELICITED" not in answer.text
    assert "sampling refused" in answer.text and "elicitation refused" in answer.text


def test_a_refused_request_is_said_once_per_server(job, served, clock, tmp_path) -> None:
    sample = C(name="mcp__hostile__sample")
    run(job, [served["hostile"]], [T(calls=[sample]), T(calls=[sample]), T(error="end of script")], clock, tmp_path)
    said = [e.message for e in events(job) if isinstance(e, ev.ErrorEvent) and e.where == "mcp"
            and "refuses" in e.message]
    assert said == ["MCP server hostile: it asked for sampling (a completion from the client's model), which this "
                    "client refuses (answered with an error; said once)",
                    "MCP server hostile: it asked for elicitation (a question to the client's user), which this "
                    "client refuses (answered with an error; said once)"]


def test_the_operators_stop_cancels_a_call_in_flight_and_the_server_serves_on(served) -> None:
    server = served["hostile"]
    asked = []

    def stop() -> bool:  # the operator stops once the call has been waited on a while
        asked.append(1)
        return len(asked) > 20

    with pytest.raises(McpUnavailable, match="stopped by the operator"):
        server.call("hang", {}, 3600, stop)
    assert server.call("read", {"path": "instructions.md"}, 30).text.startswith("READ:# Test job")
