"""`agent-console logs ID [-f] [--json] [--since SEQ] [-n N]`: a run's story from any shell, whole or followed,
and its events as they are; hostile logs (damaged lines, torn lines, huge lines, escape sequences, a closed pipe)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.headless import LogReader, StoryPrinter, use_color
from console.headless import logs as headless  # the module whose constants a test turns down
from tests.conftest import SAMPLES, sigint_as_in_a_terminal
from tests.processes import wait_for
from tests.provenance_support import record

T = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
PY = [sys.executable, "-m", "console.cli"]


def env() -> dict[str, str]:
    return {**os.environ, "NO_COLOR": ""}


def run_sample(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[str, Path]:
    assert main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0", *extra]) == 0
    head = capsys.readouterr().out.splitlines()[0]  # `run ID: FOLDER`
    rid, folder = head.removeprefix("run ").split(": ", 1)
    return rid, Path(folder)


class Events:
    """A run's events.jsonl written line by line, as the engine writes it."""

    def __init__(self, paths: JobPaths) -> None:
        self.paths = paths
        self.seq = 0
        record(paths, provider="openai", model="gpt-4.1")  # the operator's run: attach, logs and wait show no other

    def line(self, cls: type[ev.EventBase], **fields: object) -> str:
        self.seq += 1
        return cls(ts=T, seq=self.seq, session=1, **fields).model_dump_json() + "\n"

    def add(self, cls: type[ev.EventBase], **fields: object) -> str:
        text = self.line(cls, **fields)
        self.raw(text)
        return text

    def raw(self, text: str | bytes) -> None:
        data = text.encode() if isinstance(text, str) else text
        with open(self.paths.events, "ab") as fh:
            fh.write(data)

    def turn(self, n: int, text: str, tool: str = "read_file", path: str = "a.md") -> None:
        args = json.dumps({"path": path})
        self.add(ev.TurnStarted, turn=n)
        self.add(ev.AssistantMessage, turn=n, text=text,
                 tool_calls=[ev.ToolCallRecord(id=f"c{n}", name=tool, arguments=args)])
        self.add(ev.ToolCalled, turn=n, call_id=f"c{n}", tool=tool, arguments=args)
        self.add(ev.ToolResult, turn=n, call_id=f"c{n}", tool=tool, ok=True, content=f"[{path}: 3 lines]\nx\ny")
        self.add(ev.TokenUsage, turn=n, input_tokens=1000, output_tokens=20)


def a_run(make_job, turns: int = 3, end: bool = True) -> tuple[JobPaths, Events]:
    paths = make_job()
    log = Events(paths)
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-4.1", priced=True)
    for n in range(1, turns + 1):
        log.turn(n, f"Step {n}: reading.")
    if end:
        log.add(ev.SessionEnded, reason="job_complete", turns=turns)
        log.add(ev.RunEnded, reason="job_complete", sessions=1)
    return paths, log


def logs(capsys, *args: str) -> tuple[int, list[str], str]:
    code = main(["logs", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


# -- a finished run ------------------------------------------------------------------------------------------------
def test_the_story_of_a_finished_run(capsys) -> None:
    rid, folder = run_sample(capsys)
    code, lines, err = logs(capsys, rid)
    assert code == 0 and err == ""
    assert lines[0].startswith(f"run {rid} · session 1 started (scripted/scripted-agent)")
    assert lines[-1].startswith(f"run {rid} ended: completed after 1 session")
    events = list(ev.read_events(folder / ".console" / "events.jsonl"))
    said = [e for e in events if isinstance(e, ev.AssistantMessage) and e.text.strip()]
    assert sum(ln.startswith("        » ") for ln in lines) == len(said) > 40  # the model's text, each turn
    turns = [ln for ln in lines if ln.startswith("  t")]
    assert len(turns) == len([e for e in events if isinstance(e, ev.TokenUsage)])
    for needle in ("[Bootstrap: 5 tasks]", "== bootstrap transition done: now phase 1 'Review Inputs' ==",
                   "        ← read_file: [notes/2026-03-02-kickoff.md: lines 1-14 of 14]", "    ✓ 1/5 ",
                   "✔ job complete (confidence 0.85)"):
        assert any(ln.startswith(needle) for ln in lines), needle
    assert not any("\x1b" in ln for ln in lines)  # not a terminal: no colours
    # The same run by its folder, and the last lines only.
    assert logs(capsys, str(folder))[1] == lines
    code, tail, _ = logs(capsys, rid, "-n", "3")
    assert code == 0 and tail == lines[-3:]


def test_json_passes_the_events_through(capsys) -> None:
    rid, folder = run_sample(capsys)
    code, lines, err = logs(capsys, rid, "--json")
    assert code == 0 and err == ""
    file_lines = (folder / ".console" / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines == file_lines  # as they are, byte for byte (nothing there a terminal would take for a command)
    assert [json.loads(x) for x in lines] == [json.loads(x) for x in file_lines]
    since = logs(capsys, rid, "--json", "--since", "400")[1]
    assert [json.loads(x)["seq"] for x in since] == [json.loads(x)["seq"] for x in file_lines if
                                                     json.loads(x)["seq"] >= 400]
    assert logs(capsys, rid, "--json", "-n", "2")[1] == file_lines[-2:]


def test_since_starts_the_story_at_an_event(make_job, capsys) -> None:
    paths, _ = a_run(make_job, turns=3)
    code, lines, _ = logs(capsys, str(paths.root), "--since", "12")  # turn 3's turn_started is seq 12
    assert code == 0
    rid = paths.run_id
    assert lines == [f"run {rid}", "  t3    read_file(a.md)  [1.0k in, 20 out]", "        » Step 3: reading.",
                     "        ← read_file: [a.md: 3 lines] (+2 lines)", "session 1 ended: job_complete after 3 turns",
                     f"run {rid} ended: job_complete after 1 session"]


@pytest.mark.parametrize("args", [["--since", "-1"], ["-n", "0"], ["-n", "x"]])
def test_bad_flags_are_one_line(make_job, capsys, args) -> None:
    paths, _ = a_run(make_job)
    code, lines, err = logs(capsys, str(paths.root), *args)
    assert code == 2 and lines == [] and len(err.splitlines()) == 1


def test_a_run_that_never_ran_is_one_line(make_job, capsys) -> None:
    paths = make_job()
    for args in ([str(paths.root)], [str(paths.root), "-f"], [str(paths.root), "--json"]):
        code, lines, err = logs(capsys, *args)
        assert code == 2 and lines == [] and len(err.splitlines()) == 1 and "never ran" in err
    code, _, err = logs(capsys, "nosuchrun")
    assert code == 2 and len(err.splitlines()) == 1


def test_a_fifo_for_a_log_is_named_not_waited_on(make_job, capsys) -> None:
    paths = make_job()
    record(paths)
    os.mkfifo(paths.events)
    code, lines, err = logs(capsys, str(paths.root), "-f")
    assert code == 2 and lines == [] and "not a regular file" in err


# -- hostile logs ------------------------------------------------------------------------------------------------
def test_damaged_lines_are_skipped_with_one_note(make_job, capsys) -> None:
    paths, log = a_run(make_job, turns=1, end=False)
    log.raw("this is not json\n")
    log.raw('{"v":1,"ts":"2026-01-15T14:00:00Z","seq":99,"session":1,"type":"turn_started","tu\n')  # cut
    log.raw('{"v":1,"ts":"2026-01-15T14:00:00Z","seq":98,"session":1,"type":"error","message":NaN}\n')
    log.raw(b"\xff\xfe\x00garbage\n")
    # A known type without its fields: not an event to tell (noted), but JSON with a seq and a type: --json passes
    # it through, as the engine's own check of the log counts it.
    log.raw('{"v":1,"ts":"2026-01-15T14:00:00Z","seq":97,"session":1,"type":"error"}\n')
    log.turn(2, "After the damage.")
    code, lines, err = logs(capsys, str(paths.root))
    assert code == 0
    assert err.count("\n") == 1 and "line 7" in err and "damaged" in err  # one note, naming the first
    assert "        » Step 1: reading." in lines and "        » After the damage." in lines
    code, lines, err = logs(capsys, str(paths.root), "--json")
    assert code == 0 and err.count("\n") == 1
    assert [json.loads(x)["seq"] for x in lines] == [1, 2, 3, 4, 5, 6, 97, 7, 8, 9, 10, 11]  # none of the damage


def test_a_torn_last_line_waits_for_its_end(make_job, capsys) -> None:
    paths, log = a_run(make_job, turns=1, end=False)
    whole = log.line(ev.ErrorEvent, message="the end", where="x")
    log.raw(whole[:30])
    code, lines, err = logs(capsys, str(paths.root), "--json")
    assert code == 0 and err == "" and len(lines) == 6  # not printed, and not damage: it is being written
    assert not any("the end" in ln for ln in logs(capsys, str(paths.root))[1])
    log.raw(whole[30:])
    assert logs(capsys, str(paths.root), "--json")[1][-1] == whole.strip()


def test_a_newer_versions_event_is_passed_through_not_told(make_job, capsys) -> None:
    paths, log = a_run(make_job, turns=1)
    future = '{"v":2,"ts":"2026-01-15T14:00:00Z","seq":50,"session":1,"type":"from_the_future","x":1}'
    log.raw(future + "\n")
    code, lines, err = logs(capsys, str(paths.root))
    assert code == 0 and err == "" and not any("future" in ln for ln in lines)
    assert logs(capsys, str(paths.root), "--json")[1][-1] == future


def test_agent_text_never_reaches_the_terminal_raw(make_job, capsys, monkeypatch) -> None:
    paths = make_job()
    log = Events(paths)
    hostile = "ok\x1b]0;owned\x07\x1b[2J\r\x9b31m\u202eevil\x7f"
    log.add(ev.SessionStarted, reason="new", provider="openai\x1b[31m", model="m\x07")
    log.add(ev.AssistantMessage, turn=1, text=hostile,
            tool_calls=[ev.ToolCallRecord(id="c", name="x\x1b[2J", arguments=json.dumps({"path": hostile}))])
    log.add(ev.ToolResult, turn=1, call_id="c", tool="x\x1b[2J", ok=True, content=hostile)
    log.add(ev.TokenUsage, turn=1, input_tokens=1, output_tokens=1)
    log.add(ev.NeedsOperator, reason="stuck", message=hostile, evidence=[hostile])
    log.add(ev.RunEnded, reason=hostile, detail=hostile)

    def clean(text: str) -> bool:
        return not any(c in text for c in "\x1b\x07\r\x9b\u202e\x7f")

    code, lines, _ = logs(capsys, str(paths.root))
    assert code == 0 and len(lines) >= 8 and all(clean(ln) for ln in lines)
    assert "        » ok\\x1b]0;owned\\x07\\x1b[2J \\x9b31m\\u202eevil\\x7f" in lines  # shown, never run
    # --json: the same events (jq reads the same text), with what a terminal would run escaped.
    code, out, _ = logs(capsys, str(paths.root), "--json")
    assert code == 0 and all(clean(ln) for ln in out)
    assert [json.loads(x) for x in out] == [json.loads(x) for x in paths.events.read_text().splitlines()]
    # Colours only where the story goes to a terminal, never with NO_COLOR; the agent's text escaped all the same.
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert main(["logs", str(paths.root)]) == 0
    coloured = capsys.readouterr().out
    assert "\x1b[1;31m⚑ NEEDS YOU (stuck)" in coloured
    import re

    assert all(clean(re.sub(r"\x1b\[[0-9;]*m", "", ln)) for ln in coloured.splitlines())
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["logs", str(paths.root)]) == 0
    assert "\x1b" not in capsys.readouterr().out


def test_use_color():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    old = {k: os.environ.pop(k, None) for k in ("NO_COLOR", "TERM")}
    try:
        assert use_color(Tty()) and not use_color(io.StringIO()) and not use_color(object())
        os.environ["NO_COLOR"] = "1"
        assert not use_color(Tty())
        os.environ["NO_COLOR"] = ""  # set but empty: no-color.org says colours stay
        os.environ["TERM"] = "dumb"
        assert not use_color(Tty())
    finally:
        for k, v in old.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


def test_a_huge_log_streams_in_small_chunks_and_a_huge_line_is_damage(make_job, capsys, monkeypatch) -> None:
    paths, log = a_run(make_job, turns=30)
    whole = logs(capsys, str(paths.root))[1]
    whole_json = logs(capsys, str(paths.root), "--json")[1]
    monkeypatch.setattr(headless, "READ_CHUNK", 7)  # every line split across many reads
    assert logs(capsys, str(paths.root))[1] == whole
    assert logs(capsys, str(paths.root), "--json")[1] == whole_json
    monkeypatch.setattr(headless, "MAX_LINE", 4096)
    log.raw("{" + "x" * 10_000 + "\n")
    log.turn(31, "After the huge line.")
    code, lines, err = logs(capsys, str(paths.root))
    assert code == 0 and "        » After the huge line." in lines and err.count("\n") == 1 and "damaged" in err


def test_a_closed_pipe_is_no_traceback(make_job) -> None:
    paths, _ = a_run(make_job, turns=2000)
    for args in ([], ["--json"]):
        proc = subprocess.Popen([*PY, "logs", str(paths.root), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env())
        assert proc.stdout is not None and proc.stdout.readline()
        proc.stdout.close()  # `| head -1`
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and err == b"", err


# -- following -----------------------------------------------------------------------------------------------------
def test_follow_prints_each_event_as_it_comes_and_ends_with_the_run(make_job, capsys) -> None:
    paths, log = a_run(make_job, turns=1, end=False)
    lock = RunLock(paths)
    assert lock.acquire()  # a live run: a process holds its lock

    def runner() -> None:
        for n in range(2, 6):
            time.sleep(0.05)
            log.turn(n, f"Step {n}: reading.")
        whole = log.line(ev.NeedsOperator, reason="stuck", message="looping", evidence=["read_file x6"])
        log.raw(whole[:25])  # a line being written is not read half-way
        time.sleep(0.4)
        log.raw(whole[25:])
        log.add(ev.SessionEnded, reason="job_complete", turns=5)
        log.add(ev.RunEnded, reason="job_complete", sessions=1)
        time.sleep(0.3)
        lock.release()

    t = threading.Thread(target=runner)
    t.start()
    start = time.monotonic()
    code, lines, err = logs(capsys, str(paths.root), "-f")
    t.join()
    assert code == 0 and err == ""
    assert time.monotonic() - start < 10
    assert lines == logs(capsys, str(paths.root))[1]  # followed, it is the same story as told afterwards
    assert [ln for ln in lines if ln.startswith("  t")] == [f"  t{n}    read_file(a.md)  [1.0k in, 20 out]"
                                                            for n in range(1, 6)]
    assert lines.count("⚑ NEEDS YOU (stuck): looping") == 1
    assert lines[-1].startswith(f"run {paths.run_id} ended: job_complete")


def follow_on_a_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """`logs -f` following on a clock of its own (StoryPrinter.follow's injected clock and sleep): each look's
    sleep advances it, none takes real time. Returns the sleeps, in order."""
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    real = StoryPrinter.follow
    monkeypatch.setattr(StoryPrinter, "follow",
                        lambda self, holder, **kw: real(self, holder, clock=lambda: now[0], sleep=sleep, **kw))
    return sleeps


def test_follow_stops_when_no_process_runs_the_run(make_job, capsys, monkeypatch) -> None:
    """A run killed (kill -9, a power cut) never writes its end: the lock says nobody runs it."""
    paths, _ = a_run(make_job, turns=2, end=False)
    sleeps = follow_on_a_clock(monkeypatch)
    code, lines, err = logs(capsys, str(paths.root), "-f")
    assert code == 0 and lines[-1].startswith("        ← read_file")
    assert "did not end cleanly" in err and "resume" in err and len(err.splitlines()) == 1
    # It stopped once nothing had come for QUIET_S with nobody holding the lock: the first look that saw it.
    assert headless.QUIET_S <= sum(sleeps) < headless.QUIET_S + headless.POLL_S + 1e-9


def test_follow_of_a_finished_run_returns_at_once(make_job, capsys, monkeypatch) -> None:
    paths, _ = a_run(make_job)
    sleeps = follow_on_a_clock(monkeypatch)
    code, lines, err = logs(capsys, str(paths.root), "-f", "--json")
    assert code == 0 and err == "" and json.loads(lines[-1])["type"] == "run_ended"
    assert sleeps == []  # not one look: the run had ended and nobody runs it


def test_follow_goes_on_past_an_earlier_processs_end(make_job, capsys) -> None:
    """A resumed run: the log's last event is the last process's run_ended, and a new process holds the lock."""
    paths, log = a_run(make_job, turns=1)
    lock = RunLock(paths)
    assert lock.acquire()

    def resumed() -> None:
        time.sleep(0.3)
        log.add(ev.SessionStarted, reason="resume", provider="openai", model="gpt-4.1")
        log.turn(2, "Going on.")
        log.add(ev.RunEnded, reason="job_complete", sessions=2)
        lock.release()

    t = threading.Thread(target=resumed)
    t.start()
    code, lines, _ = logs(capsys, str(paths.root), "-f")
    t.join()
    assert code == 0 and "        » Going on." in lines
    assert lines[-1].startswith(f"run {paths.run_id} ended: job_complete after 2")


def test_follow_waits_for_a_starting_runs_log(make_job, capsys) -> None:
    paths = make_job()
    paths.state.mkdir()
    lock = RunLock(paths)
    assert lock.acquire()
    log = Events(paths)

    def starts() -> None:
        time.sleep(0.3)
        log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-4.1")
        log.add(ev.RunEnded, reason="job_complete", sessions=1)
        lock.release()

    t = threading.Thread(target=starts)
    t.start()
    code, lines, _ = logs(capsys, str(paths.root), "-f")
    t.join()
    assert code == 0 and lines[0] == f"run {paths.run_id} · session 1 started (openai/gpt-4.1)"


def test_a_log_repaired_or_replaced_under_the_reader_is_not_told_twice(make_job) -> None:
    paths, log = a_run(make_job, turns=1, end=False)
    reader = LogReader(paths.events)
    first = list(reader.lines())
    assert len(first) == 6
    whole = log.line(ev.ErrorEvent, message="cut by a kill", where="x")
    log.raw(whole[:20])
    assert list(reader.lines()) == []
    # The next run's start cuts the torn line, then appends whole events.
    size = paths.events.stat().st_size
    os.truncate(paths.events, size - 20)
    again = log.line(ev.ErrorEvent, message="after the repair", where="x")
    log.raw(again)
    assert [json.loads(x)["message"] for x in reader.lines() if x] == ["after the repair"]
    # Replaced whole (moved aside as damaged, rewritten): read from its start, what was told is not told again.
    out, err = io.StringIO(), io.StringIO()
    printer = StoryPrinter(paths.events, out, err, as_json=True)
    printer.pump()
    told = len(out.getvalue().splitlines())
    text = paths.events.read_text()
    tmp = paths.events.with_name("new.jsonl")
    tmp.write_text(text + log.line(ev.ErrorEvent, message="new", where="x"))
    os.replace(tmp, paths.events)
    printer.pump()
    seqs = [json.loads(x)["seq"] for x in out.getvalue().splitlines()]
    assert len(seqs) == told + 1 and seqs == sorted(set(seqs))


def test_follow_sleeps_between_looks(make_job) -> None:
    """No busy loop: with nothing new, each look is a sleep and a stat; the lock is asked once a second."""
    paths, _ = a_run(make_job, turns=1, end=False)
    printer = StoryPrinter(paths.events, io.StringIO(), io.StringIO())
    printer.pump()
    now = [0.0]
    sleeps: list[float] = []
    asked: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    def holder() -> int | None:
        asked.append(now[0])
        return 1 if now[0] < 30 else None

    end = printer.follow(holder, clock=lambda: now[0], sleep=sleep)
    assert end.how == "gone" and 30 <= now[0] <= 32
    assert all(s == headless.POLL_S for s in sleeps) and len(sleeps) == pytest.approx(now[0] / headless.POLL_S, abs=2)
    assert len(asked) <= now[0] / headless.LOCK_EVERY_S + 2


# -- real processes ------------------------------------------------------------------------------------------------
def test_logs_follows_a_real_headless_run_to_its_end(tmp_path) -> None:
    run = subprocess.Popen([*PY, "run", str(SAMPLES / "quickstart"), "--headless", "--speed", "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        assert run.stdout is not None
        head = run.stdout.readline()  # `run ID: FOLDER`, printed before the run starts
        rid = head.split(":", 1)[0].removeprefix("run ")
        # Followed once the run has started: its session_started is logged once the jobs table knows its id and
        # its process holds the run (before, `logs ID` finds no run by that id, and `-f` no process running it).
        events = JobPaths(Path(head.split(": ", 1)[1].strip())).events
        wait_for(lambda: events.exists() and b'"session_started"' in events.read_bytes(), 120, "the run's start")
        follow = subprocess.run([*PY, "logs", rid, "-f"], capture_output=True, text=True, timeout=120, env=env())
        assert run.wait(timeout=120) == 0
    finally:
        run.kill()
    assert follow.returncode == 0 and follow.stderr == "", follow.stderr
    after = subprocess.run([*PY, "logs", rid], capture_output=True, text=True, timeout=60, env=env())
    assert follow.stdout == after.stdout and after.stdout.splitlines()[-1].startswith(f"run {rid} ended: completed")


def test_ctrl_c_ends_following_quietly_with_130(make_job) -> None:
    paths, _ = a_run(make_job, turns=1, end=False)
    lock = RunLock(paths)
    assert lock.acquire()  # a run that goes on: following would never end by itself
    try:
        proc = subprocess.Popen([*PY, "logs", str(paths.root), "-f"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env(), preexec_fn=sigint_as_in_a_terminal)
        assert proc.stdout is not None and proc.stdout.readline().startswith(f"run {paths.run_id} · session 1")
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        lock.release()
    assert proc.returncode == 130 and err == "", err


def test_a_run_just_started_is_found_by_its_id_before_the_jobs_table_knows_it(capsys) -> None:
    # A run prints its id a moment before its store has its row: `logs ID` (or `pause ID`, `wait ID`) typed at once
    # in another shell read the table only, and said no run matches. The run folders (their sealed launch records)
    # answer for this machine's runs the table has not yet.
    from console.engine.runs import run_id
    from console.settings import load_settings

    folder = load_settings().runs_dir / "quickstart-20261130-120000"
    (folder / ".console").mkdir(parents=True)
    (folder / "instructions.md").write_text("a job\n")
    paths = JobPaths(folder)
    record(paths)
    t = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    paths.events.write_text(ev.SessionStarted(ts=t, seq=1, session=1, reason="new").model_dump_json() + "\n"
                            + ev.AssistantMessage(ts=t, seq=2, session=1, turn=1, text="just begun").model_dump_json()
                            + "\n")
    assert main(["logs", run_id(folder), "--json"]) == 0
    assert [json.loads(x)["seq"] for x in capsys.readouterr().out.splitlines()] == [1, 2]
    assert main(["logs", "zzzzz"]) == 2  # an id no folder has either: said as before
    assert "zzzzz" in capsys.readouterr().err
