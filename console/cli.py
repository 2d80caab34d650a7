"""agent-console: the command line.

Exit codes: 0 the job completed; 1 the run ended without completing (the last
line says why); 2 bad input (job folder, job.toml, settings, flags);
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

from console import __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _err(msg: str) -> None:
    print(f"agent-console: {msg}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-console",
        description="Run long LLM agent jobs under guardrails, and supervise them.",
    )
    p.add_argument("--version", action="version", version=f"agent-console {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run a job (a folder with instructions.md)",
                         description="Copy JOB into a fresh run folder and run it (or run it in place).")
    run.add_argument("job", type=Path, metavar="JOB", help="job folder (with instructions.md)")
    run.add_argument("--headless", action="store_true", help="print a compact live log instead of the console")
    run.add_argument("--in-place", action="store_true",
                     help="run in JOB itself instead of a fresh copy (resumes it if it has state)")
    run.add_argument("--provider", choices=["scripted", "openai", "anthropic"], help="model provider")
    run.add_argument("--model", help="model name (default depends on the provider)")
    run.add_argument("--base-url", help="API base URL (an OpenAI-compatible server such as Ollama or vLLM)")
    run.add_argument("--speed", type=float, metavar="X",
                     help="scripted model pacing: 1 looks alive (default), 0 is instant")
    run.add_argument("--max-turns", type=int, metavar="N", help="stop a session after N turns")
    run.add_argument("--context-window", type=int, metavar="TOKENS", help="override the model's context window")
    run.add_argument("--script", type=Path, metavar="FILE",
                     help="replay exact turns from FILE (JSON list or JSON Lines) with the scripted provider")

    jobs = sub.add_parser("jobs", help="list runs and their status")
    jobs.add_argument("--limit", type=int, default=30, help="how many runs to show (newest first)")
    jobs.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    return p


def _positive(name: str, value: Any) -> None:
    if value is not None and value <= 0 and name != "speed":
        raise ValueError(f"--{name.replace('_', '-')} must be positive")
    if name == "speed" and value is not None and value < 0:
        raise ValueError("--speed must be 0 or more")


def cmd_run(args: argparse.Namespace) -> int:
    from console.engine.clock import SystemClock
    from console.engine.job import JobError, load_job_config, prepare_run, validate_job_folder
    from console.engine.loop import Controls
    from console.engine.store import JobStore
    from console.engine.supervisor import Supervisor
    from console.headless import HeadlessLog
    from console.providers import ProviderError, make_provider
    from console.settings import load_settings, resolve_run_settings

    clock = SystemClock()
    try:
        for name in ("speed", "max_turns", "context_window"):
            _positive(name, getattr(args, name))
        settings = load_settings()
        if args.in_place:
            paths = validate_job_folder(args.job)
        else:
            paths = prepare_run(args.job, settings.runs_dir, clock.now())
        job = load_job_config(paths)
        rs = resolve_run_settings(settings, job, provider=args.provider, model=args.model, base_url=args.base_url,
                                  speed=args.speed, max_turns=args.max_turns, context_window=args.context_window)
        if args.script is not None and rs.provider != "scripted":
            raise ValueError("--script replays turns with the scripted provider only")
        api_key = None
        if rs.provider == "openai" and settings.openai_api_key:
            api_key = settings.openai_api_key.get_secret_value()
        if rs.provider == "anthropic" and settings.anthropic_api_key:
            api_key = settings.anthropic_api_key.get_secret_value()
        provider = make_provider(rs.provider, rs.model, base_url=rs.base_url, api_key=api_key, speed=rs.speed,
                                 clock=clock, script=args.script)
    except (JobError, ValueError, ProviderError) as exc:
        _err(str(exc))
        return EXIT_USAGE

    print(f"run folder: {paths.root}", flush=True)
    store = JobStore(settings.store_path)
    controls = Controls()
    sup = Supervisor(paths, rs, provider, clock=clock, store=store, controls=controls)
    sup.subscribe(HeadlessLog(sys.stdout, color=sys.stdout.isatty()))

    interrupts = 0

    def on_sigint(signum: int, frame: object) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            controls.request_stop()
            print("\nstopping after the current turn (Ctrl+C again to quit now)", file=sys.stderr, flush=True)
        else:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        result = sup.run()
    except KeyboardInterrupt:
        store.ended(paths.root, "stopped", clock.now(), "interrupted")
        _err(f"interrupted; the run can be resumed with: agent-console run --in-place {paths.root}")
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGINT, previous)
    if result.ok:
        if result.outcome is None:
            print(f"job already complete: {paths.root}")
        else:
            print(f"done: job complete in {result.sessions} session(s); results in {paths.root}")
        return EXIT_OK
    _err(f"run ended without job_complete: {result.reason.value}: {result.detail}")
    if result.reason.value == "user_shutdown":
        return EXIT_INTERRUPTED
    return EXIT_FAILED


def cmd_jobs(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from console.engine.job import JobError
    from console.engine.store import JobStore
    from console.settings import load_settings

    try:
        settings = load_settings()
    except JobError as exc:
        _err(str(exc))
        return EXIT_USAGE
    rows = JobStore(settings.store_path).list(args.limit)
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
    table.add_column("job", overflow="fold", max_width=28)
    table.add_column("summary / reason", overflow="fold", ratio=1, min_width=24)
    style = {"completed": "green", "running": "cyan", "failed": "red", "stopped": "yellow"}

    def short(ts: str | None) -> str:
        return (ts or "").replace("T", " ")[5:16]

    for r in rows:
        table.add_row(
            f"[{style.get(r.status, '')}]{r.status}[/]",
            short(r.started_at),
            short(r.completed_at),
            "" if r.confidence is None else f"{r.confidence:.2f}",
            re.sub(r"-\d{8}-\d{6}(-\d+)?$", "", Path(r.path).name),
            r.summary or r.detail or "",
        )
    console = Console()
    console.print(table)
    console.print(f"[dim]{len(rows)} run(s), newest first. Run folders: {settings.runs_dir}[/]")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "jobs":
        return cmd_jobs(args)
    parser.print_help()
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
