"""The command line has one usage-error path (issue 34): a command raises ``UsageError(line)`` and console.cli's
main says the line on stderr and ends with exit code 2. The commands used to print the line and return 2 by hand,
each its own copy (42 of them), so a copy could drift (a line on stdout, a code of 1, a missing prefix)."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable

import pytest

from console.cli import main
from console.engine.job import JobPaths
from console.engine.run_lock import RunLock
from tests.conftest import REPO


def usage_errors_by_hand() -> list[str]:
    """Where a module of console/cli/ prints an error line and ends with exit code 2 itself: a call of ``err`` and,
    next, a statement that names EXIT_USAGE (``return EXIT_USAGE``, ``sys.exit(EXIT_USAGE)``). The one place
    allowed is the command line's main, which says every UsageError so."""
    found = []
    for path in sorted((REPO / "console" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text())
        the_one = {id(n) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "_main"
                   and path.name == "__init__.py" for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in the_one:
                continue
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(node, field, None)
                if not isinstance(stmts, list):
                    continue
                for said, then in itertools.pairwise(stmts):
                    if (isinstance(said, ast.Expr) and isinstance(said.value, ast.Call)
                            and isinstance(said.value.func, ast.Name) and said.value.func.id == "err"
                            and "EXIT_USAGE" in ast.unparse(then)):
                        found.append(f"{path.relative_to(REPO)}:{then.lineno}")
    return found


def test_no_command_prints_a_usage_error_and_exits_2_by_hand() -> None:
    found = usage_errors_by_hand()
    assert not found, f"raise UsageError(line) instead (console.cli.common): {found}"


def test_the_grammars_error_is_the_same_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "--limitt", "3"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == ("agent-console: unrecognized arguments: --limitt 3; did you mean --limit? (see: agent-console "
                       "jobs --help)\n")


def test_a_run_another_process_holds_ends_as_a_usage_error_not_a_failure(
        make_job: Callable[..., JobPaths], capsys: pytest.CaptureFixture[str]) -> None:
    """A headless run's process judges what escapes the run as a failure past the engine (exit 7, "internal
    error"); a run another process holds is bad input (exit 2), and says who holds it and what to do instead."""
    paths = make_job("quickstart")
    paths.state.mkdir(parents=True, exist_ok=True)
    lock = RunLock(paths)
    assert lock.acquire()
    try:
        code = main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0"])
    finally:
        lock.release()
    err = capsys.readouterr().err
    assert code == 2, err
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(f"agent-console: {paths.root} is already being run by process ")
    assert line.endswith(f"or watch it with: agent-console attach {paths.root}")

