"""The scripted demo model on jobs it has never seen: it does what its recipes can, says plainly what it
could not do, never lists the job's inputs as deliverables, and its confidence reflects what it produced."""

from __future__ import annotations

import json

from console.engine import events as ev
from console.providers.scripted_writing import (
    NOT_DONE_MARK,
    insert_under_title,
    marker,
    not_done,
    not_done_path,
    recipe,
    write_target,
)

TRANSLATE = """# Translate the greeting

`greeting.txt` holds a short greeting in English. Translate it into French and write the translation to
`greeting_fr.txt`. Also write `notes.md` explaining any word choices.
"""

MEETING = """# Weekly meeting

The notes of the weekly meeting are in `meeting.md`. Read them and produce two files:

- `action_items.md`: every action item of the meeting, as a checklist
- `plan_fr.md`: the meeting's decisions translated into French
"""

MEETING_NOTES = """# Weekly meeting, 3 June

Attendees: Ana, Bo. The team reviewed the release.

- Action: Ana to update the changelog.
- Action item: Bo to book the demo room.
"""


def test_a_job_it_cannot_do_gets_notes_saying_so_and_confidence_zero(make_job, run_job) -> None:
    paths = make_job(instructions=TRANSLATE, files={"greeting.txt": "Hello, dear friends.\n"})
    _, result = run_job(paths)
    # A job it cannot do: it gives up (seed 000's unrecoverable case), honestly, and the operator is asked.
    assert (result.ended, result.reason.value) == ("gave_up", "gave_up"), result.detail
    out = result.outcome
    assert out.confidence == 0.0 and out.gave_up
    assert out.deliverables == []  # nothing real was produced: nothing is claimed
    assert "could not do this job" in out.summary and "no AI" in out.summary and "produced nothing real" in out.summary
    assert "greeting_fr.txt, notes.md" in out.summary
    fr = (paths.root / "greeting_fr.txt").read_text()
    assert fr.startswith(NOT_DONE_MARK) and "'translat" in fr.splitlines()[0]
    assert "Translate it into French and write the translation to `greeting_fr.txt`." in fr
    assert "Hello" not in fr  # no copy of the input posing as a translation
    notes = (paths.root / "notes.md").read_text()
    assert notes.startswith("# Notes: not done\n") and NOT_DONE_MARK in notes and "'explaining'" in notes
    assert (paths.root / "greeting.txt").read_text() == "Hello, dear friends.\n"  # the input is untouched
    workspace = json.loads((paths.state / "workspace.json").read_text())
    assert not any(a.startswith(("Done:", "Wrote")) for a in workspace["accomplishments"])
    assert [n for n in workspace["notes"] if n.startswith("Not done: ")] == [
        "Not done: greeting_fr.txt (the job asks for 'translate', which a fixed script cannot do; "
        "scripted demo model (deterministic, no AI))",
        "Not done: notes.md (the job asks for 'explaining', which a fixed script cannot do; "
        "scripted demo model (deterministic, no AI))",
    ]


def test_part_done_lowers_the_confidence_and_claims_only_the_real_work(make_job, run_job) -> None:
    paths = make_job(instructions=MEETING, files={"meeting.md": MEETING_NOTES})
    _, result = run_job(paths)
    # Half done: its confidence (0.42) is below low_confidence (0.5), so it is the agent giving up, not a completion.
    assert result.ended == "gave_up" and not result.ok, result.detail
    out = result.outcome
    assert out.deliverables == ["action_items.md"]
    assert 0 < out.confidence < 0.85 and out.confidence == round(0.85 / 2, 2)
    assert "produced action_items.md" in out.summary and "could not do plan_fr.md" in out.summary
    actions = (paths.root / "action_items.md").read_text()
    assert "- [ ] Ana to update the changelog." in actions and "- [ ] Bo to book the demo room." in actions
    assert (paths.root / "plan_fr.md").read_text().startswith("# Plan Fr: not done\n")


def test_the_jobs_input_files_are_never_deliverables(make_job, run_job) -> None:
    # report.md is named on a line with no "input"/"read" word: the old model listed it as a deliverable.
    instructions = "# Digest a report\n\nMake `summary.md` a digest of `report.md`.\n"
    report = "# Q2 report\n\nSales grew. Costs fell. Margins improved. Hiring paused.\n"
    paths = make_job(instructions=instructions, files={"report.md": report})
    _, result = run_job(paths)
    assert result.ok, result.detail
    assert result.outcome.deliverables == ["summary.md"]
    assert result.outcome.confidence == 0.85
    summary = (paths.root / "summary.md").read_text()
    assert "an extract, not a summary" in summary and "Sales grew. Costs fell. Margins improved." in summary
    assert (paths.root / "report.md").read_text() == report
    called = [json.loads(e.arguments) for e in ev.read_events(paths.events)
              if isinstance(e, ev.ToolCalled) and e.tool in ("write_file", "edit_file", "append_file")]
    assert not any(c["path"] in ("report.md", "instructions.md") for c in called)


def test_the_samples_keep_their_deliverables_and_confidence(make_job, run_job) -> None:
    paths = make_job("quickstart")
    _, result = run_job(paths)
    assert (sorted(result.outcome.deliverables), result.outcome.confidence) == (["action_items.md", "digest.md"], 0.85)
    assert "produced action_items.md, digest.md" in result.outcome.summary
    paths = make_job("requirements-extraction")
    _, result = run_job(paths)
    assert sorted(result.outcome.deliverables) == ["document_analysis.md", "requirements.md", "review_notes.md"]
    assert result.outcome.confidence == 0.85
    assert "docs/specification.md" not in result.outcome.deliverables


def test_a_small_window_never_lists_the_input_document(make_job, run_job) -> None:
    paths = make_job("requirements-extraction")
    _, result = run_job(paths, context_window=10_000)
    assert result.ok, result.detail
    assert sorted(result.outcome.deliverables) == ["document_analysis.md", "requirements.md", "review_notes.md"]


def test_updating_an_existing_file_keeps_what_it_holds(make_job, run_job) -> None:
    # No read_before_write policy here: the new section goes in under the title with edit_file.
    paths = make_job("guardrails")
    old = (paths.root / "CHANGELOG.md").read_text()
    _, result = run_job(paths)
    assert result.ok, result.detail
    changelog = (paths.root / "CHANGELOG.md").read_text()
    assert changelog.startswith("# Changelog\n\n## 1.4.0\n\n- Added: `parse(strict=True)` refuses unknown keys.\n")
    assert changelog.endswith(old.split("\n", 1)[1]) and changelog.count("## 1.4.0") == 1
    notes = (paths.root / "release_notes.md").read_text()
    assert "## 1.4.0" in notes and "1.3.0" not in notes and "streaming parser" not in notes  # only what is new


def test_a_review_the_completion_check_requires_is_a_mechanical_check(make_job, run_job) -> None:
    from console.engine.guardrails import GuardrailsConfig

    paths = make_job("guardrails")
    guardrails = GuardrailsConfig.model_validate({"completion": {"type": "files", "paths": ["review.md"]}})
    _, result = run_job(paths, guardrails=guardrails)
    assert result.ok, result.detail
    review = (paths.root / "review.md").read_text()
    assert "a mechanical check that each deliverable exists and is not empty" in review
    assert "- CHANGELOG.md: present, " in review and "- release_notes.md: present, " in review
    assert sorted(result.outcome.deliverables) == ["CHANGELOG.md", "release_notes.md", "review.md"]
    assert "never reason" in result.outcome.summary


# -- the pieces ----------------------------------------------------------------------------------------
def test_recipes_refuse_what_a_script_cannot_do() -> None:
    assert recipe("action_items.md", "Write action_items.md") == "actions"
    assert recipe("digest.md", "a short summary of each meeting") == "digest"
    assert recipe("requirements.md", "every requirement statement") == "requirements"
    assert recipe("CHANGELOG.md", "add a 1.4.0 section") == "changes"
    assert recipe("transactions.md", "Write transactions.md") is None  # "transaction" is not "action"
    assert recipe("summary.md", "translate the summary into German") is None
    assert recipe("review.md", "Write review.md") is None
    assert recipe("notes.md", "Write notes.md") is None


def test_write_targets_skip_the_inputs() -> None:
    assert write_target("Write `summary.md` from `report.md`", ["report.md"]) == "summary.md"
    assert write_target("Write a digest of `report.md`", ["report.md"]) is None
    assert write_target("Extract requirements from lines 1-150 of spec.md into reqs.md", []) == "reqs.md"
    assert write_target("Check reqs.md for duplicate requirements and write them to dups.md", []) == "dups.md"
    assert write_target("Read `report.md`", []) is None


def test_a_not_done_note_keeps_each_file_type_valid() -> None:
    for path, start in [("out.md", "# Out: not done\n\n" + NOT_DONE_MARK), ("out.txt", NOT_DONE_MARK),
                        ("tool.py", "# " + NOT_DONE_MARK)]:
        draft = not_done(path, "Write it.", ["in.txt"], "a reason")
        assert draft.content.startswith(start) and not draft.done
        assert "Inputs it would have used: in.txt." in draft.content
    data = json.loads(not_done("out.json", "Write it.", [], "a reason").content)
    assert data["not_done"].startswith(NOT_DONE_MARK)
    assert not_done_path("Not done: out.md (a reason; scripted demo model (deterministic, no AI))") == "out.md"
    assert not_done_path("Not done: task 'Run the tests' (a reason)") is None


def test_inserting_under_the_title_loses_nothing_and_is_found_again() -> None:
    old = "# Changelog\n\n## 1.3.0\n- Fixed: a bug.\n"
    draft = "# Changelog\n\n## 1.4.0\n\n- Added: a flag.\n"
    new = insert_under_title(old, draft)
    assert new == "# Changelog\n\n## 1.4.0\n\n- Added: a flag.\n\n## 1.3.0\n- Fixed: a bug.\n"
    assert marker(draft) == "## 1.4.0" and "## 1.4.0" in new.splitlines()
    assert insert_under_title("no title here\n", draft) == \
        "# Changelog\n\n## 1.4.0\n\n- Added: a flag.\n\nno title here\n"
    assert marker("# Doc\n\n> Written by the demo\n\nOutline of x.md (3 headings):\n\n- a\n") == \
        "Outline of x.md (3 headings):"
    assert marker("# Only a title\n") == "# Only a title"


CHECKLIST_NOTES = """# Sync, 4 June

## Decisions
- Ship on Friday.

## Action items
- [ ] Chen: send the draft to legal
* Dana to book the review room

## Other
- [x] Eve: already done
- a bullet that is no action
"""


def test_action_items_are_read_from_checkboxes_and_an_action_items_heading_too() -> None:
    from console.providers.scripted_writing import action_items

    assert action_items(CHECKLIST_NOTES) == ["Chen: send the draft to legal", "Dana to book the review room"]
    assert action_items(MEETING_NOTES) == ["Ana to update the changelog.", "Bo to book the demo room."]


def test_notes_without_any_action_item_are_no_work_done(make_job, run_job) -> None:
    """Nothing to copy is not a deliverable: the file says it was not done, and the confidence does not claim it."""
    paths = make_job(instructions=MEETING.replace("- `plan_fr.md`: the meeting's decisions translated into French\n",
                                                  ""),
                     files={"meeting.md": "# Weekly meeting\n\nWe talked about the weather.\n"})
    _, result = run_job(paths)
    text = (paths.root / "action_items.md").read_text()
    assert NOT_DONE_MARK in text and "no action items it could copy" in text
    assert result.outcome is not None and result.outcome.confidence == 0.0
    assert "action_items.md" not in result.outcome.deliverables


def test_checklist_notes_give_their_action_items(make_job, run_job) -> None:
    paths = make_job(instructions=MEETING.replace("- `plan_fr.md`: the meeting's decisions translated into French\n",
                                                  ""), files={"meeting.md": CHECKLIST_NOTES})
    _, result = run_job(paths)
    text = (paths.root / "action_items.md").read_text()
    assert "- [ ] Chen: send the draft to legal\n- [ ] Dana to book the review room\n" in text
    assert "Eve" not in text and "no action" not in text
    assert result.ended == "completed" and result.outcome is not None and result.outcome.confidence == 0.85


FRUIT = """# Inventory the fruit

Read the list below and write `fruit.md` with one line per fruit, sorted.

- pear
- apple
- fig
"""


def test_a_file_it_takes_for_an_input_is_named_as_such_not_said_to_be_missing(make_job, run_job) -> None:
    """"write `fruit.md`" on a line that says "Read": the script takes fruit.md for an input and writes no input.
    Its note said "it names no file to write that is not one of the job's inputs", as if the task named none."""
    paths = make_job(instructions=FRUIT)
    _, result = run_job(paths)
    assert result.outcome.gave_up
    said = f"{result.outcome.summary} {result.outcome.notes}"
    assert "a fixed script takes fruit.md for one of the job's inputs" in said
    assert "names no file to write" not in said
    assert not (paths.root / "fruit.md").exists()  # nothing pretends to be the inventory
