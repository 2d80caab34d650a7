"""The scripted agent: a deterministic model that follows the harness protocol (the turn policy).

It is the offline demo model and the workhorse of the integration tests. Like a real model it sees only
the request: the ACTIVE TODO LIST block, the plan and the conversation. It keeps no hidden state, so it
behaves the same after a compaction, a restart or a resume: whatever evidence of the current task is no
longer visible (a file it read before a compaction) it simply gathers again. It uses no clock and no
randomness: the same request always gets the same decision.

Each turn it answers what the guardrails said about its last turn, else follows a transition, else finds
the current task, looks at the tool calls already made for that task (everything after the last todo tool
result) and emits the next calls. Every recipe ends with todo_complete, so the agent always progresses.

It is a fixed script, not an AI, and says so: what it cannot do it notes as not done instead of faking it.
The concerns live in sibling modules:

- :mod:`console.providers.scripted_view`: what one request shows (the task, the calls made for it, the
  file contents still visible) and the shapes of a decision;
- :mod:`console.providers.scripted_planning`: the execution plan and the transitions between phases;
- :mod:`console.providers.scripted_requirements`: requirement extraction, chunk by chunk, at most once;
- :mod:`console.providers.scripted_writing`: the deliverables it can write, and notes for those it cannot;
- :mod:`console.providers.scripted_completion`: the final review, its deliverables and its confidence.
"""

from __future__ import annotations

import re

from console.engine.messages import Message, ModelRequest
from console.providers import scripted_completion as completion
from console.providers import scripted_planning as planning
from console.providers import scripted_requirements as requirements
from console.providers import scripted_writing as writing
from console.providers.scripted_view import (
    BUILTIN_TOOLS,
    DENIED,
    Call,
    Decision,
    View,
    args_of,
    once,
    paths_in,
    read,
)

__all__ = ["Call", "Decision", "ScriptedAgent", "summarize"]

# How the harness answers a call a policy denied for want of another tool, and a stop it refused.
NOT_YET_RX = re.compile(r"\(not yet: ([\w, -]{1,300})\)")
MISSING_RX = re.compile(r"missing: ([^\n\]]{1,500}?)\. Create")
QUOTED_RX = re.compile(r"['\"]([^'\"]+)['\"]")
# How the harness names the evidence a tick lacks (console.engine.evidence's Need.how): "call x()", "read p with
# read_file(path='p')". Bounded, so a long refusal cannot make them backtrack.
EVIDENCE_CALL_RX = re.compile(r"\bcall (\w{1,64})\(\)")
EVIDENCE_READ_RX = re.compile(r"read_file\(path='([^'\n]{1,300})'\)")


class ScriptedAgent:
    """Decides the next tool calls from a request. Pure: same request, same decision."""

    def decide(self, request: ModelRequest) -> Decision:
        if not request.tools and request.system.startswith("SUMMARIZE"):
            return Decision(summarize(request.messages), [])
        v = View(request)
        if (reaction := react(v)) is not None:
            return reaction
        if v.transition:
            return planning.transition(v)
        if v.task is None:
            return Decision("The todo list has no open task; the job looks finished.", [])
        return task(v, v.task)


# -- the guardrails' answers ------------------------------------------------------------------
def react(v: View) -> Decision | None:
    """Answer what the guardrails said about the last turn first, as a model reading its results would:
    read a file it was told to read first, run the tools a command needs first, create the files a refused
    stop said were missing (a mechanical review for a review file, else a note that it could not)."""
    msgs = v.request.messages
    last = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "assistant"), None)
    if last is None:
        return None
    calls = {c.id: c for c in msgs[last].tool_calls}
    for m in msgs[last + 1:]:
        text = m.content
        if m.role == "tool" and text.startswith(DENIED) and (call := calls.get(m.tool_call_id or "")):
            path = args_of(call.arguments).get("path")
            if "read_before_write" in text[:60] and isinstance(path, str):
                return Decision(f"The policy wants {path} read before it is overwritten: reading it.",
                                [Call("read_file", {"path": path})])
            if (need := NOT_YET_RX.search(text)) is not None:
                names = [n.strip() for n in need.group(1).replace(" and ", ",").split(",") if n.strip() in v.tools]
                if names:
                    return Decision(f"{call.name} needs {', '.join(names)} first: running {names[0]}.",
                                    [Call(names[0])])
        # A tick refused (or a stop, for ticks an older run made) for want of the work the task names: do it.
        evidence_refused = ((m.role == "tool" and text.startswith("todo_complete refused:"))
                            or "without the evidence it names" in text)
        if evidence_refused and (calls_needed := _evidence_calls(v, text)):
            return Decision("The harness's record does not show that work yet: doing it now.", calls_needed)
        refused = m.meta.get("kind") == "completion_blocked" or (m.role == "tool" and "was refused" in text[:40])
        if refused and (missing := MISSING_RX.search(text)) is not None:
            paths = [p.strip() for p in missing.group(1).split(",") if p.strip()][:5]
            claimed = next((args_of(c.arguments).get("deliverables") for c in calls.values()
                            if c.name == "job_complete"), None)
            return Decision(f"The job is not complete yet: creating {', '.join(paths)}.",
                            [c for p in paths for c in _required_file(v, p, claimed)])
    return None


def _evidence_calls(v: View, text: str) -> list[Call]:
    """The calls a refusal says would give the missing evidence (at most 8, each once)."""
    out: list[Call] = []
    for m in EVIDENCE_CALL_RX.finditer(text[:8000]):
        if m.group(1) in v.tools and m.group(1) not in ("job_complete", "todo_complete", "read_file") and \
                all(c.name != m.group(1) for c in out):
            out.append(Call(m.group(1)))
    for m in EVIDENCE_READ_RX.finditer(text[:8000]):
        if all(c.args.get("path") != m.group(1) for c in out):
            out.append(Call("read_file", {"path": m.group(1)}))
    return out[:8]


def _required_file(v: View, path: str, claimed: object) -> list[Call]:
    """A file the completion check requires: a review it can do mechanically, or a note that it cannot."""
    if any(w in path.lower() for w in writing.REVIEW_WORDS):
        listed = [p for p in claimed if isinstance(p, str)] if isinstance(claimed, list) else []
        return [Call("write_file", {"path": path, "content": writing.review(listed, v.files())}),
                Call("add_accomplishment", {"text": f"Wrote {path}"})]
    draft = writing.not_done(path, f"The job's completion check requires {path}.", [],
                             "the completion check requires this file, and no recipe of it makes it")
    return [Call("write_file", {"path": path, "content": draft.content}),
            writing.not_done_note(f"Create {path}", draft.what, path)]


# -- tasks --------------------------------------------------------------------------------------
def task(v: View, text: str) -> Decision:
    t = text.lower()
    if "job_complete" in t:
        return completion.job_complete(v)
    if "generate workspace summary" in t or "generate_workspace_summary" in t:
        return once(v, Call("generate_workspace_summary"), "Generating the workspace summary.")
    if "execution plan" in t or ("plan" in t and "main_plan.md" in t and ("create" in t or "write" in t)):
        return planning.write_plan(v)
    if "divide plan" in t or "executable phases" in t:
        return once(v, Call("read_file", {"path": "main_plan.md", "max_lines": 400}),
                    "Checking that each phase of main_plan.md has 5-20 steps.")
    if (m := requirements.LINES_RX.search(text)) is not None:
        return requirements.extract_chunk(v, text, int(m.group(1)), int(m.group(2)), m.group(3).strip("`'\".,"))
    if "verify" in t and "deliverable" in t:
        return completion.verify(v)
    if "summary report" in t:
        return completion.summary_report(v)
    if "duplicate" in t:
        return requirements.duplicates(v, text)
    paths = paths_in(text)
    commands = [p for p in paths if p in v.tools and p not in BUILTIN_TOOLS]
    if t.startswith("run") and commands:
        return once(v, Call(commands[0]), f"Running the job's {commands[0]} tool.")
    if t.startswith(("read", "review", "study", "skim", "open")) and paths:
        return read(v, paths)
    if t.startswith(writing.WRITE_VERBS) and paths:
        return writing.write(v, text)
    if t.startswith(("check", "validate", "proofread", "confirm")) and paths:
        return read(v, paths, verb="Checking")
    if t.startswith(("list", "inventory", "survey")):
        return once(v, Call("list_files", {"path": "."}), "Listing the files of the job folder.")
    if t.startswith("search"):
        m = QUOTED_RX.search(text)
        pattern = m.group(1) if m else (text.split()[-1] if text.split() else ".")
        where = paths[0] if paths else "."
        return once(v, Call("search_files", {"pattern": pattern, "path": where}), f"Searching for {pattern}.")
    if t.startswith("record") and "count" in t:
        return requirements.count_statements(v, text)
    if t.startswith(("record", "note")):
        return once(v, Call("add_note", {"text": note_for(v, text)}), "Recording a note.")
    return writing.skip(text, "it is not one of the things a fixed script can do")


def note_for(v: View, text: str) -> str:
    """A note of what it has seen: the first line of each file still visible."""
    facts = []
    for p, content in sorted(v.reads.items()):
        first = next((ln.strip("# ").strip() for ln in content.splitlines() if ln.strip()), "")
        facts.append(f"{p}: {first[:80]}")
    return f"{text}: " + ("; ".join(facts[:6]) if facts else "nothing to add")


def summarize(messages: list[Message]) -> str:
    """What a summarizing model would say, from the tool calls it can see: deterministic and factual."""
    counts: dict[str, int] = {}
    files: list[str] = []
    for m in messages:
        for c in m.tool_calls:
            counts[c.name] = counts.get(c.name, 0) + 1
            p = args_of(c.arguments).get("path")
            if p and p not in files:
                files.append(p)
    calls = ", ".join(f"{n} x {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (f"In this stretch the agent made {sum(counts.values())} tool calls ({calls or 'none'}). "
            f"Files touched: {', '.join(files[:12]) or 'none'}.")
