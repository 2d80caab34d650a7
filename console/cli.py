"""agent-console: the command line.

A command that takes a run (attach, approve, deny, checkpoint, rewind, pause,
resume, stop, run --in-place) accepts its folder, its short id (as `run` and
`jobs` print it) or the start of its folder name; one that matches several
runs is an error listing them.

Exit codes (console/outcome.py): 0 the job completed (the harness's record shows
the plan done); 1 incomplete (the last line says why); 2 bad input (job folder,
run id, job.toml, settings, flags); 3 stopped by the operator (a stop from the
console or another shell, or a denied restart); 4 the agent gave up; 7 failed
(an internal error); 130 interrupted (Ctrl+C, SIGTERM or SIGHUP, or the model
stayed unreachable). `wait` adds 5 timeout and 6 interrupted (see WAIT_HELP).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from console import __version__
from console.engine.text import safe_text
from console.outcome import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, exit_code
from console.providers.registry import NAMES as PROVIDER_NAMES
from console.view.jobs import one_line

COMMAND_HELP = {
    "approve": "approve a pending context restart of a running job",
    "deny": "deny a pending context restart (the run ends cleanly, exit code 3; resume later with run --in-place)",
    "checkpoint": "force a checkpoint: the agent re-reads plan and instructions, unfinished todos carried over",
    "rewind": "rewind the current phase with an issue text: the agent re-plans",
    "pause": "pause a running job after its current turn",
    "resume": "resume a paused run; or go on with a stopped, interrupted or out-of-budget one (in the background, "
              "with the settings it was started with; --console to watch it)",
    "stop": "stop a running job after its current turn (a second stop stops at once; the run exits with 3)",
}
COMMAND_NAMES = {"approve": "approve_restart", "deny": "deny_restart"}


def _err(msg: str) -> None:
    _say(f"agent-console: {msg}", sys.stderr)


def _say(line: str, stream: Any = None) -> None:
    """Print a line, made safe for the terminal (:func:`one_line`: every line the command prints passes here);
    a reader that went away (`| head`, a closed SSH session) does not change the outcome."""
    with contextlib.suppress(BrokenPipeError, ValueError):
        print(one_line(line), file=stream or sys.stdout, flush=True)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as the one line every other bad input gets (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        _err(f"{message} (see: {self.prog} --help)")
        sys.exit(EXIT_USAGE)


MAX_SCRIPT_BYTES = 64 << 20
MAX_WAIT_SECONDS = 86_400
MAX_LIST = 10**6
RUN_HELP = "the run: its folder, its id or the start of its folder name (as `run` and `jobs` print them)"


def check_flags(args: argparse.Namespace) -> None:
    """ValueError naming the first numeric flag out of its bounds or not a finite number. The bounds are
    those of job.toml and the settings: beyond them a value is a typo (or would fail deep in a run)."""
    from console.engine.job import MAX_CONTEXT_WINDOW, MAX_RESTARTS, MAX_SPEED, MAX_TURNS

    bounds: dict[str, tuple[float, float, str]] = {
        "speed": (0, MAX_SPEED, f"a number from 0 to {MAX_SPEED:g}"),
        "max_turns": (1, MAX_TURNS, f"a whole number from 1 to {MAX_TURNS}"),
        "context_window": (1, MAX_CONTEXT_WINDOW, f"a number of tokens from 1 to {MAX_CONTEXT_WINDOW}"),
        "max_restarts": (0, MAX_RESTARTS, f"a whole number from 0 to {MAX_RESTARTS}"),
        "wait": (0, MAX_WAIT_SECONDS, f"a number of seconds from 0 to {MAX_WAIT_SECONDS}"),
        "limit": (1, MAX_LIST, f"a whole number from 1 to {MAX_LIST}"),
        "phase": (1, MAX_LIST, f"a phase number from 1 to {MAX_LIST}"),
    }
    for name, (low, high, what) in bounds.items():
        value = getattr(args, name, None)
        if value is not None and not (math.isfinite(value) and low <= value <= high):
            raise ValueError(f"--{name.replace('_', '-')} {value:g}: expected {what}")


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
    from console.tui.themes import load_themes, themes_dir

    wanted = theme or settings.theme
    names = [t.name for t in load_themes()]
    if wanted not in names:
        where = "--theme" if theme else "theme (config file or AGENT_CONSOLE_THEME)"
        raise ValueError(f"{where} {wanted!r}: no such theme (themes: {', '.join(names) or 'none'}; "
                         f"they are the *.toml files in {themes_dir()})")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="agent-console",
        description="Run long LLM agent jobs under guardrails, and supervise them.",
    )
    p.add_argument("--version", action="version", version=f"agent-console {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run a job (a folder with instructions.md)",
                         description="Copy JOB into a fresh run folder and run it (or run it in place).")
    run.add_argument("job", metavar="JOB", help="job folder (with instructions.md); with --in-place, also a run's "
                                                "id or the start of its folder name")
    run.add_argument("--headless", action="store_true", help="print a compact live log instead of the console")
    run.add_argument("--theme", metavar="NAME", help="console theme (agent-dark, agent-light, agent-ansi, ...)")
    run.add_argument("--in-place", action="store_true",
                     help="run in JOB itself instead of a fresh copy (resumes it if it has state)")
    run.add_argument("--detach", action="store_true",
                     help="start the run in the background and return (follow it with attach, logs -f or wait)")
    _settings_flags(run)
    run.add_argument("--script", type=Path, metavar="FILE",
                     help="replay exact turns from FILE (JSON list or JSON Lines) with the scripted provider")
    run.add_argument("--unconfined", action="store_true",
                     help="run the job's [[tools]] commands WITHOUT a sandbox for this run (they see everything you "
                          "can and reach the network; still bounded in time, processes, memory and folder size)")
    run.add_argument("--runner", action="store_true", help=argparse.SUPPRESS)  # a run started by a console

    for name, text in COMMAND_HELP.items():
        c = sub.add_parser(name, help=text, description=text)
        c.add_argument("job", metavar="JOB", help=RUN_HELP)
        if name == "rewind":
            c.add_argument("issue", help="what is wrong, for the agent to re-plan around")
            c.add_argument("--phase", type=int, metavar="N",
                           help="the phase to rewind (its number): refused if the run is no longer in it")
        if name == "checkpoint":
            c.add_argument("--note", help="a note for the agent with the checkpoint")
        if name == "resume":
            c.add_argument("--console", action="store_true", help="open the console on the run it starts")
            c.add_argument("--theme", metavar="NAME", help="console theme (with --console)")
            _settings_flags(c)
        c.add_argument("--wait", type=float, default=5.0, metavar="SECONDS",
                       help="how long to wait for the run to confirm (default 5; 0 does not wait)")

    fleet = sub.add_parser("fleet", help="the fleet view: every run, live (also: agent-console with no command)",
                           description="List every run of the jobs store, live: id, job, state, phase, context, "
                                       "cost, elapsed, last event. A run that needs you is listed first, "
                                       "highlighted, and rings the bell. enter attaches to the selected run (q "
                                       "comes back), a approves its restart, d denies it and s stops the run (both "
                                       "ask first), x forgets a run whose folder is gone (state 'gone'; asks), / "
                                       "filters, q quits. Runs go on when it closes.")
    fleet.add_argument("--theme", metavar="NAME", help="console theme")

    attach = sub.add_parser("attach", help="open the console on a job another process runs (or a finished one)",
                            description="Follow a job run elsewhere (e.g. run --headless over SSH) in the console. "
                                        "Keys act through the job's control inbox; closing never stops the run.")
    attach.add_argument("job", metavar="JOB", help=RUN_HELP)
    attach.add_argument("--theme", metavar="NAME", help="console theme")

    logs = sub.add_parser("logs", help="print a run's story (the model's text, tool calls and results, phases, "
                                       "guardrails, operator commands, needs-you moments); -f follows a live run",
                          description="Print a run's story from its events.jsonl: one line per turn (its tool calls "
                                      "and tokens) with the model's text and the calls' results under it, todo and "
                                      "phase milestones, guardrail and context events, operator commands and "
                                      "needs-you moments. -f follows a live run until it ends (Ctrl+C stops "
                                      "following, exit 130; the run goes on). --json prints the events themselves, "
                                      "one JSON object a line, for jq.")
    logs.add_argument("job", metavar="JOB", help=RUN_HELP)
    logs.add_argument("-f", "--follow", action="store_true",
                      help="keep printing new events until the run ends (or no process runs it any more)")
    logs.add_argument("--json", action="store_true",
                      help="print the events as they are in .console/events.jsonl, one JSON object a line")
    logs.add_argument("--since", type=int, default=0, metavar="SEQ",
                      help="start at the event with this seq (the events' \"seq\" field, as --json shows it)")
    logs.add_argument("-n", "--lines", type=int, metavar="N",
                      help="only the last N lines (with --json: events) of what the log holds so far")

    jobs = sub.add_parser("jobs", help="list runs: id, state, job, started, cost, confidence, summary",
                          description="List runs, newest first. The table fits the terminal: on a narrow one the "
                                      "confidence, cost and started columns are left out (in that order) and a "
                                      "summary ends at a word with '…'; --json prints every field.")
    jobs.add_argument("--limit", type=int, default=30, help="how many runs to show (newest first)")
    jobs.add_argument("--json", action="store_true", help="print JSON lines (every field, and the id) instead")
    jobs.add_argument("--prune", action="store_true",
                      help="forget the runs whose folder is gone (state 'gone'): their rows are removed from the "
                           "list; each one is named")

    wait = sub.add_parser("wait", help="wait until a run ends or needs you; the exit code says which",
                          description="Block until the run ends or needs its operator, print one line saying "
                                      "which, and exit with a code for scripts and cron. " + WAIT_HELP + ".")
    wait.add_argument("job", metavar="JOB", help=RUN_HELP)
    wait.add_argument("--timeout", type=float, metavar="SECONDS", help="give up after this long (exit code 5); "
                                                                         "default: wait as long as it takes")
    return p


def _settings_flags(p: argparse.ArgumentParser) -> None:
    """The flags that set how a run works; recorded with the run, so a resume keeps them (flags given to a
    resume override the record and are told in its launch_settings event)."""
    p.add_argument("--provider", choices=list(PROVIDER_NAMES), help="model provider (its default model follows)")
    p.add_argument("--model", help="model name (default depends on the provider)")
    p.add_argument("--base-url", help="API base URL (an OpenAI-compatible server such as llama.cpp, vLLM, Ollama)")
    p.add_argument("--switch-model", action="store_true",
                   help="let a resume change the run's provider or model (refused without it)")
    p.add_argument("--max-turns", type=int, metavar="N", help="stop a session after N turns")
    p.add_argument("--context-window", type=int, metavar="TOKENS", help="override the model's context window")
    p.add_argument("--max-restarts", type=int, metavar="N",
                   help="the most sessions a run may have: a context full in session N ends it (seed 004)")
    auto = p.add_mutually_exclusive_group()
    auto.add_argument("--no-auto-restart", action="store_true",
                      help="when the context is full, wait for `agent-console approve RUN` before restarting")
    auto.add_argument("--auto-restart", action="store_true", help="restart on a full context without asking")
    p.add_argument("--speed", type=float, metavar="X",
                   help="scripted demo model pacing, higher is faster: 1 looks alive (default), 2 twice as fast, "
                        "0 instant")
    p.add_argument("--notify", action="append", metavar="URL",
                   help="tell this Apprise URL when the run needs you (ntfy://, slack://, json://, mailto://...; "
                        "repeatable; default: the config's [notify] urls)")


def run_folder(ref: str, settings: Any = None) -> Path:
    """The folder a command's JOB argument names: an existing folder (or anything shaped like a path) as it is,
    else the run the jobs table knows by that id or folder-name prefix. ValueError (one line) if it names no
    run or several; a path that is not a job folder is left for validate_job_folder to name. The settings
    (where the jobs table is) are read only for a reference that is not a folder."""
    from console.engine.runs import RunLookupError, looks_like_a_path, resolve_run
    from console.engine.store import JobStore

    if looks_like_a_path(ref) or os.path.isdir(ref):
        return Path(ref)
    if settings is None:
        from console.settings import load_settings

        settings = load_settings()
    try:
        rows = JobStore(settings.store_path).list(MAX_LIST)
    except (sqlite3.Error, OSError) as exc:
        raise ValueError(f"{ref!r} is not a folder, and the jobs database {settings.store_path} cannot be read to "
                         f"look it up as a run id or name ({exc}); give the run folder") from None
    try:
        return resolve_run(ref, rows)
    except RunLookupError as exc:
        if os.path.lexists(ref) and not exc.candidates:
            return Path(ref)  # a file, a dangling link: the folder check says what is wrong with it
        raise


STATE_FILES = {"TodoState": "todos.json", "MemoryState": "memory.json", "WorkspaceRecord": "workspace.json"}


def state_error(paths: Any, exc: Exception) -> str:
    """One line naming the harness file that cannot be read, and what to do about it."""
    name = STATE_FILES.get(getattr(exc, "title", ""), "")
    where = paths.state / name if name else paths.state
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return (f"{where}: harness state cannot be read ({first}); restore it from a backup, or move the job's "
            ".console/ folder aside to start the job over")


def _script_items(text: str) -> list[Any]:
    """The turns of a replay script: a JSON list (or one object), else JSON Lines; ValueError if neither."""
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        pass
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"neither a JSON list of turns nor JSON Lines (line {n}: {exc.msg})") from None
    return items


def check_script(path: Path) -> None:
    """A --script file that cannot be replayed is a ValueError of one line naming it.

    It is checked before the provider reads it: a FIFO would block the read, a deeply nested document
    would raise RecursionError, and a turn of the wrong shape a many-line validation error."""
    from pydantic import ValidationError

    from console.engine.job import JobError, format_validation_error, read_operator_file
    from console.providers.scripted import ScriptedTurn

    shown = f"--script {path}"
    try:
        text = read_operator_file(path, shown, MAX_SCRIPT_BYTES,
                                  "a replay script (a JSON list or JSON Lines of turns)")
    except JobError as exc:
        raise ValueError(str(exc)) from None
    if text is None:
        raise ValueError(f"{shown}: no such file")
    try:
        items = _script_items(text)
    except RecursionError:
        raise ValueError(f"{shown}: not usable JSON: nested too deeply") from None
    except ValueError as exc:  # not JSON, or e.g. a number of over 4,300 digits
        raise ValueError(f"{shown}: not usable JSON: {str(exc)[:160]}") from None
    for n, item in enumerate(items, 1):
        try:
            ScriptedTurn.model_validate(item)
        except ValidationError as exc:
            raise ValueError(format_validation_error(f"{shown}: turn {n}", exc, 'a turn is {"text": ..., '
                                                     '"calls": [{"name": ..., "arguments": {...}}]}')) from None
        except RecursionError:
            raise ValueError(f"{shown}: turn {n}: nested too deeply") from None


RUNNER_FLAGS_ENV = "AGENT_CONSOLE_RUNNER_FLAGS"  # a runner's flags: the environment, not argv (ps shows argv)
RUNNER_BY_ENV = "AGENT_CONSOLE_RUNNER_BY"


def explicit_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The run settings the operator gave as flags (None: not given)."""
    auto = True if getattr(args, "auto_restart", False) else False if getattr(args, "no_auto_restart", False) else None
    script = getattr(args, "script", None)
    return {"provider": args.provider, "model": args.model, "base_url": args.base_url, "speed": args.speed,
            "max_turns": args.max_turns, "context_window": args.context_window, "max_restarts": args.max_restarts,
            "auto_restart": auto, "unconfined": True if getattr(args, "unconfined", False) else None,
            "script": str(Path(script).absolute()) if script is not None else None,
            "notify": tuple(args.notify) if getattr(args, "notify", None) else None}


def launch_flags(recorded: Any, given: dict[str, Any], switch: bool) -> dict[str, Any]:
    """The flags a run starts with: its record (a resume) overridden by what was given now.

    ValueError (one line) when the flags would change the run's provider or model without --switch-model."""
    from console.engine.launch import identity_change

    if recorded is None:
        return dict(given)
    if (changed := identity_change(recorded, given)) and not switch:
        raise ValueError(f"this run was started on {recorded.provider} {recorded.model}; resuming it with "
                         f"{'; '.join(changed)} makes it another model's run: add --switch-model to do so")
    flags = recorded.flags()
    if given.get("provider") not in (None, recorded.provider):
        # Another provider: its own default model and endpoint, unless given too.
        flags["model"] = flags["base_url"] = flags["context_window"] = None
    flags.update({k: v for k, v in given.items() if v is not None})
    return flags


def _budgets(job: Any) -> dict[str, Any]:
    """job.toml's budgets ([guardrails] deadline_seconds, budget_tokens, budget_usd), for the run's record."""
    guard = getattr(job, "guardrails", None)
    names = ("deadline_seconds", "budget_tokens", "budget_usd")
    return {n: v for n in names if (v := getattr(guard, n, None)) is not None}


def cmd_run(args: argparse.Namespace) -> int:
    from console.engine.clock import SystemClock
    from console.engine.job import JobError, prepare_run, validate_job_folder
    from console.engine.job_config import load_job_config
    from console.engine.launch import Launch, LaunchStart, changes, read_launch
    from console.engine.store import JobStore
    from console.engine.supervisor import Supervisor
    from console.providers import ProviderError, make_provider
    from console.settings import load_settings, resolve_run_settings

    clock = SystemClock()
    job_arg = Path(args.job)
    runner = bool(args.runner)
    if runner:  # the flags the starting process was given (never argv: ps shows it to every user)
        with contextlib.suppress(ValueError, TypeError):
            for key, value in json.loads(os.environ.pop(RUNNER_FLAGS_ENV, "{}") or "{}").items():
                if key == "auto_restart":  # one setting, two flags
                    args.auto_restart, args.no_auto_restart = bool(value), not value
                elif hasattr(args, key) and value is not None:
                    setattr(args, key, value)
    try:
        check_flags(args)
        settings = load_settings()
        use_console = not args.headless and not args.detach and sys.stdin.isatty() and sys.stdout.isatty()
        check_console_options(args.theme, settings, console=use_console)
        if args.in_place:  # a run to go on with: its folder, id or name; a copy is made of a job folder only
            job_arg = run_folder(args.job, settings)
        source = validate_job_folder(job_arg)
        job = load_job_config(source)
        recorded = read_launch(source) if args.in_place else None
        given = explicit_flags(args)
        flags = launch_flags(recorded, given, args.switch_model)
        if not flags.get("notify"):
            flags["notify"] = tuple(settings.notify.urls)
        from console.notify import check_urls, shown_url

        if problems := check_urls(flags["notify"]):
            raise ValueError(f"--notify / [notify] urls: {problems[0]}")
        script = Path(flags["script"]) if flags.get("script") else None
        rs = resolve_run_settings(settings, job, **{k: v for k, v in flags.items() if k not in ("script", "notify")})
        if recorded is not None and given.get("context_window") is None and recorded.context_window_source:
            rs = replace(rs, context_window_source=f"as started ({recorded.context_window_source})")
        if script is not None and rs.provider != "scripted":
            raise ValueError("--script replays turns with the scripted provider only")
        if script is not None:
            check_script(script)
        secret = getattr(settings, f"{rs.provider}_api_key", None)  # AGENT_CONSOLE_<PROVIDER>_API_KEY
        api_key = secret.get_secret_value() if secret is not None else None
        try:
            provider = make_provider(rs.provider, rs.model, base_url=rs.base_url, api_key=api_key, speed=rs.speed,
                                     clock=clock, script=script, max_tokens_param=settings.max_tokens_param)
        except (ProviderError, RecursionError):
            raise
        except Exception as exc:  # an SDK refusing its settings (e.g. a URL form only it rejects)
            what = "base_url (--base-url, job.toml or settings)" if rs.base_url else f"--provider {rs.provider}"
            raise ValueError(f"{what}: the {rs.provider} client cannot be set up ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None
    except (JobError, ValueError, ProviderError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    except RecursionError:
        _err(f"{job_arg}: a job or settings file is nested too deeply to be read")
        return EXIT_USAGE
    try:
        store = JobStore(settings.store_path)
    except (sqlite3.Error, OSError) as exc:
        _err(f"{settings.store_path}: the jobs database cannot be used ({exc}); move it aside and a new one is made")
        return EXIT_USAGE
    from console.engine.atomic import private_dir

    # The data folder (made by the store) and runs/ hold every run: the operator's only (0700), or said once why not.
    for problem in (*store.not_private, private_dir(settings.runs_dir)):
        if problem and not runner:
            _err(f"warning: not private: {problem}")
    try:
        # Copy only once everything checked out: a failed start leaves no stray run folder.
        paths = source if args.in_place else prepare_run(job_arg, settings.runs_dir, clock.now())
    except JobError as exc:
        _err(str(exc))
        return EXIT_USAGE
    except OSError as exc:  # the data folder cannot be written, or a file of the job cannot be copied
        _err(f"{job_arg}: cannot be copied to a run folder under {settings.runs_dir}: {str(exc)[:300]}")
        return EXIT_USAGE
    try:
        if use_console or args.detach:
            # The run is a process of its own (a runner); this one only watches it, and may go away.
            _say(f"run {paths.run_id}: {paths.root}")
            given = {k: v for k, v in given.items() if v is not None}
            if args.switch_model:
                given["switch_model"] = True
            # Who asked: the fleet's `r` runs `resume` with this variable set to "fleet" (in launch_settings).
            by = os.environ.pop(RUNNER_BY_ENV, "") or ("console" if use_console else "detach")
            return start_runner(paths, given, by=by,
                                console=use_console, theme=args.theme or settings.theme)
        record = Launch(provider=rs.provider, model=rs.model, base_url=rs.base_url, context_window=rs.context_window,
                        context_window_source=(recorded.context_window_source if recorded is not None and
                                               given.get("context_window") is None else rs.context_window_source),
                        max_turns=rs.max_turns, max_restarts=rs.max_restarts, auto_restart=rs.auto_restart,
                        carryover_turns=rs.carryover_turns, requires_context=rs.requires_context,
                        file_index=rs.file_index, speed=rs.speed, unconfined=bool(flags.get("unconfined")),
                        script=str(script) if script is not None else None, notify=tuple(flags.get("notify") or ()),
                        budgets=_budgets(job),
                        started_at=recorded.started_at if recorded is not None else clock.now())
        launch = LaunchStart(record, source="resume" if recorded is not None else "start",
                             changes=tuple(changes(recorded, record)) if recorded is not None else (),
                             by=os.environ.pop(RUNNER_BY_ENV, "") if runner else "headless",
                             shown_notify=tuple(shown_url(u) for u in record.notify))
        try:
            sup = Supervisor(paths, rs, provider, clock=clock, store=store, launch=launch)
        except sqlite3.Error as exc:
            _err(f"{settings.store_path}: the jobs database cannot be used ({exc}); move it aside and a new one "
                 "is made")
            return EXIT_USAGE
        except (ValueError, OSError) as exc:
            _err(state_error(paths, exc))
            return EXIT_USAGE
        # The run's id, then its folder: `run ID: FOLDER` (a script takes the folder after the first ": ").
        _say(f"run {paths.run_id}: {paths.root}")
        if not args.headless and not runner and not use_console:
            _say("not a terminal: running headless (the console needs one)", sys.stderr)
    except KeyboardInterrupt:
        # Ctrl+C between the run folder and the run's own handling of it: nothing of the run has happened yet.
        _err(f"interrupted before the run started; {resume_hint(paths)}")
        return EXIT_INTERRUPTED
    return _run_headless(sup, paths, store, clock, runner=runner, notify=record.notify,
                         notify_on_end=settings.notify.on_end)


def start_runner(paths: Any, given: dict[str, Any], *, by: str, console: bool, theme: str = "") -> int:
    """Start the run in ``paths`` as a runner process; then open a console on it (``console``) or say how to
    follow it. Exit code: the run's own once it has ended under the console; 0 when it goes on."""
    import subprocess

    from console.engine.control import RunLock
    from console.runner import HARD_EXIT_AFTER, log_tail, spawn_runner, wait_started

    holder = RunLock(paths).holder()
    if holder is not None:
        _err(f"{paths.root} is already being run by process {holder} (run {paths.run_id}); watch it with: "
             f"agent-console attach {paths.run_id}")
        return EXIT_USAGE
    env = dict(os.environ)
    env[RUNNER_FLAGS_ENV] = json.dumps(given)
    env[RUNNER_BY_ENV] = by
    try:
        proc = spawn_runner(paths, env=env)
    except OSError as exc:
        _err(f"the run could not be started: {exc.strerror or exc}")
        return EXIT_FAILED
    try:
        code = wait_started(paths, proc)
        if code is None and console:
            from console.tui.launch import attach_console

            attach_console(paths, theme=theme, job_title=paths.root.name, quit_asks=True)
    except KeyboardInterrupt:
        # Ctrl+C before the console has the terminal (there it is a key, and quit asks): the run this command
        # started is stopped as a headless run's is on SIGTERM (at once, resumable), and its process gone.
        with contextlib.suppress(OSError):
            proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=HARD_EXIT_AFTER + 1.0)
        _err(f"interrupted; {resume_hint(paths)}")
        return EXIT_INTERRUPTED
    if code is not None:
        for line in log_tail(paths):
            _err(line.removeprefix("agent-console: "))
        _err(f"the run did not start (exit code {code}); its log: {paths.state / 'runner.log'}")
        return code or EXIT_FAILED
    if not console:
        _say(f"running in the background (process {proc.pid}); watch it: agent-console attach {paths.run_id}; "
             f"its story: agent-console logs -f {paths.run_id}; stop it: agent-console stop {paths.run_id}")
        return EXIT_OK
    return _after_console(paths)


def _after_console(paths: Any) -> int:
    from console.runner import ended_code

    code = ended_code(paths)
    if code is None:
        _say(f"detached: run {paths.run_id} goes on; come back with: agent-console attach {paths.run_id} "
             f"(or agent-console, the fleet); follow it: agent-console logs -f {paths.run_id}")
        return EXIT_OK
    return code


def resume_hint(paths: Any) -> str:
    """``resume run k3f9q with: agent-console run --in-place FOLDER``: the exact command that goes on
    (the folder, which works from any directory; the id names the run as `jobs` lists it)."""
    return f"resume run {paths.run_id} with: agent-console run --in-place {paths.root}"


def _finish(sup: Any, paths: Any, interrupted_by: str | None = None) -> int:
    """The closing lines of a run, and its exit code.

    ``interrupted_by`` names the signal that stopped the run (headless: Ctrl+C, SIGTERM, SIGHUP). The engine
    ends a run stopped by a signal and one stopped by the operator (a `stop` from the console or another
    shell, a denied restart) alike, as user_shutdown: the signal is what tells an interrupt (130) from the
    operator's decision (3)."""
    result = sup.result
    if result is None:
        _err(f"the run was stopped before it started; {resume_hint(paths)}")
        return EXIT_INTERRUPTED
    cost = _job_cost(sup)
    if result.ok:
        if result.already:  # nothing ran: an earlier run completed it
            _say(f"job already complete: {paths.root}")
        elif result.outcome is None:  # a free stop ([guardrails.completion] type = "none") with the work done
            _say(f"done: the agent stopped with the plan done in {result.sessions} session(s){cost}; results in "
                 f"{paths.root}")
        else:
            _say(f"done: job complete in {result.sessions} session(s){cost}; results in {paths.root}")
        return EXIT_OK
    reason = result.reason.value
    if result.ended == "gave_up" and result.outcome is not None:
        said = safe_text(result.outcome.summary, one_line=True, join=True, limit=300)
        _err(f"the agent gave up (confidence {result.outcome.confidence:g}): {said}{cost}")
        _err(f"its notes: {safe_text(result.outcome.notes, one_line=True, join=True, limit=600)}")
        _err(f"once the cause is fixed, {resume_hint(paths)}")
        return exit_code(result, interrupted_by)
    stopped = reason == "user_shutdown"
    detail = f"interrupted by {interrupted_by}" if stopped and interrupted_by else result.detail
    if result.ended == "failed":
        _err(f"run failed: {detail}{cost}")
    else:
        why = f"interrupted by {interrupted_by}" if stopped and interrupted_by else present_reason(reason)
        if reason in ("job_complete", "agent_stopped"):  # a free stop ([guardrails.completion] type = "none")
            why = f"{why}, with work left: the record does not show the plan done"
        said = "" if not detail or detail == why else f": {detail}"
        _err(f"run ended incomplete ({why}){said}{cost}")
    if reason in ("user_shutdown", "model_unavailable", "budget_exhausted", "agent_stopped", "max_turns",
                  "completion_blocked"):
        # Nothing is lost: the exact command that goes on (a budget raised in job.toml first).
        _err(resume_hint(paths))
    return exit_code(result, interrupted_by)


def present_reason(reason: str) -> str:
    from console.view.present import REASON_WORDS

    return REASON_WORDS.get(reason, reason)


def _job_cost(sup: Any) -> str:
    """"; cost $0.42" for the closing line, when the model's price is known."""
    from console.engine.cost import format_cost

    usd = sup.job_cost()
    return "" if usd is None else f"; cost {format_cost(usd)}"


def _run_headless(sup: Any, paths: Any, store: Any, clock: Any, *, runner: bool = False,
                  notify: tuple[str, ...] = (), notify_on_end: bool = True) -> int:
    """Run in this process, telling its story on stdout (a runner's goes to its log).

    Ctrl+C stops after the turn in flight (a second one at once); SIGTERM (kill, systemd, a console's stop
    of its run) stops at once and the process is gone within 2 s either way, the run resumable; SIGHUP (the
    terminal went away) is no reason to stop: the run goes on, its story into .console/runner.log."""
    notifier = None
    try:
        from console.engine.supervisor import JobBusy
        from console.headless import HeadlessLog, use_color
        from console.runner import HardExit, detach_output

        sup.subscribe(HeadlessLog(sys.stdout, color=use_color(sys.stdout), run_id=paths.run_id,
                                  provider=sup.provider.name))
        notifier = _notifier(sup, paths, notify, notify_on_end)
        interrupts = 0
        signal_name: str | None = None  # the first signal that stopped the run: an interrupt, not an operator stop
        hard_exit = HardExit(before=lambda: store.ended(paths.root, "interrupted", clock.now(), "stopped by SIGTERM"))

        def on_signal(signum: int, frame: object) -> None:
            nonlocal interrupts, signal_name
            if signum == signal.SIGHUP:
                detach_output(paths)  # the terminal is gone: the run is not
                return
            interrupts += 1
            if signal_name is None:
                signal_name = "Ctrl+C" if signum == signal.SIGINT else signal.Signals(signum).name
            sup.stop()
            if signum == signal.SIGTERM:
                sup.stop()  # at once: whoever sent it expects the process gone
                hard_exit.arm()
                return
            if interrupts == 1:
                print("\nstopping: at once if the model is being asked, else after the turn's tool calls (Ctrl+C "
                      "again to stop now)", file=sys.stderr, flush=True)
            elif interrupts > 2:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # one is enough: the next would cut its unwinding
                raise KeyboardInterrupt

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    except KeyboardInterrupt:  # Ctrl+C before the run's own handling of it: the run has not started
        if notifier is not None:
            notifier.close()
        _err(f"interrupted before the run started; {resume_hint(paths)}")
        return EXIT_INTERRUPTED
    try:
        sup.run()
    except JobBusy as exc:
        _err(f"{exc} (run {paths.run_id}); send it commands (agent-console pause|stop|... {paths.root}) or watch "
             f"it with: agent-console attach {paths.root}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        store.ended(paths.root, "stopped", clock.now(), "interrupted")
        _err(f"interrupted; {resume_hint(paths)}")
        return EXIT_INTERRUPTED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if notifier is not None:
            notifier.close()
    return _finish(sup, paths, signal_name)


def _notifier(sup: Any, paths: Any, urls: tuple[str, ...], on_end: bool = True) -> Any:
    """The operator's channels (Apprise URLs) told when the run needs them; None when there are none. A channel
    that fails is reported once, as an error event naming its scheme and host only; the run goes on."""
    if not urls:
        return None
    from console.engine import events as ev
    from console.engine.runs import job_name
    from console.notify import Notifier

    def failed(line: str) -> None:
        with contextlib.suppress(Exception):  # the run may be closing its log: the line is in runner.log anyway
            sup.events.emit(ev.ErrorEvent, message=line, where="notify")
        _err(line)

    notifier = Notifier(list(urls), paths.run_id, job_name(paths.root), on_error=failed, notify_on_end=on_end)
    sup.subscribe(notifier)
    return notifier


def cmd_attach(args: argparse.Namespace) -> int:
    from console.engine.job import JobError, validate_job_folder
    from console.settings import load_settings

    try:
        settings = load_settings()
        check_console_options(args.theme, settings)
        paths = validate_job_folder(run_folder(args.job, settings))
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    if not paths.events.exists():
        _err(f"{paths.root}: this job has no events yet (never run); a run of it is another folder: attach to the "
             f"id `agent-console run` prints (or run this folder itself with: agent-console run --headless --in-place "
             f"{paths.root})")
        return EXIT_USAGE
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        _err(f"attach opens the console and needs a terminal; for the story use: agent-console logs -f "
             f"{paths.run_id}")
        return EXIT_USAGE
    from console.tui.launch import attach_console

    return attach_console(paths, theme=args.theme or settings.theme, job_title=paths.root.name)


def _fit_parts(parts: list[str], width: int) -> list[str]:
    """Parts of a message joined with "; " into as few lines as fit ``width`` (a part is never split)."""
    out: list[str] = []
    for part in parts:
        if out and len(out[-1]) + 2 + len(part) <= width:
            out[-1] += "; " + part
        else:
            out.append(part)
    return out


def cmd_fleet(args: argparse.Namespace) -> int:
    from console.engine.job import JobError
    from console.settings import load_settings

    theme = getattr(args, "theme", None)
    try:
        settings = load_settings()
        check_console_options(theme, settings)
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        _err("the fleet view needs a terminal; for a list use: agent-console jobs")
        return EXIT_USAGE
    from console.tui.launch import fleet_console

    return fleet_console(settings.store_path, theme=theme or settings.theme)


def cmd_jobs(args: argparse.Namespace) -> int:
    from rich.console import Console

    from console.engine.job import JobError
    from console.engine.runs import run_id
    from console.engine.store import JobStore
    from console.settings import load_settings
    from console.view.jobs import as_now, jobs_table, needs_first

    try:
        check_flags(args)
        settings = load_settings()
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    if args.prune:
        return prune_jobs(settings.store_path)
    try:
        # Every run that is not finished, whatever its age (one waiting for approval is never hidden), then the
        # newest finished ones up to --limit.
        live_rows, _older = JobStore(settings.store_path).list_live_and_recent(args.limit)
        rows = live_rows
    except (sqlite3.Error, OSError) as exc:
        _err(f"{settings.store_path}: the jobs database cannot be read ({exc}); move it aside and a new one is made")
        return EXIT_USAGE
    rows = [as_now(r) for r in rows]
    rows.sort(key=needs_first)
    if args.json:
        for r in rows:
            _say(json.dumps({"id": run_id(r.path), **r.__dict__}))
        return EXIT_OK
    if not rows:
        _say("no runs yet: try  agent-console run sample_jobs/quickstart")
        return EXIT_OK
    # A gone run's line says it is gone, and how to forget it (its summary is still in --json).
    rows = [replace(r, summary=None) if r.status == "gone" else r for r in rows]
    console = Console()
    width = console.width
    lines, hidden = jobs_table(rows, width)
    for text in lines:
        console.print(text, soft_wrap=True)  # each row is one line of at most `width`: never folded
    notes = [f"{len(rows)} run(s), newest first", "commands take a run's id, folder or the start of its name"]
    if hidden:
        notes += [f"hidden to fit: {', '.join(hidden)}", "jobs --json has every field"]
    if gone := sum(1 for r in rows if r.status == "gone"):
        notes.append(f"{gone} gone (folder deleted or moved): jobs --prune forgets {'it' if gone == 1 else 'them'}")
    notes.append(f"run folders: {settings.runs_dir}")
    for note in _fit_parts([one_line(n) for n in notes], width):
        console.print(note, style="dim", soft_wrap=True, highlight=False, markup=False)
    return EXIT_OK


def cmd_logs(args: argparse.Namespace) -> int:
    """`logs JOB [-f] [--json] [--since SEQ] [-n N]`: a run's story (or its events), whole or followed.

    0 when the story is printed (followed: the run ended, or no process runs it any more), also when the reader
    of the output went away (`| head`); 2 for a run that never ran or a bad flag; 130 on Ctrl+C."""
    import stat

    from console.engine.control import RunLock
    from console.engine.job import JobError, validate_job_folder
    from console.headless import LogEnd, StoryPrinter, use_color

    try:
        if args.since < 0:
            raise ValueError(f"--since {args.since}: expected an event's seq (0 or more)")
        if args.lines is not None and not 1 <= args.lines <= MAX_LIST:
            raise ValueError(f"--lines {args.lines}: expected a whole number from 1 to {MAX_LIST}")
        paths = validate_job_folder(run_folder(args.job))
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    lock = RunLock(paths)
    try:
        mode: int | None = os.stat(paths.events).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        _err(f"{paths.events}: not a regular file, so not a log of events")
        return EXIT_USAGE
    if mode is None and not (args.follow and lock.holder() is not None):  # a run just starting has no log yet
        _err(f"{paths.root}: no events: this job never ran (a run of it is another folder: give logs the id "
             "`agent-console run` or `agent-console jobs` prints)")
        return EXIT_USAGE
    color = not args.json and use_color(sys.stdout)
    printer = StoryPrinter(paths.events, sys.stdout, sys.stderr, run_id=paths.run_id, as_json=args.json,
                           since=args.since, lines=args.lines or 0, color=color)
    try:
        printer.pump()
        printer.end_tail()
        end = printer.follow(lock.holder) if args.follow else LogEnd("done", printer.last_type)
    except KeyboardInterrupt:
        # Quietly: Ctrl+C is how one stops following. Colours are per line, so none is left on.
        return EXIT_INTERRUPTED
    finally:
        printer.reader.close()
    if printer.closed:  # the reader went away (`| head`): nothing more to say, and nothing to say it to
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    if end.how == "gone" and end.last not in ("run_ended", "job_completed"):
        _err(f"no process runs {paths.run_id} any more and it did not end cleanly (killed, or its machine went "
             f"down); {resume_hint(paths)}")
    return EXIT_OK


def prune_jobs(store_path: Path) -> int:
    """`jobs --prune`: forget every run whose folder is gone, naming each; how many, on the last line."""
    from console.engine.runs import run_id
    from console.engine.store import JobStore, folder_gone

    try:
        store = JobStore(store_path)
        gone = [r for r in store.list(MAX_LIST) if folder_gone(r.path)]
        forgot = store.forget([r.path for r in gone]) if gone else 0
    except (sqlite3.Error, OSError) as exc:
        _err(f"{store_path}: the jobs database cannot be changed ({exc}); nothing was forgotten")
        return EXIT_FAILED
    for r in gone:
        _say(f"forgot {run_id(r.path)}  {r.path}  ({r.status})")
    _say(f"forgot {forgot} run{'s' if forgot != 1 else ''} whose folder is gone" if forgot else
         "no run's folder is gone: nothing to forget")
    return EXIT_OK


def cmd_control(args: argparse.Namespace) -> int:
    import time

    from console.engine import events as ev
    from console.engine.control import RUN_SCOPED, RunLock, write_inbox
    from console.engine.job import JobError, JobPaths, validate_job_folder
    from console.runner import job_done

    try:
        check_flags(args)
        paths: JobPaths = validate_job_folder(run_folder(args.job))
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    if not paths.state.is_dir():
        _err(f"{paths.root}: this job has never run (no .console/ folder), so there is nothing to {args.command}; "
             f"a run of it is another folder: give {args.command} the id `agent-console run` prints (or run this "
             f"folder itself with: agent-console run --in-place {paths.root})")
        return EXIT_USAGE
    name = COMMAND_NAMES.get(args.command, args.command)
    cmd_args: dict[str, Any] = {}
    if args.command == "rewind":
        if not args.issue.strip():
            _err("rewind needs the issue text")
            return EXIT_USAGE
        cmd_args["issue"] = args.issue
        if args.phase is not None:
            cmd_args["phase"] = args.phase
    if args.command == "checkpoint" and args.note:
        cmd_args["note"] = args.note
    pid = RunLock(paths).holder()
    if pid is None and name == "resume":
        return resume_run(paths, args)
    if pid is None and name in RUN_SCOPED:
        # A stop (pause, approve...) belongs to a running run; left in the inbox it would act on the next one.
        if job_done(paths):
            _err(f"{args.command}: run {paths.run_id} ({paths.root}) is complete: there is nothing to {args.command}")
        else:
            _err(f"{args.command}: no process is running {paths.root} now, so there is nothing to {args.command}; "
                 f"{resume_hint(paths)}")
        return EXIT_FAILED
    try:
        cmd = write_inbox(paths, name, cmd_args, source="cli")
    except OSError as exc:  # the inbox is full (no run reads it) or cannot be written
        _err(f"{args.command}: cannot be queued for {paths.root}: {exc.strerror or exc}")
        return EXIT_FAILED
    if args.wait <= 0:
        _say(f"{args.command}: queued for {paths.root}")
        return EXIT_OK
    if pid is None:
        _say(f"{args.command}: queued; no process is running this job now, so it applies when the job runs again "
             f"(agent-console run --in-place {paths.root})")
        return EXIT_OK
    deadline = time.monotonic() + args.wait
    offset = 0
    while time.monotonic() < deadline:
        new, offset = ev.read_new(paths.events, offset)
        for e in new:
            if isinstance(e, ev.OperatorCommand) and e.command_id == cmd.id and e.status != "received":
                _say(f"{args.command}: {e.status}: {e.detail}")
                return EXIT_OK if e.status == "applied" else EXIT_FAILED
        time.sleep(0.1)
    _say(f"{args.command}: sent to process {pid}; not confirmed within {args.wait:g}s (it applies at the next "
         "turn boundary)")
    return EXIT_OK


def resume_run(paths: Any, args: argparse.Namespace) -> int:
    """``resume ID`` of a run no process runs: start it again as a runner, with its recorded settings (and the
    flags given now), in the background or under a console; or say in one line why not (non-zero)."""
    from console.engine.launch import LaunchError, read_launch
    from console.runner import job_done

    if job_done(paths):
        _err(f"resume: run {paths.run_id} ({paths.root}) is complete: there is nothing to resume")
        return EXIT_FAILED
    if not paths.events.exists():
        _err(f"resume: {paths.root} has never run: start it with agent-console run {paths.root}")
        return EXIT_USAGE
    try:
        read_launch(paths)
    except LaunchError as exc:
        _err(f"resume: {exc}; move it aside to resume with the current settings")
        return EXIT_USAGE
    if args.console and not (sys.stdin.isatty() and sys.stdout.isatty()):
        _err("resume --console needs a terminal; without --console the run goes on in the background")
        return EXIT_USAGE
    run_args = build_parser().parse_args(["run", "--in-place", str(paths.root)])
    for key, value in vars(args).items():
        if key in vars(run_args) and key not in ("command", "job"):
            setattr(run_args, key, value)
    run_args.detach = not args.console
    return cmd_run(run_args)


# `agent-console wait`: how its exit code says what became of the run (for scripts and cron).
WAIT_COMPLETED, WAIT_ENDED, WAIT_STOPPED, WAIT_NEEDS, WAIT_TIMEOUT, WAIT_INTERRUPTED = 0, 1, 3, 4, 5, 6
WAIT_FAILED = 7  # the same code as a run that failed (console/outcome.py)
WAIT_HELP = ("Exit codes: 0 the job completed; 1 the run ended without completing; 2 bad input (no such run, a "
             "folder that never ran); 3 stopped by the operator (or a denied restart); 4 the run needs you (a "
             "restart to approve, stuck, a budget reached, the provider down, a crash, the agent gave up...: the "
             "reason and message are printed); 5 --timeout passed first; 6 interrupted (no process runs it any more: "
             "killed, or the model stayed unreachable; resume it); 7 failed (an internal error)")
WAIT_POLL = 0.25  # seconds between two looks at the log and the run's lock (a poll: no busy loop, no watcher)
WAIT_GONE_GRACE = 1.0  # no process holds the lock for this long, with nothing new logged: it is not running
WAIT_START_GRACE = 5.0  # a folder whose log is still empty: how long a run just launched may take to start


class _WaitFold:
    """What `wait` needs of a run's log: how its last process ended, and what it needs its operator for."""

    def __init__(self) -> None:
        self.end: Any = None  # the last process's run_ended
        self.completed: Any = None  # job_completed (a completed job stays completed)
        self.need: Any = None  # needs_operator not yet answered
        self.gave_up: Any = None  # the agent's job_gave_up: what it said
        self.events = 0

    def apply(self, e: Any) -> None:
        from console.engine import events as ev

        self.events += 1
        if isinstance(e, ev.SessionStarted) and e.reason in ("new", "resume"):
            self.end = self.need = None  # a process (re)starts the run
        elif isinstance(e, ev.NeedsOperator):
            self.need = e
        elif isinstance(e, ev.NeedsOperatorCleared):
            self.need = None
        elif isinstance(e, ev.OperatorCommand) and e.status == "applied" and self.need is not None:
            # The answer is applied before its needs_operator_cleared reaches the log: `approve; wait` must not
            # see the need it just answered.
            restart = self.need.reason == "restart_approval"
            if e.command == "stop" or e.command in (("approve_restart", "deny_restart") if restart else ("resume",)):
                self.need = None
        elif isinstance(e, ev.RestartPending) and self.need is None:  # a log from before needs_operator
            self.need = ev.NeedsOperator(ts=e.ts, seq=e.seq, session=e.session, reason="restart_approval",
                                         message="the context is full: approve or deny the restart", paused=False)
        elif isinstance(e, ev.RestartApproved | ev.RestartDenied):
            if self.need is not None and self.need.reason == "restart_approval":
                self.need = None
        elif isinstance(e, ev.JobCompleted):
            self.completed, self.need = e, None
        elif isinstance(e, ev.JobGaveUp):
            self.gave_up = e
        elif isinstance(e, ev.RunEnded):
            self.end, self.need = e, None


def _wait_verdict(fold: _WaitFold, rid: str, alive: bool) -> tuple[int, str] | None:
    """(exit code, line) once the log and the lock say how the run stands; None: it runs on."""
    from console.engine.needs import label

    end = fold.end
    if end is not None and not alive:  # (alive: the process that ended is exiting, or a resume started anew)
        detail = f": {end.detail}" if end.detail else ""
        if end.outcome == "completed" or (end.outcome is None and end.reason in ("job_complete", "agent_stopped")):
            summary = f": {fold.completed.summary}" if fold.completed is not None else detail
            return WAIT_COMPLETED, f"run {rid} completed{summary}"
        if end.outcome == "gave_up":
            said = f": {fold.gave_up.summary} (notes: {fold.gave_up.notes})" if fold.gave_up is not None else detail
            return WAIT_NEEDS, f"run {rid} needs you (the agent gave up){said}"
        if end.outcome == "failed":
            return WAIT_FAILED, f"run {rid} failed ({end.reason}){detail}"
        if end.reason == "user_shutdown":
            return WAIT_STOPPED, f"run {rid} stopped{detail}"
        if end.reason == "model_unavailable":
            return WAIT_INTERRUPTED, f"run {rid} interrupted: the model stayed unreachable{detail}"
        return WAIT_ENDED, f"run {rid} ended without completing ({end.reason}){detail}"
    need = fold.need
    if need is not None and (alive or need.reason == "crashed"):
        since = f" since {need.ts.astimezone():%H:%M}"
        return WAIT_NEEDS, f"run {rid} needs you ({label(need.reason)}){since}: {need.message}"
    if fold.completed is not None and not alive:
        return WAIT_COMPLETED, f"run {rid} completed: {fold.completed.summary}"
    return None


def cmd_wait(args: argparse.Namespace) -> int:
    """Block until the run ends or needs its operator; the exit code says which (:data:`WAIT_HELP`)."""
    import time

    from console.engine import events as ev
    from console.engine.control import RunLock
    from console.engine.job import JobError, validate_job_folder

    try:
        if args.timeout is not None and not (math.isfinite(args.timeout) and 0 <= args.timeout <= MAX_WAIT_SECONDS):
            raise ValueError(f"--timeout {args.timeout:g}: expected a number of seconds from 0 to {MAX_WAIT_SECONDS}")
        paths = validate_job_folder(run_folder(args.job))
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    rid, lock, fold = paths.run_id, RunLock(paths), _WaitFold()
    started = time.monotonic()
    deadline = None if args.timeout is None else started + args.timeout
    offset, gone_since = 0, None
    try:
        while True:
            with contextlib.suppress(OSError):
                if os.stat(paths.events).st_size < offset:  # the log was replaced (moved aside): read it anew
                    fold, offset = _WaitFold(), 0
            batch, offset = ev.read_new(paths.events, offset, limit=8 << 20)
            for e in batch:
                fold.apply(e)
            with contextlib.suppress(OSError):
                if offset < os.stat(paths.events).st_size and batch:
                    continue  # a long log: caught up chunk by chunk, then followed
            alive = lock.holder() is not None
            verdict = _wait_verdict(fold, rid, alive)
            if verdict is not None:
                _say(verdict[1])
                return verdict[0]
            now = time.monotonic()
            if alive or batch:
                gone_since = None
            elif gone_since is None:
                gone_since = now
            elif now - gone_since >= (WAIT_GONE_GRACE if fold.events else WAIT_START_GRACE):
                if not fold.events:
                    _err(f"{paths.root}: this folder has never run (no events); a run of it is another folder: wait "
                         "for the id `agent-console run` prints")
                    return EXIT_USAGE
                _say(f"run {rid} interrupted: no process runs it ({resume_hint(paths)})")
                return WAIT_INTERRUPTED
            if deadline is not None and now >= deadline:
                what = "still running" if alive else "no process holds it and no end is logged (yet)"
                _say(f"run {rid}: {what} after {args.timeout:g}s (timeout)")
                return WAIT_TIMEOUT
            time.sleep(WAIT_POLL if deadline is None else max(0.0, min(WAIT_POLL, deadline - now)))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    from console.entry import interrupt_once, take_interrupts

    # Already in place when the command came through console.entry; `python -m console.cli` comes here first.
    previous = signal.getsignal(signal.SIGINT)
    take_interrupts()
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl+C before the command had its own handling (imports, settings, the provider, a console starting):
        # exit 130, and no traceback. A command with something to say about it (a run) said it on one line.
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`agent-console jobs | head`): nothing more to say, and nothing to say it to.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        if signal.getsignal(signal.SIGINT) is interrupt_once and previous is not interrupt_once:
            signal.signal(signal.SIGINT, previous)  # called in-process (tests): the caller's handling again


def _main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already reported on one line
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.command == "run":
        return cmd_run(args)
    if args.command == "jobs":
        return cmd_jobs(args)
    if args.command == "attach":
        return cmd_attach(args)
    if args.command == "logs":
        return cmd_logs(args)
    if args.command == "wait":
        return cmd_wait(args)
    if args.command in COMMAND_HELP:
        return cmd_control(args)
    if args.command == "fleet" or (args.command is None and sys.stdin.isatty() and sys.stdout.isatty()):
        return cmd_fleet(args)
    parser.print_help()
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
