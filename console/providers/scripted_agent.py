"""The scripted agent: a deterministic model that follows the harness protocol.

It is the offline demo model and the workhorse of the integration tests. Like
a real model it sees only the request: the ACTIVE TODO LIST block, the plan
and the conversation. It keeps no hidden state, so it behaves the same after a
compaction, a restart or a resume: whatever evidence of the current task is no
longer visible (a file it read before a compaction) it simply gathers again.

Each turn it finds the current task, looks at the tool calls already made for
that task (everything after the last todo tool result), and emits the next
calls. Every recipe ends with todo_complete, so the agent always progresses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from console.engine.messages import Message, ModelRequest
from console.engine.plan import parse_plan

TODO_TOOLS = {"todo_complete", "todo_write", "todo_rewind", "archive_and_reset"}
BUILTIN_TOOLS = {*TODO_TOOLS, "read_file", "write_file", "append_file", "edit_file", "list_files", "search_files",
                 "generate_workspace_summary", "add_accomplishment", "add_note", "job_complete"}
LOOKUP_TOOLS = {"read_file", "list_files", "search_files"}
# These run on text the agent wrote or read (tools/registry results, todo text): none may backtrack badly
# (tests/unit/test_regex_safety.py), and numbers are captured with at most 12-15 digits, so int() never
# meets a 5,000-digit run (ValueError).
PHASE_RX = re.compile(r"^Phase: (.*)$", re.MULTILINE)
PATH_RX = re.compile(r"`([^`\s]+)`|(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:md|txt|json|csv|toml|py|yaml|yml))(?![\w/])")
LINES_RX = re.compile(r"lines? (\d{1,12})\s*[-–]\s*(\d{1,12}) of ([^\s,;]+)", re.IGNORECASE)
REQ_RX = re.compile(r"\b(shall|must|should)\b", re.IGNORECASE)
ACTION_RX = re.compile(r"^\s*(?:[-*]\s*)?(?:\[ \]\s*)?(?:action(?: item)?|todo)\s*[:\-]\s*(.+)$", re.IGNORECASE)
RANGE_RX = re.compile(r"^\[[^\]]*: lines (\d{1,12})-(\d{1,12}) of (\d{1,12})\]")
TOTAL_RX = re.compile(r"^\[[^\]]*: lines \d{1,12}-\d{1,12} of (\d{1,12})\]")
QUOTED_RX = re.compile(r"['\"]([^'\"]+)['\"]")
MORE_LINES_RX = re.compile(r"\n\[\.\.\. \d+ more lines:.*\]$")
LISTING_RX = re.compile(r"^(.*) \((\d{1,15}) bytes\)$")
LIST_MARK_RX = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
SENTENCE_RX = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
SENTENCE_END_RX = re.compile(r"(?<=[.!?])\s+")
CHUNK_LINES = 150
CHUNKS_PER_PHASE = 8


@dataclass
class Call:
    name: str
    args: dict = field(default_factory=dict)


@dataclass
class Decision:
    text: str
    calls: list[Call]


@dataclass
class Done:
    """A tool call made for the current task, with its result."""

    name: str
    args: dict
    result: str
    ok: bool


def _args(raw: str) -> dict:
    try:
        data = json.loads(raw or "{}")
        return data if isinstance(data, dict) else {}
    except json.JSONDecodeError:
        return {}


CURRENT_MARK = "← CURRENT"
# How the harness answers a call a tool policy denied, and a stop the completion check refused.
DENIED = "Denied by the "
NOT_YET_RX = re.compile(r"\(not yet: ([\w, -]{1,300})\)")
MISSING_RX = re.compile(r"missing: ([^\n\]]{1,500}?)\. Create")
MAX_TASK_DIGITS = 6


def current_task(text: str) -> tuple[int, str] | None:
    """(number, text) of the first Layer 2 line "[ ] N. task      ← CURRENT", found with string methods:
    the todo text is the agent's, and a pattern with adjacent quantifiers backtracks on long space runs."""
    if CURRENT_MARK not in text:
        return None
    for line in text.split("\n"):
        if not (line.startswith("[ ] ") and line.endswith(CURRENT_MARK)):
            continue
        rest = line[4:]
        digits = 0
        while digits < len(rest) and digits <= MAX_TASK_DIGITS and rest[digits].isdecimal():
            digits += 1
        if not 1 <= digits <= MAX_TASK_DIGITS or rest[digits: digits + 2] != ". ":
            continue
        body = rest[digits + 2: len(rest) - len(CURRENT_MARK)]
        if body[-1:].isspace():  # the marker is set off by spaces
            return int(rest[:digits]), body.strip()
    return None


def paths_in(text: str) -> list[str]:
    out: list[str] = []
    for m in PATH_RX.finditer(text):
        p = (m.group(1) or m.group(2) or "").strip(".,:;()'\"")
        if p and p not in out and not p.startswith(("http", "-")) and "(" not in p:
            out.append(p)
    return out


class View:
    """What the agent can see in one request."""

    def __init__(self, request: ModelRequest) -> None:
        self.request = request
        self.protected = request.protected
        current = current_task(self.protected)
        self.task_no = current[0] if current else None
        self.task = current[1] if current else None
        pm = PHASE_RX.search(self.protected)
        self.phase = pm.group(1).strip() if pm else ""
        self.transition = "transition in progress" in self.protected
        self.done = self._done_since_anchor(request.messages)
        self.reads = self._visible_reads(request.messages)

    @staticmethod
    def _done_since_anchor(messages: list[Message]) -> list[Done]:
        results: dict[str, Message] = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
        done: list[Done] = []
        for m in messages:
            if m.role == "user" and m.meta.get("kind") in {"transition_prompt", "summary", "kickoff"}:
                done = []
            if m.role != "assistant":
                continue
            for c in m.tool_calls:
                res = results.get(c.id)
                if res is None:
                    continue
                if c.name in TODO_TOOLS:
                    done = []
                    continue
                if res.meta.get("masked") and c.name in LOOKUP_TOOLS:
                    continue  # a masked lookup is as good as not done: look again
                if res.content.startswith(DENIED):
                    continue  # a call a policy denied never ran
                done.append(Done(c.name, _args(c.arguments), res.content, bool(res.meta.get("ok", True))))
        return done

    @staticmethod
    def _visible_reads(messages: list[Message]) -> dict[str, str]:
        """File contents still visible in the conversation, keyed by path (chunks in line order)."""
        calls = {c.id: c for m in messages if m.role == "assistant" for c in m.tool_calls}
        reads: dict[str, dict[int, str]] = {}
        for m in messages:
            if m.role != "tool" or m.name != "read_file" or not m.meta.get("ok", True):
                continue
            call = calls.get(m.tool_call_id or "")
            if call is None or m.meta.get("masked"):
                continue
            args = _args(call.arguments)
            # A re-read of the same range replaces the earlier one instead of doubling it.
            start = args.get("start_line", 1)
            reads.setdefault(str(args.get("path", "")), {})[start if type(start) is int else 1] = _body(m.content)
        return {k: "\n".join(v[i] for i in sorted(v)) for k, v in reads.items()}

    def did(self, name: str, **match: object) -> Done | None:
        for d in self.done:
            if d.name == name and all(d.args.get(k) == v for k, v in match.items()):
                return d
        return None

    def read_result(self, path: str) -> str | None:
        d = self.did("read_file", path=path)
        return d.result if d else None


class ScriptedAgent:
    """Decides the next tool calls from a request. Pure: same request, same decision."""

    def decide(self, request: ModelRequest) -> Decision:
        if not request.tools and request.system.startswith("SUMMARIZE"):
            return Decision(summarize(request.messages), [])
        v = View(request)
        if (reaction := self._react(v)) is not None:
            return reaction
        if v.transition:
            return self._transition(v)
        if v.task is None:
            return Decision("The todo list has no open task; the job looks finished.", [])
        return self._task(v, v.task)

    # -- the guardrails' answers ----------------------------------------------------------
    def _react(self, v: View) -> Decision | None:
        """Answer what the guardrails said about the last turn first, as a model reading its results would:
        read a file it was told to read first, run the tools a command needs first, create the files a
        refused stop said were missing."""
        msgs = v.request.messages
        last = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "assistant"), None)
        if last is None:
            return None
        tools = {t.name for t in v.request.tools}
        calls = {c.id: c for c in msgs[last].tool_calls}
        for m in msgs[last + 1:]:
            text = m.content
            if m.role == "tool" and text.startswith(DENIED) and (call := calls.get(m.tool_call_id or "")):
                path = _args(call.arguments).get("path")
                if "read_before_write" in text[:60] and isinstance(path, str):
                    return Decision(f"The policy wants {path} read before it is overwritten: reading it.",
                                    [Call("read_file", {"path": path})])
                if (need := NOT_YET_RX.search(text)) is not None:
                    names = [n.strip() for n in need.group(1).replace(" and ", ",").split(",") if n.strip() in tools]
                    if names:
                        return Decision(f"{call.name} needs {', '.join(names)} first: running {names[0]}.",
                                        [Call(names[0])])
            refused = m.meta.get("kind") == "completion_blocked" or (m.role == "tool" and "was refused" in text[:40])
            if refused and (missing := MISSING_RX.search(text)) is not None:
                paths = [p.strip() for p in missing.group(1).split(",") if p.strip()][:5]
                return Decision(f"The job is not complete yet: creating {', '.join(paths)}.", [
                    Call("write_file", {"path": p, "content": compose_document(p, "Review of the job's deliverables",
                                                                               dict(list(v.reads.items())[:3]))})
                    for p in paths])
        return None

    # -- transitions -------------------------------------------------------------
    def _transition(self, v: View) -> Decision:
        needed = ["main_plan.md", "instructions.md", "workspace_summary.md"]
        missing = [p for p in needed if not v.did("read_file", path=p)]
        if missing:
            return Decision("Phase transition: re-reading the plan, the instructions and the workspace summary.",
                            [Call("read_file", {"path": p, "max_lines": 400}) for p in missing])
        plan_text = _body(v.read_result("main_plan.md") or "")
        plan = parse_plan(plan_text)
        if not plan.phases:
            return Decision("The plan is missing its phases; writing it again.",
                            [Call("write_file", {"path": "main_plan.md", "content": self._plan_for(v)})])
        prompt = _last_prompt(v.request.messages)
        carried = _carried(prompt)
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
        steps = [s.text for s in nxt.steps if not s.done] or nxt.step_texts
        calls.append(Call("todo_write", {"todos": [{"task": s} for s in steps]}))
        return Decision(f"Updating main_plan.md and writing the todo list for phase '{nxt.name}'.", calls)

    # -- tasks -----------------------------------------------------------------------
    def _task(self, v: View, task: str) -> Decision:
        t = task.lower()
        if "job_complete" in t:
            return self._job_complete(v)
        if "generate workspace summary" in t or "generate_workspace_summary" in t:
            return self._once(v, Call("generate_workspace_summary"), "Generating the workspace summary.")
        if "execution plan" in t or ("plan" in t and "main_plan.md" in t and ("create" in t or "write" in t)):
            return self._write_plan(v)
        if "divide plan" in t or "executable phases" in t:
            return self._once(v, Call("read_file", {"path": "main_plan.md", "max_lines": 400}),
                              "Checking that each phase of main_plan.md has 5-20 steps.")
        if (m := LINES_RX.search(task)) is not None:
            return self._extract_chunk(v, task, int(m.group(1)), int(m.group(2)), m.group(3).strip("`'\".,"))
        if "verify" in t and "deliverable" in t:
            return self._verify(v)
        if "summary report" in t:
            return self._summary_report(v)
        if "duplicate" in t:
            return self._duplicates(v, task)
        paths = paths_in(task)
        commands = [p for p in paths if p in {x.name for x in v.request.tools} and p not in BUILTIN_TOOLS]
        if t.startswith("run") and commands:
            return self._once(v, Call(commands[0]), f"Running the job's {commands[0]} tool.")
        if t.startswith(("read", "review", "study", "skim", "open")) and paths:
            return self._read(v, paths)
        if t.startswith(("write", "create", "draft", "produce", "compose")) and paths:
            return self._write(v, paths[0], task)
        if t.startswith(("check", "validate", "proofread", "confirm")) and paths:
            return self._read(v, paths, verb="Checking")
        if t.startswith(("list", "inventory", "survey")):
            return self._once(v, Call("list_files", {"path": "."}), "Listing the files of the job folder.")
        if t.startswith("search"):
            m = QUOTED_RX.search(task)
            pattern = m.group(1) if m else (task.split()[-1] if task.split() else ".")
            where = paths[0] if paths else "."
            return self._once(v, Call("search_files", {"pattern": pattern, "path": where}), f"Searching for {pattern}.")
        if t.startswith("record") and "count" in t:
            target = next((p for p in paths_in(task) if p.endswith(".md")), None) or next(
                (p for p in paths_in(self._instructions(v) or "") if "requirement" in p), "requirements.md")
            if target not in v.reads:
                return Decision(f"Reading {target} to count.", [Call("read_file", {"path": target, "max_lines": 400})])
            items = [ln for ln in v.reads[target].splitlines() if ln.startswith("- ")]
            counts = {k: sum(1 for ln in items if re.search(r"\b" + k + r"\b", ln, re.IGNORECASE))
                      for k in ("shall", "must", "should")}
            summary = ", ".join(f"{n} with '{k}'" for k, n in counts.items())
            return self._once(v, Call("add_note", {"text": f"{target}: {len(items)} statements ({summary})"}),
                              "Recording the counts.")
        if t.startswith(("record", "note")):
            return self._once(v, Call("add_note", {"text": self._note_for(v, task)}), "Recording a note.")
        return self._once(v, Call("add_accomplishment", {"text": f"Done: {task}"}), f"Working on: {task}.")

    def _complete(self, text: str, *calls: Call) -> Decision:
        return Decision(text, [*calls, Call("todo_complete")])

    def _once(self, v: View, call: Call, text: str) -> Decision:
        if v.did(call.name):
            return self._complete("Done with this task.")
        return Decision(text, [call])

    def _read(self, v: View, paths: list[str], verb: str = "Reading") -> Decision:
        todo = [p for p in paths if not v.did("read_file", path=p)]
        if not todo:
            return self._complete(f"Read {', '.join(paths)}.")
        return Decision(f"{verb} {', '.join(todo)}.", [Call("read_file", {"path": p}) for p in todo])

    # -- planning ------------------------------------------------------------------
    def _instructions(self, v: View) -> str | None:
        return v.reads.get("instructions.md") or (_body(v.read_result("instructions.md") or "") or None)

    def _write_plan(self, v: View) -> Decision:
        if v.did("write_file", path="main_plan.md"):
            return self._complete("main_plan.md is written.")
        needs = []
        if self._instructions(v) is None:
            needs.append(Call("read_file", {"path": "instructions.md", "max_lines": 400}))
        if not v.did("list_files"):
            needs.append(Call("list_files", {"path": "."}))
        if needs:
            return Decision("Gathering what I need to plan: the instructions and the files.", needs)
        # A long input is planned in chunks by line number, so learn its length first.
        _, big = plan_inputs(self._instructions(v) or "", self._files(v))
        unknown = [p for p in big if not v.did("read_file", path=p)]
        if unknown:
            return Decision(f"Checking the length of {', '.join(unknown)}.",
                            [Call("read_file", {"path": p, "max_lines": 40}) for p in unknown])
        return Decision("Writing the execution plan.",
                        [Call("write_file", {"path": "main_plan.md", "content": self._plan_for(v)})])

    def _files(self, v: View) -> dict[str, int]:
        return _listing((v.did("list_files") or Done("", {}, "", True)).result)

    def _plan_for(self, v: View) -> str:
        instructions = self._instructions(v) or ""
        totals = {}
        for d in v.done:
            if d.name == "read_file" and (m := TOTAL_RX.match(d.result)):
                totals[d.args.get("path", "")] = int(m.group(1))
        return synthesize_plan(instructions, self._files(v), totals)

    # -- doing -----------------------------------------------------------------------
    def _extract_chunk(self, v: View, task: str, start: int, end: int, src: str) -> Decision:
        paths = paths_in(task.split(" into ", 1)[1]) if " into " in task else []
        out = paths[0] if paths else "requirements.md"
        reads = [d for d in v.done if d.name == "read_file" and d.args.get("path") == src]
        if reads and not reads[-1].ok:
            return self._complete(f"Could not read {src}.",
                                  Call("add_note", {"text": f"Could not read lines {start}-{end} of {src}: "
                                                            f"{reads[-1].result[:120]}"}))
        # A budget-limited read returns fewer lines than asked: read on from where it stopped.
        upto = start - 1
        for d in reads:
            m = RANGE_RX.match(d.result)
            if m and int(m.group(1)) <= upto + 1:
                upto = max(upto, int(m.group(2)))
        if upto < end and not (reads and RANGE_RX.match(reads[-1].result) and
                               int(RANGE_RX.match(reads[-1].result).group(3)) <= upto):
            return Decision(f"Reading lines {upto + 1}-{end} of {src}.",
                            [Call("read_file", {"path": src, "start_line": upto + 1, "max_lines": end - upto})])
        if v.did("append_file", path=out):
            return self._complete("Chunk done.")
        found = extract_requirements("\n".join(_body(d.result) for d in reads if d.ok))
        block = [f"\n## Lines {start}-{end} of {src}", ""]
        block += [f"- {s}" for s in found] or ["- (no requirement statements in this range)"]
        return self._complete(
            f"Found {len(found)} requirement statements in lines {start}-{end}.",
            Call("append_file", {"path": out, "content": "\n".join(block) + "\n"}),
            Call("add_accomplishment", {"text": f"Extracted {len(found)} requirements from lines {start}-{end} "
                                                f"of {src}"}),
        )

    def _write(self, v: View, path: str, task: str) -> Decision:
        if v.did("write_file", path=path):
            return self._complete(f"{path} is written.")
        instructions = self._instructions(v)
        if instructions is None:
            return Decision("Re-reading the instructions to see what this file needs.",
                            [Call("read_file", {"path": "instructions.md", "max_lines": 400})])
        if not v.did("list_files"):
            return Decision("Listing the files to find the inputs.", [Call("list_files", {"path": "."})])
        inputs = [p for p in plan_inputs(instructions, self._files(v))[0] if p != path]
        if "outline" in task.lower() and inputs:
            found = v.did("search_files")
            if found is None:
                return Decision(f"Collecting the section headings of {inputs[0]}.", [Call(
                    "search_files", {"pattern": "^#{1,3} ", "path": inputs[0], "max_results": 300})])
            heads = [ln.split(": ", 1)[1] for ln in found.result.splitlines() if ": " in ln]
            outline = [f"# {PurePosixPath(path).stem.replace('_', ' ').title()}", "",
                       f"Outline of {inputs[0]} ({len(heads)} headings):", ""]
            outline += [("  " * max(0, h.count("#", 0, 4) - 2)) + "- " + h.lstrip("# ").strip() for h in heads]
            return self._complete(f"Writing the outline to {path}.",
                                  Call("write_file", {"path": path, "content": "\n".join(outline) + "\n"}))
        missing = [p for p in inputs if p not in v.reads]
        if missing:
            return Decision(f"Reading the inputs for {path}.", [Call("read_file", {"path": p}) for p in missing])
        content = compose_document(path, task, {p: v.reads[p] for p in inputs})
        if path in v.reads:
            # Updating a file it has read: the new content goes on top, what was there stays below.
            old = [ln for ln in v.reads[path].splitlines() if not ln.startswith("# ")]
            content = content.rstrip("\n") + "\n\n" + "\n".join(old).strip("\n") + "\n"
        if path in self._files(v):
            # Overwriting a file that exists: see the result (a policy may deny it) before calling it done.
            return Decision(f"Writing {path}.", [Call("write_file", {"path": path, "content": content}),
                                                 Call("add_accomplishment", {"text": f"Wrote {path}"})])
        return self._complete(f"Writing {path}.", Call("write_file", {"path": path, "content": content}),
                              Call("add_accomplishment", {"text": f"Wrote {path}"}))

    def _note_for(self, v: View, task: str) -> str:
        facts = []
        for p, body in sorted(v.reads.items()):
            first = next((ln.strip("# ").strip() for ln in body.splitlines() if ln.strip()), "")
            facts.append(f"{p}: {first[:80]}")
        return f"{task}: " + ("; ".join(facts[:6]) if facts else "nothing to add")

    def _deliverables(self, v: View) -> list[str]:
        listing = _listing((v.did("list_files") or Done("", {}, "", True)).result)
        instr = self._instructions(v) or ""
        wanted = [p for p in paths_in(instr) if p in listing]
        skip = {"instructions.md", "main_plan.md", "workspace_summary.md", "job.toml"}
        outs = [p for p in wanted if p not in skip and p not in _inputs_from(instr, "")]
        return outs or [p for p in listing if p.endswith(".md") and p not in skip][:5]

    def _verify(self, v: View) -> Decision:
        if not v.did("list_files"):
            calls = [Call("list_files", {"path": "."})]
            if self._instructions(v) is None:
                calls.append(Call("read_file", {"path": "instructions.md", "max_lines": 400}))
            return Decision("Verifying the deliverables: listing the files.", calls)
        todo = [p for p in self._deliverables(v) if not v.did("read_file", path=p)]
        if todo:
            return Decision(f"Checking {', '.join(todo)}.",
                            [Call("read_file", {"path": p, "max_lines": 40}) for p in todo])
        return self._complete("All deliverables are present.",
                              Call("add_note", {"text": "Verified deliverables: "
                                                        + ", ".join(self._deliverables(v))}))

    def _summary_report(self, v: View) -> Decision:
        if not v.did("generate_workspace_summary"):
            return Decision("Generating the workspace summary for the report.", [Call("generate_workspace_summary")])
        if not v.did("read_file", path="workspace_summary.md"):
            return Decision("Reading the summary.", [Call("read_file", {"path": "workspace_summary.md"})])
        if v.did("write_file", path="summary_report.md"):
            return self._complete("The report is written.")
        body = _body(v.read_result("workspace_summary.md") or "")
        acc = [ln for ln in _section(body, "Accomplishments") if ln.startswith("- ")]
        notes = [ln for ln in _section(body, "Notes") if ln.startswith("- ")]
        report = ["# Summary Report", "", "## What was done", *acc, "", "## Notes", *(notes or ["- none"]), ""]
        return self._complete("Writing summary_report.md.",
                              Call("write_file", {"path": "summary_report.md", "content": "\n".join(report)}))

    def _duplicates(self, v: View, task: str) -> Decision:
        paths = paths_in(task)
        src = paths[0] if paths else "requirements.md"
        if not v.did("read_file", path=src):
            return Decision(f"Reading {src} to look for duplicates.", [Call("read_file", {"path": src,
                                                                                          "max_lines": 400})])
        body = _body(v.read_result(src) or "")
        seen: dict[str, int] = {}
        dups, vague = [], []
        for ln in body.splitlines():
            if not ln.startswith("- "):
                continue
            key = re.sub(r"[^a-z0-9 ]", "", ln[2:].lower()).strip()
            seen[key] = seen.get(key, 0) + 1
            if seen[key] == 2:
                dups.append(ln[2:])
            if VAGUE_RX.search(ln) and len(ln) < 120:
                vague.append(ln[2:])
        out = paths[1] if len(paths) > 1 else "review_notes.md"
        text = ["# Review Notes", "", "## Duplicate statements", *([f"- {d}" for d in dups] or ["- none found"]),
                "", "## Too vague to test", *([f"- {x}" for x in vague] or ["- none found"]), ""]
        return self._complete(f"Found {len(dups)} duplicates and {len(vague)} vague statements.",
                              Call("write_file", {"path": out, "content": "\n".join(text)}))

    def _job_complete(self, v: View) -> Decision:
        if not v.did("list_files"):
            return Decision("Final check of the workspace before completing.", [Call("list_files", {"path": "."})])
        deliverables = self._deliverables(v)
        return Decision("Everything is done. Completing the job.", [Call("job_complete", {
            "summary": f"Completed all phases of main_plan.md; produced {', '.join(deliverables) or 'no files'}.",
            "deliverables": deliverables,
            "confidence": 0.85,
            "notes": "Produced by the offline scripted model: content is extracted, not reasoned.",
        })])


# -- pure helpers (also used by tests) --------------------------------------------------
def summarize(messages: list[Message]) -> str:
    """What a summarizing model would say, from the tool calls it can see: deterministic and factual."""
    counts: dict[str, int] = {}
    files: list[str] = []
    for m in messages:
        for c in m.tool_calls:
            counts[c.name] = counts.get(c.name, 0) + 1
            p = _args(c.arguments).get("path")
            if p and p not in files:
                files.append(p)
    calls = ", ".join(f"{n} x {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (f"In this stretch the agent made {sum(counts.values())} tool calls ({calls or 'none'}). "
            f"Files touched: {', '.join(files[:12]) or 'none'}.")


def _body(tool_result: str) -> str:
    """Strip the read_file header line and continuation hint."""
    if tool_result.startswith("[") and "\n" in tool_result:
        tool_result = tool_result.split("\n", 1)[1]
    return MORE_LINES_RX.sub("", tool_result)


def _section(md: str, title: str) -> list[str]:
    out, on = [], False
    for ln in md.splitlines():
        if ln.startswith("## "):
            on = ln[3:].strip().lower() == title.lower()
            continue
        if on:
            out.append(ln)
    return out


def _listing(result: str) -> dict[str, int]:
    files = {}
    for ln in result.splitlines():
        m = LISTING_RX.match(ln.strip())
        if m:
            files[m.group(1)] = int(m.group(2))
    return files


def _last_prompt(messages: list[Message]) -> str:
    for m in reversed(messages):
        if m.role == "user" and m.meta.get("kind") == "transition_prompt":
            return m.content
    return ""


def _carried(prompt: str) -> list[str]:
    if "Unfinished tasks carried over:" not in prompt:
        return []
    block = prompt.split("Unfinished tasks carried over:", 1)[1]
    out = []
    for ln in block.splitlines()[1:]:
        if not ln.startswith("- "):
            break
        out.append(ln[2:].strip())
    return out


def _inputs_from(instructions: str, exclude: str) -> list[str]:
    """Input files named in the instructions: those under an 'Input' heading or said to exist."""
    inputs = []
    for line in instructions.splitlines():
        low = line.lower()
        if any(w in low for w in ("input", "read", "source", "holds", "contains", "given")):
            inputs += [p for p in paths_in(line) if p != exclude and p not in inputs]
    return [p for p in inputs if "." in PurePosixPath(p).name]


def _blocks(text: str) -> list[str]:
    """Paragraphs and list items: headings, tables, code and blank lines end a sentence."""
    blocks: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            blocks.append(" ".join(cur))
            cur.clear()

    fenced = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("```"):
            fenced = not fenced
            flush()
            continue
        if fenced or not s or s.startswith(("#", "|")):
            flush()
            continue
        if LIST_MARK_RX.match(s):
            flush()
            s = LIST_MARK_RX.sub("", s)
        cur.append(s)
    flush()
    return blocks


def extract_requirements(text: str) -> list[str]:
    """Sentences with shall/must/should, one per statement, in document order."""
    out = []
    for block in _blocks(text):
        if block.lower().startswith("note:"):
            continue
        for sentence in SENTENCE_RX.split(block):
            sentence = sentence.strip()
            if REQ_RX.search(sentence) and 20 <= len(sentence) <= 500:
                out.append(sentence)
    return out


VAGUE_RX = re.compile(r"\b(quickly|fast|easy|simple|clear|good|reasonable|secure|highly available|"
                      r"user-friendly|appropriate|adequate|usable)\b", re.IGNORECASE)


def compose_document(path: str, task: str, inputs: dict[str, str]) -> str:
    name = PurePosixPath(path).stem.replace("_", " ").replace("-", " ").title()
    lines = [f"# {name}", ""]
    low = path.lower() + " " + task.lower()
    for src, body in inputs.items():
        title = next((ln.lstrip("# ").strip() for ln in body.splitlines() if ln.startswith("#")), src)
        if "action" in low:
            items = [m.group(1).strip() for ln in body.splitlines() if (m := ACTION_RX.match(ln))]
            lines += [f"## {title} ({src})", ""] + ([f"- [ ] {i}" for i in items] or ["- (no action items)"])
        elif "requirement" in low:
            lines += [f"## {title} ({src})", ""] + [f"- {r}" for r in extract_requirements(body)]
        else:
            prose = " ".join(ln.strip() for ln in body.splitlines() if ln.strip() and not ln.startswith(("#", "-",
                                                                                                          "*", "|")))
            sentences = SENTENCE_END_RX.split(prose)
            items = [ln.strip() for ln in body.splitlines() if ln.startswith(("- ", "* "))][:20]
            lines += [f"## {title} ({src})", "", " ".join(sentences[:3]).strip() or ("\n".join(items) if items
                                                                                      else "(no prose)")]
        lines.append("")
    if not inputs:
        lines += [f"{task}.", ""]
    return "\n".join(lines)


def plan_inputs(instructions: str, listing: dict[str, int]) -> tuple[list[str], list[str]]:
    """(input files, the long ones among them) named by the instructions and present in the listing."""
    inputs = [p for p in _inputs_from(instructions, "") if p in listing]
    for p in paths_in(instructions):  # a folder named as input: every file in it is an input
        folder = p.rstrip("/")
        if p not in listing and any(f.startswith(folder + "/") for f in listing):
            inputs += [f for f in listing if f.startswith(folder + "/") and f not in inputs]
    return inputs, [p for p in inputs if listing.get(p, 0) > 20_000]


def synthesize_plan(instructions: str, listing: dict[str, int], totals: dict[str, int] | None = None) -> str:
    """An execution plan for the instructions: explicit phases if given, else derived from the files."""
    explicit = parse_plan(instructions)
    if explicit.phases and all(p.steps for p in explicit.phases):
        phases = [(p.name, [s.text for s in p.steps]) for p in explicit.phases]
        return render_plan(_overview(instructions), phases)
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
