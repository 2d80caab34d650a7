"""The five context layers (seed 000) assembled into one model request.

Layer 1 (system prompt + harness rules) and layer 3 (tool guide + schemas)
form the stable head of every prompt. Layer 2 (the todo display, the plan and
working memory) is rebuilt every turn and sent *after* the conversation: it is
protected from every trim and summary, and keeping it out of the head means
the head and the conversation stay byte-identical between turns, so providers
can cache them. Layers 4 (previous summary) and 5 (conversation) are the only
ones pressure and compaction act on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.engine.messages import Message, ModelRequest
from console.engine.todos import TodoManager
from console.engine.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

DEFAULT_SYSTEM_PROMPT = """\
You are an autonomous agent working on a job in a workspace folder. The job is described in instructions.md.

Your work is organized into phases. Each phase has a todo list.

YOUR ONLY JOB: Complete the tasks in your todo list, one at a time.

After completing each task, call todo_complete(). The system will:
- Mark the task done
- Show you the next task
- Handle everything else automatically

Do not try to manage phases yourself. Just focus on the current task.
When you see a fresh todo list, start working through it.
Trust the process: when the context is reset or summarized, continue from the todo list you see; \
the files in the workspace hold your progress.
"""

HARNESS_RULES = """\
## How this harness works
- The ACTIVE TODO LIST block at the end of the conversation is always current. The task marked \
← CURRENT is the one to do now.
- Work only through tools. Paths are relative to the job folder; you cannot leave it.
- Save results to files as you go: the conversation may be summarized at phase boundaries, files are not.
- When a system message gives PHASE TRANSITION, REWIND or CHECKPOINT steps, do them in order; they end \
with todo_write.
- If the current approach cannot work, call todo_rewind(issue) instead of forcing it.
- When every phase is done, the last task is job_complete(summary, deliverables, confidence, notes).
"""

PLAN_CHAR_LIMIT = 12_000
# SYSTEM_PROMPT.md is the agent's to edit (seed 004): it shapes layer 1 and nothing else, and only this much of it.
SYSTEM_PROMPT_LIMIT = 64 * 1024


def read_system_prompt(rt: Runtime) -> str:
    """SYSTEM_PROMPT.md from the job folder if present (read at every session start, through the sandbox)."""
    text = rt.read_job_text("SYSTEM_PROMPT.md", limit=4 * SYSTEM_PROMPT_LIMIT)
    if text and text.strip():
        text = text.strip()
        if len(text) > SYSTEM_PROMPT_LIMIT:
            text = text[:SYSTEM_PROMPT_LIMIT] + "\n[... SYSTEM_PROMPT.md continues; only its start is used]"
        return text + "\n"
    return DEFAULT_SYSTEM_PROMPT


def build_system(base_prompt: str, registry: ToolRegistry, session: int = 1) -> str:
    tools = ["## Tools"]
    if docs := registry.docs_folder:
        # Layer 3 is short (seed 000): one line per tool, and where the rest is.
        tools.append(f"Full docs (arguments, examples, errors) are read-only files in {docs}/; read one when a "
                     "call fails.")
    parts = [base_prompt.rstrip(), "", HARNESS_RULES.rstrip(), "", *tools, registry.guide()]
    if session > 1:
        parts += [
            "",
            "## Session Continuity",
            f"This is session #{session}. You have been restarted due to context window limits.",
            "SYSTEM_PROMPT.md is reloaded from disk at each restart. Your todo list and main_plan.md are intact; "
            "check the workspace files for the state you saved.",
        ]
    return "\n".join(parts) + "\n"


_plan_cache: dict[str, tuple[tuple[float, int], str]] = {}


def plan_block(rt: Runtime) -> str:
    """The plan as it is on disk now (an agent or a human may edit it at any time); re-read only on change."""
    from console.engine.sandbox import SandboxError

    assert rt.sandbox is not None
    try:
        info = rt.sandbox.info("main_plan.md")
        if info is None:
            return "MAIN PLAN (main_plan.md): not written yet."
        key = (info.mtime, info.size)
        cached = _plan_cache.get(str(rt.paths.root))
        if cached is not None and cached[0] == key:
            return cached[1]
        text = rt.sandbox.read_text("main_plan.md", max_bytes=1 * 2**20).strip()
    except SandboxError as exc:
        return f"MAIN PLAN (main_plan.md): cannot be read: {exc}"
    if len(text) > PLAN_CHAR_LIMIT:
        text = text[:PLAN_CHAR_LIMIT] + f"\n[... main_plan.md continues: {len(text) - PLAN_CHAR_LIMIT} more chars]"
    block = f"MAIN PLAN (main_plan.md):\n{text}"
    _plan_cache[str(rt.paths.root)] = (key, block)
    return block


_goal_cache: dict[str, tuple[tuple[float, int], str]] = {}


def goal_text(rt: Runtime) -> str | None:
    """instructions.md's text, the job's goal (seed 003's goal description), as it is on disk now; read again only
    when it changed, and only its start (the goal line shows a few hundred characters). None if it cannot be read."""
    from console.engine.memory import GOAL_CHARS
    from console.engine.sandbox import SandboxError

    assert rt.sandbox is not None
    try:
        info = rt.sandbox.info("instructions.md")
        if info is None:
            return None
        key = (info.mtime, info.size)
        cached = _goal_cache.get(str(rt.paths.root))
        if cached is not None and cached[0] == key:
            return cached[1]
        # Enough bytes for GOAL_CHARS characters once whitespace is collapsed, and to know there is more.
        raw = rt.sandbox.read_head("instructions.md", 16 * GOAL_CHARS)
    except SandboxError:
        return None
    text = raw.decode("utf-8", "replace").rstrip("\ufffd")  # a character cut at the head's end is not shown
    _goal_cache[str(rt.paths.root)] = (key, text)
    return text


def build_protected(todos: TodoManager, rt: Runtime, extra: list[str] | None = None) -> str:
    blocks = [todos.render(), plan_block(rt)]
    blocks += [b for b in extra or [] if b]
    # experiences.md's newest entries from before this phase or session started (console.engine.experiences).
    if lessons := rt.experiences.prompt_block(rt.events.session, rt.todos.state.generation):
        blocks.append(lessons)
    return "\n\n".join(blocks)


def assemble(
    system: str,
    registry: ToolRegistry,
    conversation: list[Message],
    protected: str,
    max_output_tokens: int = 4096,
) -> ModelRequest:
    return ModelRequest(
        system=system,
        messages=conversation,
        tools=registry.specs(),
        protected=protected,
        max_output_tokens=max_output_tokens,
    )
