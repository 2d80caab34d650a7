"""Evidence for a todo: what the harness's own record of the run's tool calls must hold before ``todo_complete``
may mark a task done (the product's promise: "completed" means the record shows the work, never a box the agent
ticked itself).

The rule is small and conservative on purpose: it asks for evidence only where a todo's text names something the
harness can check, and a refusal says exactly what is missing and how to give it, so an agent recovers in one
turn. Everything else completes on the agent's word, as before.

=====================================  ===============================================================
A todo's text (first MAX_SCAN chars)   Evidence it needs before todo_complete
=====================================  ===============================================================
names a registry tool as a call:       a successful call of that tool in this phase
``name(``, or after one of CALL_WORDS
(``using x``, ``run the `x` tool``)
the same name only mentioned           nothing ("Summarise what list_files showed")
(no call syntax, no CALL_WORDS)
a negation before it (NEGATIONS)       nothing ("Do not call generate_workspace_summary again")
the name inside a longer word or path  nothing (``test.py``, ``notes/test``, ``publish_v2``)
starts with a READ_VERBS verb whose    a successful read_file of each such file in this phase
object is files the job folder holds
(``Read instructions.md``, ``Review
the file `a.md` and b.md``)
any other verb, or a file named later  nothing ("Summarise the notes into digest.md", "Check a.md")
a file the job folder does not hold    nothing (it cannot be read; the todo is wrong, not the agent)
the todo tools and job_complete        nothing here (job_complete is done by its own call)
=====================================  ===============================================================

"In this phase": the record (``TodoState.evidence``) is emptied when a transition archives a todo list, and the
calls made during the transition count for the list it installs. So a call made for an earlier task of the same
list counts (an agent that reads three files, then ticks three tasks, is not refused), and a call made in an
earlier phase does not. The record is part of the todo state, so it is committed with the call's own journal step:
a kill -9 after the call keeps it, a kill before redoes the call (and records it again).

Todo text is hostile: only the first MAX_SCAN characters are read, tokens are plain words (control characters,
markup and quotes only separate them), and no pattern can backtrack.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from console.engine.job_files import one_line

MAX_SCAN = 2000  # characters of a todo's text the rule reads
MAX_RECORD = 512  # evidence keys kept per phase (the oldest go first)
MAX_PATH = 300

# The harness's own protocol: ticking a todo that names these is not work the record can check here.
EXEMPT = frozenset({"todo_complete", "todo_write", "todo_rewind", "archive_and_reset", "job_complete"})
# Words right before a tool name that make it a call ("using generate_workspace_summary()", "run publish").
CALL_WORDS = frozenset({"call", "calling", "run", "running", "use", "using", "invoke", "execute", "with", "via",
                        "through"})
# Words allowed between a CALL_WORD and the name ("run the job's `test` tool").
GAP_WORDS = frozenset({"the", "its", "job's", "harness's", "tool", "command"})
NEGATIONS = frozenset({"not", "don't", "dont", "never", "without", "avoid", "skip", "instead", "no"})
# Verbs that, first in a todo, ask for files to be read.
READ_VERBS = frozenset({"read", "re-read", "reread", "review", "study", "skim", "open"})
# Words skipped inside the object of a read verb ("Read the file a.md and b.md").
OBJECT_WORDS = frozenset({"the", "file", "files", "and", "both"})
READ_TOOL = "read_file"

# A word: letters, digits and the characters of a path; or an opening parenthesis (call syntax). Linear.
TOKEN_RX = re.compile(r"[\w][\w./'’-]*|\(")
# Terminal escape sequences (CSI, e.g. "\x1b[31m"): separators, never words. Linear.
ESCAPE_RX = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]?")


@dataclass(frozen=True)
class Need:
    """One piece of evidence a todo needs: a successful call of a tool, or a read of a job file."""

    kind: Literal["call", "read"]
    target: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.target}"

    def how(self) -> str:
        """What the agent does to give it, in its words."""
        if self.kind == "call":
            return f"call {self.target}()"
        return f"read {self.target} with {READ_TOOL}(path='{self.target}')"


def _tokens(text: str) -> list[tuple[str, int, int]]:
    text = ESCAPE_RX.sub(" ", text[:MAX_SCAN])
    return [(m.group(0), m.start(), m.end()) for m in TOKEN_RX.finditer(text)]


def _word(token: str) -> str:
    return token.rstrip(".,;:'’-").lower()


def normalize_path(path: str) -> str | None:
    """A job-relative path as the rule compares it, or None if it cannot name a file in the job folder."""
    p = path.strip().rstrip(".,;:'’")
    if not p or len(p) > MAX_PATH or p.startswith("/") or "\x00" in p:
        return None
    p = posixpath.normpath(p)
    if p in (".", "..") or p.startswith("../"):
        return None
    return p


def needs(text: str, tools: Collection[str], holds: Callable[[str], bool]) -> list[Need]:
    """The evidence a todo's text asks for (see the module's table). ``tools``: the registry's tool names;
    ``holds(path)``: whether the job folder holds a regular file there."""
    toks = _tokens(text)
    out: list[Need] = []
    names = {n.lower(): n for n in tools if n not in EXEMPT}
    negated = False
    for i, (tok, _, end) in enumerate(toks):
        word = tok.lower()
        if _word(tok) in NEGATIONS:
            negated = True
        name = names.get(word)
        if name is None or negated:
            continue
        call_syntax = i + 1 < len(toks) and toks[i + 1][0] == "(" and toks[i + 1][1] == end
        j = i - 1
        while j >= 0 and i - j <= 3 and _word(toks[j][0]) in GAP_WORDS:
            j -= 1
        after_verb = j >= 0 and _word(toks[j][0]) in CALL_WORDS
        if (call_syntax or after_verb) and Need("call", name) not in out:
            out.append(Need("call", name))
    words = [t for t in toks if t[0] != "("]
    if words and _word(words[0][0]) in READ_VERBS:
        for tok, _, _ in words[1:]:
            if _word(tok) in OBJECT_WORDS:
                continue
            path = normalize_path(tok)
            if path is None or not holds(path):
                break
            if Need("read", path) not in out:
                out.append(Need("read", path))
    return out


def proofs(tool: str, params: Mapping[str, Any] | None) -> list[str]:
    """The evidence keys a successful call gives."""
    if tool in EXEMPT:
        return []
    keys = [Need("call", tool).key]
    path = (params or {}).get("path")
    if tool == READ_TOOL and isinstance(path, str) and (p := normalize_path(path)) is not None:
        keys.append(Need("read", p).key)
    return keys


def missing(wanted: Iterable[Need], record: Collection[str]) -> list[Need]:
    """The needs the record does not hold."""
    return [n for n in wanted if n.key not in record]


def add(record: list[str], keys: Iterable[str]) -> bool:
    """Add keys to a phase's record (bounded, oldest dropped); True if it changed."""
    changed = False
    for k in keys:
        if k not in record:
            record.append(k)
            changed = True
    if len(record) > MAX_RECORD:
        del record[: len(record) - MAX_RECORD]
    return changed


def refusal(index: int, text: str, gaps: list[Need]) -> str:
    """The error result of a refused todo_complete: what is missing and how to give it, first (a log line or a
    model may read only the start), then the task."""
    todo = ", then ".join(n.how() for n in gaps)
    return (f"todo_complete refused: {'; '.join(describe(n) for n in gaps)}, which task {index + 1} names. "
            f"Do it now ({todo}), then call todo_complete again. (Task {index + 1}: '{one_line(text, 200)}'; a "
            "task is done when the harness's record of this phase's tool calls shows its work.)")


def describe(n: Need) -> str:
    if n.kind == "call":
        return f"no successful call of {n.target} in this phase"
    return f"no read of {one_line(n.target, 120)} in this phase"


def owed_line(text: str, gaps: list[Need]) -> str:
    """What the record says of a task marked done without its evidence (for the completion check)."""
    return (f"task '{one_line(text, 120)}' was marked done without the evidence it names "
            f"({'; '.join(describe(n) for n in gaps)}): {', then '.join(n.how() for n in gaps)}")
