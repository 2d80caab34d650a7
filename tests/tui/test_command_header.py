"""The run's header for its commands (the ``command_sandbox`` event: what a command sees, its bounds): one line of
the headless log, a notice in the console's feedback pane, the paragraph in the guardrails view; said as a warning
when commands run unconfined and as an error when they are refused."""

from __future__ import annotations

import io

from console.engine import events as ev
from console.headless import HeadlessLog
from console.tui.screens.guardrails import plain_text
from console.view import present
from console.view.state import ConsoleState
from tests.hostile import ATTACK, SHOWN, raw_controls
from tests.tui.conftest import FROZEN_NOW
from tests.tui.fleet_runs import listed
from tests.tui.guardrail_events import Log, status

CONFINED = ("commands are confined by bubblewrap 0.11.0: they see the job folder (read-write); no network (not even "
            "loopback); nothing else of the host. Bounds: wall time 120 s, 256 processes")


def header_log(mode: str, text: str) -> Log:
    log = Log()
    log.add(ev.CommandSandbox, mode=mode, tool="bubblewrap 0.11.0", bounds_by="rlimits", commands=["test"],
            text=text)
    status(log)
    return log


def test_the_header_is_a_line_of_the_log_a_notice_and_a_paragraph_of_the_guardrails_view() -> None:
    log = header_log("confined", CONFINED)
    out = io.StringIO()
    headless = HeadlessLog(out)
    for e in log.events:
        headless(e)
    assert out.getvalue().splitlines() == [f"  ▣ {CONFINED}"]
    st = ConsoleState("job")
    st.apply_all(log.events)
    assert [(i.icon, i.severity, i.message) for i in st.feedback] == [("▣", "info", CONFINED)]
    assert CONFINED in " ".join(plain_text(st, FROZEN_NOW).split())


def test_the_header_of_this_version_is_a_short_line_with_the_paragraph_under_it() -> None:
    """The engine's header was one paragraph of 1,200 to 1,900 characters (read as one line in the log, a notice in
    the console): now its first line says what an operator checks first in about 200, and the paragraph follows,
    a clause a line, in the views with room (the headless log and `logs`); the guardrails view keeps it whole."""
    from console.engine.tools.limits import SandboxCaps, SandboxSection, describe_world, resolve_world, summarize_world

    world = resolve_world(SandboxSection(read_only=["/usr/share"]), SandboxCaps(read_only=True), max_job_mb=1024)
    text = describe_world(world, tool="bubblewrap 0.11.0", memory_by="cgroup")
    summary = summarize_world(world, tool="bubblewrap 0.11.0")
    assert len(summary) <= 240 and len(text) > 1000, (len(summary), len(text))
    assert summary.startswith("commands are confined by bubblewrap 0.11.0: the job folder (its .git read-only), 1 "
                              "more path read-only, no network, nothing else of yours; ")
    log = Log()
    log.add(ev.CommandSandbox, mode="confined", tool="bubblewrap 0.11.0", bounds_by="cgroup v2", commands=["test"],
            text=text, summary=summary, read_only=["/usr/share"])
    status(log)
    out = io.StringIO()
    headless = HeadlessLog(out)
    for e in log.events:
        headless(e)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"  ▣ {summary}" and all(ln.startswith("      ") for ln in lines[1:])
    said = [ln.strip() for ln in lines[1:]]
    assert said[0].startswith("they see the job folder (read-write;") and said[-1].startswith("bounds: ")
    assert any(ln.startswith("read-only as job.toml asks: /usr/share (an overlay") for ln in said)
    rebuilt = f"commands are confined by bubblewrap 0.11.0: {'; '.join(said[:-1])}. B{said[-1][1:]}"
    assert rebuilt == text  # every word of the paragraph, in order
    st = ConsoleState("job")
    st.apply_all(log.events)
    assert [(i.icon, i.message) for i in st.feedback] == [("▣", summary)]
    assert " ".join(text.split()) in " ".join(plain_text(st, FROZEN_NOW).split())


def test_unconfined_and_refused_commands_are_said_louder_and_the_text_stays_text() -> None:
    unconfined = present.describe(header_log("unconfined", "commands run UNCONFINED").events[0])
    refused = present.describe(header_log("refused", f"commands (test) are refused {ATTACK}").events[0])
    assert unconfined is not None and unconfined.severity == "warning"
    assert refused is not None and refused.severity == "error" and refused.text.endswith(SHOWN)
    st = ConsoleState("job")
    st.apply_all(header_log("refused", f"refused {ATTACK}").events)
    assert not raw_controls(plain_text(st, FROZEN_NOW))


def test_an_unconfined_run_says_so_on_the_status_line_and_in_the_fleet(tmp_path) -> None:
    """Issue 17: commands run unconfined only when the operator says so for the run, and every view says so: the
    headless log (its header line), the console's status line at any width, the fleet's row and detail."""
    from console.engine.job import JobPaths
    from console.engine.store import JobStore
    from console.tui.widgets.status import StatusLine, fit
    from console.view.fleet import Fleet

    log = header_log("unconfined", "commands run UNCONFINED (run --unconfined): they see everything")
    st = ConsoleState("job")
    st.apply_all(log.events)
    line = StatusLine(st, now=lambda: FROZEN_NOW)
    for width in (60, 80, 200):
        assert "UNCONFINED" in fit(line.parts(), width).plain, width
    confined = ConsoleState("job")
    confined.apply_all(header_log("confined", CONFINED).events)
    assert "UNCONFINED" not in fit(StatusLine(confined, now=lambda: FROZEN_NOW).parts(), 200).plain
    # The fleet: the row's state cell and the detail line of an unconfined run that is going.
    store_path = tmp_path / "data" / "jobs.db"
    run = tmp_path / "runs" / "free-run"
    run.mkdir(parents=True)
    JobStore(store_path).started(run, "free-run", "scripted", "scripted-agent", FROZEN_NOW)
    log.write(JobPaths(run).events)
    [row] = Fleet(store_path, now=lambda: FROZEN_NOW, holder=lambda fold: 4242).poll()
    assert row.sandbox == "unconfined"


def test_the_fleet_view_marks_an_unconfined_run(tmp_path) -> None:
    from console.engine.job import JobPaths
    from console.engine.store import JobStore
    from console.tui.launch import build_fleet_app
    from tests.tui.conftest import drive, wait_for

    store_path = tmp_path / "data" / "jobs.db"
    run = tmp_path / "runs" / "free-run"
    run.mkdir(parents=True)
    JobStore(store_path).started(run, "free-run", "scripted", "scripted-agent", FROZEN_NOW)
    header_log("unconfined", "commands run UNCONFINED (run --unconfined)").write(JobPaths(run).events)
    app = build_fleet_app(store_path, holder=lambda fold: 4242, watch=False, animations=False, keymap={},
                          now=lambda: FROZEN_NOW, poll_interval=0.05)

    async def body(pilot) -> None:
        await wait_for(pilot, lambda: listed(app, 1))
        view = app.fleet_view
        assert view.table.get_cell(str(run), "state").plain.startswith("UNCONFINED ")  # never cut by the column
        await pilot.pause()
        detail = str(view.query_one("#fleet-detail").render())
        assert "UNCONFINED: its commands run without a sandbox" in detail

    drive(app, body, size=(120, 30))
