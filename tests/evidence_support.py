"""The bootstrap's work, done honestly, for tests that drive a run past it: todo_complete needs the evidence its
tasks name (console.engine.evidence): a call of generate_workspace_summary, reads of workspace_summary.md and
instructions.md."""

from __future__ import annotations

import json
from typing import Any

from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.tools import default_registry

BOOTSTRAP_WORK: list[tuple[str, dict[str, Any]]] = [
    ("generate_workspace_summary", {}),
    ("read_file", {"path": "workspace_summary.md"}),
    ("read_file", {"path": "instructions.md"}),
]

_REG = default_registry()


def do_bootstrap_work(rt: Runtime) -> None:
    """The calls the bootstrap's tasks name, run as the agent runs them (so the run's record holds them)."""
    for name, args in BOOTSTRAP_WORK:
        parsed = _REG.parse(ToolCall(id=f"boot-{name}", name=name, arguments=json.dumps(args)))
        assert not hasattr(parsed, "ok"), parsed
        out = _REG.run(rt, *parsed)  # type: ignore[misc]
        assert out.ok, out.content


def bootstrap_calls(call_type: Any) -> list[Any]:
    """The same calls as scripted calls (``call_type``: ScriptedCall), to put in a replay script's turn."""
    return [call_type(name=name, arguments=args) for name, args in BOOTSTRAP_WORK]
