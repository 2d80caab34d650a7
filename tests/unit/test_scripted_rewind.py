"""A rewind brings a phase's steps back; the scripted demo model redoes none of the writing it already did."""

from __future__ import annotations

import re

from console.engine import events as ev
from console.engine.guardrails import GuardrailsConfig
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import run_settings

HEADING = re.compile(r"^## Lines (\d+)-(\d+) of docs/specification\.md$", re.MULTILINE)


def run(paths, clock, rewind_when=None, issue: str = "(test) re-plan this phase", **settings):
    """Run a job to its end; ``rewind_when(event)`` picks the moment of one operator rewind."""
    sup = Supervisor(paths, run_settings(**settings), ScriptedProvider(clock=clock), clock=clock)
    fired: list[ev.EventBase] = []

    def hook(e: ev.EventBase) -> None:
        if rewind_when is not None and not fired and rewind_when(e):
            fired.append(e)
            sup.rewind(issue)

    sup.subscribe(hook)
    result = sup.run()
    assert result.ok, result.detail
    assert rewind_when is None or fired, "the rewind never happened"
    return result


def texts(paths) -> list[str]:
    return [e.text for e in ev.read_events(paths.events) if isinstance(e, ev.AssistantMessage)]


def in_phase(name: str, done: int):
    return lambda e: (isinstance(e, ev.TodosChanged) and e.kind == "phase" and e.phase_name == name
                      and sum(i.done for i in e.items) == done)


def test_a_rewind_mid_extraction_leaves_each_section_once(make_job, clock) -> None:
    plain = make_job("requirements-extraction")
    run(plain, clock)
    expected = (plain.root / "requirements.md").read_text()
    assert len(HEADING.findall(expected)) == 14

    import shutil

    shutil.rmtree(plain.root)
    paths = make_job("requirements-extraction")
    run(paths, clock, in_phase("Requirement Extraction (part 1)", 3))
    assert list((paths.archive).glob("*rewind*.json")), "the phase was rewound"
    got = (paths.root / "requirements.md").read_text()
    headings = HEADING.findall(got)
    assert len(headings) == len(set(headings)) == 14  # every chunk, each exactly once
    assert got == expected
    # the three chunks done before the rewind came back and were found in the file, not appended again
    skipped = [t for t in texts(paths) if "already has the requirements of lines" in t]
    assert [t.split("lines ", 1)[1].split(";")[0] for t in skipped] == ["1-150", "151-300", "301-450"]
    section = got.split("## Lines 1501-1650 of docs/specification.md\n", 1)[1].split("\n## ", 1)[0]
    assert section.count("\n- ") == 28


def test_a_rewind_after_the_deliverables_are_written_writes_nothing_twice(make_job, clock) -> None:
    plain = make_job("quickstart")
    run(plain, clock)
    expected = {p: (plain.root / p).read_text() for p in ("action_items.md", "digest.md")}

    import shutil

    shutil.rmtree(plain.root)
    paths = make_job("quickstart")
    run(paths, clock, in_phase("Produce Deliverables", 2), issue="(test) check the digest again")
    assert list(paths.archive.glob("*rewind*.json"))
    for name, text in expected.items():
        assert (paths.root / name).read_text() == text
    said = texts(paths)
    assert "action_items.md already has '## Kickoff meeting, 2 March (notes/2026-03-02-kickoff.md)'; " \
           "not adding it twice." in said


def test_a_rewind_under_read_before_write_adds_the_changelog_section_once(make_job, clock) -> None:
    """The guardrails sample's policy: the insert is denied until CHANGELOG.md is read, then merged as text.
    Rewound after that, the step finds its section and leaves the file alone."""
    paths = make_job("guardrails")
    old = (paths.root / "CHANGELOG.md").read_text()
    guardrails = GuardrailsConfig.model_validate({"policies": [{"type": "read_before_write"}]})
    run(paths, clock, in_phase("Prepare the release", 3), guardrails=guardrails)
    events = list(ev.read_events(paths.events))
    assert any(isinstance(e, ev.ToolDenied) and e.tool == "edit_file" for e in events)
    assert list(paths.archive.glob("*rewind*.json"))
    changelog = (paths.root / "CHANGELOG.md").read_text()
    assert changelog.count("## 1.4.0") == 1 and changelog.count("## 1.3.0") == 1
    assert changelog.endswith(old.split("\n", 1)[1])
    assert (paths.root / "release_notes.md").read_text().count("## 1.4.0") == 1
