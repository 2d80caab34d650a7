"""A writer of the shared store is hostile: every column of a run's row and every event or command body it wrote is
text to show safely and to parse with bounds. Replayed here: a row whose ``host`` writes the clipboard (OSC 52),
retitles the window and clears the screen, shown by `attach ID` (the status line, the stop and resume hints); an
event body 5,000 levels deep, which ended `logs ID` and `wait ID` in a traceback and left every machine's fleet
with no run at all; a command body as deep, which the run's link reads.

Two "machines" are two AGENT_CONSOLE_HOST values (and data dirs) on one real PostgreSQL server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from console.engine import events as ev
from console.engine.commands import Pause
from console.engine.runs import run_id
from console.engine.store.postgres import PgStore
from console.tui.screens.confirm import ConfirmScreen
from tests.hostile import raw_controls
from tests.store.machines import Machine
from tests.store.test_attach_remote import T0, fake_remote_run, remote_app, remote_row, status_text
from tests.tui.conftest import drive, settle, wait_for
from tests.tui.test_terminal_safety import screen_text, words

# Writes "evil" to the clipboard (OSC 52), retitles the window, clears the screen: what a row's host carried.
HOST = "machine-a\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J"
HOST_SHOWN = "machine-a\\x1b]52;c;ZXZpbA==\\x07\\x1b]0;pwned\\x07\\x1b[2J"
DEPTH = 5_000


def story(seq: int, text: str) -> list[ev.EventBase]:
    return [ev.SessionStarted(ts=T0, seq=1, session=1, reason="new", provider="scripted", model="m",
                              context_window=32_000),
            ev.TurnStarted(ts=T0, seq=2, session=1, turn=1),
            ev.AssistantMessage(ts=T0, seq=3, session=1, turn=1, text=f"before the bad row: {text}")][:seq]


def deep_body(seq: int) -> str:
    """An event body as deep as the attack's: a few kilobytes, which PostgreSQL's jsonb takes."""
    return (f'{{"v":1,"ts":"{T0.isoformat()}","seq":{seq},"session":1,"type":"assistant_message","turn":1,'
            f'"text":"x","extra":{"[" * DEPTH}{"]" * DEPTH}}}')


def add_rows(url: str, folder: Path, bodies: list[tuple[int, str, str]]) -> str:
    """Events written straight into the store (as a hostile writer would), after the run's own; its key."""
    with psycopg.connect(url, autocommit=True) as conn:
        (key,) = conn.execute("SELECT key FROM runs WHERE path = %s", (str(folder),)).fetchone()
        for seq, kind, body in bodies:
            conn.execute("INSERT INTO events (run_key, seq, ts, type, body) VALUES (%s, %s, %s, %s, %s::jsonb)",
                         (key, seq, T0, kind, body))
        conn.execute("UPDATE runs SET last_seq = (SELECT max(seq) FROM events WHERE run_key = %s) WHERE key = %s",
                     (key, key))
    return str(key)


def hostile_run(url: str, *, host: str = "machine-a", leased: bool = False) -> Path:
    """A run of another machine whose fourth event is 5,000 levels deep, with a message before it and a turn (a
    tool call, a message) after it."""
    folder = fake_remote_run(url, story(3, "one"), host=host, leased=leased)
    after = [ev.TurnStarted(ts=T0, seq=5, session=1, turn=2),
             ev.ToolCalled(ts=T0, seq=6, session=1, turn=2, call_id="c2", tool="read_file",
                           arguments='{"path": "after.md"}'),
             ev.AssistantMessage(ts=T0, seq=7, session=1, turn=2, text="after the bad row: two"),
             ev.TokenUsage(ts=T0, seq=8, session=1, turn=2, input_tokens=10, output_tokens=5)]
    add_rows(url, folder, [(4, "assistant_message", deep_body(4))]
             + [(e.seq, e.type, e.model_dump_json()) for e in after])  # type: ignore[attr-defined]
    if not leased:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE runs SET lease_expires = NULL WHERE path = %s", (str(folder),))
    return folder


def test_the_deep_body_is_in_the_store_as_the_attack_had_it(pg_url: str) -> None:
    folder = hostile_run(pg_url)
    with psycopg.connect(pg_url) as conn:
        (length,) = conn.execute("SELECT octet_length(e.body::text) FROM events e JOIN runs r ON r.key = e.run_key "
                                 "WHERE r.path = %s AND e.seq = 4", (str(folder),)).fetchone()
    assert length > 2 * DEPTH


def test_logs_and_wait_show_a_deep_body_as_one_bad_row(pg_url: str, tmp_path: Path) -> None:
    folder = hostile_run(pg_url)
    b = Machine("machine-b", tmp_path, pg_url)
    rid = run_id(folder)
    told = b.cli("logs", rid)
    assert told.returncode == 0 and "Traceback" not in told.stderr, told.stderr
    assert "before the bad row: one" in told.stdout and "after the bad row: two" in told.stdout
    # The bad row is said once, on one line, as the store's event of that run (not a file of this machine).
    assert told.stderr.count("\n") == 1 and f"run {rid}" in told.stderr and "event 4" in told.stderr, told.stderr
    as_json = b.cli("logs", rid, "--json")
    assert as_json.returncode == 0 and "Traceback" not in as_json.stderr, as_json.stderr
    assert [line.count('"seq"') for line in as_json.stdout.splitlines()] == [1] * 7  # 1, 2, 3, 5, 6, 7, 8
    waited = b.cli("wait", rid, "--timeout", "30")
    # No runner holds it and its end never came: interrupted, said in one line (the verdict), no traceback.
    assert waited.returncode == 6 and "Traceback" not in waited.stderr, (waited.stdout, waited.stderr)
    assert waited.stdout.startswith(f"run {rid} interrupted")


def test_the_fleet_lists_every_run_past_a_deep_body(pg_url: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from console.view.fleet import Fleet

    bad = hostile_run(pg_url)
    good = fake_remote_run(pg_url, story(3, "fine"))
    own = fake_remote_run(pg_url, story(3, "mine"), host="machine-b")  # this machine's own run, in the store too
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    fleet = Fleet(tmp_path / "b-data" / "jobs.db", now=lambda: datetime.now(UTC), url=pg_url)
    try:
        listed = fleet.poll()
        rows = {r.path: r for r in listed}
        assert set(rows) == {bad, good, own} and not fleet.error, fleet.error
        # The bad run's other events are folded: what it did last is the tool call after the bad row.
        assert "after.md" in rows[bad].last and rows[bad].state == "interrupted", rows[bad]
        assert rows[good].state == "running" and rows[good].last
    finally:
        fleet.close()


def test_a_deep_command_body_is_one_bad_command(pg_url: str) -> None:
    folder = fake_remote_run(pg_url, story(3, "x"))
    good = {"id": uuid.uuid4().hex, "command": "pause", "args": {}, "source": "cli"}
    store = PgStore(pg_url)
    try:
        key = next(r.key for r in store.list(10) if r.path == str(folder))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("INSERT INTO commands (id, run_key, body) VALUES (%s, %s, %s::jsonb)",
                         (str(uuid.uuid4()), key, '{"command":"stop","args":' + "[" * DEPTH + "]" * DEPTH + "}"))
        store.send_command(key, good)
        pending = store.undelivered(key)
        assert len(pending) == 2
        assert {b.get("command") for _, b in pending} == {None, "pause"}  # the bad one is no command: refused there
    finally:
        store.close()


def test_attach_shows_a_hostile_host_as_text(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = hostile_run(pg_url, host=HOST, leased=True)
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    row = remote_row(pg_url, folder)
    assert row.host == HOST
    app = remote_app(pg_url, row)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.main.controller.owner is not None and app.main.events_seen >= 4,
                       what="the history and the lease")
        await settle(pilot, app)
        # The status line names the machine that runs it: as text.
        status = status_text(app)
        assert not raw_controls(status) and f"on {HOST_SHOWN}"[:40] in status, status
        assert not raw_controls(screen_text(app))
        # The stop's question says how to resume it there; the resume hint names the machine, as text.
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the stop's question")
        assert not raw_controls(app.screen.message) and not raw_controls(screen_text(app))
        assert words(f"on {HOST_SHOWN}") in words(screen_text(app).replace("│", " "))
        await pilot.press("n")
        # Its runner lets go: a command then says no runner holds it there, naming the machine, as text.
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE runs SET lease_expires = now() - interval '1 second' WHERE path = %s",
                         (str(folder),))
        await wait_for(pilot, lambda: app.main.controller.owner is None, what="the lease gone")
        said = app.main.controller.send(Pause()) or ""
        assert "no runner holds" in said and not raw_controls(said) and HOST_SHOWN in said, said
        assert not raw_controls(app.main.controller.resume_hint) and HOST_SHOWN in app.main.controller.resume_hint
        assert not raw_controls(screen_text(app))

    drive(app, body, size=(200, 50))


def test_numbers_no_event_holds_are_one_bad_row_each(pg_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the red team: a token count of 401 digits made `logs ID` end in a traceback (a float division
    overflowed) and the fleet list nothing; a cost of 1e400 (infinity once parsed) read as "$inf". Each is one bad
    row, named once; the run's other events are told and the fleet lists it."""
    import json

    from console.view.fleet import Fleet

    folder = fake_remote_run(pg_url, story(3, "one"))
    huge = "1" + "0" * 400
    bodies = [(4, "token_usage", f'{{"v":1,"ts":"{T0.isoformat()}","seq":4,"session":1,"type":"token_usage",'
                                 f'"turn":1,"input_tokens":{huge},"output_tokens":5}}'),
              (5, "token_usage", f'{{"v":1,"ts":"{T0.isoformat()}","seq":5,"session":1,"type":"token_usage",'
                                 '"turn":1,"input_tokens":10,"output_tokens":5,"job_cost_usd":1e400}'),
              *[(e.seq, e.type, e.model_dump_json()) for e in (  # type: ignore[attr-defined]
                  ev.TurnStarted(ts=T0, seq=6, session=1, turn=2),
                  ev.AssistantMessage(ts=T0, seq=7, session=1, turn=2, text="after the bad rows"),
                  ev.TokenUsage(ts=T0, seq=8, session=1, turn=2, input_tokens=10, output_tokens=5))]]
    add_rows(pg_url, folder, bodies)
    b = Machine("machine-b", tmp_path, pg_url)
    rid = run_id(folder)
    told = b.cli("logs", rid)
    assert told.returncode == 0 and "Traceback" not in told.stderr, told.stderr
    assert "before the bad row: one" in told.stdout and "after the bad rows" in told.stdout
    # Said once, naming the first (as for any damaged line); nothing of the infinite cost is shown.
    assert "inf" not in told.stdout and told.stderr.count("\n") == 1 and "event 4" in told.stderr, told.stderr
    as_json = b.cli("logs", rid, "--json")  # the store's rows as they are (JSON with a seq and a type passes)
    assert [json.loads(line)["seq"] for line in as_json.stdout.splitlines()] == [1, 2, 3, 4, 5, 6, 7, 8]
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")
    fleet = Fleet(tmp_path / "b-data" / "jobs.db", now=lambda: datetime.now(UTC), url=pg_url)
    try:
        row = {r.path: r for r in fleet.poll()}[folder]
        assert not fleet.error and row.cost is None, (row, fleet.error)
    finally:
        fleet.close()
    # The run's own row, as hostile: numbers that are none read as unknown; `jobs --json` stays JSON.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE runs SET cost_usd = 'Infinity', confidence = 'NaN' WHERE path = %s", (str(folder),))
    listed = b.cli("jobs", "--json")
    assert listed.returncode == 0, listed.stderr

    def no_constant(name: str) -> None:
        raise AssertionError(f"{name} is no JSON")

    entries = [json.loads(line, parse_constant=no_constant) for line in listed.stdout.splitlines()]
    entry = {e["path"]: e for e in entries}[str(folder)]
    assert entry["cost_usd"] is None and entry["confidence"] is None
    assert "inf" not in b.cli("jobs").stdout
