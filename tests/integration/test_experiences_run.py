"""experiences.md in whole runs: fed, in the next phase's prompt, read-only, and exact after a kill anywhere."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.experiences import PROMPT_TITLE
from console.engine.job import JobPaths
from console.engine.messages import ModelRequest
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider, ScriptedTurn
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import run_settings
from tests.integration.test_kill_points import enumerate_kills, work  # noqa: F401 (the fixture)
from tests.sweeps import Sweep

PLAN = ("# Plan\n\n## Phase 1: Collect\n" + "".join(f"- [ ] c{i}\n" for i in range(5))
        + "\n## Phase 2: Write\n" + "".join(f"- [ ] w{i}\n" for i in range(5)))
LESSON = "c0 is listed twice in the sources: check for duplicates first"
ISSUE = "c2 needs the other source"


def script() -> list[ScriptedTurn]:
    done = C(name="todo_complete")
    return [
        T(calls=[C(name="generate_workspace_summary"), done, done, done]),
        T(calls=[C(name="write_file", arguments={"path": "main_plan.md", "content": PLAN}), done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"c{i}" for i in range(5)]})]),
        T(calls=[C(name="record_experience", arguments={"section": "lesson", "text": LESSON}),
                 C(name="write_file", arguments={"path": "experiences.md", "content": "# mine now"}), done]),
        T(calls=[C(name="todo_rewind", arguments={"issue": ISSUE})]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"c{i}" for i in range(1, 6)]}),
                 C(name="read_file", arguments={"path": "experiences.md"}), done, done, done, done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": [f"w{i}" for i in range(5)]}),
                 C(name="record_experience", arguments={"section": "pattern", "text": "collect, then write"}),
                 C(name="write_file", arguments={"path": "out.md", "content": "# Out\n"}),
                 done, done, done, done, done]),
        T(calls=[C(name="todo_write", arguments={"todos": ["Verify all deliverables", "Call job_complete()"]}),
                 done, C(name="job_complete", arguments={"summary": "wrote out.md", "deliverables": ["out.md"],
                                                         "confidence": 0.9})]),
    ]


class Recording(ScriptedProvider):
    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> Iterator:  # type: ignore[override]
        self.requests.append(request)
        return super().stream(request)


def job(tmp_path: Path) -> Path:
    root = tmp_path / "job"
    root.mkdir()
    (root / "instructions.md").write_text("# Collect\n\nCollect c0..c5, then write out.md.\n")
    return root


def test_a_run_feeds_the_file_and_the_next_phases_prompt(tmp_path: Path) -> None:
    root = job(tmp_path)
    clock = FakeClock(step=0.001)
    provider = Recording(clock=clock, script=script())
    result = Supervisor(JobPaths(root), run_settings(), provider, clock=clock).run()
    assert result.outcome is not None
    blocks = [r.protected.split(PROMPT_TITLE, 1)[1] if PROMPT_TITLE in r.protected else "" for r in provider.requests]
    # Turns 1-6 are asked before any phase started after an entry: the lesson and the rewind's issue were
    # recorded in phase 1's first list, and turn 6 is asked while the rewind's transition is still open. Turn 6
    # installs the re-planned list (and finishes it): turn 7 carries both. The pattern, recorded in turn 7, is
    # there from turn 8, once the final list is installed.
    assert blocks[:6] == [""] * 6
    assert LESSON in blocks[6] and ISSUE in blocks[6] and "collect, then write" not in blocks[6]
    assert "collect, then write" in blocks[7] and LESSON in blocks[7]
    text = (root / "experiences.md").read_text()
    assert LESSON in text and ISSUE in text and "collect, then write" in text and "# mine now" not in text
    events = list(ev.read_events(root / ".console" / "events.jsonl"))
    refused = [e for e in events if isinstance(e, ev.ToolResult) and not e.ok and e.tool == "write_file"]
    assert refused and "the harness keeps it" in refused[0].content
    read = [e for e in events if isinstance(e, ev.ToolResult) and e.tool == "read_file"]
    assert read and read[0].ok and LESSON in read[0].content
    got = [(e.section, e.source) for e in events if isinstance(e, ev.ExperienceRecorded)]
    assert got == [("lesson", "agent"), ("failed", "rewind"), ("pattern", "agent")]
    state = json.loads((root / ".console" / "experiences.json").read_text())
    assert [e["text"] for e in state["entries"]] == [LESSON, ISSUE, "collect, then write"]


def test_a_resumed_run_keeps_them_and_puts_a_tampered_file_right(tmp_path: Path) -> None:
    root = job(tmp_path)
    clock = FakeClock(step=0.001)
    turns = script()
    Supervisor(JobPaths(root), run_settings(max_turns=5), ScriptedProvider(clock=clock, script=turns[:5]),
               clock=clock).run()
    assert ISSUE in (root / "experiences.md").read_text()
    (root / "experiences.md").write_text("# Experiences\n\nnothing to see\n")  # a command, a human, anything
    provider = Recording(clock=clock, script=turns[5:])
    result = Supervisor(JobPaths(root), run_settings(), provider, clock=clock).run()
    assert result.outcome is not None
    # Its first turn is asked while the rewind's transition is open; the next phase's first turn shows them.
    assert ISSUE in provider.requests[1].protected and LESSON in provider.requests[1].protected
    text = (root / "experiences.md").read_text()
    assert "nothing to see" not in text and text.count(ISSUE) == 1 and text.count(LESSON) == 1


@pytest.mark.sweep
def test_every_kill_point_of_a_run_with_experiences_resumes_to_the_same_end(
        work: Path, sweep: Sweep) -> None:  # noqa: F811
    """A kill anywhere (between a record and its commit, mid-write of experiences.md, after the commit and
    before the file) neither loses nor doubles an entry: the file, the events and the state end as without it."""
    base = work / "experiences"
    base.mkdir()
    (base / "instructions.md").write_text("# Collect\n\nCollect c0..c5, then write out.md.\n")
    failures = enumerate_kills(base, script(), work, sweep)
    assert not failures, "\n".join(failures)
    baseline = work / "baseline"
    assert (baseline / "experiences.md").read_text().count(ISSUE) == 1
    shutil.rmtree(baseline, ignore_errors=True)
