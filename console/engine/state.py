"""The harness state of a run, and the files that mirror it.

The state (the todo list, working memory, the workspace record, the job's
outcome) is recorded in the journal (:mod:`console.engine.journal`): each
committed step carries the components it changed, so a step's state change,
its conversation messages and its events are one atomic record.

``JOB/.console/todos.json``, ``memory.json``, ``workspace.json``, ``outcome.json``,
``guardrails.json`` and ``experiences.json`` are projections of that state, written after each commit: for
people and scripts to read, and as a second copy when the journal itself is
damaged. Every file the harness reads back is validated here; one that cannot
be used is moved to ``.console/corrupt/`` (never deleted), and the caller
reports it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from console.engine import failpoints
from console.engine.atomic import PRIVATE_DIR, atomic_write_bytes
from console.engine.experiences import ExperienceState
from console.engine.guardrails import BudgetState, EscalationState, FeedbackState, GuardrailState, PolicyState
from console.engine.guardrails.feedback import ToolCallSummary
from console.engine.job_files import JobPaths
from console.engine.memory import MemoryState
from console.engine.todos import TodoState
from console.engine.workspace import WorkspaceRecord

# More than any honest state file: a bigger one is damaged or hostile, and is not read into memory.
MAX_STATE_FILE_BYTES = 64 * 2**20


class JobOutcome(BaseModel):
    """The agent's job_complete as the harness accepted it: the job completed (the record showed the plan done),
    or the agent gave up (a low confidence and notes saying why: seed 000's unrecoverable case)."""

    summary: str
    deliverables: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)
    notes: str = ""
    completed_at: datetime | None = None
    gave_up: bool = False


class GuardrailParts(BaseModel):
    """The parts of the guardrails' state a step changed (None: unchanged). A turn changes the feedback's record of
    the calls in its tool steps and the budget in its last: recording only those keeps ~4 KB a turn out of the
    journal (its rewrites, which cost milliseconds, come that much less often)."""

    model_config = ConfigDict(extra="forbid")

    policies: dict[str, PolicyState] | None = None
    feedback: FeedbackState | None = None
    budget: BudgetState | None = None
    completion_blocks: int | None = Field(default=None, ge=0, le=10**6)
    escalation: EscalationState | None = None

    def changed(self) -> dict[str, Any]:
        return {name: value for name in GUARDRAIL_PARTS if (value := getattr(self, name)) is not None}


GUARDRAIL_PARTS = ("policies", "feedback", "budget", "completion_blocks", "escalation")


class StateSnapshot(BaseModel):
    """Components of the harness state; a component left None is unchanged (or absent). ``guardrails_parts``: the
    parts of the guardrails' state a step changed, laid over the state before it."""

    todos: TodoState | None = None
    memory: MemoryState | None = None
    workspace: WorkspaceRecord | None = None
    outcome: JobOutcome | None = None
    guardrails: GuardrailState | None = None
    experiences: ExperienceState | None = None
    guardrails_parts: GuardrailParts | None = None

    def overlay(self, newer: StateSnapshot) -> StateSnapshot:
        merged = {k: getattr(newer, k) if getattr(newer, k) is not None else getattr(self, k) for k in COMPONENTS}
        if newer.guardrails_parts is not None:
            base = merged["guardrails"] if merged["guardrails"] is not None else GuardrailState()
            merged["guardrails"] = base.model_copy(update=newer.guardrails_parts.changed())
        return StateSnapshot(**merged)


COMPONENTS = ("todos", "memory", "workspace", "outcome", "guardrails", "experiences")
PROJECTION_FILES = {"todos": "todos.json", "memory": "memory.json", "workspace": "workspace.json",
                    "outcome": "outcome.json", "guardrails": "guardrails.json", "experiences": "experiences.json"}
MODELS: dict[str, type[BaseModel]] = {"todos": TodoState, "memory": MemoryState, "workspace": WorkspaceRecord,
                                      "outcome": JobOutcome, "guardrails": GuardrailState,
                                      "experiences": ExperienceState}


# What each component is, in the operator's words.
COMPONENT_NAMES = {"todos": "the todo list", "memory": "the working memory",
                   "workspace": "the record of accomplishments and notes", "outcome": "the job's outcome",
                   "guardrails": "the guardrails' state (policy history, feedback triggers, budgets)",
                   "experiences": "the record of experiences.md (failed approaches, lessons, patterns)"}
# The keys every state file the harness writes has (older versions too): one without them was damaged,
# even if its defaults would validate ('{}' is a valid empty todo list, but never one we wrote).
DEFINING_KEYS = {"todos": {"kind", "items"}, "memory": {"completed_tasks"},
                 "workspace": {"accomplishments", "notes"}, "outcome": {"summary", "confidence"},
                 "guardrails": {"policies", "feedback", "budget"}, "experiences": {"entries"}}


_M = TypeVar("_M", bound=BaseModel)


def constructed(cls: type[_M], fields_set: set[str], values: dict[str, Any]) -> _M:
    """``cls.model_construct(fields_set, **values)`` for ``values`` that give every field of ``cls``, in its fields'
    order (a model without aliases, private attributes or model_post_init: StateSnapshot, GuardrailParts): the same
    instance (its __dict__ is ``values``), without pydantic's Python loop over each field's aliases and default
    (~290 bytecodes a call; a turn's step builds two: tests/unit/test_step_state.py holds them equal)."""
    m = cls.__new__(cls)
    object.__setattr__(m, "__dict__", values)
    object.__setattr__(m, "__pydantic_fields_set__", fields_set)
    object.__setattr__(m, "__pydantic_extra__", None)
    object.__setattr__(m, "__pydantic_private__", None)
    return m


class StateFileError(Exception):
    """A harness file that cannot be used; the message says why, in a few words."""


@dataclass(frozen=True)
class FileProblem:
    """A harness file that could not be used as it was, and where it was moved."""

    file: str
    problem: str
    moved_to: str | None
    component: str | None = None


def read_state_file(path: Path, max_bytes: int = MAX_STATE_FILE_BYTES) -> bytes | None:
    """The bytes of a harness file, or None if it does not exist.

    Opened without blocking and without following a symlink, and checked on the
    descriptor: a folder, a named pipe, a device or a link where a state file
    should be is an error, never a hang and never a read of some other file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StateFileError("it is a folder, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateFileError("it is a symbolic link, not a file") from None
        raise StateFileError(exc.strerror or type(exc).__name__) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise StateFileError("it is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise StateFileError("it is not a regular file")
        if st.st_size > max_bytes:
            raise StateFileError(f"it is {st.st_size} bytes, more than the {max_bytes} a state file may have")
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise StateFileError(f"it grew past {max_bytes} bytes while being read")
        return data
    finally:
        os.close(fd)


def parse_model(model: type[BaseModel], data: bytes) -> BaseModel:
    """Validate JSON bytes as ``model``; every failure (syntax, shape, depth, encoding) is a StateFileError."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise StateFileError(f"{err['msg']}{f' at {where}' if where else ''}") from None
    except (ValueError, RecursionError) as exc:
        raise StateFileError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def quarantine(paths: JobPaths, path: Path, now: datetime) -> Path | None:
    """Move a damaged harness file (or folder) aside into ``.console/corrupt/``; returns where it went."""
    dest_dir = paths.state / "corrupt"
    with contextlib.suppress(OSError):
        dest_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    base = f"{path.name}.{now.strftime('%Y%m%dT%H%M%S')}"
    dest = dest_dir / base
    n = 1
    while dest.exists() or dest.is_symlink():
        n += 1
        dest = dest_dir / f"{base}-{n}"
    try:
        os.replace(path, dest)
    except OSError:
        return None
    return dest


def load_projections(paths: JobPaths, now: datetime) -> tuple[StateSnapshot, list[FileProblem]]:
    """The projection files as a snapshot, and the files that had to be moved aside."""
    found: dict[str, Any] = {}
    problems: list[FileProblem] = []
    for comp, name in PROJECTION_FILES.items():
        path = paths.state / name
        try:
            data = read_state_file(path)
            if data is None:
                continue
            found[comp] = parse_model(MODELS[comp], data)
            missing = DEFINING_KEYS[comp] - set(found[comp].model_fields_set)
            if missing:
                del found[comp]
                raise StateFileError(f"it lacks {', '.join(sorted(missing))}")
        except StateFileError as exc:
            moved = quarantine(paths, path, now)
            problems.append(FileProblem(str(path.relative_to(paths.root)), str(exc),
                                        str(moved.relative_to(paths.root)) if moved else None, comp))
    return StateSnapshot(**found), problems


def folder_gone(state: Path | str) -> OSError | None:
    """Why a state file is not written: the run's ``.console`` folder is no longer there (the run's folder was
    deleted or moved away under it). Writing would make the folder again at its path, holding a few state files of a
    run that is not there (the run is being stopped: console.engine.control.FOLDER_GONE)."""
    if os.path.isdir(state):
        return None
    return FileNotFoundError(errno.ENOENT, "the run's folder is gone", os.fspath(state))


def _part_serializer(name: str) -> TypeAdapter[Any]:
    annotation = GuardrailParts.model_fields[name].annotation
    assert annotation is not None
    return TypeAdapter(annotation)


# Each part of the guardrails' state by its own serializer: a step compares and records the parts it changed
# (console.engine.runtime.Runtime._step_state), and guardrails.json is made of the same dumps.
PART_JSON = {name: _part_serializer(name) for name in GUARDRAIL_PARTS}


class FeedbackJson:
    """The feedback part's JSON, as ``PART_JSON["feedback"]`` dumps it (byte for byte: tests/unit/test_step_state.py),
    its recent calls' dumps kept from one step to the next.

    A step dumps the part at every turn (it changes at every call) and most of it is the record of the recent calls,
    each a frozen ToolCallSummary that stays the same object while it is kept: one of them is new at each call, the
    others were dumped before. The rest of the part is dumped without them, and their JSON goes back in at their
    place: after ``tool_call_count``, before ``provider_last``, the fields before it holding no text (a time and a
    number) that could hold those bytes. Not thread-safe: the run's loop's (each step's state)."""

    # FeedbackState's first fields, in their order: another order (a field added before provider_last...) makes
    # this dump fall back to the part's serializer whole, not put the calls in the wrong place.
    SPLICED = ("started_at", "tool_call_count", "recent_calls", "provider_last")

    def __init__(self) -> None:
        self._part = PART_JSON["feedback"].serializer
        self._call = ToolCallSummary.__pydantic_serializer__
        self._calls: dict[int, tuple[ToolCallSummary, bytes]] = {}
        self._spliced = tuple(FeedbackState.model_fields)[:4] == self.SPLICED

    def __call__(self, value: object) -> bytes:
        if not self._spliced or type(value) is not FeedbackState:
            return self._part.to_json(value)
        kept: dict[int, tuple[ToolCallSummary, bytes]] = {}
        dumps = []
        for call in value.recent_calls:
            known = self._calls.get(id(call))
            if known is None or known[0] is not call:  # the same id, another object: dumped afresh
                known = (call, self._call.to_json(call))
            kept[id(call)] = known
            dumps.append(known[1])
        rest: bytes = self._part.to_json(value, exclude=_RECENT_CALLS)
        self._calls = kept  # the calls kept now, each held (its id cannot be another's meanwhile)
        at = rest.index(b',"provider_last":')
        return rest[:at] + b',"recent_calls":[' + b",".join(dumps) + b"]" + rest[at:]


_RECENT_CALLS = {"recent_calls"}  # the fields the rest is dumped without (never changed)


def guardrails_file(parts: dict[str, bytes]) -> bytes:
    """guardrails.json from its parts' JSON (each part's whole dump, its null fields kept: the file is the whole
    state, as GuardrailState dumps it; a script reads ``escalation.pending`` whether or not one is pending). One
    part a line, each compact: a turn writes it from the dumps its journal step made, not from a second dump of the
    state with an indent (a fifth of a turn's instructions, benchmarks/turn_cost.py)."""
    return b'{\n' + b",\n".join([b' "' + name.encode() + b'": ' + parts[name] for name in GUARDRAIL_PARTS]) + b"\n}\n"


def projection_bytes(component: str, value: BaseModel) -> bytes:
    if component == "guardrails" and isinstance(value, GuardrailState):
        return guardrails_file({name: PART_JSON[name].serializer.to_json(getattr(value, name))
                                for name in GUARDRAIL_PARTS})
    return value.model_dump_json(indent=1).encode("utf-8", "replace")


def write_projection(paths: JobPaths, component: str, value: BaseModel | None) -> None:
    if value is None:
        return
    if (gone := folder_gone(paths.state)) is not None:
        raise gone
    atomic_write_bytes(paths.state / PROJECTION_FILES[component], projection_bytes(component, value), durable=False,
                       tmp_dir=paths.state / "tmp")


# A state file's content, or a function that makes it from the run's state (None: nothing to write).
Content = bytes | Callable[[], bytes | None]


def _background_priority() -> None:
    """The calling thread becomes background work to the scheduler (Linux's SCHED_BATCH: the same share of the
    CPU, but a wake-up of it never preempts the thread that woke it). The run's loop wakes the state-file thread
    as it asks its model; woken as a normal thread, it could take the loop's CPU at that instant, and on a busy
    machine the loop then waited a timeslice (1-5 ms) in a turn (benchmarks/overhead.py: 72 such waits in 1,200
    turns, 30 with it)."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None or not hasattr(os, "sched_setscheduler"):
        return  # not Linux: nothing to say to the scheduler
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, policy, os.sched_param(0))  # 0: this thread, not the process


class ProjectionWriter:
    """Writes files that mirror the journal on a thread of its own, off the run's loop.

    A file replace costs a millisecond or more on ext4 (the rename makes it allocate the new file's blocks),
    several of them at every turn of a run whose turns last seconds. These files lag the journal anyway (it is
    what a resume trusts; a kill may leave them one step behind, as it always could): the newest content of a
    file wins (an older one still queued is dropped), and :meth:`flush` waits until everything submitted is
    written. While the kill-point tests count the engine's write points, it writes at once, so a run's points
    come in the same order every time.

    A held content may be a function that makes it (:meth:`submit`): the state's JSON is then made on this
    thread too, once the run lends it its state (:meth:`release`, as it asks its model: nothing changes it
    meanwhile), and the run takes the state back with :meth:`serialized` before it changes anything again.
    Serialising the state files took a tenth of a turn's harness time on the run's loop.
    """

    IDLE_SECONDS = 1.0  # the thread ends after this long with nothing to write (a new submit starts another)

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: dict[Path, tuple[Content, Path]] = {}
        self._lazy: set[Path] = set()  # queued files whose content is still a function to call
        self._making = False  # a content is being made (from the run's state)
        self._busy: Path | None = None  # the file being written
        self._held = False
        self._thread: threading.Thread | None = None
        self._errors: list[tuple[Path, str]] = []
        self._parents: dict[Path, str] = {}  # the temp folders' parents (_parent_of)

    def submit(self, path: Path, data: Content, tmp_dir: Path, *, hold: bool = False) -> None:
        """Queue a file's content. ``hold``: written once :meth:`release` (or a flush) says so, e.g. when the run
        waits for its model: the thread's Python work then takes the GIL from no one (written at once, it could
        stall the run's next steps by a switch interval, 5 ms, on a busy machine). ``data`` may be a function
        that makes the content from the run's state (held only): called on this thread after the release."""
        if failpoints.installed():
            self._write(path, data, tmp_dir)
            return
        with self._cond:
            self._queue.pop(path, None)  # re-queued at the end: files are written in the order last submitted
            self._queue[path] = (data, tmp_dir)
            if callable(data):
                self._lazy.add(path)
                hold = True  # made from the state only while the run lends it (release)
            else:
                self._lazy.discard(path)
            self._held = self._held or hold
            if not self._held:
                self._start()

    def release(self) -> None:
        """Write what is held now."""
        with self._cond:
            self._held = False
            if self._queue:
                self._start()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="state-files", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def serialized(self) -> None:
        """The run takes its state back: every content still to be made from it is made (a wait only when the
        model answered before the thread was done; contents still held are made after the next release)."""
        if not self._lazy and not self._making:
            return  # read without the lock, every turn: nothing was lent, or all of it was made
        with self._cond:
            while self._making or (not self._held and self._lazy):
                self._cond.wait()

    def flush(self, path: Path | None = None) -> None:
        """Wait until every file submitted so far (or just ``path``) is written (or failed: see
        :meth:`take_errors`). The contents still to be made from the state are made before it returns, ``path``
        or not: the release lent the state, and the caller goes on changing it."""
        self.release()
        with self._cond:
            while ((self._queue or self._busy) if path is None
                   else (path in self._queue or self._busy == path or self._lazy or self._making)):
                self._cond.wait()

    def take_errors(self) -> list[tuple[Path, str]]:
        """The writes that failed since the last call: (file, why)."""
        if not self._errors:
            return []  # read without the lock (three times a turn): one failing meanwhile is taken by the next call
        with self._cond:
            out, self._errors = self._errors, []
        return out

    def _make(self, path: Path, data: Content) -> bytes | None:
        if not callable(data):
            return data
        try:
            return data()
        except Exception as exc:  # reported like a failed write: the file keeps its older content
            with self._cond:
                self._errors.append((path, str(exc) or type(exc).__name__))
            return None

    def _write(self, path: Path, data: Content, tmp_dir: Path) -> None:
        made = self._make(path, data)
        if made is None:
            return
        try:
            # tmp_dir is the run's .console/tmp: its parent gone, so is the run's folder (experiences.md too).
            if (gone := folder_gone(self._parent_of(tmp_dir))) is not None:
                raise gone
            atomic_write_bytes(path, made, durable=False, tmp_dir=tmp_dir)
        except Exception as exc:  # reported by the loop (take_errors); the thread must go on for flush()
            with self._cond:
                self._errors.append((path, getattr(exc, "strerror", None) or str(exc) or type(exc).__name__))

    def _parent_of(self, tmp_dir: Path) -> str:
        """``tmp_dir``'s parent as a str, made once (pathlib's parent is a new Path and its str at every write)."""
        parent = self._parents.get(tmp_dir)
        if parent is None:
            parent = self._parents[tmp_dir] = os.fspath(tmp_dir.parent)
        return parent

    def _run(self) -> None:
        _background_priority()
        while True:
            with self._cond:
                if not self._queue or self._held:
                    self._cond.wait(self.IDLE_SECONDS)
                    if not self._queue or self._held:
                        self._thread = None
                        return
                lazy = bool(self._lazy)
                if lazy:
                    # The contents made from the state first, all of them (the run may be waiting to take its
                    # state back), each kept in its place in the queue; then the writes.
                    path = next(p for p in self._queue if p in self._lazy)
                    data, tmp_dir = self._queue[path]
                    self._lazy.discard(path)
                    self._making = True
                else:
                    path = next(iter(self._queue))
                    data, tmp_dir = self._queue.pop(path)
                    self._busy = path
            if lazy:
                made = self._make(path, data)
                with self._cond:
                    self._making = False
                    entry = self._queue.get(path)
                    if entry is not None and entry[0] is data:  # not replaced by a newer content meanwhile
                        if made is None:
                            del self._queue[path]
                        else:
                            self._queue[path] = (made, tmp_dir)  # its place in the queue kept
                    self._cond.notify_all()
                continue
            try:
                self._write(path, data, tmp_dir)
            finally:
                with self._cond:
                    self._busy = None
                    self._cond.notify_all()
