"""Recorded agent trajectories (SWE-agent, mini-swe-agent) turned into one long job the real engine can replay.

The formats are those of /work/shared/trajectories/README.md (shared/trajectories): a SWE-agent ``.traj`` with
``trajectory`` steps (thought, action, observation), or with a function-calling ``history`` only; a
mini-swe-agent ``.traj.json`` list of messages (or an object holding it under ``messages``).

Each trajectory is one sub-task of the job, one todo. Its task text (the user messages before the first
assistant turn, less demonstrations) is a file the model reads first; then every recorded step is one turn:
the assistant's text is the step's thought and action (so the reply's tokens are the recorded ones) and its
tool call reads a file holding the step's recorded observation, so the tool result is the real tool output,
through the engine's real read_file. Then a todo_complete; after the last trajectory, the completion todos and
job_complete. An observation is cut at OBS_CHARS characters and OBS_LINES lines (the largest recorded one is
~9,000 characters and 221 lines), so read_file returns it whole at every window this benchmark uses and every
policy sees the same content.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from console.engine.messages import ToolCall
from console.engine.phases import COMPLETION_TODOS

# mini-swe-agent puts exactly one command in a fenced block of this language.
MINI_COMMAND = re.compile(r"```mswea_bash_command\n(.*?)\n?```", re.DOTALL)
OBS_CHARS = 12_000
OBS_LINES = 390


@dataclass
class Step:
    thought: str
    action: str
    observation: str


@dataclass
class Recorded:
    name: str
    task: str
    steps: list[Step]


def _text(content: object) -> str:
    if isinstance(content, list):  # content blocks
        return "\n".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content)
    return str(content or "")


def _task(prefix: list[dict]) -> str:
    return "\n\n".join(_text(m.get("content")) for m in prefix
                       if m.get("role") == "user" and not m.get("is_demo"))


def _split_prefix(messages: list[dict]) -> tuple[list[dict], list[dict]]:
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            return messages[:i], messages[i:]
    return messages, []


def _swe_agent(data: dict) -> tuple[str, list[Step]]:
    history = data.get("history") or []
    prefix, rest = _split_prefix(history)
    steps = [Step(str(s.get("thought") or ""), str(s.get("action") or ""), str(s.get("observation") or ""))
             for s in data.get("trajectory") or []]
    if not steps:  # function calling, history only: each assistant call and the tool message naming it
        for i, m in enumerate(rest):
            if m.get("role") != "assistant":
                continue
            calls = m.get("tool_calls") or []
            action = str(calls[0].get("function", {}).get("arguments", "")) if calls else str(m.get("action") or "")
            nxt = rest[i + 1] if i + 1 < len(rest) and rest[i + 1].get("role") != "assistant" else {}
            steps.append(Step(_text(m.get("content")), action, _text(nxt.get("content"))))
    return _task(prefix), steps


def _mini(data: list | dict) -> tuple[str, list[Step]]:
    messages = data if isinstance(data, list) else data.get("messages", [])
    prefix, rest = _split_prefix(messages)
    steps = []
    for i, m in enumerate(rest):
        if m.get("role") != "assistant":
            continue
        content = _text(m.get("content"))
        found = MINI_COMMAND.search(content)
        action = found.group(1) if found else ""
        thought = content[:found.start()] if found else content
        nxt = rest[i + 1] if i + 1 < len(rest) and rest[i + 1].get("role") != "assistant" else {}
        steps.append(Step(thought, action, _text(nxt.get("content"))))
    return _task(prefix), steps


def load(path: Path) -> Recorded:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: cannot be read as a trajectory: {exc}") from None
    try:
        if isinstance(data, dict) and ("trajectory" in data or "history" in data):
            task, steps = _swe_agent(data)
        elif isinstance(data, list | dict):
            task, steps = _mini(data)
        else:
            raise SystemExit(f"{path}: not a SWE-agent or mini-swe-agent trajectory")
    except (AttributeError, TypeError, KeyError, IndexError) as exc:  # a step or message of the wrong shape
        raise SystemExit(f"{path}: not a SWE-agent or mini-swe-agent trajectory ({exc})") from None
    if not steps:
        raise SystemExit(f"{path}: no steps found")
    return Recorded(path.name, task, steps)


def _cut(text: str) -> str:
    # Lines as read_file counts them (str.splitlines), so it returns the observation whole.
    lines = text.splitlines()[:OBS_LINES]
    return "\n".join(lines)[:OBS_CHARS] or "(no output)"


@dataclass
class Replay:
    """The job's files and the fixed script of (assistant text, tool call) the model follows."""

    files: dict[str, str]
    script: list[tuple[str, str, dict]]
    todos: list[str]


def build(recorded: list[Recorded]) -> Replay:
    files: dict[str, str] = {}
    script: list[tuple[str, str, dict]] = []
    todos = []
    for k, r in enumerate(recorded, 1):
        todos.append(f"Task {k}: {r.name[:60]}")
        files[f"tasks/{k:02d}.md"] = _cut(r.task or r.name)
        script.append((f"I start task {k}: I read its statement.", "read_file",
                       {"path": f"tasks/{k:02d}.md", "max_lines": OBS_LINES + 10}))
        for s, step in enumerate(r.steps, 1):
            name = f"obs/{k:02d}-{s:03d}.txt"
            files[name] = _cut(step.observation)
            text = "\n".join(x for x in (step.thought.strip(), step.action.strip()) if x) or "(no thought)"
            script.append((text, "read_file", {"path": name, "max_lines": OBS_LINES + 10}))
        script.append((f"Task {k} is done.", "todo_complete", {}))
    script += [("Closing the job.", "todo_complete", {})] * len(COMPLETION_TODOS)
    script.append(("Every task is done.", "job_complete", {"summary": "replayed every task", "confidence": 0.9}))
    return Replay(files, script, todos)


def calls(script: list[tuple[str, str, dict]]) -> list[tuple[str, ToolCall]]:
    return [(text, ToolCall(id=f"t{n + 1}", name=name, arguments=json.dumps(args)))
            for n, (text, name, args) in enumerate(script)]
