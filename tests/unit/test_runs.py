"""Run ids and run references: what `attach ID`, `approve PREFIX` and the rest resolve to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from console.engine.job import JobPaths
from console.engine.runs import (
    ALPHABET,
    ID_LENGTH,
    MAX_CANDIDATES,
    RunLookupError,
    describe_run,
    looks_like_a_path,
    normalize_id,
    resolve_run,
    run_id,
    run_name,
)


@dataclass(frozen=True)
class Row:  # the two fields of a jobs-table row that a lookup reads
    path: str
    status: str = "completed"


RUNS = Path("/data/runs")
QUICK_1 = Row(str(RUNS / "quickstart-20261122-101500"), "running")
QUICK_2 = Row(str(RUNS / "quickstart-20261122-101500-2"), "completed")
REQS = Row(str(RUNS / "requirements-extraction-20261122-093000"), "stopped")
ROWS = [QUICK_1, QUICK_2, REQS]


def test_an_id_is_short_stable_and_of_the_unambiguous_alphabet(tmp_path, monkeypatch) -> None:
    ids = {run_id(f"/data/runs/job-{n}") for n in range(200)}
    assert len(ids) == 200  # distinct folders, distinct ids (at this scale)
    for i in ids:
        assert len(i) == ID_LENGTH and set(i) <= set(ALPHABET) and not set(i) & set("ilou")
    assert run_id("/data/runs/job-1") == run_id(Path("/data/runs/job-1"))
    # relative or absolute, the same folder has the same id; JobPaths says the same
    monkeypatch.chdir(tmp_path)
    assert run_id("job") == run_id(tmp_path / "job") == JobPaths(tmp_path / "job").run_id


def test_an_exact_id_names_its_run_in_any_case_and_with_lookalike_letters() -> None:
    assert [run_id(r.path) for r in ROWS] == ["f3mpz", "gcpn7", "pgvtv"]  # sha256: the same on every machine
    assert resolve_run("pgvtv", ROWS) == Path(REQS.path)
    assert resolve_run("PGVTV", ROWS) == Path(REQS.path)
    job = Row("/data/runs/job-26")
    assert run_id(job.path) == "015q7"
    assert normalize_id("Ol5Q7") == "015q7"  # an O for the zero, an l for the one
    assert resolve_run("Ol5Q7", [*ROWS, job]) == Path(job.path)
    assert resolve_run("oI5", [*ROWS, job]) == Path(job.path)  # and in a prefix


def test_a_prefix_of_a_name_or_an_id_names_the_one_run_it_fits() -> None:
    assert resolve_run("req", ROWS) == Path(REQS.path)
    assert resolve_run("requirements-extraction", ROWS) == Path(REQS.path)
    assert resolve_run("gc", ROWS) == Path(QUICK_2.path)  # the start of an id
    assert resolve_run("F3M", ROWS) == Path(QUICK_1.path)
    assert resolve_run("quickstart-20261122-101500-", ROWS) == Path(QUICK_2.path)


def test_a_whole_folder_name_wins_over_the_longer_names_it_starts() -> None:
    # quickstart-20261122-101500 is also the start of quickstart-20261122-101500-2
    assert resolve_run(run_name(QUICK_1.path), ROWS) == Path(QUICK_1.path)
    assert resolve_run(run_name(QUICK_2.path), ROWS) == Path(QUICK_2.path)


def test_an_ambiguous_reference_is_an_error_listing_the_candidates() -> None:
    with pytest.raises(RunLookupError) as info:
        resolve_run("qu", ROWS)
    msg = str(info.value)
    assert msg.startswith("ambiguous: 2 runs match 'qu': ")
    assert info.value.candidates == (describe_run(QUICK_1), describe_run(QUICK_2))
    assert f"{run_id(QUICK_1.path)}  quickstart-20261122-101500  running" in msg
    assert f"{run_id(QUICK_2.path)}  quickstart-20261122-101500-2  completed" in msg
    assert "requirements" not in msg and "\n" not in msg


def test_two_folders_of_the_same_name_are_told_apart_by_id() -> None:
    a, b = Row("/home/me/job"), Row("/srv/job", "running")
    with pytest.raises(RunLookupError) as info:
        resolve_run("job", [a, b])
    assert run_id(a.path) in str(info.value) and run_id(b.path) in str(info.value)
    assert resolve_run(run_id(b.path), [a, b]) == Path(b.path)


def test_a_long_list_of_candidates_is_cut_and_counted() -> None:
    rows = [Row(f"/data/runs/quickstart-20261122-1015{n:02d}") for n in range(MAX_CANDIDATES + 5)]
    with pytest.raises(RunLookupError) as info:
        resolve_run("quick", rows)
    msg = str(info.value)
    assert msg.startswith(f"ambiguous: {MAX_CANDIDATES + 5} runs match 'quick': ")
    assert msg.count("quickstart-") == MAX_CANDIDATES and "and 5 more (agent-console jobs)" in msg
    assert len(info.value.candidates) == MAX_CANDIDATES + 5


@pytest.mark.parametrize("ref", ["xyz", "quickstart-2027", "Quick"])
def test_a_reference_that_matches_nothing_says_what_was_tried(ref: str) -> None:
    with pytest.raises(RunLookupError) as info:
        resolve_run(ref, ROWS)
    assert str(info.value) == f"no run folder, id or run name matches {ref!r}; see agent-console jobs"
    assert info.value.candidates == ()


def test_an_empty_reference_or_no_runs() -> None:
    with pytest.raises(RunLookupError, match="empty run reference"):
        resolve_run("", ROWS)
    with pytest.raises(RunLookupError, match="no run folder, id or run name matches 'qu'"):
        resolve_run("qu", [])


@pytest.mark.parametrize(("ref", "path"), [("runs/job", True), ("/abs", True), ("./job", True), ("~/job", True),
                                           (".", True), ("job", False), ("k3f9q", False),
                                           ("quickstart-20261122-101500", False)])
def test_what_can_only_be_a_folder_is_never_looked_up(ref: str, path: bool) -> None:
    assert looks_like_a_path(ref) is path


def test_a_run_starting_while_others_ask_who_runs_it_is_never_refused(make_job) -> None:
    """`jobs`, an attached console and the fleet view ask the lock who holds it (a shared flock for a few
    microseconds); a run that starts at that instant must get the lock, and a real holder still refuses."""
    import threading
    import time

    from console.engine.control import ACQUIRE_PATIENCE, RunLock

    paths = make_job("quickstart")
    paths.state.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    probes = 0

    def probe() -> None:
        nonlocal probes
        while not stop.is_set():
            RunLock(paths).holder()
            probes += 1

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    starts, deadline = 0, time.monotonic() + 120
    try:
        # 300 starts at least, and until the probes really raced them 300 times (a loaded machine gives the
        # prober's thread fewer turns: the count, not the machine's speed, decides when it is enough).
        while starts < 300 or probes <= 300:
            assert time.monotonic() < deadline, (starts, probes)
            lock = RunLock(paths)
            assert lock.acquire()
            lock.release()
            starts += 1
    finally:
        stop.set()
        prober.join(5)
    held = RunLock(paths)
    assert held.acquire()
    try:
        t0 = time.monotonic()
        assert RunLock(paths).acquire() is False
        assert time.monotonic() - t0 < ACQUIRE_PATIENCE + 10  # gave up after its patience, not waiting for the holder
    finally:
        held.release()
