"""agent-console: the command line.

Exit codes: 0 the job completed; 1 the run ended without completing (the last
line says why); 2 bad input (job folder, job.toml, settings, flags);
130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from console import __version__
from console.providers.registry import NAMES as PROVIDER_NAMES

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

COMMAND_HELP = {
    "approve": "approve a pending context restart of a running job",
    "deny": "deny a pending context restart (the run ends cleanly; resume later with run --in-place)",
    "checkpoint": "force a checkpoint: the agent re-reads plan and instructions, unfinished todos carried over",
    "rewind": "rewind the current phase with an issue text: the agent re-plans",
    "pause": "pause a running job after its current turn",
    "resume": "resume a paused job",
    "stop": "stop a running job after its current turn (a second stop stops at once)",
}
COMMAND_NAMES = {"approve": "approve_restart", "deny": "deny_restart"}


def one_line(text: str) -> str:
    """A message as one printable line: its lines joined, control characters (escape sequences) escaped."""
    joined = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in joined)


def _err(msg: str) -> None:
    _say(f"agent-console: {one_line(msg)}", sys.stderr)


def _say(line: str, stream: Any = None) -> None:
    """Print a line; a reader that went away (`| head`, a closed SSH session) does not change the outcome."""
    with contextlib.suppress(BrokenPipeError, ValueError):
        print(line, file=stream or sys.stdout, flush=True)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as the one line every other bad input gets (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        _err(f"{message} (see: {self.prog} --help)")
        sys.exit(EXIT_USAGE)


MAX_SCRIPT_BYTES = 64 << 20
MAX_WAIT_SECONDS = 86_400
MAX_LIST = 10**6


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
    run.add_argument("job", type=Path, metavar="JOB", help="job folder (with instructions.md)")
    run.add_argument("--headless", action="store_true", help="print a compact live log instead of the console")
    run.add_argument("--theme", metavar="NAME", help="console theme (agent-dark, agent-light, agent-ansi, ...)")
    run.add_argument("--in-place", action="store_true",
                     help="run in JOB itself instead of a fresh copy (resumes it if it has state)")
    run.add_argument("--provider", choices=list(PROVIDER_NAMES), help="model provider (its default model follows)")
    run.add_argument("--model", help="model name (default depends on the provider)")
    run.add_argument("--base-url", help="API base URL (an OpenAI-compatible server such as Ollama or vLLM)")
    run.add_argument("--speed", type=float, metavar="X",
                     help="scripted model pacing: 1 looks alive (default), 0 is instant")
    run.add_argument("--max-turns", type=int, metavar="N", help="stop a session after N turns")
    run.add_argument("--context-window", type=int, metavar="TOKENS", help="override the model's context window")
    run.add_argument("--script", type=Path, metavar="FILE",
                     help="replay exact turns from FILE (JSON list or JSON Lines) with the scripted provider")
    run.add_argument("--max-restarts", type=int, metavar="N", help="end the run after N context restarts")
    run.add_argument("--no-auto-restart", action="store_true",
                     help="when the context is full, wait for `agent-console approve JOB` before restarting")

    for name, text in COMMAND_HELP.items():
        c = sub.add_parser(name, help=text, description=text)
        c.add_argument("job", type=Path, metavar="JOB", help="the run folder (as printed by `run`)")
        if name == "rewind":
            c.add_argument("issue", help="what is wrong, for the agent to re-plan around")
        if name == "checkpoint":
            c.add_argument("--note", help="a note for the agent with the checkpoint")
        c.add_argument("--wait", type=float, default=5.0, metavar="SECONDS",
                       help="how long to wait for the run to confirm (default 5; 0 does not wait)")

    attach = sub.add_parser("attach", help="open the console on a job another process runs (or a finished one)",
                            description="Follow a job run elsewhere (e.g. run --headless over SSH) in the console. "
                                        "Keys act through the job's control inbox; closing never stops the run.")
    attach.add_argument("job", type=Path, metavar="JOB", help="the run folder (as printed by `run`)")
    attach.add_argument("--theme", metavar="NAME", help="console theme")

    jobs = sub.add_parser("jobs", help="list runs and their status")
    jobs.add_argument("--limit", type=int, default=30, help="how many runs to show (newest first)")
    jobs.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    return p


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


def cmd_run(args: argparse.Namespace) -> int:
    from console.engine.clock import SystemClock
    from console.engine.job import JobError, prepare_run, validate_job_folder
    from console.engine.job_config import load_job_config
    from console.engine.store import JobStore
    from console.engine.supervisor import Supervisor
    from console.providers import ProviderError, make_provider
    from console.settings import load_settings, resolve_run_settings

    clock = SystemClock()
    try:
        check_flags(args)
        settings = load_settings()
        check_console_options(args.theme, settings, console=not args.headless)
        source = validate_job_folder(args.job)
        job = load_job_config(source)
        rs = resolve_run_settings(settings, job, provider=args.provider, model=args.model, base_url=args.base_url,
                                  speed=args.speed, max_turns=args.max_turns, context_window=args.context_window,
                                  max_restarts=args.max_restarts,
                                  auto_restart=False if args.no_auto_restart else None)
        if args.script is not None and rs.provider != "scripted":
            raise ValueError("--script replays turns with the scripted provider only")
        if args.script is not None:
            check_script(args.script)
        secret = getattr(settings, f"{rs.provider}_api_key", None)  # AGENT_CONSOLE_<PROVIDER>_API_KEY
        api_key = secret.get_secret_value() if secret is not None else None
        try:
            provider = make_provider(rs.provider, rs.model, base_url=rs.base_url, api_key=api_key, speed=rs.speed,
                                     clock=clock, script=args.script)
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
        _err(f"{args.job}: a job or settings file is nested too deeply to be read")
        return EXIT_USAGE
    try:
        store = JobStore(settings.store_path)
    except (sqlite3.Error, OSError) as exc:
        _err(f"{settings.store_path}: the jobs database cannot be used ({exc}); move it aside and a new one is made")
        return EXIT_USAGE
    try:
        # Copy only once everything checked out: a failed start leaves no stray run folder.
        paths = source if args.in_place else prepare_run(args.job, settings.runs_dir, clock.now())
    except JobError as exc:
        _err(str(exc))
        return EXIT_USAGE
    except OSError as exc:  # the data folder cannot be written, or a file of the job cannot be copied
        _err(f"{args.job}: cannot be copied to a run folder under {settings.runs_dir}: {str(exc)[:300]}")
        return EXIT_USAGE

    try:
        sup = Supervisor(paths, rs, provider, clock=clock, store=store)
    except sqlite3.Error as exc:
        _err(f"{settings.store_path}: the jobs database cannot be used ({exc}); move it aside and a new one is made")
        return EXIT_USAGE
    except (ValueError, OSError) as exc:
        _err(state_error(paths, exc))
        return EXIT_USAGE
    print(f"run folder: {paths.root}", flush=True)
    use_console = not args.headless and sys.stdin.isatty() and sys.stdout.isatty()
    if not args.headless and not use_console:
        print("not a terminal: running headless (the console needs one)", file=sys.stderr, flush=True)
    if use_console:
        return _run_in_console(sup, paths, args.theme or settings.theme)
    return _run_headless(sup, paths, store, clock)


def _finish(sup: Any, paths: Any) -> int:
    """The one closing line of a run, and its exit code."""
    result = sup.result
    if result is None:
        _err(f"the run was stopped before it started; resume it with: agent-console run --in-place {paths.root}")
        return EXIT_INTERRUPTED
    cost = _job_cost(sup)
    if result.ok:
        if result.outcome is None:
            _say(f"job already complete: {paths.root}")
        else:
            _say(f"done: job complete in {result.sessions} session(s){cost}; results in {paths.root}")
        return EXIT_OK
    _err(f"run ended without job_complete: {result.reason.value}: {result.detail}{cost}")
    if result.reason.value in ("user_shutdown", "model_unavailable", "budget_exhausted"):
        # Nothing is lost: the exact command that goes on (a budget raised in job.toml first).
        _err(f"resume with: agent-console run --in-place {paths.root}")
    if result.reason.value in ("user_shutdown", "model_unavailable"):
        return EXIT_INTERRUPTED
    return EXIT_FAILED


def _job_cost(sup: Any) -> str:
    """"; cost $0.42" for the closing line, when the model's price is known."""
    from console.engine.cost import format_cost

    usd = sup.job_cost()
    return "" if usd is None else f"; cost {format_cost(usd)}"


def _run_in_console(sup: Any, paths: Any, theme: str) -> int:
    from console.engine.supervisor import JobBusy
    from console.tui.launch import run_console

    try:
        code = run_console(sup, theme=theme, job_title=paths.root.name)
    except JobBusy as exc:
        _err(f"{exc}; watch it with agent-console attach {paths.root}")
        return EXIT_USAGE
    if sup.result is None:
        return code
    return _finish(sup, paths)


def _run_headless(sup: Any, paths: Any, store: Any, clock: Any) -> int:
    from console.engine.supervisor import JobBusy
    from console.headless import HeadlessLog

    sup.subscribe(HeadlessLog(sys.stdout, color=sys.stdout.isatty()))
    interrupts = 0

    def on_signal(signum: int, frame: object) -> None:
        nonlocal interrupts
        interrupts += 1
        sup.stop()
        if interrupts == 1:
            what = "Ctrl+C" if signum == signal.SIGINT else "the signal"
            print(f"\nstopping: at once if the model is being asked, else after the turn's tool calls ({what} again "
                  "to stop now)", file=sys.stderr, flush=True)
        elif interrupts > 2:
            raise KeyboardInterrupt

    # SIGTERM (kill, systemd) and SIGHUP (the SSH session closed under a plain shell) stop as cleanly
    # as Ctrl+C: the turn in flight finishes and is committed, and the run can be resumed.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        sup.run()
    except JobBusy as exc:
        _err(f"{exc}; send it commands (agent-console pause|stop|... {paths.root}) or watch it with "
             f"agent-console attach {paths.root}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        store.ended(paths.root, "stopped", clock.now(), "interrupted")
        _err(f"interrupted; the run can be resumed with: agent-console run --in-place {paths.root}")
        return EXIT_INTERRUPTED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return _finish(sup, paths)


def cmd_attach(args: argparse.Namespace) -> int:
    from console.engine.job import JobError, validate_job_folder
    from console.settings import load_settings

    try:
        settings = load_settings()
        check_console_options(args.theme, settings)
        paths = validate_job_folder(args.job)
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    if not paths.events.exists():
        _err(f"{args.job}: this job has no events yet (never run); start it with agent-console run --headless")
        return EXIT_USAGE
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        _err("attach opens the console and needs a terminal; for a log use: tail -f JOB/.console/events.jsonl")
        return EXIT_USAGE
    from console.tui.launch import attach_console

    return attach_console(paths, theme=args.theme or settings.theme, job_title=paths.root.name)


def cmd_jobs(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from console.engine.cost import format_cost
    from console.engine.job import JobError
    from console.engine.store import JobStore
    from console.settings import load_settings

    try:
        check_flags(args)
        settings = load_settings()
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    try:
        rows = JobStore(settings.store_path).list(args.limit)
    except (sqlite3.Error, OSError) as exc:
        _err(f"{settings.store_path}: the jobs database cannot be read ({exc}); move it aside and a new one is made")
        return EXIT_USAGE
    from console.engine.control import RunLock
    from console.engine.job import JobPaths

    def live(r: Any) -> Any:
        # A run that died (kill -9, power cut) never wrote its end: the lock tells the truth.
        if r.status in ("running", "awaiting approval") and RunLock(JobPaths(Path(r.path))).holder() is None:
            return replace(r, status="interrupted", detail=r.detail or "no process runs it; resume with run --in-place")
        return r

    rows = [live(r) for r in rows]
    if args.json:
        for r in rows:
            print(json.dumps(r.__dict__))
        return EXIT_OK
    if not rows:
        print("no runs yet: try  agent-console run sample_jobs/quickstart")
        return EXIT_OK
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("status", no_wrap=True)
    table.add_column("started", no_wrap=True)
    table.add_column("completed", no_wrap=True)
    table.add_column("conf.", no_wrap=True, justify="right")
    table.add_column("cost", no_wrap=True, justify="right")
    table.add_column("job", overflow="fold", max_width=28)
    table.add_column("summary / reason", overflow="fold", ratio=1, min_width=24)
    style = {"completed": "green", "running": "cyan", "failed": "red", "stopped": "yellow", "interrupted": "yellow",
             "awaiting approval": "magenta", "out of budget": "yellow", "incomplete": "red"}

    def short(ts: str | None) -> str:
        return (ts or "").replace("T", " ")[5:16]

    for r in rows:
        # Text, not markup: a status without a style, or a summary the agent wrote with brackets in it,
        # must print as it is (an empty style once made "[]out of budget[/]" a markup error).
        table.add_row(
            Text(r.status, style=style.get(r.status, "")),
            short(r.started_at),
            short(r.completed_at),
            "" if r.confidence is None else f"{r.confidence:.2f}",
            "" if r.cost_usd is None else format_cost(r.cost_usd),
            re.sub(r"-\d{8}-\d{6}(-\d+)?$", "", Path(r.path).name),
            Text(r.summary or r.detail or ""),
        )
    console = Console()
    console.print(table)
    console.print(f"[dim]{len(rows)} run(s), newest first. Run folders: {settings.runs_dir}[/]")
    return EXIT_OK


def cmd_control(args: argparse.Namespace) -> int:
    import time

    from console.engine import events as ev
    from console.engine.control import RUN_SCOPED, RunLock, write_inbox
    from console.engine.job import JobError, JobPaths, validate_job_folder

    try:
        check_flags(args)
        paths: JobPaths = validate_job_folder(args.job)
    except (JobError, ValueError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    if not paths.state.is_dir():
        _err(f"{args.job}: this job has never run (no .console/ folder); start it with `agent-console run`")
        return EXIT_USAGE
    name = COMMAND_NAMES.get(args.command, args.command)
    cmd_args: dict[str, Any] = {}
    if args.command == "rewind":
        if not args.issue.strip():
            _err("rewind needs the issue text")
            return EXIT_USAGE
        cmd_args["issue"] = args.issue
    if args.command == "checkpoint" and args.note:
        cmd_args["note"] = args.note
    pid = RunLock(paths).holder()
    if pid is None and name in RUN_SCOPED:
        # A stop (pause, approve...) belongs to a running run; left in the inbox it would act on the next one.
        _err(f"{args.command}: no process is running {paths.root} now, so there is nothing to {args.command}; "
             f"resume it with: agent-console run --in-place {paths.root}")
        return EXIT_FAILED
    cmd = write_inbox(paths, name, cmd_args, source="cli")
    if args.wait <= 0:
        print(f"{args.command}: queued for {paths.root}")
        return EXIT_OK
    if pid is None:
        print(f"{args.command}: queued; no process is running this job now, so it applies when the job runs again "
              f"(agent-console run --in-place {paths.root})")
        return EXIT_OK
    deadline = time.monotonic() + args.wait
    offset = 0
    while time.monotonic() < deadline:
        new, offset = ev.read_new(paths.events, offset)
        for e in new:
            if isinstance(e, ev.OperatorCommand) and e.command_id == cmd.id and e.status != "received":
                print(f"{args.command}: {e.status}: {e.detail}")
                return EXIT_OK if e.status == "applied" else EXIT_FAILED
        time.sleep(0.1)
    print(f"{args.command}: sent to process {pid}; not confirmed within {args.wait:g}s (it applies at the next "
          "turn boundary)")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`agent-console jobs | head`): nothing more to say, and nothing to say it to.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


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
    if args.command in COMMAND_HELP:
        return cmd_control(args)
    parser.print_help()
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
