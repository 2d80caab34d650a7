"""experiences.md (seed 000): what failed, what was learned, what works, so the agent stops repeating mistakes.

Seed 000 describes a learning document with three sections, Failed Approaches, Lessons Learned and Patterns That
Work, "to help the agent avoid repeating mistakes across phases". Here it is kept by the harness:

- Fed by the run itself: every rewind (the agent's ``todo_rewind`` and the operator's) records the failed task
  and its issue under Failed Approaches; every stuck detection (an error streak, a call repeated or alternating
  without progress, idle turns) records what the detector saw; and the agent records its own entries in any
  section with the ``record_experience`` tool.
- Its newest entries are in every prompt's protected part (Layer 2, next to working memory), within
  :data:`PROMPT_TOKENS` tokens: the entries recorded *before the current phase or session started*. So the
  block changes only at a phase start (a new todo list: a transition, a rewind's re-plan, a checkpoint) and at
  a session start (a context restart), as seed 000's re-orientation points, and stays byte-identical in
  between (the prompt's cache holds; nothing the agent records mid-phase nags it at every turn).
- The record is a component of the run's harness state (``experiences``), committed in the journal with the
  step that produced it, so a kill -9 never loses an entry nor records one twice (a step is redone whole or
  not at all). ``JOB/experiences.md`` is a rendering of that record, rewritten atomically (its temp file in
  ``.console/tmp``, never in the agent's folder) after each commit that changed it and at every start, so a
  crash mid-write, a deleted or an edited file is put right from the record.
- The agent may read ``experiences.md`` but not write it: the sandbox refuses the file tools' writes to it.
- Everything in it may come from the agent, so it is hostile text: one line per entry, at most
  :data:`MAX_ENTRY_CHARS` characters, control and format characters shown escaped
  (:func:`console.engine.text.safe_text`), markdown that could open a heading, a block or a comment escaped,
  so no entry can break the file's sections. The number of entries is capped per origin (the agent's, the
  harness's), so an agent flooding the tool cannot push the harness's own records of failures out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from console.engine.context.tokens import estimate_text
from console.engine.text import safe_text
from console.engine.todos import NullSink, StateSink

if TYPE_CHECKING:
    from console.engine.events import EventStream

FILE_NAME = "experiences.md"
Section = Literal["failed", "lesson", "pattern"]
SECTIONS: tuple[Section, ...] = ("failed", "lesson", "pattern")
# Seed 000's headings, in its order.
SECTION_TITLES: dict[Section, str] = {"failed": "Failed Approaches", "lesson": "Lessons Learned",
                                      "pattern": "Patterns That Work"}
Origin = Literal["agent", "harness"]
# Who recorded an entry: the agent's tool, the agent's rewind, the operator's rewind, the stuck detector.
SOURCES = ("agent", "rewind", "operator rewind", "stuck")

# The most one entry holds (characters, after it is made one safe line); the tool's argument is as long.
MAX_ENTRY_CHARS = 300
# Entries kept per origin; past it the oldest of that origin goes (the file says how many went).
MAX_ENTRIES_PER_ORIGIN = 100
# The prompt's block: at most this many tokens (estimated as the context manager does: 4 characters a token),
# at most PROMPT_ENTRIES entries, each cut to PROMPT_ENTRY_CHARS.
PROMPT_TOKENS = 400
PROMPT_ENTRIES = 10
PROMPT_ENTRY_CHARS = 200
PROMPT_TITLE = "EXPERIENCES"

_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")
# At the start of a line, markdown that would open a heading, a quote, a list, a code block or a table row.
_BLOCK_START = re.compile(r"^(?:[#>*+=|~-]|\d+[.)])")


class Experience(BaseModel):
    id: int = Field(ge=1)
    section: Section
    text: str = Field(max_length=MAX_ENTRY_CHARS)
    source: str = Field(max_length=40)
    origin: Origin
    # Where the run was: "Phase 2 'Write'", a task's text (bounded like the entry).
    where: str = Field(default="", max_length=MAX_ENTRY_CHARS)
    at: datetime
    # When it was (last) recorded: the session and the todo list's generation. Shown in the prompt from the
    # next phase start or session start on (see the module's docstring).
    session: int = Field(default=0, ge=0)
    generation: int = Field(default=0, ge=0)
    times: int = Field(default=1, ge=1)


class ExperienceState(BaseModel):
    """The record: entries oldest first (a repeated entry moves to the end), the next id, how many were dropped."""

    entries: list[Experience] = Field(default_factory=list, max_length=2 * MAX_ENTRIES_PER_ORIGIN)
    next_id: int = Field(default=1, ge=1)
    dropped: int = Field(default=0, ge=0)


def clean_entry(text: str, limit: int = MAX_ENTRY_CHARS) -> str:
    """``text`` as one safe line: control and format characters escaped, lines joined, at most ``limit``."""
    return safe_text(_SPACES.sub(" ", text).strip(), one_line=True, join=True, limit=limit).strip()


def markdown_line(text: str) -> str:
    """An entry's text as the content of one bullet: nothing in it opens a block, a comment or a code span that
    would swallow the lines after it, and a backslash stays a backslash."""
    out = text.replace("\\", "\\\\").replace("`", "\\`").replace("<", "\\<").replace("[", "\\[")
    if _BLOCK_START.match(out):
        out = "\\" + out
    return out


def _key(section: str, text: str, origin: str) -> str:
    """What makes two entries the same: the agent's by their words; the harness's with numbers ignored too
    (a stuck pattern reported at 4, 8, 12 repeats is one experience)."""
    t = text.casefold()
    if origin == "harness":
        t = _DIGITS.sub("#", t)
    return f"{section}\x00{t}"


class ExperienceLog:
    """The record's rules; reports its changes to the sink (the Runtime) and its events to the stream."""

    def __init__(self, state: ExperienceState | None = None, events: EventStream | None = None,
                 sink: StateSink | None = None) -> None:
        self.state = state or ExperienceState()
        self.events = events
        self.sink: StateSink = sink or NullSink()
        self._prompt_cache: tuple[tuple[int, int, int, int], str] | None = None
        self._file_cache: tuple[tuple[int, int], str] | None = None
        self._version = 0

    def __len__(self) -> int:
        return len(self.state.entries)

    # -- recording ----------------------------------------------------------------------------------
    def record(self, section: Section, text: str, *, source: str, now: datetime, session: int = 0,
               generation: int = 0, where: str = "") -> Experience | None:
        """Add an entry (or move the same one to the end, counted); None if ``text`` has nothing to record."""
        clean = clean_entry(text)
        if not clean:
            return None
        origin: Origin = "agent" if source == "agent" else "harness"
        place = clean_entry(where, 120)
        st = self.state
        key = _key(section, clean, origin)
        same = next((e for e in st.entries if e.origin == origin and _key(e.section, e.text, e.origin) == key), None)
        if same is not None:
            st.entries.remove(same)
            entry = same.model_copy(update={"text": clean, "where": place or same.where, "at": now, "source": source,
                                            "session": session, "generation": generation, "times": same.times + 1})
        else:
            entry = Experience(id=st.next_id, section=section, text=clean, source=source, origin=origin, where=place,
                               at=now, session=session, generation=generation)
            st.next_id += 1
        st.entries.append(entry)
        self._prune(origin)
        self._version += 1
        self.sink.changed("experiences")
        if self.events is not None:
            from console.engine import events as ev

            self.events.emit(ev.ExperienceRecorded, entry_id=entry.id, section=section, text=entry.text,
                             source=source, where=entry.where, times=entry.times)
        return entry

    def _prune(self, origin: Origin) -> None:
        st = self.state
        mine = [e for e in st.entries if e.origin == origin]
        extra = len(mine) - MAX_ENTRIES_PER_ORIGIN
        if extra > 0:
            gone = {id(e) for e in mine[:extra]}
            st.entries = [e for e in st.entries if id(e) not in gone]
            st.dropped += extra

    # -- the file ---------------------------------------------------------------------------------------
    def render_file(self) -> str:
        """experiences.md: seed 000's title and three sections, each entry one bullet, oldest first."""
        key = (self._version, len(self.state.entries))
        if self._file_cache is not None and self._file_cache[0] == key:
            return self._file_cache[1]
        out = ["# Experiences", "",
               "<!-- Kept by the harness from the run's rewinds, stuck detections and record_experience calls. "
               "Read-only for the agent: record an entry with record_experience(section, text). -->"]
        for section in SECTIONS:
            out += ["", f"## {SECTION_TITLES[section]}"]
            items = [e for e in self.state.entries if e.section == section]
            out += [_bullet(e) for e in items] or ["- (none yet)"]
        if self.state.dropped:
            out += ["", f"_{self.state.dropped} older entries were dropped (at most {MAX_ENTRIES_PER_ORIGIN} are kept "
                        "from the agent and from the harness each)._"]
        text = "\n".join(out) + "\n"
        self._file_cache = (key, text)
        return text

    # -- the prompt -------------------------------------------------------------------------------------
    def shown(self, session: int, generation: int) -> list[Experience]:
        """The entries the prompt may show now: those recorded before the current phase or session started."""
        return [e for e in self.state.entries if (e.session, e.generation) != (session, generation)]

    def prompt_block(self, session: int, generation: int) -> str:
        """The newest shown entries, grouped by section, within PROMPT_TOKENS; "" when there are none."""
        key = (session, generation, self._version, len(self.state.entries))
        if self._prompt_cache is not None and self._prompt_cache[0] == key:
            return self._prompt_cache[1]
        text = render_prompt(self.shown(session, generation))
        self._prompt_cache = (key, text)
        return text


def _bullet(e: Experience) -> str:
    extra = []
    if e.where:
        extra.append(markdown_line(e.where))
    extra.append(e.source)
    if e.times > 1:
        extra.append(f"seen {e.times} times")
    return f"- {markdown_line(e.text)} _({'; '.join(extra)})_"


def render_prompt(candidates: Iterable[Experience]) -> str:
    """The block for Layer 2: the newest candidates that fit PROMPT_TOKENS (at most PROMPT_ENTRIES), grouped."""
    pool = list(candidates)
    if not pool:
        return ""
    picked: list[Experience] = []
    lines_for: dict[int, str] = {}
    # The fixed parts: the title line and up to three section headings.
    head_chars = 120 + 3 * 24
    used = head_chars
    for e in reversed(pool):
        if len(picked) >= PROMPT_ENTRIES:
            break
        where = f" [{safe_text(e.where, one_line=True, limit=60)}]" if e.where else ""
        line = f"- {safe_text(e.text, one_line=True, limit=PROMPT_ENTRY_CHARS)}{where}"
        if estimate_text("x" * (used + len(line) + 1)) > PROMPT_TOKENS:
            break
        used += len(line) + 1
        picked.append(e)
        lines_for[e.id] = line
    if not picked:
        return ""
    # Counted from the candidates only: the block must not change when an entry is recorded mid-phase.
    rest = len(pool) - len(picked)
    tail = f"; {rest} older in {FILE_NAME}, read it for all" if rest > 0 else ""
    out = [f"{PROMPT_TITLE} (from {FILE_NAME}: the newest {len(picked)}{tail}). Do not repeat what failed:"]
    chosen = {e.id for e in picked}
    for section in SECTIONS:
        items = [lines_for[e.id] for e in pool if e.id in chosen and e.section == section]
        if items:
            out.append(f"{SECTION_TITLES[section]}:")
            out += items
    return "\n".join(out)
