"""The fleet budget's ledger and check (console.engine.store.fleet) over the embedded store: a hold is created once
however many processes race for it, the telling is claimed once (taken over only once its claim is stale), days and
job scopes are kept apart, a raise lifts the hold, and a corrupt or foreign row counts nothing."""

from __future__ import annotations

import multiprocessing
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console.cli.budget import ConfigLimits
from console.engine.guardrails.fleet import FLEET, local_day
from console.engine.store import JobStore
from console.engine.store.fleet import FLEET_SCHEMA, FleetLimits, SqliteFleet, StoreFleetBudget, job_scope

NOW = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
DAY = local_day(NOW)


def budget(db: Path, run: str, job: str = "quickstart", limits: FleetLimits | None = None,
           claim_seconds: float = 30.0) -> StoreFleetBudget:
    fixed = limits or FleetLimits(daily_usd=1.0)
    return StoreFleetBudget(SqliteFleet(db), db.parent / run, job, lambda: fixed, f"test:{run}",
                            claim_seconds=claim_seconds)


def test_below_the_limit_nobody_is_held_and_at_it_every_run_is_but_one_tells(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db)
    a, b = budget(db, "a"), budget(db, "b")
    a.spent(NOW, 0.6)
    assert a.check(NOW) is None and b.check(NOW) is None
    b.spent(NOW, 0.4)
    ha, hb = a.check(NOW), b.check(NOW)
    assert ha is not None and hb is not None and ha.key == hb.key == (DAY, FLEET, 1.0)
    assert (ha.tell, hb.tell) == (True, False)
    assert ha.spent_usd == pytest.approx(1.0)
    # Asked again (a held run looks every few seconds), nobody tells again while the claim is fresh.
    assert a.check(NOW) is not None and not a.check(NOW).tell  # type: ignore[union-attr]
    a.told(ha, NOW)
    assert [h.told for h in a.ledger.holds(DAY)] == [True]


def _race(db: str, run: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    b = budget(Path(db), run)
    hold = b.check(NOW)
    out.put(None if hold is None else hold.tell)


def test_a_hold_is_created_and_told_once_by_processes_racing_for_it(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db)
    budget(db, "spender").spent(NOW, 5.0)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(db), f"r{n}", out)) for n in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    tells = sorted(out.get(timeout=10) for _ in procs)
    assert tells == [False] * 7 + [True]
    assert len(SqliteFleet(db).holds(DAY)) == 1


def test_a_claim_never_finished_is_taken_over_once_it_is_stale(tmp_path: Path) -> None:
    """The runner that created the hold was killed before its need was recorded: the operator must still hear it."""
    db = tmp_path / "jobs.db"
    JobStore(db)
    dead, other, third = budget(db, "dead"), budget(db, "other", claim_seconds=0.0), budget(db, "third")
    dead.spent(NOW, 2.0)
    assert dead.check(NOW).tell  # type: ignore[union-attr]  # ... and killed here, before told()
    taken = other.check(NOW)
    assert taken is not None and taken.tell
    other.told(taken, NOW)
    # Told: nobody takes it over again, however stale its claim.
    assert not budget(db, "late", claim_seconds=0.0).check(NOW).tell  # type: ignore[union-attr]
    assert not third.check(NOW).tell  # type: ignore[union-attr]


def test_a_raise_lifts_the_hold_and_a_new_crossing_is_a_new_hold_told_again(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db)
    a = budget(db, "a")
    a.spent(NOW, 1.5)
    first = a.check(NOW)
    assert first is not None and first.limit_usd == 1.0
    assert a.ledger.raise_limit(DAY, FLEET, 1.0, "test") == 1.0
    assert a.check(NOW) is None  # 1.5 of 2.0
    a.spent(NOW, 0.5)
    second = a.check(NOW)
    assert second is not None and second.limit_usd == 2.0 and second.tell


def test_a_new_day_starts_from_nothing(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db)
    a = budget(db, "a")
    a.spent(NOW, 3.0)
    assert a.check(NOW) is not None
    tomorrow = NOW + timedelta(days=1)
    assert a.check(tomorrow) is None
    a.spent(tomorrow, 0.25)
    assert a.ledger.spend(local_day(tomorrow)) == {"quickstart": 0.25}
    # A late write of yesterday's figure never takes today's place (the embedded store's increments keep the day).
    assert a.ledger.spend(DAY) == {}


def test_a_jobs_limit_holds_its_runs_only(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db)
    limits = FleetLimits(daily_usd=100.0, jobs={"triage": 1.0})
    t1, t2, other = (budget(db, "t1", "triage", limits), budget(db, "t2", "triage", limits),
                     budget(db, "o", "quickstart", limits))
    other.spent(NOW, 5.0)
    t1.spent(NOW, 0.5)
    assert t1.check(NOW) is None and other.check(NOW) is None
    t2.spent(NOW, 0.5)
    h1, h2 = t1.check(NOW), t2.check(NOW)
    assert h1 is not None and h2 is not None and h1.scope == h2.scope == job_scope("triage")
    assert other.check(NOW) is None
    assert "job triage spent $1.00 today" in h1.message()
    assert "agent-console budget --job triage --raise USD" in h1.message()


@pytest.mark.parametrize("bad", ["'lots'", "-5.0", "1e300", "9e99"])
def test_a_corrupt_or_foreign_row_counts_nothing(tmp_path: Path, bad: str) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db)
    a = budget(db, "a")
    a.spent(NOW, 0.5)
    with sqlite3.connect(db) as conn:
        conn.execute(f"INSERT INTO fleet_spend (path, day, job, usd) VALUES ('/elsewhere', ?, 'quickstart', {bad})",
                     (DAY,))
        conn.execute(f"INSERT INTO fleet_raises (day, scope, usd, by) VALUES (?, 'fleet', {bad}, 'x')", (DAY,))
    assert a.check(NOW) is None
    assert a.ledger.spend(DAY) == {"quickstart": 0.5}
    a.spent(NOW, 0.5)
    hold = a.check(NOW)
    assert hold is not None and hold.limit_usd == 1.0  # the foreign raise raised nothing


def test_no_limit_set_asks_the_store_nothing(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db)
    a = budget(db, "a", limits=FleetLimits())
    a.spent(NOW, 50.0)
    assert a.check(NOW) is None and a.checks == 0


def test_the_configs_limits_are_read_again_when_the_file_changes_and_kept_when_it_breaks(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("")
    seen: list[object] = []

    class Budgets:
        def __init__(self, usd: float | None) -> None:
            self.daily_usd, self.jobs = usd, {}

    class Loaded:
        def __init__(self, usd: float | None) -> None:
            self.budgets = Budgets(usd)

    answers: list[object] = [Loaded(None), Loaded(5.0), ValueError("bad toml")]

    def load() -> object:
        seen.append(1)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    said: list[str] = []
    limits = ConfigLimits(load, config, say=said.append)
    assert limits().daily_usd is None
    assert limits().daily_usd is None and len(seen) == 1  # unchanged: not read again
    config.write_text("[budgets]\ndaily_usd = 5.0\n")
    assert limits().daily_usd == 5.0
    config.write_text("[budgets\n")
    assert limits().daily_usd == 5.0 and len(seen) == 3  # a broken edit lifts no limit
    # ... and is said, once (found by a new operator's trial: a config broken mid-run was passed over in silence).
    assert said == ["the config file changed and does not read now (bad toml): the fleet budget keeps the limits it "
                    "read before, until the file reads again"]
    answers.append(ValueError("bad toml"))
    config.write_text("[budgets\n\n")
    assert limits().daily_usd == 5.0 and len(said) == 1  # the same fault again: not said twice


def test_a_config_emptied_or_gone_for_a_moment_lifts_no_limit_one_that_stays_so_does(tmp_path: Path) -> None:
    """Found attacking it: an editor writing the config in place (empty for a moment) lifted the hold. Empty or gone
    counts only once it stays so for BLANK_GRACE seconds."""
    from console.cli.budget import BLANK_GRACE

    config = tmp_path / "config.toml"
    config.write_text("[budgets]\ndaily_usd = 5.0\n")

    class Loaded:
        def __init__(self, usd: float | None) -> None:
            self.budgets = type("B", (), {"daily_usd": usd, "jobs": {}})()

    def load() -> object:
        text = config.read_text() if config.exists() else ""
        return Loaded(5.0 if "daily_usd" in text else None)

    clock = [100.0]
    limits = ConfigLimits(load, config, monotonic=lambda: clock[0])
    assert limits().daily_usd == 5.0
    config.write_text("")  # the editor's truncate, before its write
    assert limits().daily_usd == 5.0
    clock[0] += BLANK_GRACE / 2
    config.write_text("[budgets]\ndaily_usd = 5.0\n# saved\n")
    assert limits().daily_usd == 5.0
    config.unlink()  # the operator removes it: a moment later, still the limit; once it stays gone, none
    assert limits().daily_usd == 5.0
    clock[0] += BLANK_GRACE
    assert limits().daily_usd is None


def test_the_fleets_line_says_the_runs_the_budget_holds() -> None:
    from console.view.ledger import today_line

    assert today_line([1.0, None, 0.5], ["fleet_budget", "", "fleet_budget"]) == \
        "today $1.50 over 2 runs · fleet budget reached: 2 held"
    assert today_line([None], ["stuck"]) == ""
    assert today_line([None], ["fleet_budget"]) == "fleet budget reached: 1 held"


def test_a_need_another_run_tells_is_not_sent_by_this_runs_notifier() -> None:
    from console.engine import events as ev
    from console.notify import Notifier

    n = Notifier([], "r1", "quickstart", remind=())
    common = dict(seq=1, ts=NOW, session=1, reason="fleet_budget", message="the fleet spent $1.00 today")
    assert n.message_for(ev.NeedsOperator(**common, notify=False)) is None  # type: ignore[arg-type]
    told = n.message_for(ev.NeedsOperator(**common))  # type: ignore[arg-type]
    assert told is not None and told.title == "agent-console: run r1 needs you (fleet budget reached)"
    assert "agent-console budget --raise USD" in told.body and "agent-console resume r1" in told.body


def test_the_configs_budgets_are_typed_bounded_and_the_variable_overrides_daily_usd(monkeypatch) -> None:
    import os

    from console.engine.job import JobError
    from console.settings import load_settings

    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text("[budgets]\ndaily_usd = 50\n\n[budgets.jobs]\ntriage = 2.5\n")
    b = load_settings().budgets
    assert (b.daily_usd, b.jobs) == (50.0, {"triage": 2.5})
    monkeypatch.setenv("AGENT_CONSOLE_BUDGETS_DAILY_USD", "75")
    b = load_settings().budgets
    assert (b.daily_usd, b.jobs) == (75.0, {"triage": 2.5})  # the file's jobs kept
    monkeypatch.setenv("AGENT_CONSOLE_BUDGETS_DAILY_USD", "lots")
    with pytest.raises(JobError, match="AGENT_CONSOLE_BUDGETS_DAILY_USD"):
        load_settings()
    monkeypatch.delenv("AGENT_CONSOLE_BUDGETS_DAILY_USD")
    for bad in ("daily_usd = -1", "daily_usd = \"50\"", "daily_usd = nan", "surprise = 1"):
        config.write_text(f"[budgets]\n{bad}\n")
        with pytest.raises(JobError, match="budgets"):
            load_settings()


def test_a_run_the_operator_let_go_on_stays_past_that_limit_in_its_next_process_and_only_that_one(
        tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db)
    a, b = budget(db, "a"), budget(db, "b")
    a.spent(NOW, 2.0)
    hold = a.check(NOW)
    assert hold is not None
    a.waive(hold)
    assert a.check(NOW) is None and b.check(NOW) is not None
    again = budget(db, "a")  # the run's next process (a kill -9, then resume)
    assert again.check(NOW) is None
    assert again.ledger.raise_limit(DAY, FLEET, 1.0, "test") == 1.0
    again.spent(NOW, 1.0)
    assert again.check(NOW) is not None  # a new limit reached: held again


def test_a_jobs_hold_is_answered_with_that_jobs_commands_on_the_channels() -> None:
    # The channels' answers were the fleet's (`budget --raise USD`) for a job's hold too: that raise lifts nothing.
    from console.engine import events as ev
    from console.engine.guardrails.fleet import FleetHold
    from console.notify import Notifier

    n = Notifier([], "r1", "nightly-triage", remind=())
    hold = FleetHold(DAY, job_scope("nightly-triage"), 0.5, 0.6, tell=True)
    told = n.message_for(ev.NeedsOperator(seq=1, ts=NOW, session=1, reason="fleet_budget",  # type: ignore[arg-type]
                                          message=hold.message(), evidence=hold.evidence()))
    assert told is not None
    assert "agent-console budget --job nightly-triage --raise USD" in told.body, told.body
    assert "agent-console budget --raise USD" not in told.body
    fleet = FleetHold(DAY, FLEET, 1.0, 1.2, tell=True)
    told = n.message_for(ev.NeedsOperator(seq=2, ts=NOW, session=1, reason="fleet_budget",  # type: ignore[arg-type]
                                          message=fleet.message(), evidence=fleet.evidence()))
    assert told is not None and "agent-console budget --raise USD" in told.body and "--job" not in told.body


def test_a_jobs_name_in_the_answers_is_quoted_for_a_shell() -> None:
    from console.engine.guardrails.fleet import FleetHold, scope_of

    hold = FleetHold(DAY, job_scope("my job; rm -rf ~"), 0.5, 0.6)
    assert "`agent-console budget --job 'my job; rm -rf ~' --raise USD`" in hold.message()
    assert scope_of(hold.evidence()) == hold.scope and scope_of(FleetHold(DAY, FLEET, 1, 1).evidence()) == FLEET


@pytest.mark.parametrize("claimed_at", ["'soon'", "1e18", "x'00'"])
def test_a_claim_no_run_could_have_made_is_taken_over_once(tmp_path: Path, claimed_at: str) -> None:
    # A planted hold row claimed for text, a blob or a time far ahead was never stale: nobody told the hold, ever.
    db = tmp_path / "jobs.db"
    JobStore(db)
    run = budget(db, "r1", claim_seconds=30.0)
    run.spent(NOW, 2.0)
    with sqlite3.connect(db) as c:
        c.executescript(FLEET_SCHEMA)
        c.execute(f"""INSERT INTO fleet_holds (day, scope, limit_usd, spent_usd, created_at, created_by, claimed_by,
                      claimed_at) VALUES (?, 'fleet', 1.0, 2.0, 'x', 'planted', 'planted', {claimed_at})""", (DAY,))
    hold = run.check(NOW)
    assert hold is not None and hold.tell
    run.told(hold, NOW)
    assert not budget(db, "r2", claim_seconds=0.0).check(NOW).tell  # type: ignore[union-attr]


def test_the_hold_counts_only_the_runs_a_process_runs_now_in_words_that_fit_the_number(tmp_path: Path) -> None:
    # A trial: "3 live runs pause at their next turn" with one runner (the others killed while held, stopped,
    # completed), and with one: "1 live run pause at their next turn".
    from console.engine.control import RunLock
    from console.engine.job_files import JobPaths

    db = tmp_path / "jobs.db"
    store = JobStore(db)
    limits = FleetLimits(jobs={"triage": 1.0})
    folders = {}
    for name in ("live", "killed", "stopped", "done", "second"):
        folder = tmp_path / name
        (folder / ".console").mkdir(parents=True)
        store.started(folder, "triage", "scripted", "scripted-agent", NOW)
        folders[name] = folder
        budget(db, name, "triage", limits).spent(NOW, 0.3)
    store.needs(folders["killed"], "fleet_budget", "job triage spent $1.20 today", NOW)  # its process died held
    store.ended(folders["stopped"], "stopped", NOW)
    store.completed(folders["done"], NOW, 0.9, "done")
    live = RunLock(JobPaths(folders["live"]))
    assert live.acquire()
    try:
        hold = budget(db, "live", "triage", limits).check(NOW)
        assert hold is not None and hold.tell and hold.running == 1
        assert "; 1 live run pauses at its next turn." in hold.message()
        second = RunLock(JobPaths(folders["second"]))
        assert second.acquire()
        try:
            assert [r.path for r in SqliteFleet(db).live_runs(DAY, job_scope("triage"))] == [
                str(folders["live"]), str(folders["second"])]
            again = StoreFleetBudget(SqliteFleet(db), folders["second"], "triage", lambda: limits, "test:second",
                                     claim_seconds=0.0).check(NOW)  # the telling taken over: counted anew
            assert again is not None and again.tell and "; 2 live runs pause at their next turn." in again.message()
        finally:
            second.release()
    finally:
        live.release()


def test_a_runs_store_detail_says_which_scopes_hold_it_waits_on() -> None:
    from console.engine.guardrails.fleet import FleetHold, held_in

    job = FleetHold(DAY, job_scope("quick start"), 1.0, 1.2).message()
    fleet = FleetHold(DAY, FLEET, 1.0, 1.2).message()
    assert held_in(f"fleet_budget: {job}", job_scope("quick start"))
    assert held_in(f"fleet_budget: [not told: the webhook refused] {job}", job_scope("quick start"))
    assert not held_in(f"fleet_budget: {job}", FLEET) and not held_in(f"fleet_budget: {job}", job_scope("quick"))
    assert held_in(f"fleet_budget: {fleet}", FLEET) and not held_in(f"stuck: {fleet}", FLEET)


def test_a_run_of_the_job_held_before_it_spent_anything_is_among_its_live_runs(tmp_path: Path) -> None:
    """Found by a new operator's trial: `budget` said "runs held: none now" of a job's hold while a run of that job,
    started after the hold opened, was held at its first turn: it had spent nothing today, and the job's live runs
    were those with spend. A run is the job's by its name too; another job's live run is not."""
    from console.engine.control import RunLock
    from console.engine.job_files import JobPaths

    db = tmp_path / "jobs.db"
    store = JobStore(db)
    folders = {}
    for name in ("triage-20261201-070000", "other-20261201-070000"):
        folder = tmp_path / name
        (folder / ".console").mkdir(parents=True)
        store.started(folder, name, "scripted", "scripted-agent", NOW)
        folders[name] = folder
    locks = [RunLock(JobPaths(f)) for f in folders.values()]
    assert all(lock.acquire() for lock in locks)
    try:
        assert [r.path for r in SqliteFleet(db).live_runs(DAY, job_scope("triage"))] == [
            str(folders["triage-20261201-070000"])]
    finally:
        for lock in locks:
            lock.release()
