"""A console attached to a run whose process died (kill -9: its end never logged) says what `jobs` says, why, and
offers the way on: resume, asked first, through `agent-console resume`, then it follows the run again."""

from __future__ import annotations

from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.runs import liveness
from console.tui.screens import run_keys
from console.tui.screens.confirm import ConfirmScreen
from tests.tui.conftest import attach_app, drive, make_supervisor, pause, record_notices, wait_for

ENDS = ("session_ended", "run_ended", "job_completed")


def killed_mid_run(paths, turns: int = 12) -> None:
    """A run's log as a kill -9 leaves it: its events up to a turn, no end; nobody holds its lock."""
    make_supervisor(paths).run()
    kept: list[str] = []
    for line in paths.events.read_text(encoding="utf-8").splitlines():
        event = ev.parse_event(line)
        if event.type in ENDS or (isinstance(event, ev.TurnStarted) and event.turn > turns):
            break
        kept.append(line)
    paths.events.write_text("\n".join(kept) + "\n", encoding="utf-8")


def status_text(app) -> str:
    return app.main.query_one("#status").last_plain


def footer_keys(app) -> set[str]:
    return {b.action for _n, b, enabled, _t in app.main.active_bindings.values() if enabled and b.show}


def test_a_run_whose_process_died_says_interrupted_and_why_and_p_resumes_it_asked_first(make_job, monkeypatch):
    paths = make_job("quickstart")
    killed_mid_run(paths)
    started: list[object] = []
    monkeypatch.setattr(run_keys, "resume_in_background", lambda folder, by: started.append((folder, by)))
    app = attach_app(paths)
    said = liveness("running", None).state  # what `jobs` says of a run the store records live, nobody holds

    async def body(pilot):
        notices = record_notices(app)
        status = app.main.query_one("#status")
        await wait_for(pilot, lambda: status.runner_known and app.bridge.pending == 0, what="the lock and the log")
        await pause(pilot, 0.1)
        assert not app.state.ended
        text = status_text(app)
        # 80 columns: the state (why, and p resumes, where there is room: see the 200-column test).
        assert said == "interrupted" and f" {said} " in text and "not running (read-only)" not in text, text
        assert "resume" in footer_keys(app)  # the footer offers the way on: p Resume
        # The palette's entry starts it again (not "No resume … use the CLI"): the same as the key.
        entries = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "again" in entries["Resume run"].help
        await pilot.press("c")  # not offered: the key does nothing
        entries["Force checkpoint"].callback()  # the palette's: says why there is no process, and the way on
        await pause(pilot)
        way_on = "Resume it with p here (or agent-console resume"
        assert any("its process is gone" in m and way_on in m for _t, m in notices), notices
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        assert not started  # asked first
        await pilot.press("y")
        await wait_for(pilot, lambda: started, what="agent-console resume")
        assert started == [(paths.root, "console")]
        await wait_for(pilot, lambda: any(t == "Resumed" for t, _m in notices), what="the resume's notice")
        assert "resume" not in footer_keys(app)  # starting: not offered twice
        # The new process holds the run: the console follows it (the same screen, the lock's pid).
        monkeypatch.setattr(RunLock, "holder", lambda self: 4242)
        await wait_for(pilot, lambda: status.runner_pid == 4242, what="the new runner", timeout=10)
        await pause(pilot, 0.1)
        assert "pid 4242" in status_text(app) and "its process is gone" not in status_text(app)
        assert "p resumes" not in status_text(app)
        # Its process dies under the console (kill -9): said at once, whatever the width, with the way on.
        monkeypatch.setattr(RunLock, "holder", lambda self: None)
        await wait_for(pilot, lambda: any(t == "Run interrupted" for t, _m in notices), what="the notice",
                       timeout=10)
        told = [m for t, m in notices if t == "Run interrupted"]
        assert len(told) == 1 and "its process is gone" in told[0] and "; p resumes it here." in told[0], told
        assert "resume" in footer_keys(app)
        await pilot.press("q")

    drive(app, body, size=(80, 24))


def test_a_resume_that_fails_says_why_and_offers_it_again(make_job, monkeypatch):
    paths = make_job("quickstart")
    killed_mid_run(paths)
    monkeypatch.setattr(run_keys, "resume_in_background", lambda folder, by: "the job is busy")
    app = attach_app(paths)

    async def body(pilot):
        notices = record_notices(app)
        status = app.main.query_one("#status")
        await wait_for(pilot, lambda: status.runner_known and app.bridge.pending == 0, what="the lock and the log")
        await pause(pilot, 0.1)
        text = status_text(app)
        assert "interrupted · its process is gone" in text and "p resumes" in text, text
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: any(t == "Not resumed" for t, _m in notices), what="the failure")
        assert ("Not resumed", "the job is busy") in notices
        await pause(pilot, 0.1)
        assert "resume" in footer_keys(app) and "p resumes" in status_text(app)
        await pilot.press("q")

    drive(app, body, size=(200, 50))


def test_a_completed_run_offers_no_resume(make_job, monkeypatch):
    paths = make_job("quickstart")
    make_supervisor(paths).run()
    monkeypatch.setattr(run_keys, "resume_in_background", lambda folder, by: None)
    app = attach_app(paths)

    async def body(pilot):
        status = app.main.query_one("#status")
        await wait_for(pilot, lambda: status.runner_known and app.state.ended and app.bridge.pending == 0,
                       what="the replay")
        await pause(pilot, 0.1)
        assert "resume" not in footer_keys(app) and "resumes" not in status_text(app)
        assert "its process is gone" not in status_text(app)
        await pilot.press("p")
        await pause(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("q")

    drive(app, body)


def test_k_acknowledges_a_run_that_crashed_it_asks_no_more_and_p_still_resumes_it(make_job):
    """Issue 33: a run that crashed needing its operator asked for ever; the console's k acknowledges it (as the
    fleet's k and `agent-console ack`), offered only while it applies."""
    paths = make_job("quickstart")
    killed_mid_run(paths)
    last = list(ev.read_events(paths.events))[-1]
    with paths.events.open("a", encoding="utf-8") as fh:
        fh.write(ev.NeedsOperator(ts=last.ts, seq=last.seq + 1, session=last.session, reason="crashed",
                                  message="the run stopped on an internal error", paused=False)
                 .model_dump_json() + "\n")
    app = attach_app(paths)

    async def body(pilot):
        await wait_for(pilot, lambda: app.state.needs is not None, what="the need folded")
        await wait_for(pilot, lambda: "acknowledge" in footer_keys(app), what="k offered")
        assert "resume" in footer_keys(app)
        await pilot.press("k")
        await wait_for(pilot, lambda: app.state.acknowledged, what="the acknowledgement folded")
        await wait_for(pilot, lambda: "acknowledge" not in footer_keys(app) and "resume" in footer_keys(app),
                       what="k no longer offered, p still")
        assert app.state.needs is None and "NEEDS YOU" not in status_text(app)
        (acked,) = [e for e in ev.read_events(paths.events) if isinstance(e, ev.RunAcknowledged)]
        assert (acked.reason, acked.by) == ("crashed", "console")

    drive(app, body, size=(120, 40))


def test_the_resume_hint_goes_when_the_log_shows_the_run_completed(make_job):
    """Found by a new operator's trial: attached to a completed run, the status line sometimes said
    "completed · read-only │ p resumes" (p did nothing): the hint was set when the runner's state came, while the
    replay had not reached the run's end, and never looked at again. Here the end comes after the hint."""
    paths = make_job("quickstart")
    make_supervisor(paths).run()
    lines = paths.events.read_text(encoding="utf-8").splitlines()
    cut = next(i for i, line in enumerate(lines) if ev.parse_event(line).type in ENDS)
    paths.events.write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")  # as a kill -9 leaves it
    app = attach_app(paths)

    async def body(pilot):
        status = app.main.query_one("#status")
        await wait_for(pilot, lambda: status.runner_known and "p resumes" in status_text(app), what="the hint")
        with paths.events.open("a", encoding="utf-8") as fh:  # the rest of the log: the run's end
            fh.write("\n".join(lines[cut:]) + "\n")
        await wait_for(pilot, lambda: app.state.ended, what="the run's end")
        await wait_for(pilot, lambda: "p resumes" not in status_text(app), what="the hint gone")
        assert "completed" in status_text(app) and "resume" not in footer_keys(app)

    drive(app, body, size=(200, 50))
