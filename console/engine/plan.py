"""main_plan.md: the strategic tier of two-tier planning (seed 000).

The plan is written by the agent and sometimes edited by hand, so the parser
is tolerant (several heading and marker spellings, numbered or bulleted
checkboxes) and the model is line-based: marking a phase complete rewrites
only its heading and checkbox lines and keeps every other line verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

MIN_PHASE_STEPS = 5
MAX_PHASE_STEPS = 20

COMPLETE_MARK = "✓ COMPLETE"
CURRENT_MARK = "← CURRENT"

_HEADING = re.compile(r"^(?P<hashes>#{1,4})\s*(?P<body>.*?)\s*#*\s*$")
_PHASE = re.compile(r"^phase\s+(?P<num>\d+)\s*(?:[:.)\-–—]\s*)?(?P<name>.*)$", re.IGNORECASE)
# Markers are recognised with a symbol, in brackets, or as an upper-case word, so a phase
# honestly named "Review what is done" is not mistaken for a finished one.
_COMPLETE = re.compile(
    r"\s*(?:(?:✓|✔|✅)\s*(?:(?i:complete|completed|done))?"
    r"|[\[(]\s*(?i:complete|completed|done)\s*[\])]\s*(?:✓|✔|✅)?"
    r"|(?:COMPLETE|COMPLETED|DONE)\s*(?:✓|✔|✅)?)\s*$"
)
_CURRENT = re.compile(
    r"\s*(?:(?:←|<-+|⬅)\s*(?i:current|in progress)?|[\[(]\s*(?i:current|in progress)\s*[\])]"
    r"|CURRENT|IN PROGRESS)\s*$"
)
_CHECKBOX = re.compile(
    r"^(?P<indent>\s*)(?P<bullet>[-*+]|\d+[.)])\s+\[(?P<mark>[ xX✓✔])\]\s*(?P<text>.*?)\s*$"
)
_BULLET = re.compile(r"^(?P<indent>\s*)(?P<bullet>[-*+]|\d+[.)])\s+(?P<text>\S.*?)\s*$")


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
        for s in phase.steps:
            if not s.done:
                s.done = True
                if s.checkbox:
                    self.lines[s.line] = _CHECKBOX.sub(
                        lambda m: f"{m['indent']}{m['bullet']} [x] {m['text']}", self.lines[s.line]
                    )
        self._rewrite_heading(phase)

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
        m = _COMPLETE.search(name)
        if m and name[: m.start()].strip():
            complete = True
            name = name[: m.start()]
            continue
        m = _CURRENT.search(name)
        if m and name[: m.start()].strip():
            current = True
            name = name[: m.start()]
            continue
        break
    return name.strip(" -–—:"), complete, current


def parse_plan(text: str) -> Plan:
    lines = text.splitlines()
    phases: list[PlanPhase] = []
    title = ""
    current: PlanPhase | None = None
    plain_bullets: dict[int, list[PlanStep]] = {}
    for i, line in enumerate(lines):
        h = _HEADING.match(line)
        if h and line.lstrip().startswith("#"):
            level = len(h["hashes"])
            body = h["body"]
            pm = _PHASE.match(body)
            if pm:
                name, complete, cur = _strip_markers(pm["name"])
                current = PlanPhase(
                    number=int(pm["num"]),
                    name=name or f"Phase {pm['num']}",
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
        cb = _CHECKBOX.match(line)
        if cb:
            text_ = cb["text"].strip()
            if text_:
                current.steps.append(PlanStep(text_, cb["mark"] != " ", i, True))
            continue
        b = _BULLET.match(line)
        if b:
            plain_bullets.setdefault(id(current), []).append(PlanStep(b["text"].strip(), False, i, False))
    # A phase written as plain bullets (no checkboxes) still has steps.
    for p in phases:
        if not p.steps and id(p) in plain_bullets:
            p.steps = plain_bullets[id(p)]
    return Plan(lines=lines, phases=phases, title=title)


def load_plan(path: Path) -> Plan:
    """Parse main_plan.md, raising :class:`PlanError` with an actionable message."""
    if not path.exists():
        raise PlanError(
            f"{path.name} does not exist yet. Write it with write_file: a '# Execution Plan' title, "
            "an '## Overview', then one '## Phase N: Name' section per phase with '- [ ] step' lines."
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PlanError(f"{path.name} is not UTF-8 text; rewrite it as Markdown.") from None
    return validate_plan(parse_plan(text), path.name)


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
