"""Deliverables of the scripted demo model: what it can honestly write, and a note when it cannot.

It is a fixed script, not an AI. It can copy from the job's files: action items, requirement statements
(shall/must/should), headings for an outline, the first sentences of each file, a list of changes; and it
can check that files exist. A document that stands in for more than that (an extract where a summary was
asked, copied changes as release notes, a mechanical review) says so in a line under its title. Anything
else the job asks for (translate, explain, judge, design, write new prose or code) it does not fake: it
writes a note saying what it could not do (NOT_DONE_MARK), or, for a file that already exists, leaves the
file alone; either way it records a "Not done:" note, which the final review counts.

Writing is idempotent, so a rewind that brings a "Write X" step back duplicates nothing: a file that
exists is first searched for the draft's first section (or first line); a draft the file already holds is
not added again, else it is inserted under the file's title (edit_file: nothing of the file is lost; if
the edit is refused or finds no title, the file is read and rewritten with the draft under its title).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from console.providers.scripted_planning import inputs_from, plan_inputs
from console.providers.scripted_requirements import (
    LINES_RX,
    blocks,
    extract_requirements,
    found_in,
    heading_pattern,
    partial_scope,
)
from console.providers.scripted_view import (
    BOOKKEEPING,
    DEMO_NAME,
    Call,
    Decision,
    View,
    body,
    complete,
    paths_in,
)

ACTION_RX = re.compile(r"^\s*(?:[-*]\s*)?(?:\[ \]\s*)?(?:action(?: item)?|todo)\s*[:\-]\s*(.+)$", re.IGNORECASE)
# An open checkbox ("- [ ] Chen: send the draft"), and a bullet under a heading that names action items.
CHECKBOX_RX = re.compile(r"^\s*[-*]\s+\[ \]\s+(.+)$")
BULLET_RX = re.compile(r"^\s*[-*]\s+(.+)$")
HEADING_RX = re.compile(r"^\s*#{1,6}\s+(.*)$")
SENTENCE_END_RX = re.compile(r"(?<=[.!?])\s+")
VERSION_RX = re.compile(r"\b\d{1,6}\.\d{1,6}(?:\.\d{1,6})?\b")
ACTION_WORD_RX = re.compile(r"\baction", re.IGNORECASE)
# What the ask must not need: a deterministic script cannot do any of it.
CANNOT_RX = re.compile(
    r"\b(?:translat|explain|analy[sz]|evaluat|assess|recommend|critiqu|compar|rewrit|rephras|improv|fix|"
    r"implement|design|justif|argu|estimat|predict|answer|brainstorm|invent|debug|refactor|optimi[sz]|"
    r"calculat|comput|prove|solv|illustrat|persuad|decid|choos|review|respond|repl[iy]|poem|stor[iy]|essay|"
    r"code|program|test)\w*", re.IGNORECASE)
DIGEST_WORDS = ("digest", "summary", "summar", "overview", "recap", "minutes")
WRITE_VERBS = ("write", "create", "draft", "produce", "compose")
REVIEW_WORDS = ("review", "check", "verif", "qa")

NOT_DONE_MARK = "Not done by the scripted demo model"
NOT_DONE_NOTE = "Not done: "
CAN_DO = ("It can only copy from the job's files: action items, requirement statements (shall/must/should), "
          "headings for an outline, the first sentences of each file, a list of changes. It cannot translate, "
          "explain, judge, design or write new text or code.")
REAL_MODEL = "To get it done, run the job with a real model: --provider anthropic or --provider openai."


@dataclass
class Draft:
    """The content for a file, and whether it is the work asked for (False: a note saying it is not)."""

    content: str
    done: bool
    what: str  # one line: what the content is, or why it is not the work


def not_done_note(task: str, why: str, path: str | None = None) -> Call:
    """The workspace note for work not done: "Not done: PATH (why ...)" for a file, "Not done: task '...'"
    for a task that writes none (see :func:`not_done_path`)."""
    what = path if path is not None else f"task '{task}'"
    return Call("add_note", {"text": f"{NOT_DONE_NOTE}{what} ({why}; {DEMO_NAME})"})


def not_done_path(note: str) -> str | None:
    """The file a not-done note is about, or None for a task that writes none (or not a not-done note)."""
    if not note.startswith(NOT_DONE_NOTE):
        return None
    rest = note[len(NOT_DONE_NOTE):]
    return None if rest.startswith("task '") else rest.split(" (", 1)[0].strip() or None


def title_of(path: str) -> str:
    return PurePosixPath(path).stem.replace("_", " ").replace("-", " ").title()


def label(what: str) -> str:
    return f"> Written by the {DEMO_NAME}: {what}."


def first_heading(text: str, default: str) -> str:
    return next((ln.lstrip("# ").strip() for ln in text.splitlines() if ln.startswith("#")), default)


# -- what the job asks for a file ----------------------------------------------------------------
def asked_for(path: str, instructions: str) -> list[str]:
    """The sentences of the instructions that name ``path``."""
    out: list[str] = []
    for block in blocks(instructions):
        for sentence in SENTENCE_END_RX.split(block):
            if path in paths_in(sentence) and sentence.strip() not in out:
                out.append(sentence.strip())
    return out


def recipe(path: str, ask: str) -> str | None:
    """Which of its recipes does what is asked, or None if none does."""
    low = f"{PurePosixPath(path).name} {ask}".lower()
    if CANNOT_RX.search(low):
        return None
    if "outline" in low:
        return "outline"
    if ACTION_WORD_RX.search(low):
        return "actions"
    if "requirement" in low:
        return "requirements"
    if "changelog" in low or "release note" in low or "release_note" in low:
        return "changes"
    if any(w in low for w in DIGEST_WORDS):
        return "digest"
    return None


def why_not(path: str, ask: str) -> str:
    m = CANNOT_RX.search(f"{PurePosixPath(path).name} {ask}")
    if m is not None:
        return f"the job asks for '{m.group(0).lower()}', which a fixed script cannot do"
    return "none of its recipes is what the job asks for this file"


def write_target(task: str, inputs: list[str]) -> str | None:
    """The file a plan step writes (None if it writes none): the path after "into", the review notes of a
    duplicate check, else the first path of a "Write ..." step that is not one of the job's inputs."""
    t = task.lower()
    paths = paths_in(task)
    if LINES_RX.search(task) is not None:
        into = paths_in(task.split(" into ", 1)[1]) if " into " in task else []
        return into[0] if into else "requirements.md"
    if "duplicate" in t:
        return paths[1] if len(paths) > 1 else "review_notes.md"
    if t.startswith(WRITE_VERBS):
        return next((p for p in paths if p not in inputs and p not in BOOKKEEPING), None)
    return None


def write_inputs(instructions: str, files: dict[str, int], path: str) -> list[str]:
    """The files to write ``path`` from: the job's inputs, else the existing files the instructions name."""
    inputs = [p for p in plan_inputs(instructions, files)[0] if p != path and p not in BOOKKEEPING]
    if inputs:
        return inputs
    return [p for p in paths_in(instructions) if p in files and p != path and p not in BOOKKEEPING]


# -- drafts ----------------------------------------------------------------------------------------
def compose(kind: str, path: str, ask: str, instructions: str, inputs: dict[str, str]) -> Draft:
    """The document for ``path`` from the inputs' contents, by one of its recipes."""
    lines = [f"# {title_of(path)}", ""]
    if kind == "actions":
        found = 0
        for src, text in inputs.items():
            items = action_items(text)
            found += len(items)
            lines += [f"## {first_heading(text, src)} ({src})", ""]
            lines += [f"- [ ] {i}" for i in items] or ["- (no action items)"]
            lines.append("")
        if not found:  # nothing copied is no work done: said so, never a file of empty sections
            return not_done(path, ask, list(inputs), "the inputs hold no action items it could copy (lines like "
                            "'ACTION: ...', open checkboxes '- [ ] ...', or bullets under an 'Action items' heading)")
        return Draft("\n".join(lines), True, "action items copied from the inputs")
    if kind == "requirements":
        for src, text in inputs.items():
            lines += [f"## {first_heading(text, src)} ({src})", ""]
            lines += [f"- {r}" for r in extract_requirements(text)] or ["- (no requirement statements)"]
            lines.append("")
        return Draft("\n".join(lines), True, "requirement statements copied from the inputs")
    if kind == "changes":
        return _changes(path, ask, instructions, inputs)
    lines += [label("the first sentences of each input, copied as written: an extract, not a summary"), ""]
    for src, text in inputs.items():
        prose = " ".join(ln.strip() for ln in text.splitlines()
                         if ln.strip() and not ln.startswith(("#", "-", "*", "|")))
        sentences = SENTENCE_END_RX.split(prose)
        items = [ln.strip() for ln in text.splitlines() if ln.startswith(("- ", "* "))][:20]
        lines += [f"## {first_heading(text, src)} ({src})", "",
                  " ".join(sentences[:3]).strip() or ("\n".join(items) if items else "(no prose)"), ""]
    return Draft("\n".join(lines), True, "the first sentences of each input")


def action_items(text: str) -> list[str]:
    """The action items a text lists: "ACTION: ..." / "TODO: ..." lines, open checkboxes, and the bullets under a
    heading that names action items ("## Action items", "### Next actions")."""
    out: list[str] = []
    under_actions = False
    for ln in text.splitlines():
        if (h := HEADING_RX.match(ln)) is not None:
            under_actions = ACTION_WORD_RX.search(h.group(1)) is not None
            continue
        m = ACTION_RX.match(ln) or CHECKBOX_RX.match(ln) or (BULLET_RX.match(ln) if under_actions else None)
        if m is not None and (item := m.group(1).strip()):
            out.append(item)
    return out


def _changes(path: str, ask: str, instructions: str, inputs: dict[str, str]) -> Draft:
    """A changelog section, or release notes, listing the changes of the change notes among the inputs."""
    notes = {p: t for p, t in inputs.items() if "changelog" not in PurePosixPath(p).name.lower()} or inputs
    items = [ln.strip() for t in notes.values() for ln in t.splitlines() if ln.strip().startswith(("- ", "* "))]
    if not items:
        return not_done(path, ask, list(inputs), "the inputs list no changes it could copy")
    m = VERSION_RX.search(ask) or VERSION_RX.search(instructions)
    version = m.group(0) if m else "Unreleased"
    lines = [f"# {title_of(path)}", ""]
    if "changelog" not in PurePosixPath(path).name.lower():
        lines += [label(f"the changes listed in {', '.join(notes)}, copied as written"), ""]
    lines += [f"## {version}", "", *items, ""]
    return Draft("\n".join(lines), True, f"the {version} changes copied from {', '.join(notes)}")


def outline(path: str, src: str, headings: list[str]) -> Draft:
    lines = [f"# {title_of(path)}", "", f"Outline of {src} ({len(headings)} headings):", ""]
    lines += [("  " * max(0, h.count("#", 0, 4) - 2)) + "- " + h.lstrip("# ").strip() for h in headings]
    return Draft("\n".join(lines) + "\n", True, f"the outline of {src}")


def not_done(path: str, ask: str, inputs: list[str], why: str) -> Draft:
    """A note in place of the work: what was asked, why the demo model did not do it, how to get it done."""
    suffix = PurePosixPath(path).suffix.lower()
    text = [f"{NOT_DONE_MARK} (deterministic, no AI): {why}.", "", "What the job asks for this file:", f"  {ask}", "",
            f"The scripted demo model is a fixed script, not an AI. {CAN_DO} So this file holds this note "
            "instead of the work.", ""]
    if inputs:
        text += [f"Inputs it would have used: {', '.join(inputs)}.", ""]
    text += [REAL_MODEL]
    if suffix == ".md":
        content = f"# {title_of(path)}: not done\n\n" + "\n".join(text) + "\n"
    elif suffix in (".py", ".sh", ".toml", ".yaml", ".yml", ".r"):
        content = "\n".join(f"# {ln}".rstrip() for ln in text) + "\n"
    elif suffix == ".json":
        content = json.dumps({"not_done": " ".join(ln for ln in text if ln)}, indent=2) + "\n"
    else:
        content = "\n".join(text) + "\n"
    return Draft(content, False, why)


def review(claimed: list[str], files: dict[str, int]) -> str:
    """A mechanical review: each claimed deliverable exists and is not empty. Nothing is judged."""
    lines = ["# Review", "", label("a mechanical check that each deliverable exists and is not empty; "
                                   "their content was not judged"), "", "## Deliverables", ""]
    for p in claimed:
        size = files.get(p)
        if not files:
            state = "claimed (the listing was not in view, so not checked)"
        else:
            state = "missing" if size is None else ("empty" if size == 0 else f"present, {size} bytes")
        lines.append(f"- {p}: {state}")
    if not claimed:
        lines.append("- (no deliverable was claimed)")
    return "\n".join(lines) + "\n"


# -- adding to a file that exists -------------------------------------------------------------------
def split_title(content: str) -> tuple[str, str]:
    """(the title line, the rest without its surrounding blank lines) of a draft."""
    first, _, rest = content.partition("\n")
    return first, rest.strip("\n")


def marker(content: str) -> str:
    """The line that shows a file already holds a draft: its first '## ' heading, else its first line
    after the title and the label (else the title)."""
    title, rest = split_title(content)
    lines = [ln.rstrip() for ln in rest.splitlines() if ln.strip() and not ln.startswith("> ")]
    return next((ln for ln in lines if ln.startswith("## ")), lines[0] if lines else title.rstrip())


def holds(text: str, line: str) -> bool:
    return any(ln.rstrip() == line for ln in text.splitlines())


def insert_under_title(old: str, content: str) -> str:
    """``old`` with the draft's body inserted under its title (the draft's title if it has none): what an
    edit_file of the title line does. Nothing of ``old`` is lost."""
    title, rest = split_title(content)
    lines = old.splitlines()
    if lines and lines[0].startswith("# "):
        title, remainder = lines[0], "\n".join(lines[1:]).strip("\n")
    else:
        remainder = old.strip("\n")
    return f"{title}\n\n{rest}\n" + (f"\n{remainder}\n" if remainder else "")


# -- the task ----------------------------------------------------------------------------------------
def write(v: View, task: str) -> Decision:
    """Write the file a "Write ..." step names, honestly and at most once."""
    instructions = v.instructions()
    if instructions is None:
        return Decision("Re-reading the instructions to see what this file needs.",
                        [Call("read_file", {"path": "instructions.md", "max_lines": 400})])
    inputs = inputs_from(instructions)
    path = write_target(task, inputs)
    if path is None:
        # Said as the script saw it: a file the task names on a line of the instructions that also says "read"
        # (or "given", "listed"...) is taken for an input, which a fixed script never overwrites.
        named = paths_in(task)
        taken = [p for p in named if p in inputs]
        if taken:
            why = (f"a fixed script takes {', '.join(taken[:3])} for one of the job's inputs (the instructions name "
                   "it on a line that says read, given or listed) and writes no input")
        elif named:
            why = f"it names only files a fixed script never writes as a deliverable ({', '.join(named[:3])})"
        else:
            why = "it names no file to write"
        return skip(task, why)
    if any(d.name in ("write_file", "edit_file") and d.args.get("path") == path and d.ok for d in v.done):
        # A file that existed, updated in an earlier turn of this task (a new file completes at once).
        return complete(f"{path} is written.", Call("add_accomplishment", {"text": f"Wrote {path}"}))
    if (failed := v.did("write_file", path=path)) is not None:
        return skip(task, f"writing {path} failed: {failed.result[:160]}")
    if not v.did("list_files"):
        return Decision("Listing the files to find the inputs.", [Call("list_files", {"path": "."})])
    files = v.files()
    inputs = write_inputs(instructions, files, path)
    asked = asked_for(path, instructions)
    ask = " ".join([task, *asked])
    kind = recipe(path, ask)
    if kind is None:
        draft = not_done(path, " ".join(asked) or task, inputs, why_not(path, ask))
    elif not inputs:
        draft = not_done(path, " ".join(asked) or task, [], "the job names no input file to copy from")
    elif kind == "outline":
        found = v.did("search_files", path=inputs[0])
        if found is None:
            return Decision(f"Collecting the section headings of {inputs[0]}.", [Call(
                "search_files", {"pattern": "^#{1,3} ", "path": inputs[0], "max_results": 300})])
        heads = [ln.split(": ", 1)[1] for ln in found.result.splitlines() if ": " in ln]
        draft = outline(path, inputs[0], heads)
    else:
        if missing := [p for p in inputs if p not in v.reads]:
            return Decision(f"Reading the inputs for {path}.", [Call("read_file", {"path": p}) for p in missing])
        draft = compose(kind, path, ask, instructions, {p: v.reads[p] for p in inputs})
    if not draft.done:
        note = not_done_note(task, draft.what, path)
        if path in files:  # the job's own file: left as it is
            return complete(f"I cannot do this ({draft.what}); {path} is left as it was.", note)
        return complete(f"I cannot do this ({draft.what}): {path} gets a note saying so instead of the work.",
                        Call("write_file", {"path": path, "content": draft.content}), note)
    if path not in files:
        said = f"Writing the outline to {path}." if draft.what.startswith("the outline") else f"Writing {path}."
        return complete(said, Call("write_file", {"path": path, "content": draft.content}),
                        Call("add_accomplishment", {"text": f"Wrote {path}"}))
    return update(v, path, draft)


def update(v: View, path: str, draft: Draft) -> Decision:
    """Add a draft to a file that exists, at most once and without losing anything the file holds."""
    line = marker(draft.content)
    old = v.read_result(path)
    if old is not None:  # read (a policy asked for it, or an edit could not find the title): merge as text
        if (scope := partial_scope(old)) is not None:
            return complete(f"{path} is too long to rewrite in one piece; leaving it as it is.",
                            not_done_note(f"Write {path}", f"too long to rewrite in one piece (read {scope})",
                                          path))
        if holds(body(old), line):
            return complete(f"{path} already has '{line}'; not adding it twice.")
        # Overwriting a file that exists: see the result (a policy may deny it) before calling it done.
        return Decision(f"Writing {path}: {draft.what}, above what it holds.",
                        [Call("write_file", {"path": path, "content": insert_under_title(body(old), draft.content)})])
    pattern = heading_pattern(line)
    probe = v.did("search_files", pattern=pattern, path=path)
    if probe is None:
        return Decision(f"{path} exists: looking for '{line}' in it first.",
                        [Call("search_files", {"pattern": pattern, "path": path, "max_results": 5})])
    if probe.ok and found_in(probe.result, path):
        return complete(f"{path} already has '{line}'; not adding it twice.")
    if v.did("edit_file", path=path) is None:
        # Insert under the title: whatever else the file holds stays as it is.
        title, rest = split_title(draft.content)
        return Decision(f"Adding {draft.what} to {path}, under its title.", [Call("edit_file", {
            "path": path, "old_text": title + "\n", "new_text": f"{title}\n\n{rest}\n"})])
    return Decision(f"Reading {path} to add to it.", [Call("read_file", {"path": path})])


def skip(task: str, why: str) -> Decision:
    """A task the demo model cannot do: it says so in a note and moves on."""
    return complete(f"I cannot do this: {why}. Noting it and moving on.", not_done_note(task, why))
