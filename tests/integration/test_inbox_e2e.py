"""End to end, as an operator meets it: a headless run (``agent-console run --headless --script``) whose control
inbox holds what an older version and a hostile neighbour left there (120 rejected files, a pipe, a folder, a
link, a huge file, bytes that are not UTF-8, a name that is not a command's, another user's forged stop), then
`agent-console stop` from another shell: the stop is applied, each bad entry is reported once as an
``operator_command`` event, the inbox stays bounded, and every harness file is private."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.control import KEEP_REJECTED, Command
from tests.provenance_support import record

NOBODY = 65534


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def test_a_stop_reaches_a_run_whose_inbox_is_full_of_junk(make_job, tmp_path: Path) -> None:
    paths = make_job(instructions="# Read the notes\n\nRead instructions.md again and again.\n")
    script = tmp_path / "turns.jsonl"
    turn = {"text": "Reading it once more.", "calls": [{"name": "read_file", "arguments": {"path": "instructions.md"}}]}
    script.write_text("\n".join(json.dumps(turn) for _ in range(3000)) + "\n")  # minutes of turns: only a stop ends it
    record(paths)  # a folder this operator's harness ran: its .console/ is its own
    inbox = paths.inbox
    inbox.mkdir(parents=True)
    for i in range(120):  # what an older version left: it renamed bad files to .rejected, in the inbox
        (inbox / f"0-{i:04d}.rejected").write_text("junk")
    os.mkfifo(inbox / "0-fifo.json")
    (inbox / "0-dir.json").mkdir()
    outside = tmp_path / "stop.json"
    outside.write_text(Command(command="stop").model_dump_json())
    os.symlink(outside, inbox / "0-link.json")
    with open(inbox / "0-huge.json", "wb") as fh:
        fh.truncate(32 * 2**20)
    (inbox / "0-latin1.json").write_bytes(b'{"command": "st\xf6p"}')
    (inbox / "0-notes.txt").write_text("stop")
    forged = inbox / "0-forged.json"
    forged.write_text(Command(command="stop", source="cli").model_dump_json())
    try:
        os.chown(forged, NOBODY, NOBODY)
    except PermissionError:
        forged.unlink()  # not root: the refusal of another user's file is tested in tests/unit/test_inbox.py
    bad = {p.name for p in inbox.iterdir() if not p.name.endswith(".rejected")}

    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(paths.root), "--headless", "--in-place",
                             "--script", str(script), "--speed", "1", "--max-turns", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60  # a hang guard, not a speed requirement
        while not (paths.events.exists() and '"turn_started"' in paths.events.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        stop = run_cli("stop", paths.run_id, "--wait", "60")
        if not stop.stdout.startswith("stop: applied"):
            proc.kill()  # the stop never got through: the run would read its script for minutes
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert stop.returncode == 0 and stop.stdout.startswith("stop: applied"), (stop.stdout, stop.stderr)
    assert proc.returncode == 3 and "Traceback" not in err, err
    assert out.splitlines()[0] == f"run {paths.run_id}: {paths.root}"
    # The operator sees them in the run's log too.
    assert next(line for line in out.splitlines() if "0-fifo.json" in line).count("named pipe") == 1
    events = list(ev.read_events(paths.events))
    rejected = [e for e in events if isinstance(e, ev.OperatorCommand) and e.command == "invalid"]
    # Each bad entry reported once, naming it; the old .rejected files are not reported again.
    assert sorted(e.detail.split(":", 1)[0] for e in rejected) == sorted(bad)
    assert all(e.status == "rejected" and "moved aside" in e.detail for e in rejected)
    if forged.name in bad:
        assert f"owned by uid {NOBODY}" in next(e.detail for e in rejected if e.detail.startswith(forged.name))
    stops = [e for e in events if isinstance(e, ev.OperatorCommand) and e.command == "stop" and e.status == "applied"]
    assert len(stops) == 1 and stops[0].source == "cli"
    # Bounded: only the newest rejected files are kept.
    assert len(os.listdir(inbox)) <= KEEP_REJECTED
    # Private: every folder of the harness 0700, every regular file of ours 0600 (another user's forged file,
    # moved aside, is still theirs).
    for dirpath, dirs, files in os.walk(paths.state):
        for name in dirs:
            p = Path(dirpath) / name
            if not p.is_symlink():
                assert stat.S_IMODE(os.lstat(p).st_mode) == 0o700, p
        for name in files:
            st = os.lstat(Path(dirpath) / name)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                assert stat.S_IMODE(st.st_mode) == 0o600, Path(dirpath) / name
    assert stat.S_IMODE(os.stat(paths.state).st_mode) == 0o700


@pytest.fixture(autouse=True)
def _usual_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)
