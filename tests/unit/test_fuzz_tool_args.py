"""Fuzzing the arguments of every tool, dispatched exactly as the agent loop does.

Each example builds a small job (a file, nested folders, a named pipe, a symlink and a hard link to files
outside it, symlinks to the outside folder, to the root and to the harness folder, job.toml) and a Runtime
whose sandbox allows 4 KB per write and 64 KB for the whole job, then sends it 1-4 tool calls with
hostile arguments through :func:`console.engine.loop.dispatch`.

Whatever the call, dispatch returns a ToolOutcome in time; no tool crashes; nothing outside the job folder is
created, changed or shown; job.toml and instructions.md stay as they were; no write is bigger than the
per-write limit and the job folder never grows past its limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.loop import SessionDeps, dispatch
from console.engine.messages import ToolCall
from console.engine.operator import OperatorState
from console.engine.runtime import Runtime
from console.engine.sandbox import Sandbox
from console.engine.tools import default_registry
from console.engine.tools.registry import ToolOutcome
from console.providers.scripted import ScriptedProvider
from tests.conftest import run_settings, time_limit
from tests.sweeps import examples

MAX_WRITE = 4096
MAX_JOB = 65536
# A call that has not returned by then hangs (search_files has a 2 s deadline, nothing else comes near): a ceiling
# for a loaded machine, never a pace (a call's time is not asserted: it is the machine's, not the tool's).
HANG_SECONDS = 60
SECRET = "OUTSIDE-SECRET-41c9"
HARD_SECRET = "HARDLINK-SECRET-77b2"
# On every line of the outside files and in no argument: a result that shows it read them (a result may echo
# a searched-for SECRET without having read anything).
CANARY = "CANARY-5e1f0c"
OUTSIDE = "@OUTSIDE@"  # replaced by the outside folder's absolute path
REGISTRY = default_registry(file_index=True)  # find_files too: it reads every file's first lines
TOOL_NAMES = REGISTRY.names
UNKNOWN_NAMES = ["", " ", "READ_FILE", "read_file ", "read-file", "../write_file", "write_file\x00", "\ud800",
                 "x" * 300, "job_complete\u200b", "todo_complete()", "functions.read_file"]
JOB_TOML = b'name = "fuzz"\n\n[model]\nprovider = "scripted"\n'
INSTRUCTIONS = b"# Fuzz job\n\nRead notes.md and write a digest.\n"
HARNESS_ENTRIES = {"events.jsonl", "checkpoint.jsonl", "todos.json", "memory.json", "workspace.json", "outcome.json",
                   "guardrails.json", "experiences.json", "archive", "tmp", "blobs", "inbox", "corrupt", "run.lock"}
NOTES = "hello world\nsecond line: caf\u00e9\naaaaaaaaaaaaaaaaaaaaaaaaaaaa!\n"


# -- the job ------------------------------------------------------------------------------------------
@dataclass
class Job:
    top: Path
    root: Path
    outside: Path
    paths: JobPaths
    rt: Runtime
    deps: SessionDeps
    seen: list[ev.EventBase]

    def close(self) -> None:
        assert self.rt.sandbox is not None
        self.rt.sandbox.close()
        self.rt.events.close()


def make_job(top: Path) -> Job:
    root, outside = top / "job", top / "outside"
    (root / "sub" / "dir").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(f"# {SECRET} {CANARY}\nAPI_KEY=sk-live-123 {CANARY}\n")
    (outside / "hard-secret.txt").write_text(f"{HARD_SECRET} {CANARY}\n")
    (root / "job.toml").write_bytes(JOB_TOML)
    (root / "instructions.md").write_bytes(INSTRUCTIONS)
    (root / "notes.md").write_text(NOTES)
    (root / "sub" / "dir" / "deep.txt").write_text("deep file\nhello again\n")
    os.mkfifo(root / "pipe.md")
    (root / "link.md").symlink_to(outside / "secret.txt")
    (root / "outdir").symlink_to(outside)
    (root / "me").symlink_to(".")
    (root / "state").symlink_to(".console")
    os.link(outside / "hard-secret.txt", root / "hard.md")
    paths = JobPaths(root)
    clock = FakeClock(step=0.001)
    sandbox = Sandbox(root, max_write_bytes=MAX_WRITE, max_job_bytes=MAX_JOB)
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock), sandbox=sandbox)
    seen: list[ev.EventBase] = []
    rt.events.subscribe(seen.append)
    rt.phases.ensure_bootstrap()
    deps = SessionDeps(rt, ScriptedProvider(clock=clock), REGISTRY, run_settings(), OperatorState())
    return Job(top, root, outside, paths, rt, deps, seen)


@contextlib.contextmanager
def fresh_job(tmp_path: Path) -> Iterator[Job]:
    top = Path(tempfile.mkdtemp(dir=tmp_path))
    job = make_job(top)
    try:
        yield job
    finally:
        job.close()
        shutil.rmtree(top, ignore_errors=True)


def snapshot(folder: Path) -> dict[str, tuple[str, bytes | str | None]]:
    """Every entry under a folder (links not followed): its kind and its bytes or target."""
    out: dict[str, tuple[str, bytes | str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st_ = os.lstat(p)
            rel = p.relative_to(folder).as_posix()
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st_.st_mode):
                out[rel] = ("file", p.read_bytes())
            else:
                out[rel] = ("dir" if stat.S_ISDIR(st_.st_mode) else "other", None)
    return out


def job_bytes(root: Path) -> int:
    """What the sandbox counts: regular files outside .console, links not followed."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".console" in dirnames:
            dirnames.remove(".console")
        for name in filenames:
            st_ = os.lstat(Path(dirpath) / name)
            if stat.S_ISREG(st_.st_mode):
                total += st_.st_size
    return total


# -- calling ------------------------------------------------------------------------------------------


def call(job: Job, name: str, arguments: str) -> ToolOutcome:
    """One call, as the loop makes it, checked against every invariant."""
    arguments = arguments.replace(OUTSIDE, str(job.outside))
    outside_before = snapshot(job.outside)
    around_before = sorted(p.name for p in job.top.iterdir())
    before = len(job.seen)
    with time_limit(HANG_SECONDS):
        outcome = dispatch(job.deps, 1, ToolCall(id="c", name=name, arguments=arguments))
    shown = f"{name}({arguments[:300]!r})"
    assert isinstance(outcome, ToolOutcome), shown
    crashes = [e.message for e in job.seen[before:] if isinstance(e, ev.ErrorEvent) and e.where == "tool"]
    assert not crashes, f"{shown}: {crashes}"
    # Nothing outside was created, changed or shown.
    assert snapshot(job.outside) == outside_before, f"{shown} changed the outside folder"
    assert sorted(p.name for p in job.top.iterdir()) == around_before, f"{shown} created a file beside the job"
    assert CANARY not in outcome.content, f"{shown} showed an outside file: {outcome.content[:300]}"
    # The job's definition is untouched.
    for rel, data in (("job.toml", JOB_TOML), ("instructions.md", INSTRUCTIONS)):
        p = job.root / rel
        assert stat.S_ISREG(os.lstat(p).st_mode) and p.read_bytes() == data, f"{shown} changed {rel}"
    # The size limits hold.
    assert job_bytes(job.root) <= MAX_JOB, f"{shown}: the job folder holds {job_bytes(job.root)} bytes"
    if outcome.ok:
        _check_write_size(name, arguments, shown)
    stray = [p for p in job.root.rglob("*.tmp") if ".console" not in p.relative_to(job.root).parts]
    assert not stray, f"{shown} left {stray}"
    foreign = sorted(set(os.listdir(job.paths.state)) - HARNESS_ENTRIES)
    assert not foreign, f"{shown} wrote into .console/: {foreign}"
    return outcome


def _check_write_size(name: str, arguments: str, shown: str) -> None:
    """A write that succeeded wrote at most MAX_WRITE bytes (what it wrote is in its arguments)."""
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        return
    if not isinstance(data, dict):
        return
    if name == "write_file":
        assert len(str(data.get("content", "")).encode("utf-8", "replace")) <= MAX_WRITE, shown
    elif name == "append_file":
        assert len(str(data.get("content", "")).encode("utf-8", "replace")) <= MAX_WRITE + 1, shown


# -- strategies -------------------------------------------------------------------------------------------
NFD = unicodedata.normalize("NFD", "caf\u00e9.md")
NASTY_PATHS = [
    "../x", "../outside/secret.txt", "/etc/passwd", f"{OUTSIDE}/secret.txt", f"{OUTSIDE}/new.txt", "//etc/passwd",
    ".console/todos.json", ".console", ".console/", "./.console/events.jsonl", ".CONSOLE/todos.json",
    ".Console/new.json", "sub/../.console/x", ".console/../job.toml", "state/todos.json", "state/new.md",
    "JOB.TOML", "job.toml", "./job.toml", "sub/../job.toml", "me/job.toml", "me/me/me/instructions.md",
    "instructions.md", "Instructions.MD", "a/../../b", "sub/dir/../../../x", "link.md", "link.md/x", "hard.md",
    "pipe.md", "pipe.md/x", "outdir/secret.txt", "outdir/new.txt", "outdir/hard-secret.txt", "sub", "sub/dir",
    "sub/dir/deep.txt", "x" * 300, "y" * 255, "z" * 256, ("d" * 200 + "/") * 25 + "x", "C:\\x", "C:/x",
    "\\\\server\\share\\x", "..\\x", "sub\\..\\..\\x", "~/x", "~", "", " ", ".", "..", "./", "a\x00b",
    "notes.md\x00.txt", "\uff4a\uff4f\uff42.toml", "job.toml\u200b", "job.toml.", "job.toml ", " job.toml",
    "instructions.md\u0301", "caf\u00e9.md", NFD, "\u2024\u2024/x", "\uff0e\uff0e/x", "%2e%2e/x",
    "file:///etc/passwd", "notes.md/", "sub//dir///deep.txt", "\ud800.md", "new/" * 30 + "f.md", "main_plan.md",
    "workspace_summary.md", "SYSTEM_PROMPT.md", "notes.md", "\n", "notes.md\n", "-rf", "*", "sub/*", "?",
    "a/" * 300 + "f.md", "b/" * 2000 + "f.md", "me/" * 50 + "notes.md", "outdir/../job/notes.md",
]
SEGMENTS = ["..", ".", "", "notes.md", "sub", "dir", "link.md", "hard.md", "pipe.md", ".console", "me", "state",
            "outdir", "job.toml", "instructions.md", "x" * 120, "~", "C:", "\\", "a\x00b", "\u00e9", "e\u0301"]
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.one_of(
    st.text(max_size=40),
    st.text(st.one_of(st.characters(), SURROGATES), max_size=20),
    st.sampled_from(["", "\x00", "hello", "hello world", "\r\n", "a\x00b", "\ud800", "x" * 5000, "\u00e9" * 2100,
                     "x" * MAX_WRITE, "x" * (MAX_WRITE + 1), "# Execution Plan\n\n## Phase 1: A\n- [ ] a\n",
                     SECRET, "\ufeff", "\u202eevil"]),
)
PATHS = st.one_of(st.sampled_from(NASTY_PATHS), st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6)
                  .map("/".join), st.text(max_size=30))
PATTERNS = st.one_of(st.sampled_from(["hello", "secret", "API_KEY", SECRET, "sk-live", ".*", "^", "$", "", "(",
                                      "[", "\\", "(?i)HELLO", "a{1,100000}", "\\p{L}+", "(?R)", "\x00", "\ud800",
                                      "x" * 1000, "x" * 1001, "(a|aa)*c", "[^\\n]*e"]), st.text(max_size=20))
INTS = st.one_of(st.integers(-3, 600), st.sampled_from([0, -1, 10**9, 10**9 + 1, 2**63, -(2**63), 10**40, 10**400]))
FLOATS = st.one_of(st.floats(), st.sampled_from([0.0, 1.0, -0.0, 1e308, 5e-324, float("nan"), float("inf")]))
JSON_LEAVES = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT)
JSON_VALUES = st.recursive(JSON_LEAVES, lambda kids: st.lists(kids, max_size=3)
                           | st.dictionaries(st.text(max_size=8), kids, max_size=3), max_leaves=10)
# Field name -> values of the right type, often hostile.
RIGHT: dict[str, st.SearchStrategy[Any]] = {
    "path": PATHS, "content": TEXT, "old_text": TEXT, "new_text": TEXT, "text": TEXT, "issue": TEXT,
    "summary": TEXT, "notes": TEXT, "pattern": PATTERNS, "start_line": INTS, "max_lines": INTS,
    "max_results": INTS, "replace_all": st.booleans(), "confidence": FLOATS,
    "deliverables": st.lists(PATHS, max_size=4),
    "todos": st.lists(st.one_of(TEXT, st.fixed_dictionaries({"task": TEXT}, optional={"done": JSON_LEAVES})),
                      max_size=60),
    "query": st.one_of(PATTERNS, TEXT), "limit": INTS,
}


# Field name -> plausible values: enough calls must succeed for the write limits and side effects to be tested.
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "path": st.sampled_from(["notes.md", "new.md", "out/new.md", "sub/dir/deep.txt", "main_plan.md", "sub", ".",
                             "SYSTEM_PROMPT.md", "workspace_summary.md", "hard.md", "link.md", "pipe.md", "me/x.md",
                             "state/x.md", "outdir/x.md", "job.toml", "instructions.md", "../x.md"]),
    "content": st.one_of(st.text(max_size=200), st.sampled_from(["hello\n", "x" * MAX_WRITE, "x" * (MAX_WRITE + 1),
                                                                 "\u00e9" * (MAX_WRITE // 2 + 1)])),
    "old_text": st.sampled_from(["hello", "world", "a", "\n", "caf\u00e9", "deep"]),
    "new_text": st.one_of(st.text(max_size=50), st.just("w" * (MAX_WRITE + 1))),
    "text": st.text(min_size=1, max_size=80), "issue": st.text(min_size=1, max_size=80),
    "summary": st.text(min_size=1, max_size=80), "notes": st.text(max_size=80),
    "pattern": st.sampled_from(["hello", "a+", "[a-z]+", "caf.", "^deep", "secret", "API_KEY", "HARDLINK"]),
    "start_line": st.integers(1, 5), "max_lines": st.integers(1, 400), "max_results": st.integers(1, 500),
    "replace_all": st.booleans(), "confidence": st.floats(0, 1),
    "deliverables": st.lists(st.sampled_from(["notes.md", "new.md", "hard.md", "link.md", "pipe.md", "sub"]),
                             max_size=3),
    "todos": st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=20),
    "query": st.sampled_from(["notes", "hello second", "secret", "API_KEY", "hard link pipe", "deep sub", "md",
                              "outside", SECRET]),
    "limit": st.integers(1, 50),
}


def fields_of(name: str) -> list[str]:
    tool = REGISTRY.get(name)
    return list(tool.args.model_fields) if tool is not None else ["path", "content"]


@st.composite
def arguments(draw: st.DrawFn, name: str) -> str:
    """The raw arguments text of one call."""
    kind = draw(st.sampled_from(["plausible"] * 4 + ["object"] * 2 + ["wrong_types", "json", "text", "special"]),
                label="kind")
    if kind == "text":
        return draw(st.text(st.one_of(st.characters(), SURROGATES), max_size=60))
    if kind == "json":
        return json.dumps(draw(JSON_VALUES), ensure_ascii=draw(st.booleans()))
    if kind == "special":
        return draw(st.sampled_from(SPECIAL_ARGUMENTS))
    fields = fields_of(name)
    obj: dict[str, Any] = {}
    plausible = kind == "plausible"
    for f in fields:
        if plausible or draw(st.integers(0, 9)) > 0:  # hostile objects may lack a field
            table = PLAUSIBLE if plausible else RIGHT if kind == "object" else {}
            obj[f] = draw(table.get(f, JSON_VALUES), label=f)
    if not plausible and draw(st.integers(0, 5)) == 0:  # a typo, an unknown key
        obj[draw(st.sampled_from(["pth", "Path", "__refused__", "file", "", "\ud800", "content "]))] = "x"
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    if not plausible and draw(st.integers(0, 9)) == 0:  # cut off mid-stream
        text = text[: draw(st.integers(0, len(text)))]
    return text


DEEP = 100_000
SPECIAL_ARGUMENTS = [
    "[" * DEEP, "[" * DEEP + "]" * DEEP, '{"a":' * DEEP + "1" + "}" * DEEP, '{"path": ' + "[" * DEEP + "]" * DEEP + "}",
    '{"path": "notes.md", "start_line": ' + "9" * 5000 + "}", '{"max_results": ' + "9" * 5000 + "}",
    '{"confidence": ' + "9" * 5000 + ', "summary": "s"}', '{"confidence": NaN, "summary": "s"}',
    '{"confidence": Infinity, "summary": "s"}', '{"confidence": -Infinity, "summary": "s"}',
    '{"path": "\\ud800"}', '{"path": "a\\u0000b", "content": "x"}', '{"content": "\\udfff", "path": "s.md"}',
    '{"path": "notes.md", "path": "../outside/secret.txt"}', '{"path": "x.md", "content": "a", "content": "b"}',
    "\ufeff{}", "{}", "", "   ", "null", "[]", '""', "0", "1e400", "NaN", "\x00", '{"__refused__": "big"}',
    '{"__refused__": 1}', '{"__refused__": "x", "path": "a"}', '{"todos": ' + '["t"]' * 1 + "}",
    '{"todos": [' + ",".join(['"t"'] * 5000) + "]}", '{"todos": [{"task": "' + "t" * 501 + '"}]}',
    '{"deliverables": [' + ",".join(['"notes.md"'] * 300) + '], "summary": "s", "confidence": 0.5}',
    '{"text": "' + "n" * 2001 + '"}', '{"issue": "' + "i" * 4001 + '"}',
]


# -- the property ---------------------------------------------------------------------------------------------
FAST_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
ALL_NAMES = TOOL_NAMES + UNKNOWN_NAMES


@pytest.mark.sweep
@settings(max_examples=examples(150), deadline=None, derandomize=True, phases=FAST_PHASES,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(data=st.data())
def test_no_arguments_break_a_tool_or_the_sandbox(tmp_path: Path, data: st.DataObject) -> None:
    with fresh_job(tmp_path) as job:
        for _ in range(data.draw(st.integers(1, 4), label="calls")):
            name = data.draw(st.sampled_from(TOOL_NAMES * 6 + UNKNOWN_NAMES), label="tool")
            call(job, name, data.draw(arguments(name), label="arguments"))


# -- every tool x every kind of argument, deterministically --------------------------------------------------------
@pytest.mark.parametrize("name", ALL_NAMES)
def test_each_tool_with_each_special_argument(tmp_path: Path, name: str) -> None:
    with fresh_job(tmp_path) as job:
        for arguments_text in SPECIAL_ARGUMENTS:
            call(job, name, arguments_text)


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_each_tool_with_each_nasty_path(tmp_path: Path, name: str) -> None:
    """Every path-taking field (and the first text field of the others) gets every nasty path."""
    fields = fields_of(name)
    with fresh_job(tmp_path) as job:
        for path in NASTY_PATHS:
            obj: dict[str, Any] = {}
            for f in fields:
                obj[f] = {"path": path, "deliverables": [path], "todos": [path], "confidence": 0.5,
                          "pattern": "hello", "start_line": 1, "max_lines": 5, "max_results": 5,
                          "replace_all": True, "old_text": "hello"}.get(f, path or "x")
            call(job, name, json.dumps(obj))


@pytest.mark.parametrize("size", [2**20, 16 * 2**20 + 1, 20 * 2**20])
def test_huge_arguments_are_refused_quickly(tmp_path: Path, size: int) -> None:
    """A couple of calls of 1-20 MB: a write far over the limit and arguments over MAX_ARGUMENT_CHARS."""
    with fresh_job(tmp_path) as job:
        body = "x" * size
        for name, obj in (("write_file", {"path": "big.md", "content": body}),
                          ("append_file", {"path": "notes.md", "content": body}),
                          ("edit_file", {"path": "notes.md", "old_text": "hello", "new_text": body}),
                          ("search_files", {"pattern": body}),
                          ("add_note", {"text": body})):
            out = call(job, name, json.dumps(obj))
            assert not out.ok, f"{name} with {size} characters was accepted"
        assert not (job.root / "big.md").exists()
        assert (job.root / "notes.md").read_text() == NOTES


def test_writes_add_up_to_the_job_limit_and_no_further(tmp_path: Path) -> None:
    """Many writes under the per-write limit: the job stops growing at its own limit."""
    with fresh_job(tmp_path) as job:
        refused = 0
        for i in range(40):
            out = call(job, "write_file", json.dumps({"path": f"part{i}.md", "content": "y" * MAX_WRITE}))
            refused += not out.ok
            out = call(job, "append_file", json.dumps({"path": "log.md", "content": "z" * (MAX_WRITE - 1)}))
            refused += not out.ok
        assert refused > 0 and job_bytes(job.root) <= MAX_JOB


def test_search_with_a_catastrophic_pattern_returns_in_time(tmp_path: Path) -> None:
    with fresh_job(tmp_path) as job:
        for pattern in ["(a+)+$", "(a|aa)+$", "(a*)*b", "(x+x+)+y", "^(([a-z])+.)+[A-Z]([a-z])+$"]:
            call(job, "search_files", json.dumps({"pattern": pattern}))
