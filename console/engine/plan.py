"""main_plan.md: the strategic tier of two-tier planning (seed 000).

The plan is written by the agent and sometimes edited by hand, so the parser
is tolerant (several heading and marker spellings, numbered or bulleted
checkboxes) and the model is line-based: marking a phase complete rewrites
only its heading and checkbox lines and keeps every other line verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

MIN_PHASE_STEPS = 5
MAX_PHASE_STEPS = 20

COMPLETE_MARK = "✓ COMPLETE"
CURRENT_MARK = "← CURRENT"

# Limits of the parser. main_plan.md is written by the agent, so its text is untrusted: the parser uses
# string methods only (no regular expression, so nothing can backtrack) and looks at a bounded amount of it.
# The plan keeps every line verbatim whatever its length; these bound only what is parsed for structure.
MAX_PLAN_CHARS = 1 << 20  # characters scanned for phases and steps (1 MiB of ASCII text)
MAX_PLAN_LINES = 20_000  # lines scanned; phases or steps after either cap are not seen
MAX_LINE_CHARS = 4096  # a longer line is plain text: never a heading, a checkbox or a bullet
MAX_PHASE_DIGITS = 6  # "Phase 1234567" is a plain heading, not phase 1,234,567

# Heading and step syntax (the tolerant part; Plan._rewrite_heading always writes the canonical form):
#   heading   1-4 '#', then the text; trailing '#'s and spaces are dropped ("## Phase 2: Name ##")
#   phase     "Phase N" (any case), optionally followed by one of : . ) - – — then the name
#   checkbox  indent, a bullet (- * + or "12." / "12)"), space, "[ ]" or "[x]" / "[X]" / "[✓]" / "[✔]", the text
#   bullet    indent, a bullet, space, the text: the steps of a phase written without checkboxes
_PHASE_WORD = "phase"
_PHASE_SEPARATORS = ":.)-–—"
_BULLETS = "-*+"
_NUMBER_ENDS = ".)"
_BOX_MARKS = " xX✓✔"
# Markers at the end of a phase name are recognised with a symbol, in brackets, or as an upper-case word,
# so a phase honestly named "Review what is done" is not mistaken for a finished one:
#   complete  "✓" / "✔" / "✅" optionally followed by complete|completed|done (any case);
#             "[done]" or "(complete)" (any case, [ or ( with ] or )) optionally followed by a symbol;
#             COMPLETE / COMPLETED / DONE (upper case) optionally followed by a symbol
#   current   "←" / "⬅" / "<-" (any number of '-') optionally followed by current|in progress (any case);
#             "[current]" or "(in progress)" (any case); CURRENT / IN PROGRESS (upper case)
_COMPLETE_SYMBOLS = ("✓", "✔", "✅")
_COMPLETE_WORDS = ("completed", "complete", "done")
_CURRENT_ARROWS = ("←", "⬅")
_CURRENT_WORDS = ("current", "in progress")
_OPEN = ("[", "(")
_CLOSE = ("]", ")")
# Characters that compare equal to an ASCII letter of the words above when case is ignored (as re's
# IGNORECASE does): the long s, the dotted and dotless i, the Kelvin sign.
_FOLD = str.maketrans({"ſ": "s", "İ": "i", "ı": "i", "\u212a": "k"})


def _fold(text: str) -> str:
    return text.translate(_FOLD).lower()


def _word_start(text: str, words: tuple[str, ...], *, any_case: bool) -> int | None:
    """The index where the one of ``words`` that ``text`` ends with starts, or None. ``words`` are lower case;
    with ``any_case`` the match ignores case, otherwise only the upper-case spelling counts."""
    for word in words:
        tail = text[-len(word):] if len(text) >= len(word) else ""
        if tail and (_fold(tail) == word if any_case else tail == word.upper()):
            return len(text) - len(word)
    return None


def _bracketed_start(text: str, words: tuple[str, ...]) -> int | None:
    """Where "[word]" / "(word)" (spaces allowed inside) at the end of ``text`` starts."""
    if not text.endswith(_CLOSE):
        return None
    inner = text[:-1].rstrip()
    w = _word_start(inner, words, any_case=True)
    if w is None:
        return None
    before = inner[:w].rstrip()
    return len(before) - 1 if before.endswith(_OPEN) else None


def _arrow_start(text: str) -> int | None:
    """Where the arrow at the end of ``text`` ("←", "⬅", "<-", "<---") starts."""
    if text.endswith(_CURRENT_ARROWS):
        return len(text) - 1
    if text.endswith("-"):
        shaft = text.rstrip("-")
        if shaft.endswith("<"):
            return len(shaft) - 1
    return None


def _complete_start(text: str) -> int | None:
    """Where the complete marker ``text`` (no trailing whitespace) ends with starts; the earliest if several."""
    found: list[int] = []
    if text.endswith(_COMPLETE_SYMBOLS):
        found.append(len(text) - 1)  # "✓"
        before = text[:-1].rstrip()
        for start in (_bracketed_start(before, _COMPLETE_WORDS),  # "(done) ✓"
                      _word_start(before, _COMPLETE_WORDS, any_case=False)):  # "DONE ✓"
            if start is not None:
                found.append(start)
    else:
        w = _word_start(text, _COMPLETE_WORDS, any_case=True)
        if w is not None:
            before = text[:w].rstrip()
            if before.endswith(_COMPLETE_SYMBOLS):
                found.append(len(before) - 1)  # "✓ done"
            if _word_start(text, _COMPLETE_WORDS, any_case=False) == w:
                found.append(w)  # "DONE"
        start = _bracketed_start(text, _COMPLETE_WORDS)  # "[done]"
        if start is not None:
            found.append(start)
    return min(found, default=None)


def _current_start(text: str) -> int | None:
    """Where the current marker ``text`` (no trailing whitespace) ends with starts; the earliest if several."""
    found: list[int] = []
    arrow = _arrow_start(text)  # "←"
    if arrow is not None:
        found.append(arrow)
    w = _word_start(text, _CURRENT_WORDS, any_case=True)
    if w is not None:
        arrow = _arrow_start(text[:w].rstrip())  # "← current"
        if arrow is not None:
            found.append(arrow)
        if _word_start(text, _CURRENT_WORDS, any_case=False) == w:
            found.append(w)  # "CURRENT"
    start = _bracketed_start(text, _CURRENT_WORDS)  # "(in progress)"
    if start is not None:
        found.append(start)
    return min(found, default=None)


def _heading(line: str) -> tuple[int, str] | None:
    """(level, text) of a Markdown heading line; '#####' and deeper count as level 4 with the rest in the text."""
    if not line.startswith("#"):
        return None
    level = min(len(line) - len(line.lstrip("#")), 4)
    return level, line[level:].strip().rstrip("#").rstrip()


def _phase_heading(text: str) -> tuple[str, str] | None:
    """(number, rest) of a heading text "Phase N[sep] rest", or None."""
    if _fold(text[: len(_PHASE_WORD)]) != _PHASE_WORD:
        return None
    after_word = text[len(_PHASE_WORD):]
    rest = after_word.lstrip()
    if len(rest) == len(after_word):
        return None  # "Phases", "Phase1"
    digits = 0
    while digits < len(rest) and digits <= MAX_PHASE_DIGITS and rest[digits].isdecimal():
        digits += 1
    if not 1 <= digits <= MAX_PHASE_DIGITS:
        return None
    number, rest = rest[:digits], rest[digits:].lstrip()
    if rest[:1] and rest[0] in _PHASE_SEPARATORS:
        rest = rest[1:].lstrip()
    return number, rest


def _list_item(line: str) -> tuple[str, str, str] | None:
    """(indent, bullet, text after the bullet's spaces) of a list item line, or None."""
    body = line.lstrip()
    indent = line[: len(line) - len(body)]
    if not body:
        return None
    if body[0] in _BULLETS:
        bullet = body[0]
    else:
        digits = 0
        while digits < len(body) and body[digits].isdecimal():
            digits += 1
        if digits == 0 or body[digits: digits + 1] not in tuple(_NUMBER_ENDS):
            return None
        bullet = body[: digits + 1]
    after = body[len(bullet):]
    text = after.lstrip()
    if len(text) == len(after) or not text:
        return None  # "-x", "1.5", "- "
    return indent, bullet, text


def _checkbox(line: str) -> tuple[str, str, str, str] | None:
    """(indent, bullet, mark, text) of a checkbox line such as "  - [x] step"; the text is stripped."""
    item = _list_item(line)
    if item is None:
        return None
    indent, bullet, rest = item
    if len(rest) < 3 or rest[0] != "[" or rest[1] not in _BOX_MARKS or rest[2] != "]":
        return None
    return indent, bullet, rest[1], rest[3:].strip()


class PlanError(Exception):
    """The plan cannot be used; the message tells the agent how to fix it."""


@dataclass
class PlanStep:
    text: str
    done: bool
    line: int
    checkbox: bool


@dataclass
class PlanPhase:
    number: int
    name: str
    heading_line: int
    level: int
    marked_complete: bool
    marked_current: bool
    steps: list[PlanStep] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.marked_complete or (bool(self.steps) and all(s.done for s in self.steps))

    @property
    def status(self) -> Literal["complete", "current", "pending"]:
        if self.complete:
            return "complete"
        return "current" if self.marked_current else "pending"

    @property
    def step_texts(self) -> list[str]:
        return [s.text for s in self.steps]


@dataclass
class Plan:
    lines: list[str]
    phases: list[PlanPhase]
    title: str = ""

    # -- queries ---------------------------------------------------------------
    def phase(self, number: int) -> PlanPhase | None:
        """The phase at 1-based position ``number`` (positions, not heading numbers, are canonical)."""
        return self.phases[number - 1] if 1 <= number <= len(self.phases) else None

    def find(self, name: str) -> PlanPhase | None:
        """The phase with this name (case and spacing ignored), if exactly one has it."""
        key = " ".join(name.lower().split())
        hits = [p for p in self.phases if " ".join(p.name.lower().split()) == key]
        return hits[0] if len(hits) == 1 else None

    def position(self, phase: PlanPhase) -> int:
        return self.phases.index(phase) + 1

    def current_phase(self) -> PlanPhase | None:
        for p in self.phases:
            if p.marked_current and not p.complete:
                return p
        return self.next_incomplete()

    def next_incomplete(self, after: int = 0) -> PlanPhase | None:
        for p in self.phases[after:]:
            if not p.complete:
                return p
        return None

    @property
    def all_complete(self) -> bool:
        return bool(self.phases) and all(p.complete for p in self.phases)

    def size_advice(self) -> list[str]:
        advice = []
        for i, p in enumerate(self.phases, 1):
            n = len(p.steps)
            if n < MIN_PHASE_STEPS:
                advice.append(
                    f"Phase {i} '{p.name}' has {n} step{'s' if n != 1 else ''}: too small, "
                    f"combine it with an adjacent phase (aim for {MIN_PHASE_STEPS}-{MAX_PHASE_STEPS})."
                )
            elif n > MAX_PHASE_STEPS:
                advice.append(
                    f"Phase {i} '{p.name}' has {n} steps: too large, break it into several phases "
                    f"of {MIN_PHASE_STEPS}-{MAX_PHASE_STEPS} steps."
                )
        return advice

    # -- edits (line-based, everything else kept verbatim) --------------------
    def mark_complete(self, phase: PlanPhase) -> None:
        phase.marked_complete = True
        phase.marked_current = False
        self._tick(phase, True)
        self._rewrite_heading(phase)

    def reopen(self, phase: PlanPhase) -> None:
        """Clear a phase's completion marks (its "✓ COMPLETE" and ticked boxes): the harness never closed it."""
        phase.marked_complete = False
        self._tick(phase, False)
        self._rewrite_heading(phase)

    def _tick(self, phase: PlanPhase, done: bool) -> None:
        for s in phase.steps:
            if s.done != done:
                s.done = done
                box = _checkbox(self.lines[s.line]) if s.checkbox else None
                if box is not None:
                    indent, bullet, _, text = box
                    self.lines[s.line] = f"{indent}{bullet} [{'x' if done else ' '}] {text}"

    def mark_current(self, phase: PlanPhase) -> None:
        for p in self.phases:
            if p.marked_current and p is not phase:
                p.marked_current = False
                self._rewrite_heading(p)
        phase.marked_current = True
        self._rewrite_heading(phase)

    def _rewrite_heading(self, phase: PlanPhase) -> None:
        marker = ""
        if phase.marked_complete:
            marker = f" {COMPLETE_MARK}"
        elif phase.marked_current:
            marker = f" {CURRENT_MARK}"
        self.lines[phase.heading_line] = (
            f"{'#' * phase.level} Phase {phase.number}: {phase.name}{marker}"
        )

    def render(self) -> str:
        return "\n".join(self.lines).rstrip("\n") + "\n"


def _strip_markers(name: str) -> tuple[str, bool, bool]:
    complete = current = False
    # Markers may be stacked or in either order ("Name ← CURRENT", "Name (done) ✓").
    for _ in range(3):
        core = name.rstrip()
        start = _complete_start(core)
        if start is not None and core[:start].strip():
            complete = True
            name = core[:start].rstrip()
            continue
        start = _current_start(core)
        if start is not None and core[:start].strip():
            current = True
            name = core[:start].rstrip()
            continue
        break
    return name.strip(" -–—:"), complete, current


def parse_plan(text: str) -> Plan:
    """The plan's structure. Every line is kept verbatim (``render`` gives the text back), but only the first
    MAX_PLAN_LINES lines and MAX_PLAN_CHARS characters are looked at, and a line longer than MAX_LINE_CHARS
    is plain text: the parse is linear in the text and bounded whatever the agent wrote."""
    lines = text.splitlines()
    phases: list[PlanPhase] = []
    title = ""
    current: PlanPhase | None = None
    plain_bullets: dict[int, list[PlanStep]] = {}
    budget = MAX_PLAN_CHARS
    for i, line in enumerate(lines[:MAX_PLAN_LINES]):
        budget -= len(line) + 1
        if budget < 0:
            break
        if len(line) > MAX_LINE_CHARS:
            continue
        h = _heading(line)
        if h is not None:
            level, body = h
            pm = _phase_heading(body)
            if pm is not None:
                num, rest = pm
                name, complete, cur = _strip_markers(rest)
                current = PlanPhase(
                    number=int(num),
                    name=name or f"Phase {num}",
                    heading_line=i,
                    level=level,
                    marked_complete=complete,
                    marked_current=cur,
                )
                phases.append(current)
                continue
            if level == 1 and not title:
                title = body
            if current is not None and level <= current.level:
                current = None
            continue
        if current is None:
            continue
        item = _list_item(line)
        if item is None:
            continue
        box = _checkbox(line)
        if box is not None:
            if box[3]:
                current.steps.append(PlanStep(box[3], box[2] != " ", i, True))
            continue
        plain_bullets.setdefault(id(current), []).append(PlanStep(item[2].rstrip(), False, i, False))
    # A phase written as plain bullets (no checkboxes) still has steps.
    for p in phases:
        if not p.steps and id(p) in plain_bullets:
            p.steps = plain_bullets[id(p)]
    return Plan(lines=lines, phases=phases, title=title)


def validate_plan(plan: Plan, name: str = "main_plan.md") -> Plan:
    if not plan.phases:
        raise PlanError(
            f"{name} has no phases. Each phase needs a heading like '## Phase 1: Document Analysis' "
            "followed by its steps as '- [ ] step' lines."
        )
    empty = [f"'{p.name}'" for p in plan.phases if not p.steps]
    if empty:
        raise PlanError(
            f"{name}: phase {', '.join(empty)} has no steps. Put the steps under each phase heading "
            "as '- [ ] step' lines."
        )
    return plan
