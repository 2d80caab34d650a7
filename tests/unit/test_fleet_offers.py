"""What the fleet's keys offer for the selected run, decided from the row's plain facts, without Textual
(console.view.fleet_offers: the fleet's screen offers, its actions refuse, from these)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from console.view.fleet import GONE, NEEDS, PAUSED, RUNNING, STOPPED, FleetRow
from console.view.fleet_offers import PALETTE, ROW_ACTIONS, applies, offered, refusal

REPO = Path(__file__).resolve().parents[2]

ROW = FleetRow(path=Path("/runs/job-20260101-000000"), id="95tbj", name="job-20260101-000000", job="job",
               state=RUNNING, kind="running", phase="1/3", phase_long="", ctx=None, cost=None, elapsed="1m", last="",
               detail="", pending_seq=0, started_at="", pid=4242)


def offers(row: FleetRow | None) -> set[str]:
    return {action for action, yes in zip(ROW_ACTIONS, offered(row), strict=True) if yes}


def test_a_running_run_offers_attach_stop_and_pause_only():
    assert offers(ROW) == {"attach", "stop", "pause"}
    assert all(refusal(a, ROW) is None for a in offers(ROW))


def test_a_restart_waiting_offers_approve_and_deny_not_resume():
    waiting = replace(ROW, state=NEEDS, kind="needs", needs="restart_approval", pending_seq=12, needs_seq=12)
    assert offers(waiting) == {"attach", "approve", "deny", "stop"}
    assert refusal("resume", waiting) is not None


def test_a_question_of_an_mcp_server_is_answered_not_resumed():
    asking = replace(ROW, state=NEEDS, kind="needs", needs="mcp_question", needs_seq=12)
    assert offers(asking) == {"attach", "stop"} and asking.resume == ""
    said = refusal("resume", asking)
    assert said is not None and f"agent-console answer {ROW.id} --set NAME=VALUE" in said.message


def test_a_paused_run_resumes_by_unpausing():
    paused = replace(ROW, state=PAUSED, kind="paused")
    assert offers(paused) == {"attach", "stop", "resume"}
    assert paused.resume == "unpause"


def test_a_stopped_run_no_process_runs_resumes_and_says_why_it_does_not_stop():
    stopped = replace(ROW, state=STOPPED, kind="stopped", pid=None)
    assert offers(stopped) == {"attach", "resume"}
    said = refusal("stop", stopped)
    assert said is not None and said.title == "Nothing to stop"
    assert said.message == "95tbj job: no process runs it (stopped)."
    assert refusal("pause", stopped).message == "95tbj job: nothing to pause (no process runs it)."  # type: ignore[union-attr]


def test_a_gone_run_is_only_forgotten_and_enter_still_attaches():
    gone = replace(ROW, state=GONE, kind="gone", pid=None)
    assert offers(gone) == {"forget"}
    assert refusal("attach", gone) is None  # enter attaches to any row (its console says the folder is gone)
    assert refusal("forget", ROW).title == "Nothing to forget"  # type: ignore[union-attr]


def test_another_machines_run_that_gave_up_is_acknowledged_there():
    remote = replace(ROW, state=NEEDS, kind="needs", needs="gave_up", pid=None, host="box-2")
    assert "acknowledge" not in offers(remote)
    said = refusal("acknowledge", remote)
    assert said is not None and said.message == ("95tbj job: nothing to acknowledge (it is box-2's: acknowledge it "
                                                 "there (agent-console ack 95tbj)).")
    here = replace(remote, host="")
    assert "acknowledge" in offers(here) and refusal("acknowledge", here) is None


@pytest.mark.parametrize("action", ["approve", "deny"])
def test_approve_and_deny_need_a_pending_restart(action: str):
    said = refusal(action, ROW)
    assert said is not None and said.title == f"Nothing to {action}"
    assert said.message == "95tbj job has no restart waiting for approval (running)."


def test_no_row_offers_nothing_and_the_palette_names_row_actions():
    assert offers(None) == set()
    assert {action for action, _title, _help in PALETTE} <= set(ROW_ACTIONS)
    assert applies("filter", ROW)  # a key that does not act on a row is always offered


def test_the_offers_are_decided_without_textual():
    out = subprocess.run([sys.executable, "-c", "import sys, json, console.view.fleet_offers\n"
                          "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')))"],
                         capture_output=True, text=True, check=True, cwd=REPO, timeout=60)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
