"""The run's journal: a write-ahead log of every step, ``JOB/.console/checkpoint.jsonl``.

A run is a sequence of steps: the model's reply is recorded, each tool call is
run and recorded, the turn's bookkeeping is done, an operator command is
applied, a session restarts. Each step ends with one ``commit`` line, written in
one ``write``: it carries the checkpoint (where the run is: the turn, the stage
within it, the next tool call), the harness state the step changed, the events
the step produced (a transactional outbox: they reach events.jsonl after the
commit, and a resume appends any that a kill kept out of the log) and the file
effects to apply after it (main_plan.md bookkeeping, workspace_summary.md,
archives). Conversation changes are journaled as small ops (append, replace one
message, reset to a new list) just before their commit.

A resume replays the journal up to its last commit and continues from there,
mid-turn if that is where the run stopped: a recorded reply is not asked for
again and a recorded tool call is not run again. What follows the last commit
(a torn line, ops of a step that never committed) is cut; an ``intent`` line in
it says that a tool with side effects had started, with the facts it saw before
acting, so its redo ends as the first attempt would have.

Anything else that does not read as a journal line is damage: the file is moved
to ``.console/corrupt/`` and reported, never silently truncated.

Why one module of ~570 lines: the line types, the reader (:meth:`Journal.load`) and the writer
(:meth:`Journal.commit`) are one on-disk protocol, and crash consistency rests on them agreeing: what a commit
writes in one ``write`` is exactly what a load replays up to, and a cut after the last commit is the writer's
torn tail. Split apart, a change to one side (a new op, where blobs are externalized) could land without the
other; here both sides of each line type are read together.
"""

from __future__ import annotations

import json
import operator
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, SupportsIndex

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from console.engine import failpoints
from console.engine.atomic import PRIVATE_DIR, PRIVATE_FILE, atomic_write_bytes, fsync_dir
from console.engine.blobs import INLINE_LIMIT, BlobStore, is_ref
from console.engine.context.pressure import PressureState
from console.engine.job_files import JobPaths
from console.engine.messages import Message
from console.engine.model_json import model_json
from console.engine.state import StateFileError, StateSnapshot, quarantine

JOURNAL_NAME = "checkpoint.jsonl"
# The journal is rewritten as one snapshot when it has grown this many times past its last rewrite
# (and is at least REWRITE_MIN bytes): appends stay O(1) per step, the file stays a few times the state.
REWRITE_FACTOR = 3
REWRITE_MIN = 2 * 2**20
# Every commit survives a killed process (the page cache outlives it); an fsync, which only matters for
# a power cut, is paid every this many commits and whenever a caller asks for it.
FSYNC_EVERY = 40
MAX_LINE = 256 * 2**20


# Counts in a checkpoint are bounded: a damaged journal is damage, not a number past any float.
Count = Annotated[int, Field(ge=0, le=10**12)]


class UsageRecord(BaseModel):
    input_tokens: Count = 0
    output_tokens: Count = 0
    cached_input_tokens: Count = 0
    reported: bool = True
    cache_write_tokens: Count = 0


class Checkpoint(BaseModel):
    """Where a run is at a commit: enough to continue it exactly."""

    v: int = 3
    session: Count = 0
    turn: Count = 0
    # "boundary": between turns. "tools": the reply of ``turn`` is recorded and its tool calls from
    # ``next_call`` on have not run yet (then the turn's bookkeeping).
    stage: Literal["boundary", "tools"] = "boundary"
    next_call: Count = 0
    nudges: Count = 0
    idle_turns: Count = 0
    restarts: Count = 0
    idle_restarts: Count = 0
    # memory.next_id when the session started: a session that fills up without completing a task is idle.
    tasks_at_start: Count = 0
    # (memory.next_id, todo generation) after the last turn: an unchanged mark is a turn without progress.
    progress: list[Count] = Field(default_factory=list, max_length=2)
    # The context pressure was already evaluated at this boundary (a masking or wind-down was recorded).
    evaluated: bool = False
    job_done: bool = False
    context: PressureState | None = None
    # The turn in flight (stage "tools"): harness notices to add after the results, a compaction the
    # turn asked for, whether job_complete ended it, and what the reply cost.
    notices: list[Message] = Field(default_factory=list)
    compaction: str | None = None
    finished: bool = False
    usage: UsageRecord | None = None
    updated_at: datetime | None = None

    # -- the moves of a turn, each several fields at once (typed here: the values are the engine's own) -----------
    def reply_recorded(self, usage: UsageRecord) -> None:
        """The turn's reply is recorded: its tool calls are to run, from the first."""
        self._assign(stage="tools", next_call=0, finished=False, notices=[], compaction=None, usage=usage)

    def call_recorded(self, next_call: int, notices: list[Message], compaction: str | None) -> None:
        """A tool call of the turn has run: the next is ``next_call``; the notices and the compaction the turn has
        asked for so far."""
        self._assign(next_call=next_call, notices=notices, compaction=compaction)

    def at_boundary(self) -> None:
        """The turn's bookkeeping is recorded: between turns, the context pressure not yet evaluated."""
        self._assign(stage="boundary", next_call=0, notices=[], compaction=None, finished=False, usage=None,
                     evaluated=False)

    def stamp(self, context: PressureState | None, updated_at: datetime) -> None:
        """At every commit (two a turn): the context's figures and the time of the commit."""
        self._assign(context=context, updated_at=updated_at)

    def _assign(self, **values: Any) -> None:
        # What pydantic's assignment does for a field of a model without validate_assignment (set it, count it as
        # set), for several fields in one call: an assignment is four calls, and a turn makes twenty.
        self.__dict__.update(values)
        self.__pydantic_fields_set__.update(values)


class Effect(BaseModel):
    """A file the engine writes after the commit that records it (idempotent: redone on recovery)."""

    path: str
    content: str


class SessionOp(BaseModel):
    op: Literal["session"]
    n: Count
    system: str


class ResetOp(BaseModel):
    op: Literal["reset"]
    ms: list[Message]


class AppendOp(BaseModel):
    op: Literal["append"]
    m: Message


class ReplaceOp(BaseModel):
    op: Literal["replace"]
    i: Count
    m: Message


class IntentOp(BaseModel):
    op: Literal["intent"]
    call: str
    facts: dict[str, Any]


class CommitOp(BaseModel):
    op: Literal["commit"]
    cp: Checkpoint
    state: StateSnapshot | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    effects: list[Effect] = Field(default_factory=list)


JournalOp = Annotated[SessionOp | ResetOp | AppendOp | ReplaceOp | IntentOp | CommitOp, Field(discriminator="op")]
# Built when a journal is first read (a resume, a recovery), not by every process that imports the journal.
OP_ADAPTER: TypeAdapter[Any] = TypeAdapter(JournalOp, config=ConfigDict(defer_build=True))


class Conversation(list[Message]):
    """A list of messages that records every change for the journal.

    The loop, masking and compaction use it as a plain list (append, extend,
    item and whole-slice assignment); each change becomes a pending journal op.
    """

    def __init__(self, messages: Any = (), *, journaled: bool = False) -> None:
        super().__init__(messages)
        # A conversation read back from the journal is already there: nothing to write.
        self.pending: list[dict[str, Any]] = [] if journaled else [{"op": "reset", "ms": list(self)}]

    def append(self, m: Message) -> None:
        super().append(m)
        self.pending.append({"op": "append", "m": m})

    def extend(self, ms: Any) -> None:
        for m in ms:
            self.append(m)

    def __setitem__(self, key: SupportsIndex | slice, value: Any) -> None:
        if isinstance(key, slice):
            if key != slice(None):
                raise NotImplementedError("only whole-list assignment is journaled")
            super().__setitem__(key, value)
            self.pending = [{"op": "reset", "ms": list(self)}]
            return
        i = key.__index__()
        super().__setitem__(i, value)
        self.pending.append({"op": "replace", "i": i if i >= 0 else len(self) + i, "m": value})

    def _unsupported(self, *a: Any, **k: Any) -> None:
        raise NotImplementedError("the conversation only grows, or is replaced whole")

    insert = pop = remove = clear = sort = reverse = __delitem__ = __iadd__ = _unsupported  # type: ignore[assignment]


@dataclass
class Loaded:
    """What the journal says, up to its last commit."""

    cp: Checkpoint | None = None
    conversation: list[Message] = field(default_factory=list)
    system: str | None = None
    state: StateSnapshot = field(default_factory=StateSnapshot)
    # The last commit's effects: a kill may have come before they were all applied.
    effects: list[Effect] = field(default_factory=list)
    # Tool calls that had started after the last commit: call id -> the facts recorded before acting.
    intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Committed events that never reached events.jsonl (their seq is past the log's last one).
    unlogged: list[dict[str, Any]] = field(default_factory=list)
    # Lines after the last commit that were cut (a step in flight, a torn line).
    cut: int = 0
    # The journal could not be read past some line: what was wrong, and where the file went.
    problem: str | None = None
    moved_to: str | None = None


class Journal:
    """Owns ``checkpoint.jsonl`` of one job."""

    def __init__(self, paths: JobPaths) -> None:
        self.paths = paths
        self.path = paths.state / JOURNAL_NAME
        self.tmp_dir = paths.state / "tmp"
        self.blobs = BlobStore(paths.state / "blobs", self.tmp_dir)
        self._fd: int | None = None
        self.size = 0
        self._base = 0
        self._commits = 0
        self.rewrites = 0  # by this process (the overhead benchmark reports them)
        self._pending: list[str] = []
        # The conversation as the journal wrote it: each message, its journal bytes and the blobs they refer to,
        # kept in step by the ops. A message is never changed in place (the conversation replaces it, as a
        # journaled op), so a rewrite joins these bytes instead of serialising the whole conversation again
        # (~10 ms at 2,800 messages, in one turn).
        self._image: list[Message] = []
        self._image_json: list[bytes] = []
        self._image_refs: list[tuple[str, ...]] = []

    # -- reading -------------------------------------------------------------------------------------
    def _internalize_message(self, d: Any) -> Any:
        if not isinstance(d, dict):
            return d
        if is_ref(d.get("content")):
            d["content"] = self.blobs.get(d["content"])
        for c in d.get("tool_calls") or []:
            if isinstance(c, dict) and is_ref(c.get("arguments")):
                c["arguments"] = self.blobs.get(c["arguments"])
        return d

    def _parse(self, raw: bytes) -> Any:
        obj = json.loads(raw)
        if not isinstance(obj, dict):
            raise ValueError("a journal line must be a JSON object")
        kind = obj.get("op")
        if kind in ("append", "replace"):
            self._internalize_message(obj.get("m"))
        elif kind == "reset" and isinstance(obj.get("ms"), list):
            for m in obj["ms"]:
                self._internalize_message(m)
        elif kind == "commit":
            for e in obj.get("effects") or []:
                if isinstance(e, dict) and is_ref(e.get("content")):
                    e["content"] = self.blobs.get(e["content"])
        return OP_ADAPTER.validate_python(obj)

    def load(self, now: datetime, logged_seq: int = 0) -> Loaded:
        """Replay the journal to its last commit; cut what follows; move a damaged journal aside."""
        out = Loaded()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return out
        except OSError as exc:
            return self._damaged(out, now, f"it cannot be opened ({exc.strerror})")
        conv: list[Message] = []
        # Ops wait for their commit: those of a step that never committed are never applied.
        steps: list[AppendOp | ReplaceOp | ResetOp | SessionOp] = []
        length = 0  # of the conversation once the buffered ops are applied
        session: tuple[int, str] | None = None
        kept = kept_lines = 0
        lines = 0
        problem: str | None = None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                problem = "it is not a regular file"
            else:
                with os.fdopen(os.dup(fd), "rb") as fh:
                    offset = 0
                    while True:
                        raw = fh.readline(MAX_LINE)
                        if not raw:
                            break
                        lines += 1
                        if not raw.endswith(b"\n"):
                            if len(raw) >= MAX_LINE:
                                problem = f"line {lines} is longer than {MAX_LINE} bytes"
                            break  # the last line, torn by a kill mid-write: it never committed
                        offset += len(raw)
                        try:
                            op = self._parse(raw)
                        except (ValueError, RecursionError, ValidationError, StateFileError) as exc:
                            problem = f"line {lines} is not a journal record ({_first_line(exc)})"
                            break
                        if isinstance(op, IntentOp):
                            out.intents[op.call] = op.facts
                        elif not isinstance(op, CommitOp):
                            if isinstance(op, ReplaceOp) and op.i >= length:
                                problem = f"line {lines} replaces message {op.i} of {length}"
                                break
                            length = len(op.ms) if isinstance(op, ResetOp) else length + isinstance(op, AppendOp)
                            steps.append(op)
                        else:
                            for step in steps:
                                if isinstance(step, AppendOp):
                                    conv.append(step.m)
                                elif isinstance(step, ReplaceOp):
                                    conv[step.i] = step.m
                                elif isinstance(step, ResetOp):
                                    conv = list(step.ms)
                                else:
                                    session = (step.n, step.system)
                            steps = []
                            out.cp = op.cp
                            if session is not None:
                                out.system = session[1] if session[0] == op.cp.session else None
                            if op.state is not None:
                                out.state = out.state.overlay(op.state)
                            out.effects = list(op.effects)
                            out.unlogged += [e for e in op.events if _seq(e) > logged_seq]
                            out.intents = {}
                            kept, kept_lines = offset, lines
        finally:
            os.close(fd)
        out.conversation = conv
        if problem is not None:
            return self._damaged(out, now, problem)
        size = self.path.stat().st_size
        if size > kept:
            out.cut = max(1, lines - kept_lines)
            # What follows the last commit never committed: cut it (its intents are kept in memory).
            with open(self.path, "rb+") as fh:
                fh.truncate(kept)
        self.size = self._base = kept
        return out

    def _damaged(self, out: Loaded, now: datetime, why: str) -> Loaded:
        moved = quarantine(self.paths, self.path, now)
        # Its blobs go with it: the new journal's first rewrite would otherwise collect them as unused.
        if self.blobs.folder.exists():
            quarantine(self.paths, self.blobs.folder, now)
        # Nothing of it is used but the events it committed: the state files and a fresh conversation
        # continue the run (the caller says so).
        fresh = Loaded(unlogged=out.unlogged)
        fresh.problem = why
        fresh.moved_to = str(moved.relative_to(self.paths.root)) if moved else None
        self.size = self._base = 0
        return fresh

    # -- writing -------------------------------------------------------------------------------------
    def _externalize_message(self, m: Message, refs: set[str] | None) -> dict[str, Any]:
        d = m.model_dump(mode="json", exclude_defaults=True)
        if len(m.content) > INLINE_LIMIT:
            d["content"] = ref = self.blobs.put(m.content)
            if refs is not None:
                refs.add(ref["$blob"])
        for c in d.get("tool_calls") or []:
            if len(c.get("arguments", "")) > INLINE_LIMIT:
                c["arguments"] = ref = self.blobs.put(c["arguments"])
                if refs is not None:
                    refs.add(ref["$blob"])
        return d

    def _message_json(self, m: Message) -> tuple[bytes, tuple[str, ...]]:
        if len(m.content) <= INLINE_LIMIT and not any([len(c.arguments) > INLINE_LIMIT for c in m.tool_calls]):
            # Nothing to put in a blob: the model's own serializer, in one call (the same JSON as below, ~3x
            # faster, for the two or three messages of every turn).
            try:
                return model_json(m, exclude_defaults=True), ()
            except ValueError:
                pass  # a lone surrogate (half an emoji): below, it becomes '?' as everywhere the harness writes
        refs: set[str] = set()
        return _encode(_dumps(self._externalize_message(m, refs))), tuple(refs)

    def _reset_image(self, ms: list[Message]) -> None:
        # A message already in the image (the turns a compaction carries, a conversation replaced whole) keeps its
        # bytes: a message is never changed in place, and the image holds it, so its id is its own meanwhile.
        aligned = len(self._image) == len(self._image_json) == len(self._image_refs)
        known = dict(zip(map(id, self._image), zip(self._image_json, self._image_refs, strict=True), strict=True)
                     ) if aligned else {}
        dumped = [known.get(id(m)) or self._message_json(m) for m in ms]
        self._image = list(ms)
        self._image_json = [d for d, _ in dumped]
        self._image_refs = [r for _, r in dumped]

    def _op_line(self, op: dict[str, Any]) -> bytes:
        """The op's journal line (the bytes of _dumps of the op, its messages externalized); the image follows."""
        kind = op["op"]
        if kind == "reset":
            self._reset_image(op["ms"])
            return b'{"op":"reset","ms":[' + b",".join(self._image_json) + b"]}"
        data, refs = self._message_json(op["m"])
        if kind == "append":
            self._image.append(op["m"])
            self._image_json.append(data)
            self._image_refs.append(refs)
            return b'{"op":"append","m":' + data + b"}"
        i = op["i"]
        if i < len(self._image):
            self._image[i], self._image_json[i], self._image_refs[i] = op["m"], data, refs
        else:
            # Out of step: the next rewrite serialises the conversation afresh.
            self._image, self._image_json, self._image_refs = [], [], []
        return b'{"op":"replace","i":' + str(i).encode() + b',"m":' + data + b"}"

    def _commit_line(self, cp: Checkpoint, state: StateSnapshot | None, events: list[str], effects: list[Effect],
                     refs: set[str] | None = None, state_json: str | None = None) -> str:
        # Kept as '{"op": "commit", ...' (with the space): scripts that look for commits by that text still work.
        parts = ['{"op": "commit", "cp": ' + model_json(cp, exclude_defaults=True).decode()]
        if state_json is not None:
            parts.append('"state": ' + state_json)
        elif state is not None:
            parts.append('"state": ' + state.model_dump_json(exclude_none=True))
        if events:
            parts.append('"events": [' + ",".join(events) + "]")
        if effects:
            dumped = []
            for e in effects:
                content: Any = e.content
                if len(content) > INLINE_LIMIT:
                    content = self.blobs.put(content)
                    if refs is not None:
                        refs.add(content["$blob"])
                dumped.append({"path": e.path, "content": content})
            parts.append('"effects": ' + _dumps(dumped))
        return ", ".join(parts) + "}"

    def session(self, n: int, system: str) -> None:
        """Record the system prompt a session runs with (written with the next commit)."""
        self._pending.append(_dumps({"op": "session", "n": n, "system": system}))

    def intent(self, call_id: str, facts: dict[str, Any]) -> None:
        """Before a tool call acts on the world: what it saw, so a redo after a kill acts the same."""
        self._write(_dumps({"op": "intent", "call": call_id, "facts": facts}) + "\n", "intent")

    def commit(self, cp: Checkpoint, conversation: Conversation, *, state: StateSnapshot | None,
               events: list[str], effects: list[Effect], full_state: Callable[[], StateSnapshot],
               system: str | None, durable: bool = False, state_json: str | None = None) -> None:
        """Record a step. ``state_json``: ``state.model_dump_json(exclude_none=True)``, when the caller has it."""
        self._commits += 1
        durable = durable or self._commits % FSYNC_EVERY == 0
        ops = [self._op_line(op) for op in conversation.pending]
        grown = self.size + self.blobs.fresh
        if self.size == 0 or grown > max(REWRITE_MIN, REWRITE_FACTOR * self._base):
            self._rewrite(cp, conversation, full_state(), events, effects, system, durable)
        else:
            body = [_encode(line) for line in self._pending]
            body += ops
            body.append(_encode(self._commit_line(cp, state, events, effects, state_json=state_json)))
            self._write(b"\n".join(body) + b"\n", "commit", durable=durable)
        self._pending = []
        conversation.pending = []

    def _rewrite(self, cp: Checkpoint, conversation: Conversation, state: StateSnapshot, events: list[str],
                 effects: list[Effect], system: str | None, durable: bool) -> None:
        """Start the journal afresh from the current state: one session line, one reset, one commit."""
        lines = []
        if system is not None:
            lines.append(_encode(_dumps({"op": "session", "n": cp.session, "system": system})))
        if len(self._image) != len(conversation) or not all(map(operator.is_, self._image, conversation)):
            self._reset_image(list(conversation))  # a conversation the ops did not bring here (a resume)
        lines.append(b'{"op":"reset","ms":[' + b",".join(self._image_json) + b"]}")
        refs: set[str] = set().union(*self._image_refs)
        self.rewrites += 1
        lines.append(_encode(self._commit_line(cp, state, events, effects, refs)))
        data = b"\n".join(lines) + b"\n"
        self.close()
        failpoints.hit("journal rewrite")
        atomic_write_bytes(self.path, data, durable=durable, tmp_dir=self.tmp_dir)
        self.size = self._base = len(data)
        self.blobs.gc(refs)

    def _write(self, text: str | bytes, what: str, durable: bool = False) -> None:
        data = text if isinstance(text, bytes) else _encode(text)
        if self._fd is None:
            self.path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            # The conversation is in it: the operator's only (0600), like every harness file.
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
        fd = self._fd

        if failpoints.installed():  # the kill-point tests' (their closure and name not made at every write of a run)
            def tear() -> None:
                os.write(fd, data[: max(1, len(data) // 2)])

            failpoints.hit(f"journal {what}", tear=tear)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        self.size += len(data)
        if durable:
            os.fsync(fd)
            if self.size == len(data):
                fsync_dir(self.path.parent)

    def sync(self) -> None:
        """Make every commit so far durable (at the end of a run)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _encode(text: str) -> bytes:
    # A lone surrogate (half an emoji in a tool's output) becomes '?', as everywhere the harness writes text.
    return text.encode("utf-8", "replace")


def _seq(e: dict[str, Any]) -> int:
    s = e.get("seq")
    return s if isinstance(s, int) else 0


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError) and exc.errors():
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("tagged-union", "function-")))
        return f"{where}: {err['msg']}"[:200] if where else err["msg"][:200]
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


def load_checkpoint(paths: JobPaths) -> Checkpoint | None:
    """Just the last checkpoint of a job, read without changing the file (e.g. to know whether it is done)."""
    try:
        with open(paths.state / JOURNAL_NAME, "rb") as fh:
            last: Checkpoint | None = None
            for raw in fh:
                if raw.startswith(b'{"op": "commit"') and raw.endswith(b"\n"):
                    try:
                        last = Checkpoint.model_validate(json.loads(raw)["cp"])
                    except (ValueError, KeyError, TypeError, RecursionError):
                        continue
            return last
    except OSError:
        return None
