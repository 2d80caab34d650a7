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

from pathlib import Path

from console.engine.job import JobPaths
from console.engine.messages import Message, ModelRequest
from console.engine.todos import TodoManager
from console.engine.tools.registry import ToolRegistry

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


def read_system_prompt(paths: JobPaths) -> str:
    """SYSTEM_PROMPT.md from the job folder if present (re-read at every session start)."""
    if paths.system_prompt.is_file():
        text = paths.system_prompt.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            return text + "\n"
    return DEFAULT_SYSTEM_PROMPT


def build_system(base_prompt: str, registry: ToolRegistry, session: int = 1) -> str:
    parts = [base_prompt.rstrip(), "", HARNESS_RULES.rstrip(), "", "## Tools", registry.guide()]
    if session > 1:
        parts += [
            "",
            "## Session Continuity",
            f"This is session #{session}. You have been restarted due to context window limits.",
            "SYSTEM_PROMPT.md is reloaded from disk at each restart. Your todo list and main_plan.md are intact; "
            "check the workspace files for the state you saved.",
        ]
    return "\n".join(parts) + "\n"


_plan_cache: dict[Path, tuple[tuple[int, int], str]] = {}


def plan_block(paths: JobPaths) -> str:
    """The plan as it is on disk now (an agent or a human may edit it at any time); re-read only on change."""
    try:
        st = paths.main_plan.stat()
    except FileNotFoundError:
        return "MAIN PLAN (main_plan.md): not written yet."
    key = (st.st_mtime_ns, st.st_size)
    cached = _plan_cache.get(paths.main_plan)
    if cached is not None and cached[0] == key:
        return cached[1]
    text = paths.main_plan.read_text(encoding="utf-8", errors="replace").strip()
    if len(text) > PLAN_CHAR_LIMIT:
        text = text[:PLAN_CHAR_LIMIT] + f"\n[... main_plan.md continues: {len(text) - PLAN_CHAR_LIMIT} more chars]"
    block = f"MAIN PLAN (main_plan.md):\n{text}"
    _plan_cache[paths.main_plan] = (key, block)
    return block


def build_protected(todos: TodoManager, paths: JobPaths, extra: list[str] | None = None) -> str:
    blocks = [todos.render(), plan_block(paths)]
    blocks += [b for b in extra or [] if b]
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
