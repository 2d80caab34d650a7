"""Fuzzing the harness files a resumed run reads back (the "Trust" promise of DESIGN.md).

One realistic job state is built per module: the quickstart job stopped after 25 turns, with a queued
operator command in the inbox, a journal message stored as a blob and an older file already in
``.console/corrupt/``. Each example copies it, damages ONE harness file in one way and resumes the run.

Whatever the damage, the resumed run must:
- return a RunResult (no exception escapes ``Supervisor.run()``), within a time limit (a FIFO never hangs),
  and end with job_complete or a clean failure reason (never "internal error");
- lose nothing silently: a file that cannot be used is reported by a ``state_recovered`` event that names it
  and its bytes survive in ``.console/corrupt/`` (an inbox command: renamed to ``.rejected`` and reported by a
  rejected ``operator_command``); only a torn last line of the journal or of the event log may be cut, and
  only uncommitted journal records with it; nothing that was in ``.console/corrupt/`` disappears;
- never read or change anything outside the job folder through a symbolic link;
- leave no ``*.tmp`` file outside ``.console`` and an event log whose every line is JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from console.cli import main as cli_main
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.context.summary import ArchivedList
from console.engine.control import Command, write_inbox
from console.engine.job import JobPaths
from console.engine.loop import ShutdownReason
from console.engine.state import MODELS, JobOutcome, StateFileError, parse_model
from console.engine.supervisor import RunResult, Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import SAMPLES, run_settings, time_limit
from tests.sweeps import examples

HANG_SECONDS = 20
BLOB_REF = re.compile(rb'"\$blob"\s*:\s*"([0-9a-f]{64})"')
SECRET = "OUTSIDE-SECRET-7f3a9c"
OLD_CORRUPT = "corrupt/todos.json.20251231T235959"
ARCHIVE = "archive/phase-01-review-inputs.json"
INBOX = "inbox/00000000000000000001-fuzzcommand1.json"

# Targets: where each harness file lives under .console/ ("blob" is found in the base state).
PROJECTIONS = {"todos.json": "todos", "memory.json": "memory", "workspace.json": "workspace",
               "outcome.json": "outcome"}
TARGETS = ("todos.json", "memory.json", "workspace.json", "outcome.json", "checkpoint.jsonl", "events.jsonl",
           "run.lock", "archive", "inbox", "blob")
KINDS = ("truncate", "flip", "garbage_line", "random_json", "deep_json", "wrong_shape", "directory", "fifo",
         "symlink", "empty", "non_utf8")
KNOWN_KEYS = ("op", "cp", "m", "ms", "i", "n", "system", "state", "events", "effects", "seq", "type", "ts",
              "session", "items", "text", "done", "kind", "phase_name", "phase_number", "current_index",
              "generation", "pending", "command", "args", "id", "issued_at", "source", "summary", "confidence",
              "deliverables", "next_id", "completed_tasks", "blockers", "accomplishments", "notes", "content",
              "role", "tool_calls", "$blob", "turn", "stage", "next_call", "progress", "context")
BAD_BYTES = (b"\xff", b"\xfe\xff", b"\xc3\x28", b"\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf",
             b"\x00")


# -- the base state ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Base:
    root: Path  # a job folder with state, never run again itself
    blob: str  # .console-relative path of the blob the journal refers to
    outcome: bytes  # a valid outcome.json (written only when outcome.json is the target)
    seq: int  # the last event of the base state's log: later ones are the resumed run's


def _run(root: Path, **kw: Any) -> RunResult:
    clock = FakeClock(step=0.001)
    return Supervisor(JobPaths(root), run_settings(**kw), ScriptedProvider(clock=clock), clock=clock).run()


def _externalize_a_message(state: Path) -> str:
    """Store the content of one journal message as a blob, as the journal does for big ones."""
    journal = state / "checkpoint.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    best = max((i for i, raw in enumerate(lines) if json.loads(raw).get("op") == "append"
                and isinstance(json.loads(raw)["m"].get("content"), str)),
               key=lambda i: len(json.loads(lines[i])["m"]["content"]))
    op = json.loads(lines[best])
    text = op["m"]["content"]
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    (state / "blobs").mkdir(exist_ok=True)
    (state / "blobs" / digest).write_bytes(text.encode("utf-8"))
    op["m"]["content"] = {"$blob": digest, "n": len(text)}
    lines[best] = (json.dumps(op, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    journal.write_bytes(b"".join(lines))
    return f"blobs/{digest}"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    top = tmp_path_factory.mktemp("fuzz-state-base")
    root = top / "job"
    shutil.copytree(SAMPLES / "quickstart", root, ignore=shutil.ignore_patterns(".console"))
    result = _run(root, max_turns=25)
    assert result.reason is ShutdownReason.MAX_TURNS
    paths = JobPaths(root)
    blob = _externalize_a_message(paths.state)
    # A queued operator command (written as `agent-console checkpoint JOB` would).
    cmd = write_inbox(paths, "checkpoint", {"note": "queued while nothing ran"})
    for f in paths.inbox.iterdir():
        f.rename(paths.state / INBOX)
    assert Command.model_validate_json((paths.state / INBOX).read_bytes()).id == cmd.id
    (paths.state / OLD_CORRUPT).parent.mkdir(parents=True, exist_ok=True)
    (paths.state / OLD_CORRUPT).write_bytes(b'{"kept": "from an earlier recovery"')
    outcome = JobOutcome(summary="Done by hand.", deliverables=["digest.md"], confidence=0.5,
                         notes="written by the fuzz test").model_dump_json(indent=1).encode()
    for rel in ("todos.json", "memory.json", "workspace.json", "checkpoint.jsonl", "events.jsonl", "run.lock",
                ARCHIVE, INBOX, blob):
        assert (paths.state / rel).is_file(), rel
    # The undamaged state resumes to the end, with no recovery (else the fuzz oracles mean nothing).
    check = top / "check"
    shutil.copytree(root, check, symlinks=True)
    assert _run(check).ok
    assert not [e for e in ev.read_events(JobPaths(check).events) if e.type == "state_recovered"]
    seq = max(e.seq for e in ev.read_events(paths.events))
    return Base(root, blob, outcome, seq)


def _rel(base: Base, target: str) -> str:
    return {"archive": ARCHIVE, "inbox": INBOX, "blob": base.blob}.get(target, target)


def _original(base: Base, target: str) -> bytes:
    if target == "outcome.json":
        return base.outcome
    return (base.root / ".console" / _rel(base, target)).read_bytes()


# -- mutations -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mutation:
    kind: str
    data: bytes | None = None  # the new bytes of a regular file (None for directory, fifo, symlink)

    def __repr__(self) -> str:
        shown = self.data if self.data is None or len(self.data) <= 300 else self.data[:300] + b"..."
        return f"Mutation({self.kind!r}, {shown!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how Hypothesis prints a falsifying example
        printer.text(repr(self))


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def truncate(data: bytes, at: int) -> Mutation:
    return Mutation("truncate", data[: at % (len(data) + 1)])


def flip(data: bytes, changes: list[tuple[int, int]]) -> Mutation:
    out = bytearray(data or b"{}")
    for pos, value in changes:
        out[pos % len(out)] = value
    return Mutation("flip", bytes(out))


def garbage_line(data: bytes, where: int, garbage: bytes) -> Mutation:
    lines = _lines(data)
    at = where % (len(lines) + 1)
    if at and not lines[at - 1].endswith(b"\n"):
        lines[at - 1] += b"\n"
    lines.insert(at, garbage.replace(b"\n", b" ") + b"\n")
    return Mutation("garbage_line", b"".join(lines))


def deep(depth: int, kind: str, wrap: str | None) -> str:
    inner = "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth
    return inner if wrap is None else json.dumps({wrap: 0}).replace("0", inner, 1)


def dumps(value: Any) -> str:
    """JSON text (ASCII: a lone surrogate is written as \\ud800; NaN and Infinity as Python writes them)."""
    return json.dumps(value, ensure_ascii=True).replace(json.dumps(HUGE_INT), HUGE_INT_TEXT)


def json_mutation(kind: str, text: str, jsonl: bool) -> Mutation:
    return Mutation(kind, (text + ("\n" if jsonl else "")).encode("utf-8"))


def _children(node: Any) -> list[tuple[Any, Any]]:
    if isinstance(node, dict):
        return list(node.items())
    if isinstance(node, list):
        return list(enumerate(node))
    return []


def wrong_shape(data: bytes, line_choice: int, path: list[int], change: str, tail: bool = False) -> Mutation:
    """A real object of the file with one field changed: another type, dropped, -1 or 10**40."""
    try:
        whole = json.loads(data)
    except ValueError:
        whole = None
    lines = [data] if isinstance(whole, dict) else _lines(data)  # one JSON file, or JSON lines
    candidates = [i for i, raw in enumerate(lines) if raw.strip()[:1] == b"{"]
    if not candidates:  # not a JSON file (run.lock is empty): a plausible object of the wrong shape
        return Mutation("wrong_shape", b'{"pid": "me", "since": -1}\n')
    # The last records of a log matter most (a resume starts from them): ``tail`` picks one of the last 4.
    idx = candidates[-1 - line_choice % min(4, len(candidates))] if tail else candidates[line_choice % len(candidates)]
    obj = json.loads(lines[idx])
    parent: Any = None
    key: Any = None
    node: Any = obj
    for choice in path:
        kids = _children(node)
        if not kids:
            break
        key, child = kids[choice % len(kids)]
        parent, node = node, child
    if parent is None:  # the root object itself: drop its first key or empty it
        if obj:
            obj.pop(next(iter(obj)))
    elif change == "drop" and isinstance(parent, dict):
        del parent[key]
    elif change == "minus_one":
        parent[key] = -1
    elif change == "huge":
        parent[key] = 10**40
    elif change == "huger":  # past the largest float
        parent[key] = 10**400
    else:  # another type
        parent[key] = (
            "x" if not isinstance(node, str) else 7 if change == "retype" else None
        ) if not isinstance(node, list | dict) else ("x" if isinstance(node, list) else [node])
    end = b"\n" if lines[idx].endswith(b"\n") else b""
    lines[idx] = json.dumps(obj, ensure_ascii=True).encode() + end
    return Mutation("wrong_shape", b"".join(lines))


def non_utf8(data: bytes, where: int, bad: bytes) -> Mutation:
    at = where % (len(data) + 1)
    return Mutation("non_utf8", data[:at] + bad + data[at:])


# Strategies -------------------------------------------------------------------------------------------
# A 5000-digit integer cannot go through json.dumps (Python's int/str limit): it is spliced into the text.
HUGE_INT = "\u0000huge-int\u0000"
HUGE_INT_TEXT = "9" * 5000
SPECIAL_INTS = st.sampled_from([-1, 0, 2**63, -(2**64), 10**40, 10**400])
SPECIAL_FLOATS = st.sampled_from([1e308, -1e308, 5e-324, float("nan"), float("inf"), -float("inf")])
SPECIAL_STRINGS = st.sampled_from(["NaN", "Infinity", "-Infinity", "\ud800", "\udfff", "a\udc80b", "\x00",
                                   "", "\u202e", "x" * 5000, "phase", "commit", "append", "boundary", "tools"])
JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), SPECIAL_INTS, st.floats(), SPECIAL_FLOATS,
                        st.text(max_size=12), SPECIAL_STRINGS, st.just(HUGE_INT))
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=6), kids, max_size=5),
    max_leaves=24,
)
# Known keys with wrong-type values: as likely to pass a first check as to fail a later one.
KNOWN_OBJECTS = st.dictionaries(st.sampled_from(KNOWN_KEYS), JSON_VALUES, min_size=1, max_size=8)


class Original(bytes):
    """A file's bytes, shown short (Hypothesis prints the arguments of a strategy)."""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes>"


@st.composite
def mutations(draw: st.DrawFn, original: bytes, jsonl: bool, kind: str | None = None) -> Mutation:
    kind = kind or draw(st.sampled_from(KINDS), label="kind")
    if kind == "truncate":
        return truncate(original, draw(st.integers(0, max(0, len(original) - 1)), label="at"))
    if kind == "flip":
        changes = draw(st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), min_size=1, max_size=8),
                       label="changes")
        return flip(original, changes)
    if kind == "garbage_line":
        garbage = draw(st.binary(max_size=80) | st.text(max_size=80).map(lambda s: s.encode("utf-8", "replace"))
                       | JSON_VALUES.map(lambda v: dumps(v).encode()), label="garbage")
        return garbage_line(original, draw(st.integers(0, 2**31), label="where"), garbage)
    if kind == "random_json":
        value = draw(JSON_VALUES | KNOWN_OBJECTS, label="value")
        return json_mutation(kind, dumps(value), jsonl)
    if kind == "deep_json":
        depth = draw(st.integers(1, 5000), label="depth")
        shape = draw(st.sampled_from(["list", "dict"]), label="shape")
        wrap = draw(st.none() | st.sampled_from(KNOWN_KEYS), label="wrap")
        return json_mutation(kind, deep(depth, shape, wrap), jsonl)
    if kind == "wrong_shape":
        change = draw(st.sampled_from(["drop", "minus_one", "huge", "huger", "retype", "null"]), label="change")
        return wrong_shape(original, draw(st.integers(0, 2**31), label="line"),
                           draw(st.lists(st.integers(0, 2**31), max_size=6), label="path"), change,
                           draw(st.booleans(), label="tail"))
    if kind == "non_utf8":
        return non_utf8(original, draw(st.integers(0, 2**31), label="where"),
                        draw(st.sampled_from(BAD_BYTES), label="bad"))
    if kind == "empty":
        return Mutation("empty", b"")
    return Mutation(kind)  # directory, fifo, symlink


# -- applying one, running, judging ------------------------------------------------------------------
@dataclass
class Case:
    root: Path
    paths: JobPaths
    target: str
    rel: str  # relative to the job root, as events name files: ".console/..."
    path: Path
    mutation: Mutation
    outside: Path
    outside_bytes: bytes
    corrupt_before: dict[str, bytes]


def _outside_content(base: Base, target: str) -> bytes:
    """What the symlink leads to: plausible content for the file, carrying the secret."""
    if target == "archive":
        obj = json.loads(_original(base, target))
        obj["note"] = SECRET
        return json.dumps(obj).encode()
    if target == "inbox":
        return Command(command="rewind", args={"issue": SECRET}, source="cli").model_dump_json().encode()
    if target in PROJECTIONS:
        obj = json.loads(_original(base, target))
        if target == "todos.json":
            obj["phase_name"] = SECRET
        elif target == "memory.json":
            obj["completed_tasks"][0]["summary"] = SECRET
        else:
            obj["notes"] = [SECRET] if target == "workspace.json" else SECRET
        return json.dumps(obj).encode()
    return _original(base, target) + f"{SECRET}\n".encode()


def prepare(base: Base, workdir: Path, target: str, mutation: Mutation) -> Case:
    root = workdir / "job"
    shutil.copytree(base.root, root, symlinks=True)
    paths = JobPaths(root)
    rel = _rel(base, target)
    path = paths.state / rel
    if target == "outcome.json":
        path.write_bytes(base.outcome)
    outside = workdir / "outside" / "secret.json"
    outside.parent.mkdir()
    outside.write_bytes(_outside_content(base, target))
    corrupt_before = {p.relative_to(paths.state).as_posix(): p.read_bytes()
                      for p in (paths.state / "corrupt").rglob("*") if p.is_file()}
    path.unlink()
    if mutation.kind == "directory":
        path.mkdir()
        (path / "inside.txt").write_text("a file inside the folder\n")
    elif mutation.kind == "fifo":
        os.mkfifo(path)
    elif mutation.kind == "symlink":
        path.symlink_to(outside)
    else:
        assert mutation.data is not None
        path.write_bytes(mutation.data)
    return Case(root, paths, target, f".console/{rel}", path, mutation, outside, outside.read_bytes(),
                corrupt_before)




def resume(case: Case) -> RunResult:
    with time_limit(HANG_SECONDS):
        result = _run(case.root)
    assert isinstance(result, RunResult)
    return result


def usable(case: Case, base: Base) -> bool:
    """Whether the damaged file can still be used as what it is, by the engine's own validators."""
    if case.mutation.kind in ("directory", "fifo", "symlink"):
        return False
    data = case.mutation.data
    assert data is not None
    try:
        if case.target in PROJECTIONS:
            parse_model(MODELS[PROJECTIONS[case.target]], data)
        elif case.target == "archive":
            parse_model(ArchivedList, data)
        elif case.target == "inbox":
            if len(data) > 64 * 1024:
                return False
            Command.model_validate_json(data)
        elif case.target == "blob":
            text = data.decode("utf-8", "replace")
            return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest() == Path(base.blob).name
    except (StateFileError, ValueError, RecursionError):
        return False
    return True


def _norm(name: str | None) -> str:
    return (name or "").removeprefix("./")


def _survives(case: Case) -> bool:
    """The damaged file (bytes, folder or pipe) is still in place or was moved to .console/corrupt/."""
    corrupt = case.paths.state / "corrupt"
    where = [case.path, *(p for p in corrupt.rglob(case.path.name + "*"))]
    if case.target == "inbox":
        where.append(case.path.with_suffix(".rejected"))
    for p in where:
        try:
            mode = os.lstat(p).st_mode
        except OSError:
            continue
        kind = case.mutation.kind
        if kind == "directory" and stat.S_ISDIR(mode) and (p / "inside.txt").is_file():
            return True
        if kind == "fifo" and stat.S_ISFIFO(mode):
            return True
        if kind == "symlink" and stat.S_ISLNK(mode) and Path(os.readlink(p)) == case.outside:
            return True
        if case.mutation.data is not None and stat.S_ISREG(mode) and p.read_bytes() == case.mutation.data:
            return True
    return False


def _complete_lines(data: bytes) -> list[bytes]:
    return [raw for raw in _lines(data) if raw.endswith(b"\n")]


def _is_commit(raw: bytes) -> bool:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("op") == "commit"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (jq cannot read it)")


def strict_json(raw: bytes) -> Any:
    """JSON as jq reads it: no NaN/Infinity; integers of any length (Python's 4300-digit limit is not JSON's)."""
    return json.loads(raw, parse_int=lambda digits: 0, parse_constant=_no_constant)


def judge(case: Case, base: Base, result: RunResult) -> None:
    paths = case.paths
    evs = list(ev.read_events(paths.events))
    recovered = [e for e in evs if isinstance(e, ev.StateRecovered)]
    named = {_norm(e.file) for e in recovered}
    # 1. The run ended cleanly: job_complete, or a reason in the operator's words (never an internal error).
    assert "internal error" not in result.detail, result.detail
    # (A demo agent whose conversation was lost may give up: it no longer sees the work it did, and says so.)
    assert result.reason in (ShutdownReason.JOB_COMPLETE, ShutdownReason.USER_SHUTDOWN, ShutdownReason.GAVE_UP), \
        result
    crashes = [e.message for e in evs if isinstance(e, ev.ErrorEvent) and e.where in ("supervisor", "tool")]
    assert not crashes, crashes
    # 2. The event log: every line is JSON (jq reads it), every event it reports is a file that exists.
    log = paths.events.read_bytes()
    for n, raw in enumerate(log.splitlines(), 1):
        if raw.strip():
            try:
                strict_json(raw)
            except (ValueError, RecursionError) as exc:
                raise AssertionError(f"events.jsonl line {n} is not JSON ({exc}): {raw[:200]!r}") from None
    for e in recovered:
        if e.moved_to:
            assert os.path.lexists(case.root / e.moved_to), f"{e.moved_to} was reported and is gone"
    # 3. Nothing that was in .console/corrupt/ disappeared or changed.
    for rel, data in case.corrupt_before.items():
        assert (paths.state / rel).read_bytes() == data, f"{rel} changed or disappeared"
    # ... nor did a blob that a journal moved there refers to (it would be unreadable without it).
    blobs, corrupt = paths.state / "blobs", paths.state / "corrupt"
    for f in corrupt.rglob("checkpoint.jsonl*"):
        if f.is_file() and not f.is_symlink():
            for ref in set(BLOB_REF.findall(f.read_bytes())):
                name = ref.decode()
                kept = os.path.lexists(blobs / name) or any(corrupt.rglob(name + "*"))
                assert kept, f"{f.name} refers to blob {name[:12]}, which was deleted"
    # 4. Nothing outside was changed, and nothing outside leaked into the run.
    assert case.outside.read_bytes() == case.outside_bytes
    for f in (paths.events, paths.state / "checkpoint.jsonl", paths.workspace_summary, paths.main_plan):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f"the outside file was read into {f.name}"
    # 5. No temp file outside .console.
    stray = [p for p in case.root.rglob("*.tmp") if ".console" not in p.relative_to(case.root).parts]
    assert not stray, stray
    # 6. The damaged file was reported and kept, or it was still usable / legitimately tolerated.
    _judge_target(case, base, named, evs)


def _judge_target(case: Case, base: Base, named: set[str], evs: list[ev.EventBase]) -> None:
    kind, data, target = case.mutation.kind, case.mutation.data, case.target
    if target in ("checkpoint.jsonl", "events.jsonl"):
        if case.rel in named:
            assert _survives(case), f"{case.rel} was reported but its content is gone"
            return
        assert data is not None, f"{case.rel} was {kind} and not reported"
        now = case.path.read_bytes()
        common = 0
        for a, b in zip(data, now, strict=False):
            if a != b:
                break
            common += 1
        common = data.rfind(b"\n", 0, common) + 1  # compare whole lines
        lost = data[common:]
        if target == "checkpoint.jsonl":
            # Only what never committed may be cut: records after the last commit, and a torn last line.
            committed = [raw for raw in _complete_lines(lost) if _is_commit(raw)]
            assert not committed, f"committed journal records were dropped silently: {committed[0][:200]!r}"
            bad = [raw for raw in _complete_lines(lost) if not _journal_line(raw)]
            assert not bad, f"a damaged journal line was dropped silently: {bad[0][:200]!r}"
        else:
            assert not _complete_lines(lost), f"events.jsonl lost whole lines: {lost[:200]!r}"
        return
    if target == "run.lock":
        if kind in ("directory", "fifo", "symlink"):
            assert case.rel in named and _survives(case), f"{case.rel} ({kind}) was not moved aside and reported"
        return
    if target == "inbox":
        if usable(case, base):
            return  # a valid command: applied or rejected on its merits
        rejected = [e for e in evs if isinstance(e, ev.OperatorCommand) and e.status == "rejected"
                    and case.path.name in e.detail]
        assert rejected, f"the damaged inbox command ({kind}) was not reported as rejected"
        assert _survives(case), "the damaged inbox command is gone"
        return
    if usable(case, base):
        return
    if target == "archive" and not any(isinstance(e, ev.ContextCompacted) and e.seq > base.seq for e in evs):
        return  # the resumed run never read the archives back
    if target == "blob":
        assert named & {case.rel, ".console/checkpoint.jsonl"}, f"the damaged blob ({kind}) was not reported"
    else:
        assert case.rel in named, f"{case.rel} ({kind}) could not be used and no state_recovered names it"
    assert _survives(case), f"{case.rel} ({kind}) is gone: neither in place nor in .console/corrupt/"


def _journal_line(raw: bytes) -> bool:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("op") in ("session", "reset", "append", "replace", "intent")


def check(base: Base, workdir: Path, target: str, mutation: Mutation) -> None:
    case = prepare(base, workdir, target, mutation)
    result = resume(case)
    judge(case, base, result)


@contextlib.contextmanager
def scratch(tmp_path: Path) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# Without the "explain" phase, which re-runs a failing example many times over to say which parts matter.
FAST_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)


# -- the property ------------------------------------------------------------------------------------
@pytest.mark.sweep
@settings(max_examples=examples(40), deadline=None, derandomize=True, phases=FAST_PHASES,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_any_damage_to_one_harness_file_is_survived(base: Base, tmp_path: Path, data: st.DataObject) -> None:
    target = data.draw(st.sampled_from(TARGETS), label="target")
    original = Original(_original(base, target))
    mutation = data.draw(mutations(original, target.endswith(".jsonl")), label="mutation")
    with scratch(tmp_path) as workdir:
        check(base, workdir, target, mutation)


# -- every (file x mutation kind) pair, deterministically ------------------------------------------------
def fixed_mutation(original: bytes, kind: str, jsonl: bool) -> Mutation:
    middle = len(original) // 2
    return {
        "truncate": lambda: truncate(original, middle),
        "flip": lambda: flip(original, [(middle, ord("#")), (middle + 7, 0xFF)]),
        "garbage_line": lambda: garbage_line(original, 1, b"this is not JSON {"),
        "random_json": lambda: json_mutation(kind, dumps({"items": [1e308, "\ud800", 10**40, None, HUGE_INT],
                                                          "seq": "NaN", "op": 7}), jsonl),
        "deep_json": lambda: json_mutation(kind, deep(5000, "list", "items"), jsonl),
        "wrong_shape": lambda: wrong_shape(original, 10**6 + 3, [1, 2], "retype"),
        "non_utf8": lambda: non_utf8(original, middle, b"\xff\xfe"),
        "empty": lambda: Mutation("empty", b""),
    }.get(kind, lambda: Mutation(kind))()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("target", TARGETS)
def test_each_file_and_mutation_kind(base: Base, tmp_path: Path, target: str, kind: str) -> None:
    mutation = fixed_mutation(_original(base, target), kind, target.endswith(".jsonl"))
    check(base, tmp_path, target, mutation)


# -- through the command line: exit code, never a traceback ------------------------------------------------
NASTY = [
    ("checkpoint.jsonl", "fifo"),
    ("events.jsonl", "fifo"),
    ("checkpoint.jsonl", "deep_json"),
    ("events.jsonl", "deep_json"),
    ("todos.json", "symlink"),
    ("inbox", "directory"),
    ("blob", "flip"),
    ("archive", "non_utf8"),
]


@pytest.mark.parametrize(("target", "kind"), NASTY)
def test_cli_resume_of_damaged_state_exits_cleanly(base: Base, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   target: str, kind: str) -> None:
    case = prepare(base, tmp_path, target, fixed_mutation(_original(base, target), kind, target.endswith(".jsonl")))
    with time_limit(HANG_SECONDS):
        code = cli_main(["run", str(case.root), "--headless", "--in-place", "--speed", "0"])
    err = capsys.readouterr().err
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]


# -- regressions: the smallest inputs that broke the promise, as plain tests -----------------------------------
def _append_line(base: Base, target: str, line: bytes) -> Mutation:
    original = _original(base, target)
    return garbage_line(original, len(_lines(original)), line)


def _last_commit_with(base: Base, change: Any) -> Mutation:
    lines = _lines(_original(base, "checkpoint.jsonl"))
    i = max(j for j, raw in enumerate(lines) if _is_commit(raw))
    obj = json.loads(lines[i])
    change(obj)
    lines[i] = json.dumps(obj).encode() + b"\n"
    return Mutation("wrong_shape", b"".join(lines))


def test_regression_event_log_ending_in_deeply_nested_json(base: Base, tmp_path: Path) -> None:
    """events.jsonl whose last line is '[' * 5000 + ']' * 5000: RecursionError out of Supervisor()."""
    check(base, tmp_path, "events.jsonl", _append_line(base, "events.jsonl", b"[" * 5000 + b"]" * 5000))


@pytest.mark.parametrize("line", [b'{"seq": Infinity}', b'{"seq": 1e400}'])
def test_regression_event_log_ending_in_an_infinite_seq(base: Base, tmp_path: Path, line: bytes) -> None:
    """events.jsonl whose last line is {"seq": Infinity}: OverflowError out of Supervisor()."""
    check(base, tmp_path, "events.jsonl", _append_line(base, "events.jsonl", line))


def test_regression_event_log_with_a_damaged_line_in_the_middle(base: Base, tmp_path: Path) -> None:
    """A line that is not JSON in the middle of events.jsonl is neither reported nor moved aside: jq breaks on it."""
    check(base, tmp_path, "events.jsonl", garbage_line(_original(base, "events.jsonl"), 1, b"not json"))


def test_regression_journal_with_a_context_size_past_any_float(base: Base, tmp_path: Path) -> None:
    """The last commit's cp.context.used = 10**400 passes validation, then the run dies of an OverflowError."""
    check(base, tmp_path, "checkpoint.jsonl",
          _last_commit_with(base, lambda o: o["cp"]["context"].__setitem__("used", 10**400)))


@pytest.mark.parametrize("kind", ["empty", "directory", "fifo"])
def test_regression_damaged_archive_is_reported_and_kept(base: Base, tmp_path: Path, kind: str) -> None:
    """An archive file that cannot be read (here empty, a folder, a pipe) is skipped silently by the summary."""
    check(base, tmp_path, "archive", Mutation(kind, b"" if kind == "empty" else None))


def test_regression_archive_symlink_to_outside_is_not_followed(base: Base, tmp_path: Path) -> None:
    """.console/archive/x.json -> a file outside the job: its text goes into the summary (and the journal)."""
    check(base, tmp_path, "archive", Mutation("symlink"))


def test_regression_inbox_symlink_to_outside_is_not_followed(base: Base, tmp_path: Path) -> None:
    """.console/inbox/x.json -> a file outside the job: it is read and applied as an operator command."""
    check(base, tmp_path, "inbox", Mutation("symlink"))


def test_regression_blobs_of_a_quarantined_journal_are_kept(base: Base, tmp_path: Path) -> None:
    """A journal moved to corrupt/ loses its blobs: the fresh journal's first rewrite garbage-collects them."""
    check(base, tmp_path, "checkpoint.jsonl", garbage_line(_original(base, "checkpoint.jsonl"), 1, b"not json"))


def test_regression_damaged_blob_is_kept(base: Base, tmp_path: Path) -> None:
    """A blob cut in half: the journal is moved aside and reported, then the blob itself is deleted."""
    original = _original(base, "blob")
    check(base, tmp_path, "blob", truncate(original, len(original) // 2))
