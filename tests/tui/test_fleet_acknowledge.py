"""Issue 33 in the fleet: its footer offers only what applies to the selected run (it always offered approve, deny,
stop and resume: `a` on a run that gave up said "Nothing to approve"); k acknowledges a run that gave up (it asks no
more, r still resumes it); a needs notice told over a run's console goes when the list is back or the need is
gone (the fleet's "Approval needed" stayed after returning from the run)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from textual.widgets._footer import FooterKey

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.tui.launch import build_fleet_app
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.fleet_bell import NEEDS_TITLES
from console.tui.screens.run import RunScreen
from console.view.fleet import GAVE_UP, NEEDS
from tests.tui.conftest import FROZEN_NOW, drive, wait_for
from tests.tui.fleet_runs import FleetFixture, _run, listed, make_fleet
from tests.tui.guardrail_events import Log


def with_a_run_that_gave_up(root: Path) -> tuple[FleetFixture, Path]:
    """The seven runs of make_fleet, and one whose agent gave up (no process runs it), as the engine leaves it."""
    fx = make_fleet(root)
    started = FROZEN_NOW - timedelta(minutes=50)
    folder = root / "runs" / f"pdf-extract-{started:%Y%m%d-%H%M%S}"
    folder.mkdir(parents=True)
    (folder / "instructions.md").write_text("# pdf-extract\n", encoding="utf-8")
    store = JobStore(fx.store_path)
    store.started(folder, "pdf-extract", "openai", "gpt-6.2-sol", started)
    log = Log(start=started)
    _run(log, phase=1, of=3, name="Read the input", cost=0.07)
    log.add(ev.JobGaveUp, summary="Cannot read the input", confidence=0.0, notes="a scanned PDF")
    log.add(ev.NeedsOperator, reason="gave_up", message="the agent gave up: Cannot read the input", paused=False)
    log.add(ev.SessionEnded, reason="gave_up", detail="")
    log.add(ev.RunEnded, reason="gave_up", outcome="gave_up", sessions=1)
    log.write(JobPaths(folder).events)
    store.gave_up(folder, started + timedelta(minutes=4), 0.0, "Cannot read the input (notes: a scanned PDF)")
    return FleetFixture(fx.store_path, {**fx.runs, "gave_up": folder}, fx.live), folder


def fleet_app(fx: FleetFixture, **kw):
    kw.setdefault("watch", False)
    kw.setdefault("animations", False)
    kw.setdefault("keymap", {})
    kw.setdefault("now", lambda: FROZEN_NOW)
    kw.setdefault("dialog_delay", 0)
    return build_fleet_app(fx.store_path, holder=fx.holder, **kw)


def footer(app) -> set[str]:
    return {k.description for k in app.fleet_view.query(FooterKey)}


ALWAYS = {"Filter", "Quit", "palette"}  # (enter attaches: the list's own key, which the footer does not show)
# What the footer offers for each run of the fixture (make_fleet's pretend processes run waiting, running, paused).
OFFERED = {
    "waiting": {"Approve", "Deny", "Stop"},
    "running": {"Stop", "Pause"},
    "paused": {"Stop", "Resume"},
    "completed": set(),
    "failed": {"Resume", "Ack"},
    "interrupted": {"Resume"},
    "stopped": {"Resume"},
    "gave_up": {"Resume", "Ack"},
}


def test_the_footer_offers_only_what_applies_to_the_selected_run(tmp_path):
    fx, _gave_up = with_a_run_that_gave_up(tmp_path)
    app = fleet_app(fx)
    by_path = {path: name for name, path in fx.runs.items()}

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 8))
        view = app.fleet_view

        def select(path: Path) -> bool:
            # By path, again at each look: a poll may re-sort the list between the move and the look (on a busy
            # machine), and then the cursor's row is another run's, whose footer differs.
            n = next(i for i, r in enumerate(view.shown) if r.path == path)
            if view.table.cursor_row != n:
                view.table.move_cursor(row=n)
            return view.selected is not None and view.selected.path == path

        for path, name in by_path.items():
            await wait_for(pilot, lambda path=path, name=name: select(path) and footer(app) == OFFERED[name] | ALWAYS,
                           what=f"the footer of the {name} run: {OFFERED[name]}")
        # A key the footer does not offer does nothing (as in the run's console): no "Nothing to approve".
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if by_path[r.path] == "gave_up"))
        await pilot.pause()
        await pilot.press("a", "d", "s")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)  # nothing asked (deny and stop ask first)
        assert not [n for n in app._notifications if n.title.startswith(("Nothing to", "Approve", "Deny", "Stop"))]

    drive(app, body, size=(120, 40))


def test_k_acknowledges_a_run_that_gave_up_it_asks_no_more_and_r_still_resumes_it(tmp_path):
    fx, gave_up = with_a_run_that_gave_up(tmp_path)
    app = fleet_app(fx, poll_interval=0.05)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 8))
        view = app.fleet_view
        title = view.query_one("#fleet-title")
        assert "2 runs need you" in str(title.render())  # the restart waiting, and the agent that gave up
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.path == gave_up))
        await pilot.pause()
        assert view.selected.state == NEEDS and "Ack" in footer(app)
        await pilot.press("k")
        await wait_for(pilot, lambda: next(r for r in view.rows if r.path == gave_up).state == GAVE_UP,
                       what="the run listed as it ended")
        row = next(r for r in view.rows if r.path == gave_up)
        assert (row.kind, row.needs, row.resume, row.ackable) == ("stopped", "", "start", False)
        assert view.rows.index(row) > 0 and "1 run needs you" in str(title.render())
        assert not app._notifications  # the row says it: no notice over the columns
        await wait_for(pilot, lambda: view.selected is not None and view.selected.path == gave_up
                       and footer(app) == {"Resume"} | ALWAYS, what="Ack gone, Resume kept")
        (acked,) = [e for e in ev.read_events(JobPaths(gave_up).events) if isinstance(e, ev.RunAcknowledged)]
        assert (acked.reason, acked.by) == ("gave_up", "fleet")
        # The jobs store is told after the log's line (console/engine/acknowledge.py), on the fleet's worker
        # thread, and the row's state comes from the log: wait for the store's word.
        store = JobStore(fx.store_path)
        await wait_for(pilot, lambda: getattr(store.get(gave_up), "needs_since", "") is None,
                       what="the jobs store told of the acknowledgement")
        stored = store.get(gave_up)
        assert stored is not None and stored.status == "gave up" and stored.needs_since is None
        assert rings == []

    drive(app, body, size=(80, 24))


def test_a_needs_notice_over_a_runs_console_goes_when_the_list_is_back_or_the_need_is_gone(tmp_path):
    fx = make_fleet(tmp_path)
    app = fleet_app(fx, poll_interval=0.05)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    paused = fx.runs["paused"]

    def need(seq: int, cls: type[ev.EventBase] = ev.NeedsOperator, **kw: object) -> None:
        with (paused / ".console" / "events.jsonl").open("a") as fh:
            fh.write(cls(ts=FROZEN_NOW, seq=seq, session=1, reason="stuck", **kw).model_dump_json() + "\n")

    def told() -> list[str]:
        return [n.title for n in app._notifications if n.title in NEEDS_TITLES]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7), what="the list read whole")
        await asyncio.sleep(0.2)  # a few polls
        view = app.fleet_view
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.path == fx.runs["running"]))
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run's console")
        need(900, message="no todo completed in 40 turns")  # another run needs you while you watch this one
        await wait_for(pilot, lambda: told() == ["Needs you"], what="the notice over the console")
        notice = next(n for n in app._notifications if n.title == "Needs you")
        assert "release-notes" in notice.message and "q returns to the list" in notice.message
        assert notice.timeout <= 5 and len(rings) == 1
        need(901, ev.NeedsOperatorCleared, by="operator's resume")  # answered elsewhere: the notice goes
        await wait_for(pilot, lambda: told() == [], what="the notice gone with its need")
        need(902, message="no todo completed in 50 turns")
        await wait_for(pilot, lambda: told() == ["Needs you"], what="a new need's notice")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="the list")
        await wait_for(pilot, lambda: told() == [], what="the notice gone with the console")
        await asyncio.sleep(0.2)  # more polls: nothing told again
        assert told() == [] and len(rings) == 2

    drive(app, body, size=(80, 24))
