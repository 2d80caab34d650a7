"""Agent and job text reaches the operator's terminal only as text: an agent plays escape sequences and markup
through every field it controls (a reply, a tool's name, a file it writes and reads back, a failing call, the
job_complete summary and deliverables) and a job folder's name carries them too; the headless log, `run`'s own
lines and `jobs` show each visibly and write not one raw control character."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from console.cli import main
from console.engine import events as ev
from console.headless import HeadlessLog
from tests.hostile import ATTACK, SHOWN, hostile_turns, raw_controls
from tests.tui.guardrail_events import Log

# job_complete is accepted at once; the record shows nothing done, so the run ends incomplete (exit 1).
COMPLETES_FREELY = '[guardrails.completion]\ntype = "none"\n'
INCOMPLETE = 1


def hostile_script(tmp_path: Path) -> Path:
    turns = hostile_turns()
    script = tmp_path / "hostile.json"
    script.write_text(json.dumps(turns), encoding="utf-8")
    return script


def test_the_headless_log_shows_every_attack_and_writes_no_control_character(make_job, tmp_path, capsys) -> None:
    paths = make_job(files={"job.toml": COMPLETES_FREELY})
    code = main(["run", str(paths.root), "--headless", "--in-place", "--script", str(hostile_script(tmp_path))])
    out, err = capsys.readouterr()
    assert code == INCOMPLETE, err
    assert not raw_controls(out + err)
    # Each attack is there to read: the tool's name on its turn line and in its failure, the failed read, the summary.
    assert f"tool{SHOWN}()" in out and f"tool{SHOWN} failed" in out
    assert f"missing{SHOWN}.md" in out
    assert f"job_complete accepted without a completion check (confidence 0.50): All done {SHOWN}" in out
    # The engine really carried the attack: the log has it raw (the views are what make it safe).
    logged = (paths.state / "events.jsonl").read_text(encoding="utf-8")
    assert "\\u001b]0;pwned" in logged


def test_coloured_headless_lines_hold_no_escape_but_their_own_colours() -> None:
    out = io.StringIO()
    log = HeadlessLog(out, color=True, run_id="k3f9q")
    events = Log()
    events.add(ev.SessionStarted, reason="new", provider=f"x{ATTACK}", model=f"m{ATTACK}")
    events.add(ev.AssistantMessage, turn=1, text="", tool_calls=[
        ev.ToolCallRecord(id="c1", name=f"t{ATTACK}", arguments=json.dumps({"path": ATTACK}))])
    events.add(ev.ToolDenied, turn=1, call_id="c1", tool=f"t{ATTACK}", policy=f"p{ATTACK}", reason=ATTACK)
    events.add(ev.TokenUsage, turn=1, input_tokens=10, output_tokens=1)
    events.add(ev.JobCompleted, summary=ATTACK, deliverables=[ATTACK], confidence=0.5)
    for e in events.events:
        log(e)
    text = out.getvalue()
    # Every ESC starts one of the log's own colours (SGR: ESC [ digits m); nothing else is a control character.
    assert re.sub(r"\x1b\[[0-9;]*m", "", text).count("\x1b") == 0
    assert not raw_controls(re.sub(r"\x1b\[[0-9;]*m", "", text))
    assert SHOWN in text and f"t{SHOWN}" in text


def test_run_and_jobs_show_a_hostile_folder_name_and_summary_as_text(tmp_path, capsys) -> None:
    # A folder name may hold anything but "/" and NUL: an escape sequence, a bell, a C1 CSI, unbalanced markup.
    root = tmp_path / 'evil[link="x]\x1b]0;pwned\x07\x9bz'
    root.mkdir()
    (root / "instructions.md").write_text("# Test job\n\nDo the thing.\n", encoding="utf-8")
    (root / "job.toml").write_text(COMPLETES_FREELY, encoding="utf-8")
    code = main(["run", str(root), "--headless", "--in-place", "--script", str(hostile_script(tmp_path))])
    out, err = capsys.readouterr()
    assert code == INCOMPLETE, err
    assert not raw_controls(out + err)
    first = out.splitlines()[0]  # "run ID: FOLDER", the folder shown with its escapes visible
    assert first.endswith('evil[link="x]\\x1b]0;pwned\\x07\\x9bz')
    assert main(["jobs"]) == 0
    table = capsys.readouterr().out
    assert not raw_controls(table)
    assert 'evil[link="x]' in table and "All done" in table
    assert main(["jobs", "--json"]) == 0
    assert not raw_controls(capsys.readouterr().out)
