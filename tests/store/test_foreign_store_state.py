"""A job folder from elsewhere names a run of the shared store (issue 32, point 1): its ``.console/store-id`` picked
which run of the store the folder was, and its ``.console/store-behind.json`` rewrote another team run's row (an
incomplete one made "completed" with a forged summary, on every machine). Neither is this operator's: the folder is
refused, ``--fresh`` makes it a run of its own, and a marker's updates change the marker's own run only."""

from __future__ import annotations

import json
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.engine.job import JobPaths
from console.engine.seal import Seal
from console.engine.store import shown_store_url
from console.engine.store.catchup import catch_up_machine
from console.engine.store.marker import MARKER, POINTERS, SEAL_KIND, Pointer
from console.engine.store.postgres import PgStore, read_store_id
from tests.store.machines import QUICKSTART, Machine, sql


@pytest.fixture
def machines(pg_url: str, tmp_path: Path) -> tuple[Machine, Machine]:
    return Machine("machine-a", tmp_path, pg_url), Machine("machine-b", tmp_path, pg_url)


def victim(b: Machine, pg_url: str) -> tuple[str, tuple[object, ...]]:
    """Another team member's run on machine B, ended incomplete (a turn limit): its key and its row."""
    done = b.cli("run", str(QUICKSTART), "--headless", "--speed", "0", "--max-turns", "2")
    assert done.returncode == 1, done.stderr
    ((key, *row),) = sql(pg_url, "SELECT key, status, summary, host, path, id FROM runs")
    assert row[0] != "completed"
    return key, tuple(row)


def hostile(base: Path, files: dict[str, str]) -> Path:
    root = base / "downloaded-job"
    shutil.copytree(QUICKSTART, root)
    (root / ".console").mkdir()
    for name, text in files.items():
        (root / ".console" / name).write_text(text)
    return root


def forged_marker(pg_url: str, own: str, target: str, host: str = "machine-a") -> dict[str, object]:
    ts = datetime.now(UTC).isoformat(timespec="seconds")
    return {"version": 1, "store": shown_store_url(pg_url), "key": own, "host": host, "owner": f"{host}:1:x",
            "since": ts, "updates": [{"op": "completed", "params": [ts, ts, 0.99, "forged summary", target]}]}


def test_a_shipped_marker_never_rewrites_another_run(machines: tuple[Machine, Machine], pg_url: str,
                                                     tmp_path: Path) -> None:
    """The attack: a folder whose store-id is a key of its own and whose marker (that key) carries an update naming
    the victim's key. Run in place on machine A, the marker's updates went first: the victim's row said completed."""
    a, b = machines
    key, before = victim(b, pg_url)
    own = uuid.uuid4().hex
    root = hostile(tmp_path, {"store-id": own + "\n", MARKER: json.dumps(forged_marker(pg_url, own, key))})
    done = a.cli("run", "--in-place", str(root), "--headless", "--speed", "0")
    assert sql(pg_url, "SELECT status, summary, host, path, id FROM runs WHERE key=%s", key) == [before]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "--fresh" in done.stderr
    assert sql(pg_url, "SELECT count(*) FROM runs") == [(1,)]  # nothing of the folder reached the store


def test_a_shipped_store_id_never_picks_a_run_of_the_store(machines: tuple[Machine, Machine], pg_url: str,
                                                          tmp_path: Path) -> None:
    """The attack: a folder whose store-id is the victim's key. Run in place, it became that run (its row's
    machine, path and id the folder's, its events appended to the victim's). Refused; with --fresh it is set aside
    and the folder is a run of its own."""
    a, b = machines
    key, before = victim(b, pg_url)
    root = hostile(tmp_path, {"store-id": key + "\n"})
    refused = a.cli("run", "--in-place", str(root), "--headless", "--speed", "0")
    assert sql(pg_url, "SELECT status, summary, host, path, id FROM runs WHERE key=%s", key) == [before]
    assert refused.returncode == 2, refused.stdout + refused.stderr
    fresh = a.cli("run", "--in-place", str(root), "--headless", "--speed", "0", "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert "moved aside to" in fresh.stderr and fresh.stdout.startswith("run ")  # the first line stays `run ID: ...`
    (aside,) = tmp_path.glob("downloaded-job.console-set-aside-*")
    assert (aside / "store-id").read_text() == key + "\n"
    assert sql(pg_url, "SELECT status, summary, host, path, id FROM runs WHERE key=%s", key) == [before]
    (mine,) = sql(pg_url, "SELECT key, status FROM runs WHERE path=%s", str(root.resolve()))
    assert mine[0] != key and mine[1] == "completed"
    assert read_store_id(root, Seal.of(Path(a.env["AGENT_CONSOLE_DATA_DIR"]))) == mine[0]


def test_a_marker_of_ours_changes_its_own_run_only(machines: tuple[Machine, Machine], pg_url: str,
                                                   tmp_path: Path) -> None:
    """Even a marker this operator's harness sealed (a defect, a file edited by hand and sealed again) is applied only
    when every update names the marker's own run: one naming another makes the whole marker no marker."""
    a, b = machines
    key, before = victim(b, pg_url)
    data = Path(a.env["AGENT_CONSOLE_DATA_DIR"])
    seal = Seal.of(data)
    store = PgStore(pg_url, host="machine-a", data_dir=data)
    try:
        paths = JobPaths(tmp_path / "ours")
        shutil.copytree(QUICKSTART, paths.root)
        own = store.key(paths.root)  # the folder's sealed store id
        marker = forged_marker(pg_url, own, key)
        marker["updates"].insert(0, {"op": "cost", "params": [0.5, own]})  # type: ignore[attr-defined]
        (paths.state / MARKER).write_text(seal.sealed_json(SEAL_KIND, paths.root, marker))
        (data / POINTERS).mkdir(parents=True, exist_ok=True)
        (data / POINTERS / f"{own}.json").write_text(Pointer(path=str(paths.root), key=own,
                                                             store=store.shown).model_dump_json())
        (out,) = catch_up_machine(store, data)
        assert out.why == "nothing to catch up", out
    finally:
        store.close()
    assert sql(pg_url, "SELECT status, summary, host, path, id FROM runs WHERE key=%s", key) == [before]
    assert sql(pg_url, "SELECT count(*) FROM runs WHERE key=%s", own) == [(0,)]  # not even its own cost


def test_a_run_from_before_seals_keeps_its_store_id_and_its_marker(machines: tuple[Machine, Machine], pg_url: str
                                                                   ) -> None:
    """A run of this operator made before seals (a copy in the data dir's runs/, as a shared store's operator has no
    jobs table): its store id, without a seal, is still its key in the store, its marker is applied, and both are
    sealed at its resume."""
    a, _b = machines
    done = a.cli("run", str(QUICKSTART), "--headless", "--speed", "0", "--max-turns", "2")
    assert done.returncode == 1, done.stderr
    folder = Path(done.stdout.splitlines()[0].split(": ", 1)[1])
    ((key, status),) = sql(pg_url, "SELECT key, status FROM runs")
    assert status != "completed"
    data = Path(a.env["AGENT_CONSOLE_DATA_DIR"])
    # As the version before seals left it: no seal anywhere, no key in the data dir, a marker of its own.
    state = folder / ".console"
    record = json.loads((state / "launch.json").read_text())
    record.pop("seal")
    (state / "launch.json").write_text(json.dumps(record))
    (state / "store-id").write_text(key + "\n")
    ts = datetime.now(UTC).isoformat(timespec="seconds")
    (state / MARKER).write_text(json.dumps({"version": 1, "store": shown_store_url(pg_url), "key": key,
                                            "host": "machine-a", "owner": "machine-a:1:old", "since": ts,
                                            "updates": [{"op": "cost", "params": [0.42, key]}]}))
    shutil.rmtree(data / "keys")
    again = a.cli("run", "--in-place", str(folder), "--headless", "--speed", "0", "--max-turns", "400")
    assert again.returncode == 0, again.stderr
    assert sql(pg_url, "SELECT key, status FROM runs") == [(key, "completed")]  # one run, its own row
    seal = Seal.of(data)
    assert read_store_id(folder, seal) == key  # sealed now
    assert not (state / MARKER).exists()  # applied first, then gone
    assert json.loads((state / "launch.json").read_text())["seal"]
