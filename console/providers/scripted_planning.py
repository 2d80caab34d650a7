"""Planning for the scripted demo model: the execution plan it writes, and the todo list of each phase.

A plan comes from the instructions: their own phases if they give them, else phases derived from the files
the instructions name (a long input is read in chunks of CHUNK_LINES lines). At a transition the model
re-reads the plan, marks the finished phase and writes the next phase's steps as its todo list.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from console.engine.plan import parse_plan
from console.providers.scripted_view import Call, Decision, View, body, complete, paths_in

TOTAL_RX = re.compile(r"^\[[^\]]*: lines \d{1,12}-\d{1,12} of (\d{1,12})\]")
# A line of the instructions that names input files ("`notes/` holds ...", "The input document ...").
INPUT_WORDS_RX = re.compile(r"\b(?:inputs?|read|reads|sources?|holds?|contains?|given|listed)\b", re.IGNORECASE)
CHUNK_LINES = 150
CHUNKS_PER_PHASE = 8


# -- the plan -----------------------------------------------------------------------------
def inputs_from(instructions: str, exclude: str = "") -> list[str]:
    """Input files named in the instructions: on a line that says they are read, given, held, listed..."""
    inputs: list[str] = []
    for line in instructions.splitlines():
        if INPUT_WORDS_RX.search(line):
            inputs += [p for p in paths_in(line) if p != exclude and p not in inputs]
    return [p for p in inputs if "." in PurePosixPath(p).name]


def plan_inputs(instructions: str, listing: dict[str, int]) -> tuple[list[str], list[str]]:
    """(input files, the long ones among them) named by the instructions and present in the listing."""
    inputs = [p for p in inputs_from(instructions) if p in listing]
    for p in paths_in(instructions):  # a folder named as input: every file in it is an input
        folder = p.rstrip("/")
        if p not in listing and any(f.startswith(folder + "/") for f in listing):
            inputs += [f for f in listing if f.startswith(folder + "/") and f not in inputs]
    return inputs, [p for p in inputs if listing.get(p, 0) > 20_000]


def synthesize_plan(instructions: str, listing: dict[str, int], totals: dict[str, int] | None = None) -> str:
    """An execution plan for the instructions: explicit phases if given, else derived from the files."""
    explicit = parse_plan(instructions)
    if explicit.phases and all(p.steps for p in explicit.phases):
        return render_plan(_overview(instructions), [(p.name, [s.text for s in p.steps]) for p in explicit.phases])
    mentioned = paths_in(instructions)
    inputs, big = plan_inputs(instructions, listing)
    outputs = [p for p in mentioned if p not in listing and "." in PurePosixPath(p).name
               and p not in ("main_plan.md", "workspace_summary.md")]
    phases: list[tuple[str, list[str]]] = []
    if big:
        src = big[0]
        lines_est = (totals or {}).get(src) or max(1, listing[src] // 40)
        out = next((o for o in outputs if "requirement" in o), outputs[0] if outputs else "requirements.md")
        phases.append(("Document Analysis", [
            "List the files of the job folder",
            f"Read the beginning of {src} to learn its structure",
            f"Search {src} for section headings '^## '",
            "Record the document structure as a note",
            f"Write document_analysis.md with the outline of {src}",
        ]))
        chunks = [(a, min(a + CHUNK_LINES - 1, lines_est)) for a in range(1, lines_est + 1, CHUNK_LINES)]
        parts = [chunks[i:i + CHUNKS_PER_PHASE] for i in range(0, len(chunks), CHUNKS_PER_PHASE)]
        if len(parts) > 1 and len(parts[-1]) < 3:
            parts[-2] += parts.pop()
        for n, part in enumerate(parts, 1):
            steps = [f"Extract requirements from lines {a}-{b} of {src} into {out}" for a, b in part]
            steps.append(f"Record progress of extraction part {n} as a note")
            phases.append((f"Requirement Extraction (part {n})", steps))
        rest = [o for o in outputs if o not in (out, "review_notes.md", "document_analysis.md")]
        phases.append(("Validation", [
            f"Read {out} in full",
            f"Check {out} for duplicate requirements and write them to review_notes.md",
            *[f"Write {o}" for o in rest],
            f"Record counts of requirements in {out} by keyword as a note",
            f"Check review_notes.md and {out} once more",
        ]))
    else:
        review = ["List the files of the job folder", *[f"Read {p}" for p in inputs[:14]],
                  "Record the key facts from the inputs as a note"]
        while len(review) < 5:
            review.insert(-1, "Search the inputs for 'action'" if len(review) == 3 else "Review instructions.md")
        phases.append(("Review Inputs", review))
        produce = [f"Write {o}" for o in outputs] + [f"Check {o}" for o in outputs]
        bullets = [ln.strip()[2:].strip() for ln in instructions.splitlines()
                   if ln.strip().startswith(("- ", "* ")) and not paths_in(ln)]
        produce += bullets[: max(0, 18 - len(produce))]
        while len(produce) < 5:
            produce.append("Record what was produced as a note")
        phases.append(("Produce Deliverables", produce))
    return render_plan(_overview(instructions), phases)


def _overview(instructions: str) -> str:
    title = next((ln.lstrip("# ").strip() for ln in instructions.splitlines() if ln.startswith("# ")), "the job")
    prose = next((ln.strip() for ln in instructions.splitlines() if ln.strip() and not ln.startswith("#")), "")
    return f"Job: {title}. {prose}".strip()


def render_plan(overview: str, phases: list[tuple[str, list[str]]]) -> str:
    out = ["# Execution Plan", "", "## Overview", overview, ""]
    for i, (name, steps) in enumerate(phases, 1):
        out.append(f"## Phase {i}: {name}")
        out += [f"- [ ] {s}" for s in steps]
        out.append("")
    return "\n".join(out)


def plan_steps(plan_text: str) -> list[str]:
    """Every step of every phase of a plan, in order."""
    return [s.text for p in parse_plan(plan_text).phases for s in p.steps]


# -- the bootstrap task: write main_plan.md -------------------------------------------------
def write_plan(v: View) -> Decision:
    if v.did("write_file", path="main_plan.md"):
        return complete("main_plan.md is written.")
    needs = []
    if v.instructions() is None:
        needs.append(Call("read_file", {"path": "instructions.md", "max_lines": 400}))
    if not v.did("list_files"):
        needs.append(Call("list_files", {"path": "."}))
    if needs:
        return Decision("Gathering what I need to plan: the instructions and the files.", needs)
    # A long input is planned in chunks by line number, so learn its length first.
    _, big = plan_inputs(v.instructions() or "", v.files())
    unknown = [p for p in big if not v.did("read_file", path=p)]
    if unknown:
        return Decision(f"Checking the length of {', '.join(unknown)}.",
                        [Call("read_file", {"path": p, "max_lines": 40}) for p in unknown])
    return Decision("Writing the execution plan.",
                    [Call("write_file", {"path": "main_plan.md", "content": plan_for(v)})])


def plan_for(v: View) -> str:
    totals = {}
    for d in v.done:
        if d.name == "read_file" and (m := TOTAL_RX.match(d.result)):
            totals[d.args.get("path", "")] = int(m.group(1))
    return synthesize_plan(v.instructions() or "", v.files(), totals)


# -- transitions ----------------------------------------------------------------------------
def transition(v: View) -> Decision:
    """Follow a transition prompt: re-read, mark the plan, write the next todo list."""
    needed = ["main_plan.md", "instructions.md", "workspace_summary.md"]
    missing = [p for p in needed if not v.did("read_file", path=p)]
    if missing:
        return Decision("Phase transition: re-reading the plan, the instructions and the workspace summary.",
                        [Call("read_file", {"path": p, "max_lines": 400}) for p in missing])
    plan_text = body(v.read_result("main_plan.md") or "")
    plan = parse_plan(plan_text)
    if not plan.phases:
        return Decision("The plan is missing its phases; writing it again.",
                        [Call("write_file", {"path": "main_plan.md", "content": plan_for(v)})])
    prompt = last_prompt(v)
    carried = carried_tasks(prompt)
    if "CHECKPOINT" in prompt[:40] and carried:
        return Decision("Checkpoint: continuing with the unfinished tasks.",
                        [Call("todo_write", {"todos": [{"task": t} for t in carried]})])
    if prompt.startswith("PHASE TRANSITION") and "was reset" not in prompt:
        cur = plan.current_phase()
        if cur is not None and cur.marked_current:
            plan.mark_complete(cur)
    nxt = plan.current_phase()
    if nxt is None:
        return Decision("Every phase of the plan is complete; writing the final review list.",
                        [Call("todo_write", {"todos": [{"task": "Verify all deliverables"},
                                                       {"task": "Generate summary report"},
                                                       {"task": "Call job_complete()"}]})])
    plan.mark_current(nxt)
    calls = []
    new_plan = plan.render()
    if new_plan.strip() != plan_text.strip() and not v.did("write_file", path="main_plan.md"):
        calls.append(Call("write_file", {"path": "main_plan.md", "content": new_plan}))
    # After a rewind the same steps come again: each one finds what it already did and does not redo it.
    steps = [s.text for s in nxt.steps if not s.done] or nxt.step_texts
    calls.append(Call("todo_write", {"todos": [{"task": s} for s in steps]}))
    return Decision(f"Updating main_plan.md and writing the todo list for phase '{nxt.name}'.", calls)


def last_prompt(v: View) -> str:
    for m in reversed(v.request.messages):
        if m.role == "user" and m.meta.get("kind") == "transition_prompt":
            return m.content
    return ""


def carried_tasks(prompt: str) -> list[str]:
    if "Unfinished tasks carried over:" not in prompt:
        return []
    block = prompt.split("Unfinished tasks carried over:", 1)[1]
    out = []
    for ln in block.splitlines()[1:]:
        if not ln.startswith("- "):
            break
        out.append(ln[2:].strip())
    return out
