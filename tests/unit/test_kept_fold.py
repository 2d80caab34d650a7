"""The view's fold kept on disk (console.view.state.kept): the kept fold and the log's tail after it give exactly the
state the whole log's fold gives, over real runs (context restarts, phase transitions, a rewind); a kept fold that is
stale, torn, damaged, another folder's or another operator's (planted in a job folder from elsewhere) is never
believed; a kill -9 in the middle of keeping it leaves the older one, which still holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

from console.engine import commands as cmds
from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.seal import Seal
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from console.tui import follow
from console.view.state import ConsoleState
from console.view.state import kept as kept_mod
from console.view.state.kept import (
    NOT_FOLDED,
    PRIVATE,
    FoldKeeper,
    FoldRecord,
    Kept,
    blank_of,
    fold_lines,
    keep,
    load,
    path_of,
)
from tests.conftest import job_factory, run_settings
from tests.provenance_support import launch, operator_seal
from tests.sweeps import Sweep

# The lines of a run's log a kept fold is checked after in the README's test command (besides the first and last
# line and the first of each type of event); every line with --full-sweeps.
KEPT_LINES = 40


def comparable(st: ConsoleState) -> dict[str, object]:
    """Everything the fold set, as it is (the bounded collections with their bounds), but what it never sets."""
    out: dict[str, object] = {}
    for name, value in vars(st).items():
        if name in NOT_FOLDED:
            continue
        if name == "told":
            value = {k: (v, v.maxlen) if isinstance(v, deque) else v for k, v in vars(value).items()}
        elif isinstance(value, deque):
            value = (value, value.maxlen)
        elif name == "gauge":
            value = (value, value.trend.maxlen)
        out[name] = value
    return out


def whole(paths: JobPaths) -> ConsoleState:
    st = ConsoleState("job")
    fold_lines(st, paths.events.read_bytes())
    return st


def restarting_run(make_job, clock) -> JobPaths:
    """A quickstart run in a small window: context restarts (their compactions) and both phase transitions; its
    runner's keeper keeping the fold after every few events, as a runner does after every few hundred KB."""
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(context_window=6_000, max_restarts=10), ScriptedProvider(clock=clock),
                     clock=clock, launch=launch())
    sup.subscribe(FoldKeeper(paths, operator_seal()), deferred=True, text=False)
    assert sup.run().ok
    return paths


def rewound_run(make_job, clock) -> JobPaths:
    """A quickstart run the operator rewinds as its first phase transition starts."""
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock, launch=launch())
    sent: list[bool] = []

    def hook(e: ev.EventBase) -> None:
        if not sent and isinstance(e, ev.PhaseTransition) and e.kind == "phase" and e.stage == "started":
            sent.append(True)
            sup.submit(cmds.Rewind(issue="use bullet lists only", phase=1))

    sup.subscribe(hook)
    sup.subscribe(FoldKeeper(paths, operator_seal()), deferred=True, text=False)
    assert sup.run().ok and sent
    return paths


@pytest.fixture
def keep_often(monkeypatch) -> None:
    monkeypatch.setattr(kept_mod, "KEEP_EVERY", 1)
    monkeypatch.setattr(kept_mod, "KEEP_CHECK", 0.0)


def test_the_record_holds_every_field_the_fold_sets() -> None:
    """A field added to the fold and not to the kept record would be lost by every attach: it must be one or the
    other."""
    recorded = {PRIVATE.get(name, name) for name in vars(ConsoleState())} - NOT_FOLDED
    assert recorded == set(FoldRecord.model_fields)


@pytest.mark.sweep
@pytest.mark.parametrize("run", [restarting_run, rewound_run])
def test_a_kept_fold_and_the_tail_after_it_are_the_whole_fold_at_every_line(run, make_job, clock, keep_often,
                                                                            sweep: Sweep) -> None:
    paths = run(make_job, clock)
    events = list(ev.read_events(paths.events))
    kinds = {type(e) for e in events}
    if run is restarting_run:
        assert any(isinstance(e, ev.SessionStarted) and e.reason == "restart" for e in events)
        assert ev.PhaseTransition in kinds and ev.ContextCompacted in kinds
    else:
        assert any(isinstance(e, ev.PhaseTransition) and e.kind == "rewind" for e in events)
    expected = comparable(whole(paths))
    seal = operator_seal()
    # The runner's keeper kept it as the run went: its last one, and the tail after it.
    resumed = load(paths, seal, ConsoleState("job"))
    assert resumed is not None and resumed.offset > 0
    fold_lines(resumed.state, paths.events.read_bytes()[resumed.offset:])
    assert comparable(resumed.state) == expected
    # Kept at every line of the log, read back, and the rest folded onto it.
    data = paths.events.read_bytes()
    st, offset = ConsoleState("job"), 0
    blank = blank_of(st)
    lines = data.split(b"\n")[:-1]
    # Each line is kept after, read back and folded on to the end (a fold of the tail per line: quadratic) with
    # --full-sweeps (.ci/run); else the first and the last line, the first line of each type of event, and a
    # fixed-seed draw of the rest (tests/sweeps.py). Every line is folded either way.
    firsts = {json.loads(raw)["type"]: i for i, raw in reversed(list(enumerate(lines)))}
    kept_at = {0, len(lines) - 1, *firsts.values(), *sweep.subset(list(range(len(lines))), KEPT_LINES, "lines")}
    for i, raw in enumerate(lines):
        fold_lines(st, raw)
        offset += len(raw) + 1
        if i not in kept_at:
            continue
        assert keep(paths, seal, st, blank, offset, 0, 0)
        back = load(paths, seal, ConsoleState("job"))
        assert back is not None and back.offset == offset
        assert comparable(back.state) == comparable(st)
        fold_lines(back.state, data[offset:])
        assert comparable(back.state) == expected, f"kept after line {raw[:80]!r}"


def test_an_attach_from_a_kept_fold_adopts_the_whole_fold(make_job, clock, keep_often, monkeypatch) -> None:
    """The attach's first read (console.tui.follow) from the runner's kept fold: the state it hands over is the
    whole log's fold, and the conversation gets the newest messages (as from the whole log)."""
    paths = restarting_run(make_job, clock)
    monkeypatch.setattr(follow, "QUICK_BYTES", 0)
    monkeypatch.setattr(follow, "TAIL_WINDOW", 64)  # the newest messages lie before the window: read further
    pushed: list[ev.EventBase] = []
    folded: list[follow.Folded] = []
    bridge = type("B", (), {"pending": 0, "push_many": lambda self, e: pushed.extend(e)})()
    worker = type("W", (), {"is_cancelled": False})()
    kept = Kept(paths, operator_seal())
    end = follow.quick_first_read(paths.events, bridge, 5, lambda s: pytest.fail("no seed"),  # type: ignore[arg-type]
                                  lambda: ConsoleState("job"), folded.append, worker, kept)
    assert end == paths.events.stat().st_size and len(folded) == 1
    assert comparable(folded[0].state) == comparable(whole(paths))
    events = list(ev.read_events(paths.events))
    messages = [i for i, e in enumerate(events) if isinstance(e, ev.AssistantMessage)]
    assert pushed == events[messages[-5]:]
    assert folded[0].older_messages == len(messages) - 5


def test_an_attach_without_one_folds_the_whole_log_and_keeps_it(make_job, clock, monkeypatch) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(context_window=6_000), ScriptedProvider(clock=clock), clock=clock,
                     launch=launch())
    assert sup.run().ok
    assert not path_of(paths).exists()
    monkeypatch.setattr(follow, "QUICK_BYTES", 0)
    monkeypatch.setattr(follow, "DRAW_FIRST", 0)
    folded: list[follow.Folded] = []
    bridge = type("B", (), {"pending": 0, "push_many": lambda self, e: None})()
    worker = type("W", (), {"is_cancelled": False})()
    follow.quick_first_read(paths.events, bridge, 5, lambda s: None, lambda: ConsoleState("job"),  # type: ignore[arg-type]
                            folded.append, worker, Kept(paths, operator_seal()))
    resumed = load(paths, operator_seal(), ConsoleState("job"))
    assert resumed is not None and resumed.offset == paths.events.stat().st_size
    assert comparable(resumed.state) == comparable(folded[0].state) == comparable(whole(paths))


@pytest.fixture
def kept_run(make_job, clock, keep_often) -> JobPaths:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock, launch=launch())
    sup.subscribe(FoldKeeper(paths, operator_seal()), deferred=True, text=False)
    assert sup.run().ok
    assert load(paths, operator_seal(), ConsoleState("job")) is not None
    return paths


def _body(paths: JobPaths) -> tuple[bytes, bytes]:
    mac, _, body = path_of(paths).read_bytes().partition(b"\n")
    return mac, body


def test_a_damaged_or_torn_kept_fold_is_not_believed(kept_run: JobPaths) -> None:
    paths, seal = kept_run, operator_seal()
    good = path_of(paths).read_bytes()
    i = good.index(b'"input_tokens":') + len(b'"input_tokens":')
    path_of(paths).write_bytes(good[:i] + b"9" + good[i:])  # one figure changed: the seal no longer holds
    assert load(paths, seal, ConsoleState("job")) is None
    for cut in (len(good) // 2, 64, 0):  # torn (not as a kill leaves it: written in place, here)
        path_of(paths).write_bytes(good[:cut])
        assert load(paths, seal, ConsoleState("job")) is None
    path_of(paths).write_bytes(good)
    assert load(paths, seal, ConsoleState("job")) is not None


def test_a_planted_kept_fold_is_never_believed(kept_run: JobPaths, tmp_path: Path) -> None:
    """Made by another operator (another key), for another folder, unsealed, of another version, or a link to a
    fold of ours elsewhere: none is believed."""
    paths, seal = kept_run, operator_seal()
    mac, body = _body(paths)
    other = Seal.of(tmp_path / "other-operator")
    forged = body.replace(b'"input_tokens":', b'"input_tokens":1')
    for planted in (other.mac(kept_mod.SEAL_KIND, paths.root, forged).encode() + b"\n" + forged,  # another's key
                    seal.mac(kept_mod.SEAL_KIND, tmp_path / "elsewhere", body).encode() + b"\n" + body,
                    seal.mac("launch", paths.root, body).encode() + b"\n" + body,  # another kind of record
                    b"\n" + body, body):
        path_of(paths).write_bytes(planted)
        assert load(paths, seal, ConsoleState("job")) is None
    v2 = body.replace(b'"version":1', b'"version":2')
    path_of(paths).write_bytes(seal.mac(kept_mod.SEAL_KIND, paths.root, v2).encode() + b"\n" + v2)
    assert load(paths, seal, ConsoleState("job")) is None
    # Our own, read through a link: not a file of this folder.
    real = tmp_path / "ours.json"
    real.write_bytes(mac + b"\n" + body)
    path_of(paths).unlink()
    path_of(paths).symlink_to(real)
    assert load(paths, seal, ConsoleState("job")) is None


def test_a_kept_fold_of_another_log_or_another_blank_is_not_believed(kept_run: JobPaths) -> None:
    paths, seal = kept_run, operator_seal()
    assert load(paths, seal, ConsoleState("job", window=1000)) is None  # the reader folds from another blank
    data = paths.events.read_bytes()
    paths.events.write_bytes(data.replace(b'"seq":3,', b'"seq":3, '))  # the log before its offset is another
    assert load(paths, seal, ConsoleState("job")) is None
    paths.events.write_bytes(data[:len(data) // 2])  # moved aside and begun again: shorter than its offset
    assert load(paths, seal, ConsoleState("job")) is None
    paths.events.write_bytes(data)
    assert load(paths, seal, ConsoleState("job")) is not None


KILLED_KEEP = """
import os, sys
from pathlib import Path
from console.engine import failpoints
from console.engine.job import JobPaths
from console.engine.seal import Seal
from console.view.state import ConsoleState
from console.view.state.kept import blank_of, fold_lines, keep

paths = JobPaths(Path(sys.argv[1]))
point = sys.argv[2]

def hook(name, tear):
    if name == point:
        if tear is not None:
            tear()
        os._exit(9)

st = ConsoleState()
blank = blank_of(st)
data = paths.events.read_bytes()
fold_lines(st, data)
failpoints.install(hook)
keep(paths, Seal.of(Path(os.environ["AGENT_CONSOLE_DATA_DIR"])), st, blank, len(data), 0, 0)
"""


@pytest.mark.parametrize("point", ["write view-fold.json", "rename view-fold.json"])
def test_a_kill_while_keeping_leaves_the_older_fold_which_still_holds(kept_run: JobPaths, point: str) -> None:
    paths, seal = kept_run, operator_seal()
    older = path_of(paths).read_bytes()
    before = load(paths, seal, ConsoleState("job"))
    assert before is not None
    # The run went on: its log grew past the kept fold (appended as its stream appends, whole lines).
    extra = ev.Feedback(ts=before.state.last_ts, seq=before.state.last_seq + 1, session=1, source="test",
                        severity="warning", message="after the kept fold").model_dump_json()
    with paths.events.open("a") as fh:
        fh.write(extra + "\n")
    done = subprocess.run([sys.executable, "-c", KILLED_KEEP, str(paths.root), point], env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stderr
    assert path_of(paths).read_bytes() == older  # the older one, whole: the new one never took its place
    resumed = load(paths, seal, ConsoleState("job"))
    assert resumed is not None and resumed.offset < paths.events.stat().st_size
    fold_lines(resumed.state, paths.events.read_bytes()[resumed.offset:])
    assert comparable(resumed.state) == comparable(whole(paths))
    assert resumed.state.feedback[-1].message == "after the kept fold"


def test_an_attach_from_a_kept_fold_parses_only_the_tail_and_the_newest_messages(make_job, clock, keep_often,
                                                                                monkeypatch) -> None:
    """The problem itself (issue 37): an attach parsed every event of the log (2 s of CPU and 230 MB at 100,000).
    From a kept fold it parses the lines after it and the newest messages' lines, none before."""
    paths = restarting_run(make_job, clock)
    data = paths.events.read_bytes()
    lines = data.count(b"\n")
    offset = data.rfind(b"\n", 0, len(data) * 3 // 4) + 1  # kept three quarters in: a quarter is the tail
    st = ConsoleState("job")
    blank = blank_of(st)
    fold_lines(st, data[:offset])
    assert keep(paths, operator_seal(), st, blank, offset, 0, 0)
    tail = data[offset:].count(b"\n")
    parsed: list[int] = []
    real = ev.parse_event
    monkeypatch.setattr(ev, "parse_event", lambda line: parsed.append(1) or real(line))
    monkeypatch.setattr(follow, "QUICK_BYTES", 0)
    pushed: list[ev.EventBase] = []
    bridge = type("B", (), {"pending": 0, "push_many": lambda self, e: pushed.extend(e)})()
    worker = type("W", (), {"is_cancelled": False})()
    follow.quick_first_read(paths.events, bridge, 3, lambda s: pytest.fail("no seed"),  # type: ignore[arg-type]
                            lambda: ConsoleState("job"), lambda f: None, worker, Kept(paths, operator_seal()))
    assert len(parsed) <= tail + len(pushed) < lines // 2


def test_the_keeper_folds_a_long_log_a_slice_at_a_time(make_job, clock, monkeypatch) -> None:
    """A resumed run's keeper with no kept fold folds its log in slices (never the whole log at once), lines longer
    than a slice too: what it keeps is the whole fold."""
    paths = make_job("quickstart")
    assert Supervisor(paths, run_settings(context_window=6_000), ScriptedProvider(clock=clock), clock=clock,
                      launch=launch()).run().ok
    data = paths.events.read_bytes()
    monkeypatch.setattr(kept_mod, "READ_CHUNK", 700)
    assert max(len(line) for line in data.split(b"\n")) > 700
    keeper = FoldKeeper(paths, operator_seal())
    assert keeper.catch_up(force=True) and keeper.offset == len(data)
    resumed = load(paths, operator_seal(), ConsoleState("job"))
    assert resumed is not None and resumed.offset == len(data)
    assert comparable(resumed.state) == comparable(whole(paths))
    with paths.events.open("ab") as fh:
        fh.write(data.split(b"\n")[3][:50])  # a line being written: not folded, nor kept, until it is whole
    assert not keeper.catch_up(force=True) and keeper.offset == len(data)


def priced(paths: JobPaths) -> None:
    """The run's log with every turn priced (the scripted model has no prices): the fleet's today's spend is
    then a sum worth comparing."""
    lines = []
    for e in ev.read_events(paths.events):
        if isinstance(e, ev.TokenUsage):
            e = e.model_copy(update={"cost_usd": e.seq / 1000})
        lines.append(e.model_dump_json())
    paths.events.write_text("\n".join(lines) + "\n", encoding="utf-8")


def fleet_of(paths: JobPaths, tmp_path: Path, seal: Seal | None) -> tuple[list[object], list[int]]:
    """The fleet's rows of the one run once every log is caught up, and the offsets its full parse read from."""
    from console.engine.store import JobStore
    from console.view.fleet import Fleet

    store_path = tmp_path / "fleet-jobs.db"
    if not store_path.exists():
        JobStore(store_path).started(paths.root, "quickstart", "scripted", "scripted-agent",
                                     next(ev.read_events(paths.events)).ts)
    now = list(ev.read_events(paths.events))[-1].ts
    read_from: list[int] = []
    real = ev.read_new

    def read_new(path: Path, offset: int, limit: int = -1) -> tuple[list[ev.EventBase], int]:
        read_from.append(offset)
        return real(path, offset, limit)

    fleet = Fleet(store_path, now=lambda: now, holder=lambda fold: None, seal=seal)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ev, "read_new", read_new)
        rows = [fleet.poll() for _ in range(4)][-1]  # the kept part's slice, then the tail, then nothing new
    fleet.close()
    return list(rows), read_from


@pytest.mark.parametrize("where", ["three quarters in", "at the end", "a live run's, just after a tool call"])
def test_the_fleet_starts_a_run_from_its_kept_fold_and_lists_it_as_from_the_whole_log(make_job, clock, tmp_path,
                                                                                    where: str) -> None:
    """The fleet's first fold of a long run read every line of its log (most of the fleet's CPU at 100,000
    events); from the runner's kept fold it parses only the tail, and its row is the same: state, last event
    (a tool call before the kept fold's offset included), today's spend."""
    paths = restarting_run(make_job, clock)
    priced(paths)
    data = paths.events.read_bytes()
    if where.startswith("a live run"):  # its runner kept the fold as the call began: the tail has no call
        data = data[:data.find(b"\n", data.rfind(b'"type":"tool_called"', 0, len(data) // 2)) + 1]
        paths.events.write_bytes(data)
    offset = data.rfind(b"\n", 0, len(data) * 3 // 4) + 1 if where == "three quarters in" else len(data)
    st = ConsoleState("job")
    blank = blank_of(st)
    fold_lines(st, data[:offset])
    assert keep(paths, operator_seal(), st, blank, offset, 0, 0)
    whole_rows, whole_read = fleet_of(paths, tmp_path, None)
    kept_rows, kept_read = fleet_of(paths, tmp_path, operator_seal())
    assert whole_read[0] == 0 and min(kept_read) >= offset  # nothing before the kept fold parsed whole
    assert kept_rows == whole_rows
    row = kept_rows[0]
    assert row.today == pytest.approx(sum(e.cost_usd or 0 for e in ev.read_events(paths.events)  # type: ignore
                                          if isinstance(e, ev.TokenUsage)))
    assert row.last  # (something to compare: the run's last event said)
    if where.startswith("a live run"):
        assert row.last.startswith("▸ read_file("), row.last  # the call, not an older notice


def test_the_fleet_never_believes_a_kept_fold_of_another_key(make_job, clock, tmp_path) -> None:
    """A kept fold sealed with another key (planted in a job folder from elsewhere) is not the fleet's starting
    point: it folds the whole log, and its row is the log's, not the planted state's."""
    paths = restarting_run(make_job, clock)
    data = paths.events.read_bytes()
    offset = data.rfind(b"\n", 0, len(data) // 2) + 1
    planted = ConsoleState("job")
    blank = blank_of(planted)
    fold_lines(planted, data[:offset])
    planted.outcome, planted.turns_total = "completed", 10_000  # what the planter would have the operator see
    other = Seal.of(tmp_path / "someone-else")
    assert keep(paths, other, planted, blank, offset, 0, 0)
    whole_rows, _ = fleet_of(paths, tmp_path, None)
    rows, read = fleet_of(paths, tmp_path, operator_seal())
    assert read[0] == 0 and rows == whole_rows


def test_the_fleet_folds_a_log_begun_again_while_it_read_the_part_its_kept_fold_stands_for(make_job, clock, tmp_path,
                                                                                        monkeypatch) -> None:
    """The log is moved aside and begun again (longer than the kept fold's offset) while the fleet reads the log
    before the kept fold a slice at a time: what it had from the old log is dropped, and the row is the new log's."""
    import console.view.fleet as fleet_mod
    from console.engine.store import JobStore
    from console.view.fleet import Fleet

    paths = restarting_run(make_job, clock)
    priced(paths)
    old = paths.events.read_bytes()
    offset = old.rfind(b"\n", 0, len(old) // 2) + 1
    st = ConsoleState("job")
    blank = blank_of(st)
    fold_lines(st, old[:offset])
    assert keep(paths, operator_seal(), st, blank, offset, 0, 0)
    other = rewound_run(job_factory(tmp_path / "other"), clock)  # another log: the one begun again in its place
    new = other.events.read_bytes()
    assert len(new) > offset and new[:offset] != old[:offset]
    monkeypatch.setattr(fleet_mod, "READ_CHUNK", 4096)  # the part before the kept fold read over several polls
    store_path = tmp_path / "jobs.db"
    JobStore(store_path).started(paths.root, "quickstart", "scripted", "scripted-agent",
                                 next(ev.read_events(paths.events)).ts)
    now = list(ev.read_events(other.events))[-1].ts
    fleet = Fleet(store_path, now=lambda: now, holder=lambda fold: None, seal=operator_seal())
    fleet.poll()
    fold = fleet.folds[str(paths.root)]
    assert 0 < fold._read_before < offset  # (the kept fold was believed, its part is being read)
    paths.events.write_bytes(new)
    for _ in range(2 + len(new) // 4096 + offset // 4096):
        rows = fleet.poll()
    fleet.close()
    monkeypatch.setattr(fleet_mod, "READ_CHUNK", 8 << 20)
    # What the fleet shows of the whole new log, read by a fleet without a kept fold.
    fresh = Fleet(store_path, now=lambda: now, holder=lambda fold: None)
    for _ in range(3):
        expected = fresh.poll()
    fresh.close()
    assert list(rows) == list(expected)
