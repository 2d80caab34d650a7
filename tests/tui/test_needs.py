"""Needs you, as the console and the fleet show it: the fold keeps what the run needs its operator for (why, since
when, the evidence) until they answer or the run ends; the fleet lists such a run first, highlighted, with the
reason and "since HH:MM"; the status line says NEEDS YOU at every width; an attached console rings once per need."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.needs import answered, ask_operator
from console.engine.store import JobStore
from console.tui.launch import build_fleet_app
from console.tui.widgets.status import StatusLine, fit
from console.view.fleet import INTERRUPTED, NEEDS, RUNNING, Fleet, matches
from console.view.state import ConsoleState
from tests.tui.conftest import FROZEN_NOW, drive, make_supervisor, run_app, wait_for
from tests.tui.fleet_runs import _run, listed
from tests.tui.guardrail_events import Log


def stuck(log: Log, **kw: object) -> ev.EventBase:
    fields: dict[str, object] = dict(reason="stuck", message="no todo completed in 40 turns",
                                     evidence=["read_file(notes.md) x 12", "idle 40 turns"], paused=True)
    fields.update(kw)
    return log.add(ev.NeedsOperator, **fields)


# -- the fold ------------------------------------------------------------------------------------------
def test_a_need_is_kept_until_the_operator_answers() -> None:
    log = Log(start=FROZEN_NOW - timedelta(minutes=30))
    log.add(ev.SessionStarted, reason="new")
    asked = stuck(log)
    st = ConsoleState("job")
    st.apply_all(log.events)
    need = st.needs
    assert need is not None and (need.reason, need.label, need.since, need.seq) == ("stuck", "stuck", asked.ts,
                                                                                       asked.seq)
    assert need.evidence == ("read_file(notes.md) x 12", "idle 40 turns") and need.paused
    assert st.status == "needs you" and st.paused  # the engine holds the run: resume (p) answers
    assert st.feedback[-1].kind == "needs-you" and "no todo completed" in st.feedback[-1].message
    # Another reason while the first is unanswered: the newest reason, since the first moment.
    budget = log.add(ev.NeedsOperator, reason="budget", message="spend limit $5.00 reached")
    st.apply(budget)
    assert st.needs is not None and st.needs.reason == "budget" and st.needs.since == asked.ts
    assert st.needs.seq == budget.seq  # a new need (an attached console rings again)
    st.apply(log.add(ev.OperatorCommand, command="resume", source="cli", status="received"))
    st.apply(log.add(ev.NeedsOperatorCleared, reason="budget", by="operator's resume"))
    st.apply(log.add(ev.OperatorCommand, command="resume", source="cli", status="applied"))
    assert st.needs is None and st.status == "running"


def test_the_runs_end_clears_its_need_and_a_new_process_starts_clean() -> None:
    for end in (ev.RunEnded, ev.JobCompleted):
        log = Log()
        log.add(ev.SessionStarted, reason="new")
        stuck(log, paused=False)
        st = ConsoleState("job")
        st.apply_all(log.events)
        fields = {"reason": "error"} if end is ev.RunEnded else {"summary": "done", "confidence": 0.9}
        st.apply(log.add(end, **fields))
        assert st.needs is None, end
    # A process killed while it needed its operator: the next one asks anew for what still needs them.
    log = Log()
    log.add(ev.SessionStarted, reason="new")
    stuck(log)
    log.add(ev.SessionStarted, reason="resume")
    st = ConsoleState("job")
    st.apply_all(log.events)
    assert st.needs is None


def test_a_restart_waiting_for_approval_is_a_need_even_in_an_older_log() -> None:
    log = Log()
    log.add(ev.SessionStarted, reason="new")
    pending = log.add(ev.RestartPending, usage_pct=0.9, next_session=2)
    st = ConsoleState("job")
    st.apply_all(log.events)
    assert st.needs is not None and st.needs.reason == "restart_approval" and st.needs.since == pending.ts
    assert st.status == "needs you" and not st.paused
    # The newer log says it again (needs_operator right after): the same need, since the same moment.
    st.apply(log.add(ev.NeedsOperator, reason="restart_approval", message="approve the restart", paused=False))
    assert st.needs.since == pending.ts and st.needs.message == "approve the restart"
    st.apply(log.add(ev.RestartApproved, by="operator"))
    assert st.needs is None and st.restart_pending is None


def test_agent_text_in_a_need_is_made_safe() -> None:
    log = Log()
    log.add(ev.SessionStarted, reason="new")
    stuck(log, message="loop \x1b]52;c;aGk=\x07 [red]x[/]", evidence=["\x1b[2J"])
    st = ConsoleState("job")
    st.apply_all(log.events)
    assert st.needs is not None and "\x1b" not in st.needs.message and "\x1b" not in st.needs.evidence[0]
    assert "\x1b" not in st.feedback[-1].message


def test_a_hold_lifted_by_itself_unpauses_the_run_but_an_operators_own_pause_stays() -> None:
    """A fleet budget's hold lifted (a raise from another shell) closes the need with no resume command: the run
    goes on, so the view must not say "paused" (p would be refused: "not paused")."""
    log = Log()
    log.add(ev.SessionStarted, reason="new")
    log.add(ev.NeedsOperator, reason="fleet_budget", message="job quickstart spent $2.11 today", paused=True)
    st = ConsoleState("job")
    st.apply_all(log.events)
    assert st.paused and st.status == "needs you"
    st.apply(log.add(ev.NeedsOperatorCleared, reason="fleet_budget", by="the fleet budget was raised (cli)"))
    assert st.needs is None and not st.paused and st.status == "running"
    # A need that does not pause the run (the store down), answered while the operator's own pause holds it:
    # still paused (the engine keeps their pause: console.engine.operator).
    st.apply(log.add(ev.OperatorCommand, command="pause", source="cli", status="applied"))
    st.apply(log.add(ev.NeedsOperator, reason="store_down", message="the store is away", paused=False))
    st.apply(log.add(ev.NeedsOperatorCleared, reason="store_down", by="the store is back"))
    assert st.needs is None and st.paused and st.status == "paused"


# -- the status line ---------------------------------------------------------------------------------
def test_the_status_line_says_needs_you_at_every_width() -> None:
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-6.2-sol", context_window=32_000)
    log.add(ev.TokenUsage, turn=3, input_tokens=9_000, output_tokens=300, context_tokens=9_300,
            context_window=32_000, prompt_budget=28_000, job_cost_usd=0.42)
    stuck(log)
    st = ConsoleState("security-audit-with-a-long-name")
    st.apply_all(log.events)
    line = StatusLine(st, lambda: FROZEN_NOW, run_id="k3f9q")
    for width in (30, 40, 60, 80, 120, 200):
        shown = fit(line.parts(), width).plain
        assert "NEEDS YOU: stuck" in shown and len(shown) <= width, (width, shown)
    assert "p resumes" in fit(line.parts(), 120).plain  # paused by the need: p answers
    attached = StatusLine(st, lambda: FROZEN_NOW, run_id="k3f9q", attached=True)
    attached.runner_pid = 4242
    assert "NEEDS YOU: stuck · pid 4242" in fit(attached.parts(), 120).plain


# -- the fleet -------------------------------------------------------------------------------------------
def _fleet(root: Path) -> tuple[Path, dict[str, Path], dict[Path, int]]:
    """Runs that need their operator (stuck, alive; stuck, process gone; crashed) and one running, older."""
    store_path = root / "data" / "jobs.db"
    store = JobStore(store_path)
    runs: dict[str, Path] = {}
    live: dict[Path, int] = {}
    for n, name in enumerate(("running", "stuck", "dead", "crashed")):
        started = FROZEN_NOW - timedelta(hours=3) + timedelta(minutes=n)  # the running one is the newest
        if name == "running":
            started = FROZEN_NOW - timedelta(minutes=5)
        folder = root / "runs" / f"{name}-{started:%Y%m%d-%H%M%S}"
        folder.mkdir(parents=True)
        (folder / "instructions.md").write_text("# job\n")
        log = Log(start=started)
        store.started(folder, name, "openai", "gpt-6.2-sol", started)
        _run(log)
        if name in ("stuck", "dead"):
            asked = stuck(log)
            store.needs(folder, "stuck", "no todo completed in 40 turns", asked.ts)
        if name == "crashed":  # it crashed before it could record its end (no run_ended)
            asked = log.add(ev.NeedsOperator, reason="crashed", message="the run crashed", paused=False)
            store.needs(folder, "crashed", "the run crashed", asked.ts)
        if name in ("running", "stuck"):
            live[folder] = 4000 + n
        log.write(JobPaths(folder).events)
        runs[name] = folder
    return store_path, runs, live


def test_the_fleet_lists_a_run_that_needs_you_first_with_why_and_since(tmp_path: Path) -> None:
    store_path, runs, live = _fleet(tmp_path)
    rows = Fleet(store_path, now=lambda: FROZEN_NOW, holder=lambda fold: live.get(fold.paths.root)).poll()
    by = {r.path: r for r in rows}
    first = rows[0]
    assert first.path in (runs["stuck"], runs["crashed"]) and rows[1].path in (runs["stuck"], runs["crashed"])
    s = by[runs["stuck"]]
    assert (s.state, s.kind, s.needs, s.needs_label, s.state_text) == (NEEDS, "needs", "stuck", "stuck",
                                                                       "needs you: stuck")
    expected_since = (FROZEN_NOW - timedelta(hours=3) + timedelta(minutes=1)).astimezone()
    assert s.needs_since.endswith(f"{expected_since:%H:%M}") and s.needs_seq > 0 and s.pending_seq == 0
    assert s.need_line.startswith(f"stuck since {s.needs_since}: no todo completed")
    # Its process is gone: it no longer waits for anyone (interrupted: resume it); a crash still needs you.
    assert by[runs["dead"]].state == INTERRUPTED and by[runs["dead"]].needs == ""
    assert by[runs["crashed"]].state == NEEDS and by[runs["crashed"]].needs == "crashed"
    assert by[runs["running"]].state == RUNNING and by[runs["running"]].needs == ""
    assert matches(s, "needs stuck") and not matches(by[runs["running"]], "stuck")


def test_the_fleet_view_highlights_a_stuck_run_and_rings_once_for_a_new_need(tmp_path: Path) -> None:
    store_path, runs, live = _fleet(tmp_path)
    app = build_fleet_app(store_path, holder=lambda fold: live.get(fold.paths.root), watch=False, animations=False,
                          keymap={}, now=lambda: FROZEN_NOW, poll_interval=0.05)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]

    async def body(pilot) -> None:
        await wait_for(pilot, lambda: listed(app, 4))
        await asyncio.sleep(0.3)  # several polls: the needs were there when the list opened: no bell, no notice
        assert rings == [] and not any(n.title == "Needs you" for n in app._notifications)
        view = app.fleet_view
        cell = view.table.get_cell(str(runs["stuck"]), "state")
        assert cell.plain == "needs you: stuck" and cell.style.bgcolor is not None  # highlighted
        assert "2 runs need you" in str(view.query_one("#fleet-title").render())
        # The detail under the list: why and since when; a / d do nothing here (no restart waits).
        while view.selected is not None and view.selected.path != runs["stuck"]:
            await pilot.press("down")
        detail = str(view.query_one("#fleet-detail").render())
        assert "needs you: stuck since" in detail and "no todo completed in 40 turns" in detail
        assert not view.check_action("approve", ()) and not view.check_action("deny", ())  # not offered
        await pilot.press("a")
        await pilot.pause()
        assert not (runs["stuck"] / ".console" / "inbox").exists() or not any(
            (runs["stuck"] / ".console" / "inbox").iterdir())
        # A new need of the same run (another event) rings again.
        log_path = JobPaths(runs["stuck"]).events
        with log_path.open("a") as fh:
            fh.write(ev.NeedsOperator(ts=FROZEN_NOW, seq=10_000, session=1, reason="budget",
                                      message="spend limit reached").model_dump_json() + "\n")
        await wait_for(pilot, lambda: len(rings) == 1, what="the bell")
        assert not any(n.title == "Needs you" for n in app._notifications)  # the row says it, no notice over it

    drive(app, body, size=(120, 40))


# -- an attached console ---------------------------------------------------------------------------------
def test_a_console_rings_once_per_new_need_and_shows_it(make_job) -> None:
    sup = make_supervisor(make_job("quickstart"), gate_at=3)
    app = run_app(sup)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]

    async def body(pilot) -> None:
        provider = sup.provider
        await wait_for(pilot, lambda: provider.waiting.is_set(), what="the run to hold at turn 3")
        ask_operator(sup.events, sup.operator, "stuck", "no todo completed in 40 turns", ["idle 40 turns"],
                     pause=False)
        await wait_for(pilot, lambda: app.state.needs is not None, what="the need")
        await pilot.pause(0.1)
        status = app.main.query_one(StatusLine)
        status.refresh()
        await pilot.pause()
        assert "NEEDS YOU: stuck" in status.last_plain
        assert len(rings) == 1
        ask_operator(sup.events, sup.operator, "stuck", "again", pause=False)  # the same need: nothing new
        await pilot.pause(0.2)
        assert len(rings) == 1
        ask_operator(sup.events, sup.operator, "budget", "spend limit reached", pause=False)
        await wait_for(pilot, lambda: len(rings) == 2, what="a bell for the new need")
        answered(sup.events, sup.operator, "test")
        await wait_for(pilot, lambda: app.state.needs is None, what="the answer")
        sup.stop()
        provider.gate.set()
        await wait_for(pilot, lambda: app.run_screen.run_finished, timeout=60, what="the run to stop")
        assert len(rings) == 2

    drive(app, body, size=(80, 24))
