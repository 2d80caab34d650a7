"""The fleet budget's hold is told at least once, never zero times: it is marked told in the store only once the
operator's channel took the need (console.engine.guardrails.fleet.Telling). A runner killed -9 after its need was
recorded and before its channel had it leaves the hold unmarked, and the run resumed (or another held run) tells it.
Before, the mark came with the need's record: that kill left a hold the store said was told, and nobody heard."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, SAMPLES
from tests.notify_server import loopback
from tests.processes import wait_for

# The runner killed -9 while its channel sends the hold's message (a slow channel: a phone's ntfy over the internet,
# a second here), the need recorded, nobody told yet. (Before, the hold was marked told within that second.)
KILLED_AS_IT_TELLS = """
import os, signal, sys, time
import console.notify as notify
real = notify.Notifier._deliver
def deliver(self, channel, message):
    if "fleet budget" in message.title:
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, channel, message)
notify.Notifier._deliver = deliver
from console.cli import main
sys.exit(main(sys.argv[1:]))
"""


def holds(db: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT told_at, claimed_by FROM fleet_holds").fetchall()
    finally:
        con.close()


def test_a_kill_9_before_the_channel_took_the_hold_leaves_it_untold_and_the_resumed_run_tells_it(
        tmp_path: Path) -> None:
    from console.settings import load_settings

    with loopback() as server:
        Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(
            '[prices."scripted-agent"]\ninput = 3.0\noutput = 15.0\n\n[budgets]\ndaily_usd = 0.02\n\n'
            f'[notify]\nurls = ["{server.url("json", "hook")}"]\non_end = false\n')
        db = load_settings().store_path
        job = tmp_path / "job"
        shutil.copytree(SAMPLES / "quickstart", job)
        argv = ["run", str(job), "--in-place", "--headless", "--speed", "0"]
        killed = subprocess.run([sys.executable, "-c", KILLED_AS_IT_TELLS, *argv], capture_output=True, text=True,
                                cwd=REPO, timeout=300, stdin=subprocess.DEVNULL)
        assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
        [(told_at, claimed_by)] = holds(db)
        assert told_at is None and claimed_by is not None  # claimed by the runner that died telling it
        assert server.requests == []  # nobody was told, and the store does not say it was
        con = sqlite3.connect(db)
        con.execute("UPDATE fleet_holds SET claimed_at = 0")  # time passes: the dead teller's claim is stale
        con.commit()
        con.close()
        resumed = subprocess.Popen([sys.executable, "-m", "console.cli", *argv], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, cwd=REPO, stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda: any("fleet budget" in r.body.get("title", "") for r in server.requests), 120,
                     "the hold told by the resumed run")
            wait_for(lambda: holds(db)[0][0] is not None, 60, "the hold marked told once its channel took it")
        finally:
            resumed.kill()
            resumed.communicate()
        assert len([r for r in server.requests if "fleet budget" in r.body.get("title", "")]) == 1
