from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.engine.plan import (
    MAX_LINE_CHARS,
    MAX_PHASE_DIGITS,
    MAX_PLAN_CHARS,
    MAX_PLAN_LINES,
    PlanError,
    _strip_markers,
    parse_plan,
    validate_plan,
)
from tests.conftest import cpu_limit
from tests.sweeps import examples

SEED_PLAN = """\
# Execution Plan

## Overview
[Brief description of the task and approach]

## Phase 1: Document Analysis ✓ COMPLETE
- [x] Extract document structure
- [x] Identify key sections
- [x] Categorize content types

## Phase 2: Requirement Extraction ← CURRENT
- [ ] Process section 1-3
- [ ] Process section 4-6
- [ ] Consolidate findings

## Phase 3: Validation & Integration
- [ ] Validate against schema
- [ ] Check for duplicates
- [ ] Integrate into graph

## Phase 4: Final Review
- [ ] Generate summary report
- [ ] Call job_complete()
"""


def test_parses_the_seed_example() -> None:
    plan = parse_plan(SEED_PLAN)
    assert plan.title == "Execution Plan"
    assert [p.name for p in plan.phases] == ["Document Analysis", "Requirement Extraction",
                                             "Validation & Integration", "Final Review"]
    assert [p.status for p in plan.phases] == ["complete", "current", "pending", "pending"]
    assert plan.current_phase().name == "Requirement Extraction"
    assert plan.phases[1].step_texts == ["Process section 1-3", "Process section 4-6", "Consolidate findings"]


def test_render_round_trips_byte_for_byte() -> None:
    assert parse_plan(SEED_PLAN).render() == SEED_PLAN


def test_mark_complete_and_current_touch_only_their_lines() -> None:
    plan = parse_plan(SEED_PLAN + "\nSome trailing hand-written note.\n")
    plan.mark_complete(plan.phases[1])
    plan.mark_current(plan.phases[2])
    text = plan.render()
    assert "## Phase 2: Requirement Extraction ✓ COMPLETE" in text
    assert "- [x] Consolidate findings" in text
    assert "## Phase 3: Validation & Integration ← CURRENT" in text
    assert "Some trailing hand-written note." in text
    assert text.count("← CURRENT") == 1
    again = parse_plan(text)
    assert [p.status for p in again.phases] == ["complete", "complete", "current", "pending"]


@pytest.mark.parametrize(
    "heading, name, complete, current",
    [
        ("## Phase 2: Extraction ✓ COMPLETE", "Extraction", True, False),
        ("## Phase 2 - Extraction (complete)", "Extraction", True, False),
        ("### Phase 2. Extraction [DONE]", "Extraction", True, False),
        ("## Phase 2: Extraction ✅", "Extraction", True, False),
        ("## Phase 2: Extraction <- CURRENT", "Extraction", False, True),
        ("## phase 2 — Extraction (current)", "Extraction", False, True),
        ("## Phase 2: Review what is done", "Review what is done", False, False),
        ("## Phase 2", "Phase 2", False, False),
    ],
)
def test_tolerates_hand_edited_headings(heading: str, name: str, complete: bool, current: bool) -> None:
    plan = parse_plan(f"# Plan\n\n{heading}\n* [ ] a step\n")
    (phase,) = plan.phases
    assert (phase.name, phase.marked_complete, phase.marked_current) == (name, complete, current)


def test_checkbox_and_bullet_variants() -> None:
    plan = parse_plan(
        "## Phase 1: A\n1. [x] one\n2) [ ] two\n  - [X] three\n+ [✓] four\n\n## Phase 2: B\n- plain\n- bullets\n"
    )
    assert [(s.text, s.done) for s in plan.phases[0].steps] == [("one", True), ("two", False), ("three", True),
                                                                ("four", True)]
    assert plan.phases[1].step_texts == ["plain", "bullets"]


def test_malformed_plans_raise_actionable_errors(tmp_path) -> None:
    with pytest.raises(PlanError, match=r"no phases.*## Phase 1"):
        validate_plan(parse_plan("# Plan\n\nJust some prose, no phases.\n"))
    with pytest.raises(PlanError, match="has no steps"):
        validate_plan(parse_plan("# Plan\n## Phase 1: Empty\n\n## Phase 2: Full\n- [ ] x\n"))


def test_size_advice() -> None:
    steps = lambda n: "\n".join(f"- [ ] s{i}" for i in range(n))  # noqa: E731
    plan = parse_plan(f"## Phase 1: Tiny\n{steps(2)}\n## Phase 2: Fine\n{steps(8)}\n## Phase 3: Huge\n{steps(25)}\n")
    advice = plan.size_advice()
    assert len(advice) == 2
    assert "Phase 1 'Tiny' has 2 steps: too small" in advice[0]
    assert "Phase 3 'Huge' has 25 steps: too large" in advice[1]


# -- untrusted text: linear time, bounded work, never an exception ------------------------------------------

ADVERSARIAL_LINES = [
    "## Phase 1: Name" + " " * 2500 + "x",  # the 40-second heading of the old regex parser
    "# a" + " " * 5000 + "b",
    "## Phase 1: Name" + " " * 5000 + "COMPLETE" + " " * 5000 + "!",
    "## Phase 1: Name ←" + " " * 5000 + "x",
    "## Phase 1: Name [" + " " * 5000 + "done",
    "#" * 5000,
    "#" * 5000 + "x",
    "# " + "#" * 5000 + " x",
    "-" * 5000,
    "- " + "-" * 5000,
    "- [ ] a" + " " * 5000 + "!",
    "- a" + "\t" * 5000 + "!",
    "1. [x] " + "[" * 5000,
    "[" * 5000,
    " " * 5000 + "!",
    "\t" * 5000 + "!",
    " \t" * 2500 + "!",
    "# \t#" * 1250,
    "- [ ] " * 800,
    "## Phase " + "9" * 5000 + ": Big",  # int() of 5,000 digits raised ValueError (the 4,300-digit limit)
    "## Phase 1234567: Seven digits",
    "<" + "-" * 5000 + " current",
    "✓ " * 2500,
    "COMPLETE " * 600,
    "(done) " * 700,
]


@pytest.mark.parametrize("line", ADVERSARIAL_LINES, ids=lambda s: f"{s[:12]!r}x{len(s)}")
def test_adversarial_lines_parse_fast(line: str) -> None:
    text = f"# Plan\n\n## Phase 1: Real\n- [ ] a step\n{line}\n- [ ] b step\n{line}\n"
    with cpu_limit(0.25):  # CPU, not the wall clock: a linear parse of these takes under a millisecond
        plan = parse_plan(text)
    assert plan.render() == text  # every line kept verbatim
    assert plan.phases[0].name == "Real"
    assert all(p.number < 10**MAX_PHASE_DIGITS for p in plan.phases)


@pytest.mark.parametrize("digits", [7, 4000, 5000])
def test_a_phase_number_over_6_digits_is_not_a_phase(digits: int) -> None:
    plan = parse_plan(f"## Phase 1: A\n- [ ] x\n## Phase {'9' * digits}: B\n- [ ] y\n## Phase 123456: C\n- [ ] z\n")
    assert [(p.number, p.name) for p in plan.phases] == [(1, "A"), (123456, "C")]
    # A plain heading ends phase 1; a line over MAX_LINE_CHARS is not even a heading.
    assert plan.phases[0].step_texts == (["x"] if digits < MAX_LINE_CHARS else ["x", "y"])


def test_long_lines_are_plain_text_but_kept() -> None:
    long_step = "- [ ] " + "x" * MAX_LINE_CHARS
    long_heading = "## Phase 2: " + "y" * MAX_LINE_CHARS
    text = f"## Phase 1: A\n- [ ] short\n{long_step}\n{long_heading}\n- [ ] after\n"
    plan = parse_plan(text)
    assert [p.name for p in plan.phases] == ["A"]
    assert plan.phases[0].step_texts == ["short", "after"]
    plan.mark_complete(plan.phases[0])
    assert long_step in plan.render() and long_heading in plan.render()
    at_limit = "- [ ] " + "z" * (MAX_LINE_CHARS - 6)
    assert parse_plan(f"## Phase 1: A\n{at_limit}\n").phases[0].step_texts == ["z" * (MAX_LINE_CHARS - 6)]


def test_only_the_first_lines_and_characters_are_parsed() -> None:
    filler = "\n".join(f"note {i}" for i in range(MAX_PLAN_LINES))
    text = f"## Phase 1: A\n- [ ] a\n{filler}\n## Phase 2: Late\n- [ ] b\n"
    plan = parse_plan(text)
    assert [p.name for p in plan.phases] == ["A"]
    assert plan.render() == text
    big = "x" * (MAX_LINE_CHARS - 1)
    lines = (MAX_PLAN_CHARS // MAX_LINE_CHARS) + 1
    text = "## Phase 1: A\n- [ ] a\n" + f"{big}\n" * lines + "## Phase 2: Late\n- [ ] b\n"
    assert [p.name for p in parse_plan(text).phases] == ["A"]


def test_a_large_plan_parses_in_linear_time() -> None:
    phase = "## Phase {n}: Work " + " " * 200 + "\n" + "".join(f"- [ ] step {i}" + " " * 300 + "\n" for i in range(10))
    text = "# Plan\n" + "".join(phase.format(n=n) for n in range(1, 300))
    with cpu_limit(1.0):  # about 25 ms of CPU, linear
        plan = parse_plan(text)
    assert len(plan.phases) == 299 and all(len(p.steps) == 10 for p in plan.phases)


# -- the string-method parser recognises exactly what the regular expressions did ---------------------------
# The old parser, kept here as the oracle: on short lines (where its backtracking does not matter) the new one
# must agree with it on every heading, marker, checkbox and bullet spelling.

_OLD_HEADING = re.compile(r"^(?P<hashes>#{1,4})\s*(?P<body>.*?)\s*#*\s*$")
_OLD_PHASE = re.compile(r"^phase\s+(?P<num>\d+)\s*(?:[:.)\-–—]\s*)?(?P<name>.*)$", re.IGNORECASE)
_OLD_COMPLETE = re.compile(
    r"\s*(?:(?:✓|✔|✅)\s*(?:(?i:complete|completed|done))?"
    r"|[\[(]\s*(?i:complete|completed|done)\s*[\])]\s*(?:✓|✔|✅)?"
    r"|(?:COMPLETE|COMPLETED|DONE)\s*(?:✓|✔|✅)?)\s*$"
)
_OLD_CURRENT = re.compile(
    r"\s*(?:(?:←|<-+|⬅)\s*(?i:current|in progress)?|[\[(]\s*(?i:current|in progress)\s*[\])]"
    r"|CURRENT|IN PROGRESS)\s*$"
)
_OLD_CHECKBOX = re.compile(
    r"^(?P<indent>\s*)(?P<bullet>[-*+]|\d+[.)])\s+\[(?P<mark>[ xX✓✔])\]\s*(?P<text>.*?)\s*$"
)
_OLD_BULLET = re.compile(r"^(?P<indent>\s*)(?P<bullet>[-*+]|\d+[.)])\s+(?P<text>\S.*?)\s*$")


def _old_strip_markers(name: str) -> tuple[str, bool, bool]:
    complete = current = False
    for _ in range(3):
        m = _OLD_COMPLETE.search(name)
        if m and name[: m.start()].strip():
            complete = True
            name = name[: m.start()]
            continue
        m = _OLD_CURRENT.search(name)
        if m and name[: m.start()].strip():
            current = True
            name = name[: m.start()]
            continue
        break
    return name.strip(" -–—:"), complete, current


def _old_parse(text: str) -> tuple:
    lines = text.splitlines()
    phases: list[list] = []
    title = ""
    current: list | None = None
    bullets: dict[int, list] = {}
    for i, line in enumerate(lines):
        h = _OLD_HEADING.match(line)
        if h and line.lstrip().startswith("#"):
            level = len(h["hashes"])
            pm = _OLD_PHASE.match(h["body"])
            if pm:
                name, complete, cur = _old_strip_markers(pm["name"])
                current = [int(pm["num"]), name or f"Phase {pm['num']}", i, level, complete, cur, []]
                phases.append(current)
                continue
            if level == 1 and not title:
                title = h["body"]
            if current is not None and level <= current[3]:
                current = None
            continue
        if current is None:
            continue
        cb = _OLD_CHECKBOX.match(line)
        if cb:
            if cb["text"].strip():
                current[6].append((cb["text"].strip(), cb["mark"] != " ", i, True))
            continue
        b = _OLD_BULLET.match(line)
        if b:
            bullets.setdefault(id(current), []).append((b["text"].strip(), False, i, False))
    for p in phases:
        if not p[6] and id(p) in bullets:
            p[6] = bullets[id(p)]
    return title, [(*p[:6], p[6]) for p in phases]


def _new_parse(text: str) -> tuple:
    plan = parse_plan(text)
    return plan.title, [(p.number, p.name, p.heading_line, p.level, p.marked_complete, p.marked_current,
                         [(s.text, s.done, s.line, s.checkbox) for s in p.steps]) for p in plan.phases]


_PREFIXES = ["", "#", "##", "####", "#####", " #", "#\t", "- ", "* ", "+ ", "1. ", "12) ", "  - [x] ", "- [ ]",
             "- [✓] ", "- [y] ", "-", "1.5 ", "١. ", "\t* [X]"]
_HEADS = ["Phase ", "phase\t", "PHASE  ", "Phaſe ", "Phases ", "Phase", "phase 1", "Phase 12: ", "Phase 3 - ",
          "Phase 123456 ", "Phase ١ ", "Phase 4) ", "Phase 5—"]
_TOKENS = ["Name", " ", "\t", "✓", "✔", "✅", "COMPLETE", "COMPLETED", "complete", "Done", "DONE", "(", ")", "[", "]",
           "←", "⬅", "<", "-", "--", "current", "CURRENT", "in progress", "IN PROGRESS", "İn progress", "ınprogress",
           "#", "##", ":", "—", "–", "x", "a b", "\u00a0", "\x1f", "\u212a"]
_line = st.builds(
    lambda pre, head, toks: pre + head + "".join(toks),
    st.sampled_from(_PREFIXES),
    st.one_of(st.just(""), st.sampled_from(_HEADS)),
    st.lists(st.sampled_from(_TOKENS), max_size=6),
)


@pytest.mark.sweep
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_line, min_size=1, max_size=8))
def test_agrees_with_the_regex_parser_on_structured_lines(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert _new_parse(text) == _old_parse(text)
    for line in lines:
        assert _strip_markers(line) == _old_strip_markers(line)


@pytest.mark.sweep
@settings(max_examples=examples(400), deadline=None)
@given(st.text(alphabet=" \t#-*+[](){}.:)–—0123456789xXaPhsecompltdnurgiCOMPLETDNURGI✓✔✅←⬅<\n", max_size=60))
def test_agrees_with_the_regex_parser_on_random_text(text: str) -> None:
    assert _new_parse(text) == _old_parse(text)


def test_mark_complete_rewrites_checkboxes_like_before() -> None:
    plan = parse_plan("## Phase 1: A\n  * [ ]   spaced step  \n3) [ ] numbered\n- [x] done\n")
    plan.mark_complete(plan.phases[0])
    assert plan.render() == "## Phase 1: A ✓ COMPLETE\n  * [x] spaced step\n3) [x] numbered\n- [x] done\n"
