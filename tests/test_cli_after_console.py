"""A run that ended under its console: once the console is gone, the terminal says how it ended and, when it can go
on, the exact command (as a headless run's closing lines do)."""

from __future__ import annotations

from console.cli.lifecycle import after_console
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.outcome import EXIT_OK
from tests.provenance_support import record


def log(paths, *events: ev.EventBase) -> None:
    record(paths)  # a run of this operator's (attach shows no other)
    paths.events.write_text("".join(e.model_dump_json() + "\n" for e in events))


def test_a_stop_from_the_console_says_how_to_go_on(make_job, capsys) -> None:
    paths = make_job("quickstart")
    t = FakeClock().now()
    log(paths, ev.SessionStarted(ts=t, seq=1, session=1, reason="new"),
        ev.RunEnded(ts=t, seq=2, session=1, reason="user_shutdown", detail="stopped by the operator",
                    outcome="incomplete"))
    assert after_console(paths) == 3
    said = capsys.readouterr().err.splitlines()
    assert said == [f"agent-console: run {paths.run_id} ended incomplete (stopped): stopped by the operator",
                    f"agent-console: resume run {paths.run_id} with: agent-console resume {paths.run_id}"]


def test_a_completed_run_says_where_its_results_are_and_a_gave_up_one_says_when_to_resume(make_job, capsys) -> None:
    paths = make_job("quickstart")
    t = FakeClock().now()
    log(paths, ev.SessionStarted(ts=t, seq=1, session=1, reason="new"),
        ev.JobCompleted(ts=t, seq=2, session=1, summary="done", confidence=0.9),
        ev.RunEnded(ts=t, seq=3, session=1, reason="job_complete", outcome="completed"))
    assert after_console(paths) == EXIT_OK
    said = capsys.readouterr()
    assert said.err == "" and said.out.splitlines() == [f"run {paths.run_id} completed; results in {paths.root}"]
    log(paths, ev.SessionStarted(ts=t, seq=1, session=1, reason="new"),
        ev.RunEnded(ts=t, seq=2, session=1, reason="gave_up", detail="the agent gave up \x1b[2J", outcome="gave_up"))
    assert after_console(paths) == 4
    said = capsys.readouterr().err
    assert f"run {paths.run_id} ended: the agent gave up: \\x1b[2J\n" in said and "\x1b" not in said
    assert "gave up (the agent gave up)" not in said
    assert f"once the cause is fixed, resume run {paths.run_id} with: agent-console resume {paths.run_id}" in said


def test_a_run_out_of_time_says_which_file_to_raise_the_deadline_in(make_job, capsys) -> None:
    """Resuming as it is would end it again at once: the limit is raised in the run's own job.toml first (the job
    folder's is not read again)."""
    paths = make_job("quickstart")
    t = FakeClock().now()
    log(paths, ev.SessionStarted(ts=t, seq=1, session=1, reason="new"),
        ev.RunEnded(ts=t, seq=2, session=1, reason="budget_exhausted", outcome="incomplete",
                    detail="deadline passed: 33 seconds since the job started, deadline 25 seconds"))
    assert after_console(paths) != EXIT_OK
    said = capsys.readouterr().err.splitlines()
    assert said[-1] == (f"agent-console: raise deadline under [guardrails] in {paths.root / 'job.toml'} (the run's "
                        f"own copy), then resume run {paths.run_id} with: agent-console resume {paths.run_id}")


def test_attach_says_what_run_says_once_its_console_is_gone(make_job, capsys, monkeypatch) -> None:
    """`attach` closed on a finished run says where its results are, as `run` does; its own exit code stays the
    console's. A terminal that hung up (the reason the console closed) gets nothing, and no traceback."""
    import sys

    import console.tui.launch as launch
    from console import cli

    paths = make_job("quickstart")
    t = FakeClock().now()
    log(paths, ev.SessionStarted(ts=t, seq=1, session=1, reason="new"),
        ev.RunEnded(ts=t, seq=2, session=1, reason="user_shutdown", detail="stopped by the operator",
                    outcome="incomplete"))
    monkeypatch.setattr(launch, "attach_console", lambda *a, **k: 0)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli.main(["attach", str(paths.root)]) == 0
    said = capsys.readouterr().err.splitlines()
    assert said[-1] == f"agent-console: resume run {paths.run_id} with: agent-console resume {paths.run_id}"

    def hung_up(*a: object, **k: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("console.cli.lifecycle.err", hung_up)
    assert cli.main(["attach", str(paths.root)]) == 0


def test_how_a_run_ended_is_said_once() -> None:
    from console.cli.lifecycle import ended_line

    # It said "run ek5qc ended gave up (the agent gave up): the agent gave up (job_complete with confidence 0)".
    assert ended_line("ek5qc", "gave_up", "the agent gave up", "the agent gave up (job_complete with confidence 0)") \
        == "run ek5qc ended: the agent gave up (job_complete with confidence 0)"
    assert ended_line("ek5qc", "gave_up", "the agent gave up", "") == "run ek5qc ended: the agent gave up"
    assert ended_line("ek5qc", "incomplete", "stopped", "stopped by the operator") == \
        "run ek5qc ended incomplete (stopped): stopped by the operator"
    assert ended_line("ek5qc", None, "turn limit reached", "turn limit reached") == \
        "run ek5qc ended incomplete (turn limit reached)"
    assert ended_line("ek5qc", "failed", "an error", "disk full") == "run ek5qc ended failed (an error): disk full"


def test_a_cost_follows_a_sentence_without_its_full_stop() -> None:
    from console.cli.lifecycle import with_cost

    # It said "the agent gave up (confidence 0): Run it with --provider openai.; cost $0.29".
    assert with_cost("the agent gave up (confidence 0): Run it with --provider openai.", "; cost $0.29") == \
        "the agent gave up (confidence 0): Run it with --provider openai; cost $0.29"
    assert with_cost("run failed: wait...", "; cost $0.29") == "run failed: wait...; cost $0.29"
    assert with_cost("a sentence.", "") == "a sentence."
