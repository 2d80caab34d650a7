"""What every command shares: printing one safe line, usage errors, flag bounds, finding the run a JOB names."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import math
import os
import shlex
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from console.view.jobs import one_line  # the one definition, shared with the jobs table

if TYPE_CHECKING:
    from console.engine.runs import RunLookupError


class UsageError(Exception):
    """Bad input: a flag, a run reference, a job folder, job.toml, the settings, or a run that cannot be used as
    asked. Raised by any command with its one line; console.cli's main says it (:func:`err`, on stderr) and ends
    the command with exit code 2 (EXIT_USAGE): the one place a usage error becomes its line and its code."""


def err(msg: str) -> None:
    say(f"agent-console: {msg}", sys.stderr)


def say(line: str, stream: Any = None) -> None:
    """Print a line, made safe for the terminal (:func:`one_line`: every line the command prints passes here);
    a reader that went away (`| head`, a closed SSH session) does not change the outcome."""
    with contextlib.suppress(BrokenPipeError, ValueError):
        print(one_line(line), file=stream or sys.stdout, flush=True)


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as the one line every other bad input gets (exit code 2), and no flag taken
    from its start: argparse's default prefix matching read `--unconf` as `--unconfined` (the sandbox off) and a
    typo as whichever flag it began. Subcommands' parsers are of this class too (add_subparsers makes its parsers
    with the parent's class), so the default here reaches every one of them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, but an unknown flag is named by the command it was given to, with the flag it may have
        meant (never taken for it) and that command's help: `run --unconf` said `see: agent-console --help`,
        whose page lists no flag of `run`."""
        if misplaced := self._misplaced(sys.argv[1:] if args is None else list(args)):
            self.error(misplaced)
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            where: argparse.ArgumentParser = self
            while True:  # down to the (sub)command given: a command may have commands of its own
                chosen = [sub.choices[name] for sub in where._actions if isinstance(sub, argparse._SubParsersAction)
                          and (name := getattr(parsed, sub.dest or "", None)) in sub.choices]
                if not chosen:
                    break
                where = chosen[0]
            meant = [m for x in extras if x.startswith("-")
                     for m in difflib.get_close_matches(x.split("=", 1)[0], list(where._option_string_actions), 1,
                                                        0.6)]
            hint = f"; did you mean {' or '.join(dict.fromkeys(meant))}?" if meant else ""
            where.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed


    def _misplaced(self, args: list[str]) -> str | None:
        """What to say of a command's flag given before any command (`agent-console --theme nope`): argparse took
        its value for the command ("argument COMMAND: invalid choice: 'nope'"). None: nothing misplaced."""
        subs = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return None
        for arg in args:
            if not arg.startswith("-") or arg == "--":
                return None  # the command (or a value): whatever follows is its own
            flag = arg.split("=", 1)[0]
            if flag in self._option_string_actions:
                continue
            owners = list(dict.fromkeys(  # by parser: an alias (ack, acknowledge) is named once
                {id(p): name for name, p in subs[0].choices.items() if flag in p._option_string_actions}.values()))
            if not owners:
                return None  # no command's either: argparse names it as unrecognized
            names = [f"`{self.prog} {owners[0]}`", *(f"`{n}`" for n in owners[1:])]
            which = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
            return f"{flag} is an option of {which}: give it after the command ({self.prog} {owners[-1]} {flag} ...)"
        return None


MAX_SCRIPT_BYTES = 64 << 20
MAX_WAIT_SECONDS = 86_400
MAX_LIST = 10**6
RUN_HELP = "the run: its folder, its id or the start of its folder name (as `run` and `jobs` print them)"


def check_flags(args: argparse.Namespace) -> None:
    """ValueError naming the first numeric flag out of its bounds or not a finite number. The bounds are
    those of job.toml and the settings (the run settings' table): beyond them a value is a typo (or would fail deep
    in a run); then those of the commands' own numbers."""
    from console.engine.run_setting_specs import FLAGGED

    checks: list[tuple[str, Callable[[float], bool], str]] = [
        (spec.dest, spec.bounds.holds, spec.expected()) for spec in FLAGGED if spec.bounds.low is not None]
    for name, low, high, what in (
        ("wait", 0, MAX_WAIT_SECONDS, f"a number of seconds from 0 to {MAX_WAIT_SECONDS}"),
        ("limit", 1, MAX_LIST, f"a whole number from 1 to {MAX_LIST}"),
        ("phase", 1, MAX_LIST, f"a phase number from 1 to {MAX_LIST}"),
    ):
        checks.append((name, _within(low, high), what))
    for name, holds, what in checks:
        value = getattr(args, name, None)
        if value is not None and not (math.isfinite(value) and holds(value)):
            raise ValueError(f"--{name.replace('_', '-')} {value:g}: expected {what}")


def _within(low: float, high: float) -> Callable[[float], bool]:
    return lambda value: low <= value <= high


def check_console_options(theme: str | None, settings: Any, console: bool = True) -> None:
    """ValueError for a console option that names nothing: a theme that does not exist (flag or config), or a
    [keys] entry with an unknown binding id. Checked before anything runs: a typo must not pass silently.
    A headless run checks a theme only when --theme names one (reading themes costs the console's imports)."""
    from console.tui.keymap import check_keymap

    _, problems = check_keymap(settings.keys)
    if problems:
        raise ValueError(f"the config file's {problems[0]}")
    if not console and not theme:
        return
    from console.tui.themes import theme_names, user_themes_dir

    wanted = theme or settings.theme
    names = theme_names()  # every theme the palette offers
    if wanted not in names:
        where = "--theme" if theme else "theme (config file or AGENT_CONSOLE_THEME)"
        raise ValueError(f"{where} {wanted!r}: no such theme (themes: {', '.join(names)}; yours are the *.toml "
                         f"files in {user_themes_dir()})")



def where_runs_are() -> Any:
    """Where the runs are (the data dir, the store), and the console's theme and [keys], as the settings say them:
    read without building the settings' models when that is sure (console.locations: a command that only finds
    runs, or opens a console, starts in far less CPU), else the whole settings (a JobError naming what is wrong
    with them)."""
    from console.locations import read_locations

    if (found := read_locations()) is not None:
        return found
    from console.settings import load_settings

    return load_settings()


def run_folder(ref: str, settings: Any = None) -> Path:
    """The folder a command's JOB argument names: an existing folder (or anything shaped like a path) as it is,
    else the run the jobs table knows by that id or folder-name prefix. ValueError (one line) if it names no
    run or several; a path that is not a job folder is left for validate_job_folder to name. The settings
    (where the jobs table is) are read only for a reference that is not a folder."""
    from console.engine.runs import RunLookupError, looks_like_a_path, resolve_run
    from console.engine.store import StoreError

    if looks_like_a_path(ref) or os.path.isdir(ref):
        return Path(ref)
    if settings is None:
        settings = where_runs_are()
    try:
        rows = listed_runs(settings)
    except StoreError as exc:
        raise ValueError(f"{ref!r} is not a folder, and the jobs store cannot be read to look it up as a run id or "
                         f"name ({exc}); give the run folder") from None
    except (sqlite3.Error, OSError) as exc:
        raise ValueError(f"{ref!r} is not a folder, and the jobs database {settings.store_path} cannot be read to "
                         f"look it up as a run id or name ({exc}); give the run folder") from None
    try:
        return resolve_run(ref, rows)
    except RunLookupError as exc:
        if (found := not_in_the_table(ref, settings, exc)) is not None:
            return found
        raise


def listed_runs(settings: Any) -> list[Any]:
    """The jobs table's rows a run reference is looked up in (the newest :data:`MAX_LIST`); the store's errors are
    the caller's to say."""
    store = settings.open_store()
    try:
        return list(store.list(MAX_LIST))
    finally:
        store.close()


def not_in_the_table(ref: str, settings: Any, missing: RunLookupError) -> Path | None:
    """What ``ref`` names that the jobs table does not (``missing``: its lookup's RunLookupError): a file or a
    dangling link there, as it is (the folder check says what is wrong with it), or a run of this machine just
    started (:func:`just_started`); None: nothing."""
    if os.path.lexists(ref) and not missing.candidates:
        return Path(ref)
    return just_started(ref, settings, missing)


def just_started(ref: str, settings: Any, missing: RunLookupError) -> Path | None:
    """The run of this machine ``ref`` names whose row the jobs table has not yet, read from the run folders (their
    sealed launch records): a run prints its id a moment before its store knows it, and `run --headless` then at
    once `logs ID -f` in another shell found no run. None when the table's lookup (``missing``) had candidates, or
    the folders name none or several."""
    from console.cli.local_runs import own_rows
    from console.engine.runs import RunLookupError, resolve_run

    if missing.candidates:
        return None
    try:
        return resolve_run(ref, own_rows(settings))
    except RunLookupError:
        return None


def foreign_line(root: Path, why: str, refused: str = "neither resumed nor read") -> str:
    """The one line that refuses a folder whose .console/ is another's, naming the two ways to start fresh."""
    shown = shlex.quote(str(root))
    return (f"{root}: its .console/ was not made by this operator's agent-console ({why}), so it is {refused}: "
            f"start fresh with `agent-console run --in-place {shown} --fresh` (moves it aside), or run a copy "
            f"without it: `agent-console run {shown}`")


def refuse_foreign(paths: Any, data_dir: Path) -> None:
    """A ValueError with the one line, for a folder whose .console/ another operator's harness made
    (console.engine.provenance): `attach`, `logs` and `wait` show this operator's runs only, as `run --in-place`
    resumes only them (its story, its settings and its hints would be another's words, and name commands that
    refuse it)."""
    from console.engine.launch import LaunchError
    from console.engine.provenance import judge
    from console.engine.seal import Seal, SealError

    try:
        verdict = judge(paths, Seal.of(data_dir))
    except (LaunchError, SealError):
        return  # this operator's own record, damaged, or the key unreadable: the folder is shown as it is
    if not verdict.usable:
        raise ValueError(foreign_line(paths.root, verdict.why, "not shown as one of your runs"))


STATE_FILES = {"TodoState": "todos.json", "MemoryState": "memory.json", "WorkspaceRecord": "workspace.json"}


def state_error(paths: Any, exc: Exception) -> str:
    """One line naming the harness file that cannot be read, and what to do about it."""
    name = STATE_FILES.get(getattr(exc, "title", ""), "")
    where = paths.state / name if name else paths.state
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return (f"{where}: harness state cannot be read ({first}); restore it from a backup, or start the job over "
            f"with its .console/ moved aside: agent-console run --in-place {paths.root} --fresh")


def resume_hint(paths: Any) -> str:
    """``resume run k3f9q with: agent-console resume k3f9q``: the exact command that goes on, by the short id `jobs`
    lists (from any directory; it starts the run again in the background, with its recorded settings). Said only
    of a run the jobs table has: a start interrupted before the run registered leaves nothing to resume."""
    return f"resume run {paths.run_id} with: agent-console resume {paths.run_id}"



def go_on_hint(paths: Any, reason: str, detail: str = "") -> str:
    """The exact command that goes on after an end of ``reason``. After a spent budget the same command would end
    the run again at once: the limit is raised first, in the run's own job.toml (a run works on a copy of its
    job: the job folder's job.toml is not read again)."""
    from console.engine.enforcement.limits import spent_key

    if reason != "budget_exhausted":
        return resume_hint(paths)
    key = spent_key(detail) or "deadline, budget_tokens or budget_usd"
    return (f"raise {key} under [guardrails] in {paths.root / 'job.toml'} (the run's own copy), then "
            f"{resume_hint(paths)}")


def fit_parts(parts: list[str], width: int) -> list[str]:
    """Parts of a message joined with "; " into as few lines as fit ``width`` (a part is never split)."""
    out: list[str] = []
    for part in parts:
        if out and len(out[-1]) + 2 + len(part) <= width:
            out[-1] += "; " + part
        else:
            out.append(part)
    return out


def find_run(ref: str, settings: Any, away: str | None = None) -> tuple[Path, str | None]:
    """The folder a command's JOB argument names (console.cli.common.run_folder), and, when the shared store is
    away, why (``None`` when it answered): this machine's own runs are then found from their folders
    (:func:`local_rows`). ``away``: the store was found away already (not asked again). ValueError (one line naming
    what works) when the reference names no run or several."""
    from console.cli.local_runs import STORE_AWAY, own_rows
    from console.engine.runs import RunLookupError, looks_like_a_path, resolve_run
    from console.engine.store import StoreError

    if not settings.store_url or looks_like_a_path(ref) or os.path.isdir(ref):
        return run_folder(ref, settings), None  # a folder, or the embedded store: never away
    try:
        if away is not None:
            raise StoreError(away)
        rows = listed_runs(settings)
    except StoreError as exc:
        away = str(exc)
        try:
            return resolve_run(ref, own_rows(settings)), away
        except RunLookupError as missing:
            raise ValueError(f"{STORE_AWAY} ({away}), and {missing}: this machine's runs are listed by agent-console "
                             "jobs (from their folders); give the run's folder instead of its id") from None
    try:
        return resolve_run(ref, rows), None
    except RunLookupError as exc:
        if (found := not_in_the_table(ref, settings, exc)) is not None:
            return found, None
        raise


def say_away(away: str, paths: Any) -> None:
    """The first line of a command that found the run from its folder, the store being away."""
    from console.cli.local_runs import STORE_AWAY

    err(f"{STORE_AWAY} ({away}): run {paths.run_id} found from its folder {paths.root}")
