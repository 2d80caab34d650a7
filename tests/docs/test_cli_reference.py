"""The command line's reference (docs/cli.md) says what the parser knows, option by option, and what the code
exits with, code by code (issue 33: "Help, README and code agree on every option and every exit code").

One table per subcommand, under a heading that names it (`` ## `agent-console run` ``); the first column of each
row names the options (``--provider NAME``, ``-f``, ``--follow``) or a positional argument in capitals (``JOB``).
Checked both ways: an option the parser knows and the table lacks fails, and so does a row the command does not
take. A new command needs a heading and a table; a new option, a row.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from console import outcome
from console.cli import wait as wait_cli
from console.cli.parser import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLI = DOCS / "cli.md"

HEADING = re.compile(r"^#{2,3} `agent-console(?: (?P<command>[a-z-]+))?`\s*$")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
POSITIONAL = re.compile(r"^`([A-Z][A-Z_]*)`$")


def tables(text: str) -> dict[str, list[list[str]]]:
    """Each command's first table after its heading: the rows (cells), header and rule left out. "" is the
    program itself (`` ## `agent-console` ``)."""
    found: dict[str, list[list[str]]] = {}
    command: str | None = None
    for line in text.splitlines():
        if m := HEADING.match(line):
            command = m.group("command") or ""
            continue
        if line.startswith("#"):
            command = None  # another section: its tables are not a command's
            continue
        if command is None or not line.startswith("|"):
            if command is not None and found.get(command) and not line.startswith("|"):
                command = None  # the table ended: only the first one after the heading counts
            continue
        # "\|" inside a cell is a literal bar (choices such as scripted|openai), not a column's edge
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells and (cells[0] in ("option", "exit code") or set(cells[0]) <= set("-: ")):
            continue
        found.setdefault(command, []).append(cells)
    return found


def documented(rows: list[list[str]]) -> set[str]:
    """The options and positional arguments a table's first column names."""
    names: set[str] = set()
    for cells in rows:
        first = cells[0]
        if m := POSITIONAL.match(first):
            names.add(m.group(1))
            continue
        for code in re.findall(r"`([^`]*)`", first):
            option = OPTION.match(code)
            assert option is not None, f"{first!r}: a row names options (`--x`) or an argument in capitals (`JOB`)"
            names.add(option.group(1))
    return names


def known(parser: argparse.ArgumentParser) -> set[str]:
    """What the parser offers an operator: every option string, and each positional argument by its name in
    capitals (its metavar, or its dest); --help and hidden options left out."""
    names: set[str] = set()
    for action in parser._actions:  # argparse has no public walk of its actions
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            names.update(action.option_strings)
        else:
            metavar = action.metavar if isinstance(action.metavar, str) else action.dest
            names.add(metavar.upper())
    return names


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: dict[str, argparse.ArgumentParser] = {"": parser}
    for name, command in sub.choices.items():  # an alias (ack's acknowledge) is the same parser: one table
        if all(command is not known for known in found.values()):
            found[name] = command
    return found


def test_every_command_has_its_table() -> None:
    found = tables(CLI.read_text())
    missing = sorted(f"agent-console {name}".strip() for name in commands() if name not in found)
    extra = sorted(f"agent-console {name}".strip() for name in found if name not in commands())
    assert not missing, f"docs/cli.md has no table for {missing}: add a heading and a table of its options"
    assert not extra, f"docs/cli.md documents commands the parser does not have: {extra}"


@pytest.mark.parametrize("command", sorted(commands()), ids=lambda c: c or "agent-console")
def test_a_commands_table_names_exactly_its_options(command: str) -> None:
    rows = tables(CLI.read_text()).get(command, [])
    in_docs, in_help = documented(rows), known(commands()[command])
    name = f"agent-console {command}".strip()
    assert not in_help - in_docs, f"{name}: --help offers {sorted(in_help - in_docs)}, missing in docs/cli.md's table"
    assert not in_docs - in_help, f"{name}: docs/cli.md's table names {sorted(in_docs - in_help)}, not an option of it"


def codes_in(section: str) -> set[int]:
    """The exit codes of the table under ``## <section>`` in docs/cli.md."""
    text = CLI.read_text()
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    rows = [line for line in text[start:end if end > 0 else None].splitlines() if line.startswith("| ")]
    return {int(line.split("|")[1]) for line in rows if line.split("|")[1].strip().isdigit()}


def test_the_run_exit_codes_are_the_codes_a_run_exits_with() -> None:
    used = {value for name, value in vars(outcome).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert codes_in("Exit codes of a run") == used


def test_the_wait_exit_codes_are_the_codes_wait_exits_with() -> None:
    used = {value for name, value in vars(wait_cli).items()
            if name.startswith("WAIT_") and isinstance(value, int) and not isinstance(value, bool)}
    used |= {outcome.EXIT_USAGE, outcome.EXIT_INTERRUPTED}  # a bad flag or run; Ctrl+C while it waits
    assert codes_in("Exit codes of `wait`") == used
    # `wait --help` lists them too (each "N <meaning>" after "Exit codes:"), the same set but Ctrl+C's
    helped = {int(n) for n in re.findall(r"(?:^ |; )(\d+) ", wait_cli.WAIT_HELP.split("Exit codes:", 1)[1])}
    assert helped == used - {outcome.EXIT_INTERRUPTED}


def test_a_missing_row_fails(tmp_path: Path) -> None:
    """The check bites: the run table without --detach, and with an option run does not take."""
    text = CLI.read_text()
    run = tables(text)["run"]
    without = [r for r in run if "--detach" not in r[0]] + [["`--no-such-flag`", "x"]]
    in_docs, in_help = documented(without), known(commands()["run"])
    assert in_help - in_docs == {"--detach"} and in_docs - in_help == {"--no-such-flag"}
