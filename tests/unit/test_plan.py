from __future__ import annotations

import pytest

from console.engine.plan import PlanError, load_plan, parse_plan, validate_plan

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
    with pytest.raises(PlanError, match="does not exist yet"):
        load_plan(tmp_path / "main_plan.md")
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
