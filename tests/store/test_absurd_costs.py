"""A store's row is anyone's (a shared store's writers, an older version, a hand's UPDATE): a cost that is no amount
of dollars (below zero, absurdly large) or a confidence outside 0..1 reads as unknown in every view, as NaN and
infinity already did. Found by a new operator's trial: a row's cost_usd of -1e308 was printed by serve's run page
as 309 digits (the phone page overflowed), and cut by the fleet to "$-10000"; 1e300 to "$1,000,"."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.cost import MAX_COST_USD, format_cost
from console.engine.job import JobPaths
from console.engine.store import JobRow, open_store
from console.view.fleet import Fleet
from console.view.jobs import jobs_table
from console.view.run_snapshot import look
from console.web import pages
from tests.store.machines import sql

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
BAD_COSTS = (-1e308, -0.01, 1e300, MAX_COST_USD * 1.5)
# What a figure that reached a view looked like: a minus sign before a dollar figure, or a run of 10 digits.
SHOWN_FIGURE = re.compile(r"\$-|\d[\d,]{12,}")


def a_run(store_url: str, tmp_path: Path, cost: float, confidence: float) -> tuple[Path, Path]:
    """A run of this machine in the store (its folder here, one event in its log), its row's cost and confidence
    then written as a hostile writer would: straight into the table."""
    db = tmp_path / "data" / "jobs.db"
    run = tmp_path / "runs" / "absurd-20261126-090000"
    JobPaths(run).state.mkdir(parents=True)
    JobPaths(run).events.write_text(ev.SessionStarted(ts=T0, seq=1, session=1, reason="new", provider="openai",
                                                      model="gpt-x", context_window=32_000).model_dump_json() + "\n")
    store = open_store(store_url or None, db)
    try:
        store.started(run, run.name, "openai", "gpt-x", T0)
        store.completed(run, T0, 0.5, "done")
    finally:
        store.close()
    if store_url:
        sql(store_url, "UPDATE runs SET cost_usd = %s, confidence = %s WHERE path = %s", cost, confidence, str(run))
    else:
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE jobs SET cost_usd = ?, confidence = ? WHERE path = ?", (cost, confidence, str(run)))
        conn.close()
    return db, run


@pytest.mark.parametrize("cost", BAD_COSTS)
def test_a_cost_that_is_no_amount_reads_as_unknown_in_jobs_the_fleet_and_serve(
        store_url: str, tmp_path: Path, cost: float) -> None:
    db, run = a_run(store_url, tmp_path, cost, confidence=-1e308)
    store = open_store(store_url or None, db)
    try:
        (row,) = store.list()
    finally:
        store.close()
    assert (row.cost_usd, row.confidence) == (None, None)
    # `jobs`: no cost column at all (no run has one), no confidence.
    lines, _hidden = jobs_table([row], 200)
    table = "\n".join(line.plain for line in lines)
    assert "$" not in table and not SHOWN_FIGURE.search(table), table
    # The fleet's model (the fleet view's and serve's rows): no cost.
    fleet = Fleet(db, now=lambda: T0, url=store_url or None)
    try:
        (listed,) = fleet.poll()
        assert listed.path == run and listed.cost is None
        # serve's pages: the fleet's list and the run's page.
        snap = look(list(fleet.rows), list(fleet.folds.values()), listed.id)
        assert snap is not None and snap.cost == ""
        html = pages.fleet_list(list(fleet.rows), "csrf") + pages.run_page(snap, listed, "csrf")
        assert not SHOWN_FIGURE.search(html), SHOWN_FIGURE.search(html)
        assert pages.row_view(listed).cost == ""
    finally:
        fleet.close()


def test_a_row_keeps_every_figure_that_is_one() -> None:
    base = {"path": "/r", "name": "r", "status": "completed", "provider": "p", "model": "m", "started_at": "",
            "updated_at": "", "completed_at": None, "summary": None, "detail": None}
    for cost, confidence in ((0.0, 0.0), (0.0042, 1.0), (12_345.67, 0.85), (MAX_COST_USD, 0.5)):
        row = JobRow(**base, cost_usd=cost, confidence=confidence)  # type: ignore[arg-type]
        assert (row.cost_usd, row.confidence) == (cost, confidence)
    for cost, confidence in ((-1.0, 1.01), (float("nan"), -0.1), (1e300, float("inf")), (True, True)):
        row = JobRow(**base, cost_usd=cost, confidence=confidence)  # type: ignore[arg-type]
        assert (row.cost_usd, row.confidence) == (None, None), (cost, confidence)


def test_format_cost_says_unknown_for_a_figure_that_is_no_amount() -> None:
    """The one formatter every view's cost goes through: its last line of defence, for a figure that reached it
    from elsewhere than a store's row (it printed -1e308 as "$-1000...", 309 characters)."""
    for usd in (-1e308, -1.0, 1e300, float("inf"), float("-inf"), float("nan"), MAX_COST_USD * 2):
        assert format_cost(usd) == "cost unknown", usd
    assert [format_cost(v) for v in (0.0, 0.0042, 1.27, 312.4, 123_456.0)] == [
        "$0.00", "$0.0042", "$1.27", "$312", "$123,456"]
