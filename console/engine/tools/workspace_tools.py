"""Workspace and completion tools: summary, accomplishments, notes, experiences, job_complete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from console.engine.experiences import MAX_ENTRY_CHARS
from console.engine.job_files import one_line
from console.engine.sandbox import SandboxError
from console.engine.tools.file_access import sandbox
from console.engine.tools.registry import Example, Failure, NoArgs, Tool, ToolArgs, ToolOutcome

if TYPE_CHECKING:
    from console.engine.runtime import Runtime


class TextArgs(ToolArgs):
    text: str = Field(min_length=1, max_length=2000, description="One line of text")


class ExperienceArgs(ToolArgs):
    section: Literal["failed", "lesson", "pattern"] = Field(
        description="failed approach, lesson learned or pattern that works")
    text: str = Field(min_length=1, max_length=MAX_ENTRY_CHARS, description="One specific line: what and why")


class JobCompleteArgs(ToolArgs):
    summary: str = Field(min_length=1, max_length=4000, description="What was achieved, in one or two sentences")
    deliverables: list[str] = Field(default_factory=list, max_length=200,
                                    description="Paths of the files produced")
    confidence: float = Field(ge=0, le=1, description="How confident you are in the result, 0 to 1")
    notes: str = Field(default="", max_length=8000, description="Caveats, open questions, items for human review")


def generate_workspace_summary(rt: Runtime, _: NoArgs) -> str:
    text = rt.generate_workspace_summary(checked=True)  # a write that would be refused fails the call
    return f"Wrote workspace_summary.md ({len(text.splitlines())} lines). Read it to see the state."


def add_accomplishment(rt: Runtime, a: TextArgs) -> str:
    n = rt.workspace.add_accomplishment(a.text)
    return f"Accomplishment {n} recorded."


def add_note(rt: Runtime, a: TextArgs) -> str:
    n = rt.workspace.add_note(a.text)
    return f"Note {n} recorded."


def record_experience(rt: Runtime, a: ExperienceArgs) -> ToolOutcome:
    entry = rt.record_experience(a.section, a.text, "agent")
    if entry is None:
        return ToolOutcome(False, "record_experience needs text: one line saying what happened and why.")
    return ToolOutcome(True, f"Experience {entry} recorded in experiences.md; it is in your prompt from the next "
                             "phase on.")


# A file's modification time may be this much before the job's first start and still count as written during
# the run: file systems keep times coarser than the clock (FAT: 2 s), and the two clocks are read apart.
MTIME_SLACK = 2.0
# Notes that say why the agent gives up: at least a sentence (seed 000: "detailed notes").
MIN_GIVE_UP_NOTES = 20


def deliverable_problems(rt: Runtime, paths: list[str]) -> list[str]:
    """Each declared deliverable that is not a non-empty file in the job folder written during this job."""
    sb = sandbox(rt)
    started = rt.guardrails.budget_state.started_at
    since = started.timestamp() - MTIME_SLACK if started is not None else None
    problems = []
    for d in paths:
        shown = one_line(d, 200)
        try:
            info = sb.info(sb.check(d))
        except SandboxError:
            info = None
        if info is None or info.kind != "file":
            problems.append(f"{shown} does not exist in the job folder")
        elif info.size == 0:
            problems.append(f"{shown} is empty")
        elif since is not None and info.mtime < since:
            problems.append(f"{shown} was not written during this job (it is older than the job's start)")
    return problems


def job_complete(rt: Runtime, a: JobCompleteArgs) -> ToolOutcome:
    low = rt.guardrails.low_confidence
    if a.confidence < low:
        # Seed 000's unrecoverable case: accepted at any time (a transition under way, a checker saying no), as
        # long as the notes say why; the run ends as gave up and asks its operator.
        if len(a.notes.strip()) < MIN_GIVE_UP_NOTES:
            return ToolOutcome(False, f"job_complete with confidence {a.confidence:g} (below {low:g}) ends the job "
                                      "as given up: say why in notes (what was tried, what blocks it, what a human "
                                      "should do), then call it again. If the job can still be done, continue "
                                      "with the task marked ← CURRENT instead.")
        rt.give_up(summary=a.summary, deliverables=a.deliverables, confidence=a.confidence, notes=a.notes)
        return ToolOutcome(True, "Job ended as given up; your operator is asked to look at it. Thank you.",
                           end_session=True)
    problems = deliverable_problems(rt, a.deliverables)
    if problems:
        return ToolOutcome(False, f"job_complete refused: {'; '.join(problems)}. List only the files this job "
                                  "produced, once they hold the work.")
    # Seed 000's protocol (the harness's record shows the plan done) and the job's declared checker (seed 002);
    # a refusal is this call's error result.
    verdict = rt.guards.check_stop("job_complete", a.model_dump())
    if not verdict.allowed:
        return ToolOutcome(False, verdict.message)
    rt.complete_job(summary=a.summary, deliverables=a.deliverables, confidence=a.confidence, notes=a.notes)
    return ToolOutcome(True, "Job marked complete. Thank you.", end_session=True)


ONE_LINE = Failure("the text is empty or over 2000 characters", "give one line")

WORKSPACE_TOOLS: list[Tool[Any]] = [
    Tool("generate_workspace_summary", "Write workspace_summary.md: files, accomplishments, current state, notes.",
         NoArgs, generate_workspace_summary, "write workspace_summary.md",
         examples=(Example({}, "Refresh workspace_summary.md, then read it"),),
         errors=(Failure("workspace_summary.md cannot be written (the job folder is full, or the name is taken by "
                         "a folder)", "free space, or tell the operator through a note"),),
         rules=("It is written from facts: the files on disk, the accomplishments and notes recorded, the todo "
                "state.", "Phase transitions regenerate it by themselves.")),
    Tool("add_accomplishment", "Record a milestone achieved; it appears in workspace_summary.md.", TextArgs,
         add_accomplishment, "record a milestone",
         examples=(Example({"text": "Converted the 12 input files to CSV in data/"}, "Record a milestone"),),
         errors=(ONE_LINE,), rules=("Accomplishments are kept for the whole job.",)),
    Tool("add_note", "Record a working note (a finding, a caveat); it appears in workspace_summary.md.", TextArgs,
         add_note, "record a working note",
         examples=(Example({"text": "The 2019 files use ';' as separator"}, "Record a finding"),),
         errors=(ONE_LINE,), rules=("Notes are kept for the whole job.",)),
    Tool("record_experience", "Add to experiences.md an approach that failed, a lesson or a pattern that works, so "
         "later phases do not repeat a mistake.", ExperienceArgs, record_experience,
         "add to experiences.md (what failed, lessons, what works)",
         examples=(Example({"section": "lesson", "text": "The 2019 files are XML: check a file's format before "
                                                         "parsing it"}, "Record a lesson"),
                   Example({"section": "failed", "text": "Parsing the XML with regexes: nested tags broke it"},
                           "Record an approach that failed")),
         errors=(Failure(f"the text is empty or over {MAX_ENTRY_CHARS} characters", "one specific line: what and "
                                                                                    "why"),),
         rules=("experiences.md is kept by the harness: read it, never write it (the file tools refuse).",
                "An entry is in your prompt from the next phase or session on.")),
    Tool("job_complete", "Finish the whole job: a summary, the deliverables' paths, your confidence (0-1), notes. "
         "If it cannot be done: a low confidence and notes saying why (the job ends as given up).",
         JobCompleteArgs, job_complete, "finish the job (last todo), or give up with a low confidence",
         examples=(Example({"summary": "Converted the 2019 files and wrote the totals.", "deliverables":
                            ["totals.md", "data/2019.csv"], "confidence": 0.9,
                            "notes": "Two rows of March were unreadable and are left out."},
                           "Finish the job (the last task of the final list)"),
                   Example({"summary": "Could not convert the files.", "deliverables": [], "confidence": 0.1,
                            "notes": "Every 2019 file is encrypted; a human must provide the key."},
                           "Give up: the job cannot be done (your operator is asked)")),
         errors=(Failure("a deliverable does not exist, is empty, or was not written during this job",
                         "finish it, or list only the files this job produced"),
                 Failure("a phase transition is in progress", "follow its steps (todo_write) first"),
                 Failure("the record shows work left: todos not done, phases never worked through their todo list "
                         "(the result names them)", "do the work it names, then call job_complete again"),
                 Failure("a low confidence with notes shorter than a sentence",
                         "say why the job cannot be done, or continue with the current task")),
         rules=("Call it when every phase is done: the todos completed through todo_complete, each phase's list "
                "worked through; checkboxes ticked in main_plan.md do not count.",
                "It is the last task of the final list (\"Call job_complete()\"): call it, do not todo_complete "
                "that task.",
                "A confidence below the job's low_confidence (0.5 by default), with notes saying why, ends the job "
                "as given up, at any time: your operator is asked.")),
]
