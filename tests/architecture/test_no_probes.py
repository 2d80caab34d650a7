"""Issue 34, point 4: the views ask what the protocols declare (console.tui.commands.Controller, the stores'
SharedStore, console.tui.host.ConsoleHost), never probe an object for a capability by name, and never test for a
concrete store. What a getattr is left for is named here, with why it is no capability probe."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "console"
VIEWS = ("tui", "view", "web", "headless", "cli")
# (module, the getattr's first argument): why it stays.
ALLOWED = {
    ("console/tui/notices.py", "screen"): "a class marker of Dialog, which this module may not import",
    ("console/tui/screens/fleet.py", "old"): "a row's own dataclass fields, compared by name",
    ("console/tui/screens/fleet.py", "new"): "a row's own dataclass fields, compared by name",
    ("console/view/present/registry.py", "e"): "an event or its type's name",
    ("console/cli/common.py", "parsed"): "argparse's namespace",
    ("console/cli/common.py", "exc"): "an exception's optional title",
    ("console/cli/run.py", "job"): "a job's optional section",
    ("console/cli/run.py", "guard"): "a job's optional section",
    ("console/cli/run.py", "settings"): "the provider's key setting, named by the provider",
    ("console/cli/lifecycle.py", "exc"): "an OSError's optional filename",
    ("console/cli/__init__.py", "importlib"): "a command's module, imported by name",
}


def probes() -> list[tuple[str, str, int]]:
    found = []
    for part in VIEWS:
        for path in sorted((ROOT / part).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            rel = str(path.relative_to(ROOT.parent))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                        "getattr", "hasattr") and node.args:
                    first = node.args[0]
                    name = ast.unparse(first).split("(")[0].split(".")[0]
                    if name == "self" or (name == "args" and rel.startswith("console/cli/")):
                        continue  # its own attributes; argparse's namespace (a subcommand's flags)
                    found.append((rel, name, node.lineno))
    return found


def test_the_views_probe_no_capability() -> None:
    left = [f"{rel}:{line}: getattr({name}, ...)" for rel, name, line in probes() if (rel, name) not in ALLOWED]
    assert not left, "declare it in a protocol instead:\n" + "\n".join(left)


def test_no_view_tests_for_a_concrete_store() -> None:
    found = []
    for part in VIEWS:
        for path in sorted((ROOT / part).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                        and len(node.args) == 2 and "PgStore" in ast.unparse(node.args[1])):
                    found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not found, found
