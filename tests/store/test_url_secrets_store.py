"""A base URL's password never reaches the shared store: the run's launch_settings event (which names the base URL)
is shipped to every machine sharing the store, and the runs table and `jobs --json` on another machine show what
that machine may read. Before, the event carried ``http://user:pw@...`` whole."""

from __future__ import annotations

from pathlib import Path

from tests.store.machines import QUICKSTART, Machine, sql

SECRET = "hunter2-pw"


def test_the_store_never_holds_a_base_urls_password(pg_url: str, tmp_path: Path) -> None:
    a = Machine("machine-a", tmp_path, pg_url)
    url = f"http://user:{SECRET}@127.0.0.1:9/v1?api-key=sk-query-token-77"  # the scripted model never calls it
    runner = a.start(str(QUICKSTART), "--speed", "0", "--base-url", url)
    assert runner.wait() == 0
    folder = runner.folder()
    bodies = [b for (b,) in sql(pg_url, "SELECT e.body::text FROM events e JOIN runs r ON r.key = e.run_key "
                                        "WHERE r.path = %s", str(folder))]
    launch = [b for b in bodies if '"launch_settings"' in b]
    assert launch and all("http://***@127.0.0.1:9/v1?api-key=***" in b for b in launch), launch
    rows = sql(pg_url, "SELECT * FROM runs")
    b = Machine("machine-b", tmp_path, pg_url)
    seen = [b.cli("jobs", "--json").stdout, b.cli("logs", folder.name[:8]).stdout, *bodies, repr(rows),
            runner.out.read_text()]
    assert all(SECRET not in text and "sk-query-token-77" not in text for text in seen)
