"""benchmarks/serve.py's machinery at tiny sizes, so the script cannot rot: a real `serve` process lists every run
it made, each action it times reached its run (the inbox here, a real headless run's log, another machine's run
through PostgreSQL), the live run page showed the last event written, and serve's CPU and memory were read. How
fast any of it was is the benchmark's to report, never asserted here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.benchmarks import load


def test_the_benchmark_does_what_it_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the benchmark's own folder, inside the test's
    bench = load("serve")
    args = bench.parser().parse_args(["--runs", "3", "--samples", "2", "--approvals", "1", "--rate", "200",
                                      "--seconds", "1", "--idle-seconds", "0.2", "--idle-runs", "2", "--url", ""])
    out = bench.run(args)
    assert out["page_rows"] == 4  # 3 finished runs and the live one, each with its last event
    assert out["actions_sent"] == out["actions_arrived"] == 2  # every pause reached the run's inbox
    assert out["approvals"] == 1  # the headless run's log has the approval applied, sent from the page
    assert out["remote_arrived"] == 2  # through the store, to another machine's run's inbox
    assert out["live_written"] >= 100 and out["live_shown_last"]  # the page showed the last event written
    assert out["live_frames"] >= 1
    for n in ("0runs", "2runs", "2runs_pages"):
        assert out[f"rss_mb_{n}"] > 0 and out[f"idle_cpu_s_{n}"] >= 0
    # A live run whose log is still, its page and the fleet page open: nothing new shown, no frame sent.
    assert out["idle_fleet_frames_2runs_pages"] == out["idle_run_frames_2runs_pages"] == 0
    assert not any(name.startswith("agent-console-bench-serve-") for name in os.listdir(tmp_path))  # cleaned up
