"""The operator's keys: defaults, binding ids, and remapping from the config file.

Every key is a Textual ``Binding`` with an ``id``; the config file's ``[keys]``
table maps ids to keys (``checkpoint = "ctrl+k"``, several keys comma-separated)
and the app applies it with ``App.set_keymap``. The run's commands' keys come from
the engine's command specs (console.engine.command_specs.SPECS); the console's own
keys (panes, help, quit...) are listed here.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from console.engine.command_specs import SPECS


@dataclass(frozen=True)
class OperatorKey:
    id: str
    key: str
    action: str
    label: str  # footer
    help: str  # help screen and command palette
    show: bool = True
    key_display: str | None = None


# A command's second face on its key: once a stop was asked the footer reads Stop now (the same key and id; help
# lists the key once).
VARIANTS: dict[str, list[OperatorKey]] = {
    "stop": [OperatorKey("stop", "s", "stop_now", "Stop now", "")],
}


def command_keys() -> list[OperatorKey]:
    """The keys of the run's commands, in the specs' order: each with its action ``<cli name>`` (RunScreen's). Pause and
    resume share one key and id: the footer shows whichever applies, help lists the key once."""
    keys: list[OperatorKey] = []
    for spec in SPECS:
        if spec.key is not None:
            keys.append(OperatorKey(spec.key.id, spec.key.default, spec.action, spec.key.label,
                                    spec.key.help))
            keys += VARIANTS.get(spec.action, [])
    return keys


# Bound on a run's screen (console.tui.screens.run.RunScreen): each action is that screen's.
OPERATOR_KEYS: list[OperatorKey] = [
    *command_keys(),
    # Only on a run that ended without completing and asks for its operator (RunScreen.check_action).
    OperatorKey("acknowledge", "k", "acknowledge", "Ack",
                "acknowledge a run that gave up, crashed or failed: it asks for you no more (resume still goes on "
                "with it; as agent-console ack ID)"),
    OperatorKey("guardrails", "g", "guardrails", "Guards",
                "guardrails: policies, feedback providers, completion checker and verdict, deadline, token budget, "
                "command tools (g or esc closes)"),
    OperatorKey("help", "question_mark", "help", "Help", "this help"),
    OperatorKey("quit", "q", "quit_console", "Quit",
                "quit: asks whether to detach (the run goes on) or stop the run; in the fleet, back to the list"),
    OperatorKey("next_pane", "tab", "next_pane", "Pane", "focus the next pane (narrow terminal: show it)",
                key_display="⇥"),
    OperatorKey("previous_pane", "shift+tab", "previous_pane", "Prev pane", "focus the previous pane", show=False),
    OperatorKey("maximize", "m", "toggle_maximize", "Max", "maximize the focused pane (m or esc restores)"),
]
KEY_IDS = {k.id for k in OPERATOR_KEYS}


def check_keymap(raw: Mapping[str, object]) -> tuple[dict[str, str], list[str]]:
    """Valid entries, and a readable problem per invalid one (unknown id, not a string)."""
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for key_id, value in raw.items():
        if key_id not in KEY_IDS:
            problems.append(f"[keys] {key_id}: unknown key id (known: {', '.join(sorted(KEY_IDS))})")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"[keys] {key_id}: expected a key such as \"ctrl+k\"")
        else:
            keymap[key_id] = ",".join(part.strip() for part in value.split(","))
    return keymap, problems


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """The ``[keys]`` table of the config file (``$AGENT_CONSOLE_CONFIG`` by default); never raises."""
    if path is None:
        from console.locations import config_path

        path = config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"{path}: cannot read the [keys] table: {exc}"]
    table = data.get("keys", {})
    if not isinstance(table, dict):
        return {}, [f"{path}: [keys] must be a table of key id = \"key\""]
    return check_keymap(table)
