"""The fleet's start (issue 20: 200 runs shown within 0.5 s of the command; benchmarks/tui.py times it): the store's
rows are drawn before any log is read, then the logs are folded a slice at a time, the runs not finished first;
the console's first frame imports neither a run's screen nor, for an attach, the fleet's list; the garbage
collector, off while the console starts, is on once it is up. Checked as orders, calls and sets of modules, never
as times."""

from __future__ import annotations

import gc
import io
import json
import subprocess
import sys
from itertools import count

from console.engine.store import FINISHED, JobRow, JobStore
from console.engine.store.base import this_host
from console.outcome import EXIT_USAGE
from console.tui.launch import build_fleet_app
from console.view.fleet import Fleet, RemoteFold, RunFold, RunSeat, first_row, snapshot
from tests.conftest import REPO
from tests.tui.conftest import FROZEN_NOW, drive, wait_for
from tests.tui.fleet_runs import listed, make_fleet


def test_a_poll_with_a_budget_folds_the_runs_not_finished_first_and_says_it_is_not_done(tmp_path):
    fx = make_fleet(tmp_path)
    ticks = count()  # each look at the clock is one second later: a budget of 1.5 s folds exactly one log
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder, clock=lambda: float(next(ticks)))
    first = fleet.poll(budget=1.5)
    stored, _older = JobStore(fx.store_path).list_live_and_recent(500)
    newest_unfinished = next(r.path for r in stored if r.status not in FINISHED)
    assert [p for p, f in fleet.folds.items() if f.offset > 0] == [newest_unfinished]
    assert not first.folded and len(first) == len(fx.runs)  # every run listed, one of them folded
    # Slice after slice, the logs not finished before the finished ones, newest first, until every one is read.
    order = [newest_unfinished]
    while not (rows := fleet.poll(budget=1.5)).folded:
        order += [p for p, f in fleet.folds.items() if f.offset > 0 and p not in order]
    order += [p for p, f in fleet.folds.items() if f.offset > 0 and p not in order]
    unfinished = [r.path for r in stored if r.status not in FINISHED]
    assert order == unfinished + [r.path for r in stored if r.status in FINISHED]
    assert rows.folded and all(f.catch_up() is False for f in fleet.folds.values())
    # The same rows as a poll that folds every log at once.
    whole = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder).poll()
    assert [(r.path, r.state, r.phase, r.last) for r in rows] == [(r.path, r.state, r.phase, r.last) for r in whole]


def test_a_budget_of_nothing_folds_no_log(tmp_path):
    fx = make_fleet(tmp_path)
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder, clock=lambda: 0.0)
    assert not fleet.poll(budget=0).folded
    assert all(f.offset == 0 for f in fleet.folds.values())


def test_the_store_rows_are_drawn_before_any_log_is_read(tmp_path, monkeypatch):
    """The first poll reads no log; every poll that folds comes after the first rows were drawn (folding takes the
    GIL from the first frame), and the fleet ends up listing every run folded."""
    fx = make_fleet(tmp_path)
    app = build_fleet_app(fx.store_path, holder=fx.holder, watch=False, animations=False, keymap={},
                          now=lambda: FROZEN_NOW, poll_interval=0.05)
    calls: list[tuple[bool, bool]] = []
    poll = Fleet.poll

    def recorded(self: Fleet, fold: bool = True, budget: float | None = None):  # type: ignore[no-untyped-def]
        calls.append((fold, app.poller.drawn.is_set()))
        return poll(self, fold, budget)

    monkeypatch.setattr(Fleet, "poll", recorded)

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, len(fx.runs)), what="every run folded")

    drive(app, body)
    assert calls[0] == (False, False)
    assert len(calls) > 1 and all(drawn for fold, drawn in calls[1:] if fold)


def test_the_collector_is_on_once_the_console_is_up(tmp_path):
    fx = make_fleet(tmp_path)
    app = build_fleet_app(fx.store_path, holder=fx.holder, watch=False, animations=False, keymap={},
                          now=lambda: FROZEN_NOW)
    seen: list[bool] = []

    async def body(pilot):
        await pilot.pause()
        seen.append(gc.isenabled())

    gc.disable()  # as `agent-console` and `attach` start
    try:
        drive(app, body)
    finally:
        gc.enable()
    assert seen == [True]


def test_a_console_command_that_refuses_leaves_the_collector_on(tmp_path, monkeypatch):
    from console.cli import main

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal: both commands refuse
    assert main(["fleet"]) == EXIT_USAGE and gc.isenabled()
    assert main(["attach", str(tmp_path / "nowhere")]) == EXIT_USAGE and gc.isenabled()


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, cwd=REPO, timeout=60)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


# What a run's screen needs and the fleet's first frame does not: its panes, Markdown, the sandbox's words, the
# providers' SDKs.
RUN_ONLY = ("console.tui.screens.run", "console.tui.screens.main", "console.tui.widgets.conversation",
            "console.tui.widgets.plan_pane", "markdown_it", "console.engine.sandbox",
            "console.providers.openai_provider", "console.providers.anthropic_provider", "openai", "anthropic",
            "apprise")


def test_the_fleet_first_frame_imports_no_run_screen():
    mods = _modules_after("import console.tui.app, console.tui.launch, console.tui.screens.fleet, console.settings")
    assert sorted(m for m in mods for n in RUN_ONLY if m == n or m.startswith(n + ".")) == []
    assert "textual.app" in mods  # (it did import the console)


def test_the_console_app_imports_no_fleet_list():
    """An attach never shows the fleet's list: the app does not import it."""
    mods = _modules_after("import console.tui.app")
    assert "console.tui.screens.fleet" not in mods and "console.tui.screens.run" not in mods


def test_the_first_frames_rows_are_what_a_blank_fold_shows(tmp_path):
    """The first frame's rows are built from the store's rows without the fold (console.view.fleet.first_row: the
    typed events are not imported yet); each is the row a fold that read nothing makes, for every kind of row: each
    stored state with and without a process, a summary, a detail, a cost, a folder gone, another machine's run with
    and without its lease."""
    fx = make_fleet(tmp_path)
    stored, _ = JobStore(fx.store_path).list_live_and_recent(500)
    gone = tmp_path / "runs" / "gone-20260115-100000"
    kinds = [JobRow(path=str(gone), name="gone", status="running", provider="p", model="m", started_at="2026-01-15",
                    updated_at="2026-01-15", completed_at=None, confidence=None, summary=None, detail=None)]
    for status in ("running", "completed", "failed", "stopped", "needs you", "awaiting approval", "interrupted"):
        for summary, detail, cost in ((None, None, None), ("all done", "max_turns reached " * 30, 1.25)):
            base = dict(path=str(fx.runs["running"]), name="j", status=status, provider="p", model="m",
                        started_at="2026-01-15T10:00:00+00:00", updated_at="2026-01-15T10:00:00+00:00",
                        completed_at=None, confidence=None, summary=summary, detail=detail, cost_usd=cost)
            kinds.append(JobRow(**base))
            for leased in (True, False, None):
                kinds.append(JobRow(**base, host=f"not-{this_host()}", key="k1", leased=leased))
    assert len(stored) == len(fx.runs)
    for row in stored + kinds:
        for pid in ((None,) if row.remote else (None, 4242)):
            fold = RemoteFold(row, row.key) if row.remote else RunFold(row)
            assert first_row(row, RunSeat(row), pid, FROZEN_NOW) == snapshot(row, fold, pid, FROZEN_NOW), row
    # And a fleet's first poll gives them, reading no log.
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder)
    first = fleet.poll(fold=False)
    assert not fleet.folds  # no fold made: no log read, nothing of the fold imported
    blank = [snapshot(row, fold, fx.holder(fold), FROZEN_NOW) for row in stored for fold in (RunFold(row),)]
    assert sorted(first, key=lambda r: r.path) == sorted(blank, key=lambda r: r.path)
