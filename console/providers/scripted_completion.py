"""The final review of the scripted demo model: what it delivered, what it could not do, how sure it is.

Its deliverables are the files it recorded as written (accomplishments "Wrote X", "... into X") or as not
done (notes "Not done: X (...)"), and the files written for the current task: never the job's inputs,
never the harness's files. A deliverable a not-done note names holds a note instead of the work (or was
left as it was); a task noted as not done counts against it too. Its confidence is MAX_CONFIDENCE times
the share of real work among them: 0 when it produced nothing real.

It needs little to see all this (the file listing and workspace_summary.md), so the final tasks also work
in a small context window; a lookup the context manager masked is not repeated (it could not fit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.providers.scripted_view import (
    BOOKKEEPING,
    DEMO_NAME,
    Call,
    Decision,
    View,
    body,
    complete,
    section,
)
from console.providers.scripted_writing import NOT_DONE_NOTE, REAL_MODEL, label, not_done_path

# Copied and extracted, never reasoned: the demo model is never surer than this of its work.
MAX_CONFIDENCE = 0.85
SUMMARY = "workspace_summary.md"
INTO_RX = re.compile(r" into (\S{1,500})$")


@dataclass
class Outcome:
    done: list[str]  # deliverables holding the work asked for
    not_done: list[str]  # deliverables holding a note instead (or left as they were)
    skipped: list[str]  # "Not done:" notes of tasks that write no deliverable

    @property
    def confidence(self) -> float:
        total = len(self.done) + len(self.not_done) + len(self.skipped)
        return round(MAX_CONFIDENCE * len(self.done) / total, 2) if total else 0.0

    def summary(self) -> str:
        who = DEMO_NAME[0].upper() + DEMO_NAME[1:]
        if not (self.done or self.not_done or self.skipped):
            return f"{who}: it followed its plan and produced no file, so there is nothing to deliver."
        if not self.done:
            made = (f" {', '.join(self.not_done)} hold{'s' if len(self.not_done) == 1 else ''} a note saying "
                    "what it could not do." if self.not_done else "")
            return f"{who}: it could not do this job and produced nothing real.{made} {REAL_MODEL}"
        text = f"{who}: produced {', '.join(self.done)} by fixed recipes that copy and check, never reason."
        missed = [*self.not_done] + ([f"{len(self.skipped)} other task{'s' if len(self.skipped) != 1 else ''}"]
                                     if self.skipped else [])
        if missed:
            text += f" It could not do {', '.join(missed)}. {REAL_MODEL}"
        return text

    def notes(self) -> str:
        out = ["Produced by the offline scripted demo model: content is copied or extracted, never reasoned."]
        if self.not_done:
            out.append(f"Not done (the file says why or was left as it was): {', '.join(self.not_done)}.")
        out += self.skipped
        return " ".join(out)


def gather(v: View) -> Decision | None:
    """What the review needs and cannot see yet: the file listing and the workspace summary."""
    calls = [] if v.did("list_files") else [Call("list_files", {"path": "."})]
    if SUMMARY not in v.reads and not v.did("read_file", path=SUMMARY) and ("read_file", SUMMARY) not in v.masked:
        calls.append(Call("read_file", {"path": SUMMARY, "max_lines": 400}))
    return Decision("Looking at the files and the workspace summary.", calls) if calls else None


def _seen(v: View, path: str) -> str:
    return v.reads.get(path) or body(v.read_result(path) or "")


def not_done_notes(v: View) -> list[str]:
    """The "Not done:" notes recorded so far (the workspace summary's, and this task's own), once each."""
    notes = [ln[2:].strip() for ln in section(_seen(v, SUMMARY), "Notes") if ln.startswith("- " + NOT_DONE_NOTE)]
    notes += [str(d.args.get("text", "")) for d in v.done
              if d.name == "add_note" and str(d.args.get("text", "")).startswith(NOT_DONE_NOTE)]
    return list(dict.fromkeys(notes))


def deliverables(v: View) -> list[str]:
    """The files it recorded as written or as not done, and those written for this task, that exist."""
    found: list[str | None] = []
    for ln in section(_seen(v, SUMMARY), "Accomplishments"):
        if ln.startswith("- Wrote "):
            found.append(ln[len("- Wrote "):].strip())
        elif ln.startswith("- Extracted ") and (m := INTO_RX.search(ln.rstrip())) is not None:
            found.append(m.group(1))
    found += [not_done_path(n) for n in not_done_notes(v)]
    written = v.written()  # for this task, perhaps after its listing
    found += written
    files = v.files()
    out: list[str] = []
    for p in found:
        if p and (p in files or p in written) and p not in BOOKKEEPING and p not in out:
            out.append(p)
    return out


def unread(v: View, paths: list[str]) -> list[str]:
    return [p for p in paths if p not in v.reads and not v.did("read_file", path=p) and ("read_file", p)
            not in v.masked]


def grade(v: View, delivered: list[str]) -> Outcome:
    notes = not_done_notes(v)
    named = {p for n in notes if (p := not_done_path(n)) is not None}
    not_done = [p for p in delivered if p in named]
    skipped = [n for n in notes if not_done_path(n) is None or not_done_path(n) not in delivered]
    return Outcome([p for p in delivered if p not in not_done], not_done, skipped)


# -- the final tasks ------------------------------------------------------------------------------
def verify(v: View) -> Decision:
    if (g := gather(v)) is not None:
        return g
    delivered = deliverables(v)
    if todo := unread(v, delivered):
        return Decision(f"Checking {', '.join(todo)}.", [Call("read_file", {"path": p, "max_lines": 40})
                                                         for p in todo])
    o = grade(v, delivered)
    text = f"Deliverables present: {', '.join(o.done) or 'none'}"
    if o.not_done:
        text += f"; not done (a note instead of the work, or left as it was): {', '.join(o.not_done)}"
    return complete("Checked the deliverables.", Call("add_note", {"text": text}))


def summary_report(v: View) -> Decision:
    if not v.did("generate_workspace_summary"):
        return Decision("Generating the workspace summary for the report.", [Call("generate_workspace_summary")])
    if not v.did("read_file", path="workspace_summary.md"):
        return Decision("Reading the summary.", [Call("read_file", {"path": "workspace_summary.md"})])
    if v.did("write_file", path="summary_report.md"):
        return complete("The report is written.")
    summary = body(v.read_result("workspace_summary.md") or "")
    acc = [ln for ln in section(summary, "Accomplishments") if ln.startswith("- ")]
    notes = [ln for ln in section(summary, "Notes") if ln.startswith("- ")]
    report = ["# Summary Report", "", label("the accomplishments and notes it recorded, as recorded"), "",
              "## What was done", *(acc or ["- nothing recorded"]), "", "## Notes", *(notes or ["- none"]), ""]
    return complete("Writing summary_report.md.",
                    Call("write_file", {"path": "summary_report.md", "content": "\n".join(report)}))


def job_complete(v: View) -> Decision:
    if (g := gather(v)) is not None:
        return g
    delivered = deliverables(v)
    o = grade(v, delivered)
    said = "Completing the job." if o.done and not (o.not_done or o.skipped) else \
        "Completing the job, saying what I could not do."
    return Decision(said, [Call("job_complete", {
        "summary": o.summary(),
        "deliverables": o.done,
        "confidence": o.confidence,
        "notes": o.notes(),
    })])
