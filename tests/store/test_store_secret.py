"""The store's URL is a secret: its password reaches no log, event, record, store row or command's environment;
and a run resumes only with the store it was started with."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.engine.tools.commands import CommandToolConfig, command_env
from console.engine.tools.limits import CommandWorld
from console.settings import load_settings
from tests.store.machines import QUICKSTART, Machine, sql

SECRET = "s3cret-Pa55"


def with_password(url: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")


def test_the_password_is_nowhere_and_the_store_is_kept_for_a_resume(pg_url: str, tmp_path: Path) -> None:
    a = Machine("machine-a", tmp_path, with_password(pg_url))  # the test server trusts: any password is let in
    runner = a.start(str(QUICKSTART), "--speed", "0")
    assert runner.wait() == 0
    folder = runner.folder()
    for path in [runner.out, *folder.rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert '"store": "postgresql://postgres@127.0.0.1' in (folder / ".console" / "launch.json").read_text()
    dump = sql(pg_url, "SELECT string_agg(body::text, '') FROM events")[0][0] + str(sql(pg_url, "SELECT * FROM runs"))
    assert SECRET not in dump
    embedded = Machine("machine-a", tmp_path, "")
    refused = embedded.cli("run", "--in-place", str(folder), "--headless", "--speed", "0")
    assert refused.returncode == 2 and "started with the store postgresql://postgres@127.0.0.1" in refused.stderr
    assert SECRET not in refused.stderr
    wrong = Machine("machine-a", tmp_path, "postgresql://postgres:other-pw@127.0.0.1:1/elsewhere")
    said = wrong.cli("jobs")
    # The store away: this machine's runs are listed from their folders (exit 0), the server named without its
    # password.
    assert said.returncode == 0 and "store away" in said.stderr and "127.0.0.1:1" in said.stderr
    assert "other-pw" not in said.stderr + said.stdout


def test_a_bad_store_setting_is_one_line_without_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from console.engine.job import JobError

    monkeypatch.setenv("AGENT_CONSOLE_STORE", f"mysql://root:{SECRET}@db/x")
    with pytest.raises(JobError) as caught:
        load_settings()
    assert "key 'store'" in str(caught.value) and SECRET not in str(caught.value)
    monkeypatch.setenv("AGENT_CONSOLE_STORE", "")
    assert load_settings().store_url is None


def test_a_commands_environment_never_has_the_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_STORE", f"postgresql://u:{SECRET}@db/x")
    env = command_env(CommandToolConfig(name="t", description="d", command=["true"]), str(tmp_path),
                      CommandWorld(unconfined=True))
    assert SECRET not in repr(env) and "AGENT_CONSOLE_STORE" not in env


def test_hostile_rows_of_the_store_are_printed_safe(pg_url: str, tmp_path: Path) -> None:
    """Whoever can write the store can write a host, a path, an event: what a terminal is shown of them is text."""
    from console.engine.runs import run_id

    b = Machine("machine-b", tmp_path, pg_url)
    assert b.jobs() == []  # the schema made
    path = "/x/\x1b]0;pwned\x07run-[red]1"
    sql(pg_url, "INSERT INTO runs (key, id, host, path, name, status, started_at, updated_at) VALUES "
        "(%s, %s, %s, %s, %s, 'running', '2026', '2026')", "k" * 32, run_id(path), "evil\x1b[2J[bold]host", path,
        "n\x1b[31m")
    sql(pg_url, "INSERT INTO events (run_key, seq, type, body) VALUES (%s, 1, 'error', %s)", "k" * 32,
        '{"v":1,"seq":1,"session":1,"type":"error","ts":"2026-11-26T09:00:00Z","message":"\\u001b[2Jboom",'
        '"where":"x","recoverable":true}')
    rid = run_id(path)
    for args in (("jobs",), ("logs", rid), ("stop", rid), ("attach", rid), ("resume", rid)):
        done = b.cli(*args)
        assert "\x1b" not in done.stdout + done.stderr, args
    assert "boom" in b.cli("logs", rid).stdout
