"""`agent-console costs`: the cost ledger over real runs of the scripted model at a price, equal to the runs' own
token_usage events, by job, model, machine and day (a run over midnight split by its turns' times), since a time,
with unpriced usage and unreadable logs said; and the fleet's line for today's spend."""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.cost import Prices, format_cost
from console.engine.job import JobPaths
from console.engine.runs import run_id
from console.engine.store import JobStore, this_host
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from console.settings import load_settings
from console.view.ledger import LedgerJson, parse_since
from tests.conftest import SAMPLES, run_settings

PRICES = Prices(input=3.0, output=15.0, cached_input=0.3)
# A timezone of the operator's three hours east of UTC (POSIX writes it "-3"): local midnight is 21:00 UTC.
EAST = "XST-3"


@pytest.fixture
def make_job(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(base=tmp_path)


@pytest.fixture
def local_tz(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", EAST)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def a_run(make_job, *, name: str = "quickstart", model: str = "scripted-agent", prices: Prices | None = PRICES,
          start: datetime | None = None, step: float = 0.001) -> JobPaths:
    """A real run of the scripted model (agent mode, the quickstart sample) to its end, recorded in this
    machine's jobs store, priced at ``prices`` (None: a model without prices)."""
    root = make_job.base / name  # a copy of the quickstart sample under a job name of its own
    shutil.copytree(SAMPLES / "quickstart", root, ignore=shutil.ignore_patterns(".console"))
    paths = JobPaths(root)
    clock = FakeClock(start=start, step=step)
    store = JobStore(load_settings().store_path)
    sup = Supervisor(paths, run_settings(model=model, prices=prices), ScriptedProvider(model, clock=clock),
                     clock=clock, store=store)
    sup.run()
    store.close()
    return paths


def usages(paths: JobPaths) -> list[ev.TokenUsage]:
    return [e for e in ev.read_events(paths.events) if isinstance(e, ev.TokenUsage)]


def costs(capsys, *args: str) -> tuple[int, LedgerJson]:
    code = main(["costs", "--json", *args])
    return code, LedgerJson.model_validate_json(capsys.readouterr().out)


def test_the_ledger_equals_each_runs_own_events_by_job_and_in_total(make_job, capsys) -> None:
    a = a_run(make_job)
    b = a_run(make_job, name="second")
    code, got = costs(capsys)
    assert code == 0 and got.by == "job" and not got.unreadable and not got.runs_unpriced
    rows = {r.key: r for r in got.rows}
    for paths, job in ((a, "quickstart"), (b, "second")):
        evs = usages(paths)
        assert len(evs) > 1 and all(e.cost_usd is not None for e in evs)
        # The engine's own running total of the run (the console's header, the fleet's cost column), exactly.
        assert rows[job].cost_usd == evs[-1].job_cost_usd
        assert rows[job].turns == len(evs) and rows[job].runs == 1
        assert rows[job].input_tokens == sum(e.input_tokens for e in evs)
        assert rows[job].output_tokens == sum(e.output_tokens for e in evs)
    assert got.total.cost_usd == pytest.approx(usages(a)[-1].job_cost_usd + usages(b)[-1].job_cost_usd)
    assert got.total.runs == 2


def test_an_mcp_servers_sampling_is_spend_but_no_turn(make_job, capsys) -> None:
    paths = a_run(make_job)
    turns = usages(paths)
    # What the engine writes when a server's sampling is answered (console.engine.tools.mcp_sampling).
    ev.EventStream(paths.events, FakeClock()).emit(
        ev.TokenUsage, turn=0, input_tokens=40, output_tokens=5, cost_usd=0.25, source="mcp_sampling",
        mcp_server="muse", call_id="c1")
    code, got = costs(capsys)
    (row,) = got.rows
    assert code == 0 and row.turns == len(turns)
    assert row.input_tokens == sum(e.input_tokens for e in turns) + 40
    assert row.cost_usd == pytest.approx(sum(e.cost_usd or 0 for e in turns) + 0.25)


def test_by_model_and_machine_and_unpriced_usage_is_said_never_zero(make_job, capsys) -> None:
    priced = a_run(make_job)
    free = a_run(make_job, name="local", model="my-local-model", prices=None)
    code, got = costs(capsys, "--by", "model")
    assert code == 0
    rows = {r.key: r for r in got.rows}
    assert rows["scripted-agent"].cost_usd == usages(priced)[-1].job_cost_usd
    unpriced = rows["my-local-model"]
    assert unpriced.cost_usd is None  # not $0: nothing priced
    assert unpriced.unpriced_tokens == sum(e.input_tokens + e.output_tokens for e in usages(free)) > 0
    assert got.runs_unpriced == [run_id(free.root)]
    code, got = costs(capsys, "--by", "machine")
    assert [(r.key, r.runs) for r in got.rows] == [(this_host(), 2)]
    assert got.rows[0].cost_usd == usages(priced)[-1].job_cost_usd
    # The table's words, piped: the unpriced run is said, with what to do.
    assert main(["costs", "--by", "model"]) == 0
    out = capsys.readouterr().out
    assert "1 run had unpriced usage" in out and run_id(free.root) in out and "[prices]" in out


def test_a_run_over_midnight_splits_by_its_turns_times_and_since_cuts_at_local_midnight(make_job, capsys,
                                                                                       local_tz) -> None:
    # 23:59:40 local (20:59:40 UTC); each clock read moves half a second: the run's turns go on past midnight.
    paths = a_run(make_job, start=datetime(2026, 1, 15, 20, 59, 40, tzinfo=UTC), step=0.5)
    evs = usages(paths)
    before = [e for e in evs if e.ts.astimezone().date().isoformat() == "2026-01-15"]
    after = [e for e in evs if e.ts.astimezone().date().isoformat() == "2026-01-16"]
    assert before and after, "the run should span local midnight"
    code, got = costs(capsys, "--by", "day")
    assert code == 0 and got.timezone == "XST"
    assert [r.key for r in got.rows] == ["2026-01-15", "2026-01-16"]  # not the UTC day: all of it the 15th
    assert got.rows[0].cost_usd == pytest.approx(sum(e.cost_usd for e in before))
    assert got.rows[1].cost_usd == pytest.approx(sum(e.cost_usd for e in after))
    assert got.rows[0].turns == len(before) and got.rows[1].turns == len(after)
    assert got.total.cost_usd == pytest.approx(evs[-1].job_cost_usd)
    code, got = costs(capsys, "--since", "2026-01-16", "--by", "day")
    assert [r.key for r in got.rows] == ["2026-01-16"] and got.total.turns == len(after)
    assert got.since is not None and got.since.startswith("2026-01-16T00:00:00+03:00")


def test_since_reads_iso_times_spans_and_days_in_local_time(local_tz) -> None:
    now = datetime(2026, 1, 16, 2, 30, tzinfo=UTC)  # 05:30 local
    assert parse_since("today", now) == datetime(2026, 1, 15, 21, 0, tzinfo=UTC)
    assert parse_since("yesterday", now) == datetime(2026, 1, 14, 21, 0, tzinfo=UTC)
    assert parse_since("24h", now) == now - timedelta(hours=24)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("2026-01-15T08:00", now) == datetime(2026, 1, 15, 5, 0, tzinfo=UTC)
    assert parse_since("2026-01-15T08:00Z", now) == datetime(2026, 1, 15, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize("since", ["last tuesday", "", "  "])
def test_a_bad_since_is_one_line_and_exit_2(capsys, since: str) -> None:
    """An empty one too (a script's unset variable, `--since "$FROM"`): it was all time, said as such."""
    assert main(["costs", "--since", since]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--since {since!r} is no time" in err and "24h" in err


def test_a_corrupt_and_an_unreadable_log_are_named_once_and_the_rest_counted(make_job, capsys) -> None:
    good = a_run(make_job)
    damaged = a_run(make_job, name="damaged")
    gone = a_run(make_job, name="unreadable")
    lines = damaged.events.read_bytes().splitlines(keepends=True)
    damaged.events.write_bytes(b"".join([*lines[:5], b"\x00\xffgarbage{{\n", *lines[5:]]))
    gone.events.unlink()
    gone.events.mkdir()  # no file there: a log that cannot be read
    code, got = costs(capsys)
    assert code == 1
    named = {u.id: u.problem for u in got.unreadable}
    assert named == {run_id(damaged.root): "1 damaged line in its log (passed over)",
                     run_id(gone.root): "its log is not a file"}
    rows = {r.key: r for r in got.rows}
    assert rows["quickstart"].cost_usd == usages(good)[-1].job_cost_usd
    assert rows["damaged"].cost_usd == usages(damaged)[-1].job_cost_usd  # its events all read, the garbage passed
    assert "unreadable" not in rows
    assert main(["costs"]) == 1
    out = capsys.readouterr().out
    assert "Traceback" not in out and out.count(run_id(gone.root)) == 1 and "2 runs could not be read whole" in out


def test_a_run_whose_folder_is_gone_is_named_with_its_last_cost_not_silently_left_out(make_job, capsys) -> None:
    """The total was every run's but one, and nothing said so: a run deleted (or moved) is known to the store, its
    log gone with its folder. It is named, with the cost its record last said, and how to forget it."""
    kept = a_run(make_job)
    deleted = a_run(make_job, name="deleted")
    cost = usages(deleted)[-1].job_cost_usd
    assert cost
    shutil.rmtree(deleted.root)
    code, got = costs(capsys)
    assert code == 1  # printed, but not every known run is in it
    assert [(u.id, u.problem) for u in got.unreadable] == [
        (run_id(deleted.root), f"its folder is gone (deleted or moved): not counted (its last record said "
                               f"{format_cost(cost)})")]
    assert [r.key for r in got.rows] == ["quickstart"] and got.total.cost_usd == usages(kept)[-1].job_cost_usd
    assert main(["costs"]) == 1
    out = capsys.readouterr().out
    assert (f"1 run is not counted, its folder gone (deleted or moved): {run_id(deleted.root)} on {this_host()} "
            f"(its last record said {format_cost(cost)}); `agent-console jobs --prune` forgets it") in out, out
    assert "could not be read whole" not in out
    assert main(["jobs", "--prune"]) == 0
    capsys.readouterr()
    code, got = costs(capsys)
    assert code == 0 and not got.unreadable  # forgotten: the ledger is whole again


def test_an_empty_machine_has_spent_nothing(capsys) -> None:
    code, got = costs(capsys)
    assert code == 0 and got.rows == [] and got.total.cost_usd is None and got.total.runs == 0
    assert main(["costs", "--by", "day"]) == 0
    assert capsys.readouterr().out.startswith("costs by day, all time; days in ")


def test_the_fleet_shows_todays_spend(make_job, local_tz) -> None:
    from console.view.fleet import Fleet
    from console.web.pages import fleet_list

    early = a_run(make_job, start=datetime(2026, 1, 15, 20, 59, 40, tzinfo=UTC), step=0.5)  # over midnight
    evs = usages(early)
    today = sum(e.cost_usd for e in evs if e.ts.astimezone().date().isoformat() == "2026-01-16")
    now = datetime(2026, 1, 16, 9, 0, tzinfo=UTC)
    rows = Fleet(load_settings().store_path, now=lambda: now, holder=lambda fold: None).poll()
    (row,) = rows
    assert row.today == pytest.approx(today) and row.cost == evs[-1].job_cost_usd
    from console.engine.cost import format_cost

    page = fleet_list(rows, csrf="x")
    assert f"today {format_cost(today)} over 1 run" in page
    # The run began yesterday: its row says what it spent today beside its whole cost.
    assert f"{format_cost(row.cost)} today {format_cost(today)}" in page


def test_the_fleet_views_title_and_detail_say_todays_spend(make_job, local_tz) -> None:
    from console.engine.cost import format_cost
    from console.tui.launch import build_fleet_app
    from tests.tui.conftest import drive, wait_for

    paths = a_run(make_job, start=datetime(2026, 1, 15, 20, 59, 40, tzinfo=UTC), step=0.5)  # over midnight
    evs = usages(paths)
    today = sum(e.cost_usd for e in evs if e.ts.astimezone().date().isoformat() == "2026-01-16")
    app = build_fleet_app(load_settings().store_path, holder=lambda fold: None, watch=False, animations=False,
                          keymap={}, now=lambda: datetime(2026, 1, 16, 9, 0, tzinfo=UTC), dialog_delay=0)

    async def body(pilot):
        title = lambda: str(app.fleet_view.query_one("#fleet-title").render())  # noqa: E731
        await wait_for(pilot, lambda: "today" in title(), what="today's spend in the title")
        assert f"today {format_cost(today)} over 1 run" in title()
        await pilot.pause()
        assert f"today {format_cost(today)}" in str(app.fleet_view.query_one("#fleet-detail").render())

    drive(app, body, size=(120, 40))


def test_json_schema_is_documented(capsys) -> None:
    """--json's schema is LedgerJson: every field of it is named in docs/cli.md."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    for name in [*LedgerJson.model_fields, "unpriced_tokens", "cached_input_tokens"]:
        assert f"`{name}`" in doc, name
    code, got = costs(capsys)
    assert code == 0 and json.loads(got.model_dump_json())["schema_version"] == 1


def test_with_the_store_away_this_machines_runs_are_counted_from_their_folders_and_it_says_so() -> None:
    """A run made by `run --headless` (its folder under the data dir, its launch record sealed), then the shared
    store away: the ledger is this machine's, read from the folders; one line says so; exit 1 (not whole)."""
    import os
    import subprocess
    import sys

    from console.engine.job import JobPaths as Paths

    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text('[prices."scripted-agent"]\ninput = 3.0\noutput = 15.0\n')
    done = subprocess.run([sys.executable, "-m", "console.cli", "run", str(SAMPLES / "quickstart"), "--headless",
                           "--speed", "0"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (folder,) = (load_settings().runs_dir).iterdir()
    spent = usages(Paths(folder))[-1].job_cost_usd
    env = {**os.environ, "AGENT_CONSOLE_STORE": "postgresql://agents@127.0.0.1:1/agents"}  # nothing listens there
    got = subprocess.run([sys.executable, "-m", "console.cli", "costs", "--json"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert got.returncode == 1
    assert got.stderr.count("\n") == 1 and "the store is away" in got.stderr and "agent-console costs" in got.stderr
    ledger = LedgerJson.model_validate_json(got.stdout)
    assert [(r.key, r.cost_usd) for r in ledger.rows] == [("quickstart", spent)]


def test_on_a_terminal_a_table_with_the_total_and_the_notes(make_job, capsys, monkeypatch) -> None:
    import sys

    priced = a_run(make_job)
    free = a_run(make_job, name="local", model="my-local-model", prices=None)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["costs", "--by", "model"]) == 0
    out = capsys.readouterr().out
    from console.engine.cost import format_cost

    (row,) = [line for line in out.splitlines() if "scripted-agent" in line]
    assert format_cost(usages(priced)[-1].job_cost_usd) in row and "│" in row
    (total,) = [line for line in out.splitlines() if "total" in line and "│" in line]
    assert format_cost(usages(priced)[-1].job_cost_usd) in total
    assert "1 run had unpriced usage" in out and run_id(free.root) in out
