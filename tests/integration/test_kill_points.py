"""A kill at every step of a run, then a resume, ends exactly as the uninterrupted run does.

Every durable write of the engine is a failpoint (console.engine.failpoints). A
first run counts them. Then, for every point n, a forked process runs the same
job and dies at point n with os._exit (a real kill: no finally, no flush; for
the journal, the event log and appends also with half of the write on disk),
and the same worker resumes the job (a new Supervisor, as `run --in-place`
does). The resumed run's end state must equal the uninterrupted run's:

- the same files in the job folder, byte for byte (timestamps aside);
- the same working memory, todo list, accomplishments, notes and outcome;
- the same archives;
- the same effect events, each exactly once and in the same order (a resumed
  run may repeat what only reports: a turn starting, a session resuming);
- no temp file anywhere in the job folder, none left in .console/tmp, and a
  journal that reads back cleanly.

By default each sweep runs a fixed-seed sample of its points that keeps the
first, the last and one of each kind of write, clean and torn (tests/sweeps.py);
``--full-sweeps`` (or AGENT_CONSOLE_FULL_SWEEPS=1) runs them all, as .ci/run does.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from console.engine import failpoints
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.journal import Journal
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider, ScriptedTurn
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import SAMPLES, run_settings
from tests.sweeps import Sweep, points

KILLED = 137
CALL_ID = re.compile(r"call_[0-9a-f]{12}")
WORKERS = 2
TIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?|\b\d{2}:\d{2}\b")
# What reports rather than records: a resumed run repeats these (a turn it streams again, its own start).
REPORTS = {"turn_started", "session_started", "session_ended", "run_ended", "state_recovered", "text_delta",
           "token_usage", "error", "guardrails_status"}


def norm(text: str) -> str:
    return TIME.sub("<time>", text)


# Run settings a test adds (forked children inherit them): e.g. the job's guardrails.
EXTRA: dict[str, Any] = {}


def run(root: Path, script: list[ScriptedTurn] | None) -> None:
    clock = FakeClock(step=0.001)
    provider = ScriptedProvider(clock=clock, script=list(script) if script is not None else None)
    Supervisor(JobPaths(root), run_settings(**EXTRA), provider, clock=clock).run()


def replay_from(root: Path, script: list[ScriptedTurn]) -> list[ScriptedTurn]:
    """A replay script resumes at the turn the journal is at (a real model is asked again from there)."""
    return script[count_model_turns(root):]


def count_model_turns(root: Path) -> int:
    """Replies recorded so far: in the log, or committed in the journal but not yet logged (read-only)."""
    from console.engine import events as ev

    turns = {e.turn for e in ev.read_events(root / ".console" / "events.jsonl") if isinstance(e, ev.AssistantMessage)}
    journal = root / ".console" / "checkpoint.jsonl"
    if journal.exists():
        for raw in journal.read_bytes().splitlines(keepends=True):
            if raw.startswith(b'{"op": "commit"') and raw.endswith(b"\n"):
                turns |= {e["turn"] for e in json.loads(raw).get("events", []) if e["type"] == "assistant_message"}
    return len(turns)


def fingerprint(root: Path) -> dict[str, Any]:
    state = root / ".console"
    files = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(".console") or p.is_dir():
            continue
        files[rel] = norm(p.read_bytes().decode("utf-8", "replace"))

    def load(name: str) -> Any:
        return json.loads((state / name).read_text()) if (state / name).exists() else None

    memory = load("memory.json") or {}
    todos = load("todos.json") or {}
    outcome = load("outcome.json") or {}
    events = []
    seqs = []
    for line in (state / "events.jsonl").read_bytes().splitlines():
        e = json.loads(line)  # every line must parse: a torn one is cut at the next start
        seqs.append(e["seq"])
        if e["type"] in REPORTS or (e["type"] == "todos_changed" and e["reason"] == "resume"):
            continue
        for k in ("ts", "seq", "session", "v", "duration_ms"):
            e.pop(k, None)
        events.append(norm(json.dumps(e, sort_keys=True)))
    # Call ids are names, not effects (the scripted model derives them from a request that holds a summary's
    # timestamp): compare them by order of first appearance.
    ids: dict[str, str] = {}
    events = [CALL_ID.sub(lambda m: ids.setdefault(m[0], f"call#{len(ids)}"), e) for e in events]
    archives = {p.name: [(i["text"], i["done"]) for i in json.loads(p.read_text())["items"]]
                for p in sorted((state / "archive").glob("*.json"))}
    loaded = Journal(JobPaths(root)).load(FakeClock().now(), logged_seq=10**9)
    return json.loads(json.dumps({
        "files": files,
        "memory": [(t["task_id"], t["intent"], t["summary"], t["success"]) for t in memory.get("completed_tasks", [])],
        "blockers": [(b["task"], b["reason"], b["resolved_at"] is None) for b in memory.get("blockers", [])],
        "todos": (todos.get("kind"), todos.get("phase_name"), [(i["text"], i["done"]) for i in todos.get("items", [])]),
        "workspace": load("workspace.json"),
        "outcome": {k: outcome.get(k) for k in ("summary", "deliverables", "confidence", "notes")},
        "archives": archives,
        "events": events,
        "seqs_increase": all(b > a for a, b in itertools.pairwise(seqs)),
        "temp_files": sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                             if p.name.endswith(".tmp") and p.is_file()),
        "journal_ok": loaded.problem is None and loaded.cut == 0,
    }))


def in_child(fn: Callable[[], Any], out: Path) -> int:
    """Fork; the child runs ``fn`` and writes its JSON result to ``out``. Returns the pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            out.write_text(json.dumps(fn()))
        except BaseException as exc:
            out.write_text(json.dumps({"crash": repr(exc)}))
            code = 1
        os._exit(code)
    return pid


def kill_at(root: Path, script: list[ScriptedTurn] | None, n: int, tear: bool, note: Path) -> int:
    """Run the job in a child that dies at failpoint ``n``; returns its exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        seen = 0

        def hook(name: str, tear_fn: Callable[[], None] | None) -> None:
            nonlocal seen
            seen += 1
            if seen == n:
                note.write_text(name + (" (torn)" if tear and tear_fn else ""))
                if tear and tear_fn is not None:
                    tear_fn()
                os._exit(KILLED)

        failpoints.install(hook)
        try:
            run(root, script)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def scenario(base: Path, script: list[ScriptedTurn] | None, work: Path, n: int, tear: bool) -> dict[str, Any]:
    root = work / f"kill-{n}{'-torn' if tear else ''}"
    shutil.copytree(base, root)
    note = work / f"note-{n}-{tear}"
    code = kill_at(root, script, n, tear, note)
    where = note.read_text() if note.exists() else "(the run ended before this point)"
    run(root, replay_from(root, script) if script is not None else None)
    return {"where": where, "code": code, "fp": fingerprint(root)}


def count_points(base: Path, script: list[ScriptedTurn] | None,
                 work: Path) -> tuple[list[tuple[str, bool]], dict[str, Any]]:
    """Run once, uninterrupted: the failpoints (name, and whether it can tear), and the end state to compare
    with."""
    root = work / "baseline"
    shutil.copytree(base, root)
    seen: list[tuple[str, bool]] = []
    failpoints.install(lambda name, tear_fn: seen.append((name, tear_fn is not None)))
    try:
        run(root, script)
    finally:
        failpoints.install(None)
    return seen, fingerprint(root)


def enumerate_kills(base: Path, script: list[ScriptedTurn] | None, work: Path, sweep: Sweep) -> list[str]:
    names, expected = count_points(base, script, work)
    assert expected["outcome"]["summary"], "the uninterrupted run must complete"
    every = points(names)
    chosen = sweep.select(every)
    assert chosen[0] == every[0] and every[len(names) - 1] in chosen  # the ends are always in
    cases = [(p.n, p.tear) for p in chosen]
    failures: list[str] = []
    running: dict[int, tuple[int, bool, Path]] = {}
    pending = list(cases)
    while pending or running:
        while pending and len(running) < WORKERS and len(failures) <= 20:
            n, tear = pending.pop(0)
            out = work / f"result-{n}-{tear}.json"
            pid = in_child(lambda n=n, tear=tear: scenario(base, script, work, n, tear), out)
            running[pid] = (n, tear, out)
        if not running:
            break
        pid, status = os.wait()
        if pid not in running:
            continue  # a child an earlier test of this worker left (a detached run's watcher): not a kill point
        kn, kt, out = running.pop(pid)
        result = json.loads(out.read_text()) if out.exists() else {"crash": f"exit status {status}"}
        label = f"kill {kn}{' torn' if kt else ''}"
        if "crash" in result:
            failures.append(f"{label}: the resumed run crashed: {result['crash']}")
            continue
        if result["code"] != KILLED:
            failures.append(f"{label}: the first run was not killed (exit {result['code']})")
        diff = [k for k in expected if result["fp"][k] != expected[k]]
        if diff:
            detail = "; ".join(f"{k}: {_diff(expected[k], result['fp'][k])}" for k in diff)
            failures.append(f"{label} at {result['where']}: {detail}")
    print(f"{len(cases)} kill points run of {len(every)} ({sum(t for _, t in names)} of {len(names)} can tear), "
          f"{len(failures)} failures")
    return [f"[{sweep.describe()}] {f}" for f in failures]


def _diff(a: Any, b: Any) -> str:
    if isinstance(a, str) and isinstance(b, str):
        i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        return f"at char {i}: expected ...{a[max(0, i - 80):i + 120]!r} got ...{b[max(0, i - 80):i + 120]!r}"
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return f"first difference at #{i}: {_diff(x, y)}"
        extra = (a if len(a) > len(b) else b)[min(len(a), len(b))]
        return f"expected {len(a)} items, got {len(b)}: extra {str(extra)[:300]}"
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        bad = [k for k in keys if a.get(k) != b.get(k)]
        return f"differs at {bad[:3]}: expected {str(a.get(bad[0]))[:200]} got {str(b.get(bad[0]))[:200]}"
    return f"expected {str(a)[:300]} got {str(b)[:300]}"


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """A scratch folder on tmpfs when there is one: hundreds of runs, each with file replaces that cost
    milliseconds on a disk file system and microseconds in memory."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="kill-points-", dir=shm))
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path


@pytest.mark.sweep
def test_every_kill_point_of_quickstart_resumes_to_the_same_end(work: Path, sweep: Sweep) -> None:
    base = work / "quickstart"
    shutil.copytree(SAMPLES / "quickstart", base)
    failures = enumerate_kills(base, None, work, sweep)
    assert not failures, "\n".join(failures)


@pytest.mark.sweep
def test_every_kill_point_of_the_guardrails_sample_resumes_to_the_same_end(
        work: Path, monkeypatch: pytest.MonkeyPatch, sweep: Sweep) -> None:
    """Policy state (a denial, then the read that lifts it), a file trigger that fires once, and a refused
    stop (review.md missing) survive a kill anywhere. Its commands and the time-based feedback are left out:
    a command a kill interrupts is not run again (its result says so), and the clock restarts with each
    process here, so neither can end byte-identical by design."""
    from console.engine.guardrails import GuardrailsConfig

    base = work / "guardrails"
    shutil.copytree(SAMPLES / "guardrails", base)
    monkeypatch.setitem(EXTRA, "guardrails", GuardrailsConfig.model_validate({
        "max_completion_blocks": 5,
        "policies": [{"type": "read_before_write"}],
        "feedback": [{"type": "static", "name": "ReleaseNotes", "feedback": "Keep it short.",
                      "on_file_created": "release_notes.md"}],
        "completion": {"type": "composite", "all_must_pass": True, "checkers": [
            {"type": "plan"}, {"type": "files", "paths": ["CHANGELOG.md", "release_notes.md", "review.md"]}]},
    }))
    failures = enumerate_kills(base, None, work, sweep)
    assert not failures, "\n".join(failures)
    reference = work / "baseline"
    events = (reference / ".console" / "events.jsonl").read_text()
    assert '"type":"tool_denied"' in events and '"type":"completion_blocked"' in events
    assert events.count('"source":"ReleaseNotes"') == 1
    assert (reference / "review.md").exists()


PLAN = ("# Plan\n\n## Phase 1: Collect\n" + "".join(f"- [ ] c{i}\n" for i in range(5))
        + "\n## Phase 2: Write\n" + "".join(f"- [ ] w{i}\n" for i in range(5)))


def _edits_script() -> list[ScriptedTurn]:
    """Appends, edits, a rewind, notes and the job's end, several calls a turn (a kill lands mid-turn)."""
    done = C(name="todo_complete")
    return [
        T(calls=[C(name="generate_workspace_summary"), done, done, done]),
        T(calls=[C(name="write_file", arguments={"path": "main_plan.md", "content": PLAN}), done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"c{i}" for i in range(5)]})]),
        T(calls=[C(name="append_file", arguments={"path": "log.md", "content": "- collected c0"}),
                 C(name="append_file", arguments={"path": "log.md", "content": "- collected c0 again"}), done,
                 C(name="edit_file", arguments={"path": "log.md", "old_text": "again", "new_text": "twice"}),
                 C(name="add_note", arguments={"text": "c0 came twice"}), done]),
        T(calls=[C(name="todo_rewind", arguments={"issue": "c2 needs the other source"})]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"c{i}" for i in range(1, 6)]}),
                 C(name="append_file", arguments={"path": "log.md", "content": "- collected c1..c5"}),
                 C(name="add_accomplishment", arguments={"text": "all collected"}), done, done, done, done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"w{i}" for i in range(5)]}),
                 C(name="write_file", arguments={"path": "out.md", "content": "# Out\n\nc0..c5\n"}),
                 done, done, done, done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": ["Verify all deliverables", "Call job_complete()"]}),
                 done,
                 C(name="job_complete", arguments={"summary": "wrote out.md", "deliverables": ["out.md", "log.md"],
                                                   "confidence": 0.9})]),
    ]


@pytest.mark.sweep
def test_every_kill_point_of_appends_edits_and_a_rewind_resumes_to_the_same_end(work: Path, sweep: Sweep) -> None:
    base = work / "edits"
    base.mkdir()
    (base / "instructions.md").write_text("# Edits\n\nCollect c0..c5 into log.md, then write out.md.\n")
    script = _edits_script()
    failures = enumerate_kills(base, script, work, sweep)
    assert not failures, "\n".join(failures)
    assert (work / "baseline" / "log.md").read_text() == \
        "- collected c0\n- collected c0 twice\n- collected c1..c5\n"


def test_the_harness_notices_a_broken_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness itself: a redo that appends at the end instead of the recorded offset is caught."""
    from console.engine.sandbox import Sandbox

    base = tmp_path / "edits"
    base.mkdir()
    (base / "instructions.md").write_text("# Edits\n")
    script = _edits_script()
    names, expected = count_points(base, script, tmp_path)
    original = Sandbox.append_bytes
    monkeypatch.setattr(Sandbox, "append_bytes",
                        lambda self, rel, data, at=None, mkdirs=True: original(self, rel, data, mkdirs=mkdirs))
    k = next(n for n, (name, _) in enumerate(names, 1) if "append" in name)  # the first append, torn
    root = tmp_path / f"k{k}"
    shutil.copytree(base, root)
    assert kill_at(root, script, k, True, tmp_path / f"n{k}") == KILLED
    assert "append" in (tmp_path / f"n{k}").read_text()
    run(root, replay_from(root, script))
    assert fingerprint(root)["files"]["log.md"] != expected["files"]["log.md"]


def test_an_interrupt_inside_a_step_resumes_to_the_same_end(work: Path) -> None:
    """A third Ctrl+C raises KeyboardInterrupt wherever the engine is: the step it lands in is dropped whole
    (its events too) and redone by the resume. Every 9th point, in-process (no kill: the unwinding runs)."""
    base = work / "edits"
    base.mkdir()
    (base / "instructions.md").write_text("# Edits\n")
    script = _edits_script()
    names, expected = count_points(base, script, work)
    failures = []
    for n in range(3, len(names) + 1, 9):
        root = work / f"interrupt-{n}"
        shutil.copytree(base, root)
        seen = 0

        def hook(name: str, tear: Callable[[], None] | None, n: int = n) -> None:
            nonlocal seen
            seen += 1
            if seen == n:
                raise KeyboardInterrupt

        failpoints.install(hook)
        try:
            run(root, script)
        except KeyboardInterrupt:
            pass
        finally:
            failpoints.install(None)
        run(root, replay_from(root, script))
        got = fingerprint(root)
        diff = [k for k in expected if got[k] != expected[k]]
        if diff:
            failures.append(f"interrupt at {n}: " + "; ".join(f"{k}: {_diff(expected[k], got[k])}" for k in diff))
    assert not failures, "\n".join(failures)
