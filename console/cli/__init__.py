"""agent-console: the command line.

A command that takes a run (attach, approve, deny, checkpoint, rewind, pause,
resume, stop, run --in-place) accepts its folder, its short id (as `run` and
`jobs` print it) or the start of its folder name; one that matches several
runs is an error listing them.

Exit codes (console/outcome.py): 0 the job completed (the harness's record shows
the plan done); 1 incomplete (the last line says why); 2 bad input (job folder,
run id, job.toml, settings, flags); 3 stopped by the operator (a stop from the
console or another shell, or a denied restart); 4 the agent gave up; 7 failed
(an internal error); 130 interrupted (Ctrl+C, SIGTERM or SIGHUP, or a stop while
the run asked because the model could not be reached). `wait` adds 5 timeout and 6 interrupted (see WAIT_HELP).

One module per command family (run, lifecycle, views, jobs, control, wait; the grammar in parser, what they
share in common). A command imports what it needs when it runs: `jobs` and the operator's commands start
without the console, the providers' SDKs or the run's machinery (benchmarks/cli_start.py times them).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import sys
from typing import Any

from console.interrupts import interrupt_once, is_interrupt, take_interrupts
from console.outcome import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

# Names this package offered when it was one module, and where they live now (imported when first asked for).
_MOVED = {
    "build_parser": "parser", "launch_flags": "run", "explicit_flags": "run", "check_script": "run",
    "cmd_run": "run", "start_runner": "lifecycle", "jobs_table": "console.view.jobs", "shorten": "console.view.jobs",
    "need_summary": "console.view.jobs", "cmd_jobs": "jobs", "prune_jobs": "jobs", "cmd_attach": "views",
    "cmd_fleet": "views", "cmd_logs": "views", "cmd_control": "control", "resume_run": "control",
    "cmd_wait": "wait", "WAIT_HELP": "wait", "WAIT_COMPLETED": "wait", "WAIT_ENDED": "wait", "WAIT_STOPPED": "wait",
    "WAIT_NEEDS": "wait", "WAIT_TIMEOUT": "wait", "WAIT_INTERRUPTED": "wait", "WAIT_FAILED": "wait",
    "one_line": "common", "run_folder": "common", "check_flags": "common", "resume_hint": "common",
}
# Commands the garbage collector stays off for after their imports (see _command): `jobs` reads, prints and ends (what
# it makes lives until the process ends a moment later); the console's turn it on once the console is up, after
# freezing what exists then (console.cli.views.console_start, ConsoleApp._tune_gc).
_COLLECTOR_OFF = frozenset({"jobs", "attach", "fleet"})
# Each subcommand's function: (module, name); the operator's commands (console.engine.command_specs.SPECS) go to
# control.cmd_control.
_COMMANDS = {"run": ("run", "cmd_run"), "jobs": ("jobs", "cmd_jobs"), "attach": ("views", "cmd_attach"),
             "logs": ("views", "cmd_logs"), "wait": ("wait", "cmd_wait"), "fleet": ("views", "cmd_fleet"),
             "submit": ("submit", "cmd_submit"), "store": ("store", "cmd_store"),
             "ack": ("acknowledge", "cmd_ack"), "acknowledge": ("acknowledge", "cmd_ack"),
             "serve": ("serve", "cmd_serve"), "costs": ("costs", "cmd_costs"),
             "budget": ("budget", "cmd_budget")}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        where = _MOVED[name]
        return getattr(importlib.import_module(where if "." in where else f"console.cli.{where}"), name)
    raise AttributeError(f"module 'console.cli' has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    # Already in place when the command came through console.entry; `python -m console.cli` comes here first.
    previous = signal.getsignal(signal.SIGINT)
    try:
        take_interrupts()  # inside the try: a Ctrl+C while it is put in place is Python's own, raised there
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`agent-console jobs | head`): nothing more to say, and nothing to say it to.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except BaseException as exc:
        # Ctrl+C before the command had its own handling (imports, settings, the provider, a console starting):
        # exit 130, and no traceback. A command with something to say about it (a run) said it on one line.
        if not is_interrupt(exc):
            raise
        return EXIT_INTERRUPTED
    finally:
        if signal.getsignal(signal.SIGINT) is interrupt_once and previous is not interrupt_once:
            signal.signal(signal.SIGINT, previous)  # called in-process (tests): the caller's handling again


def _main(argv: list[str] | None = None) -> int:
    was_on = gc.isenabled()
    gc.disable()  # what every command imports first (see _command)
    try:
        from console.cli.common import UsageError, err
    finally:
        if was_on:
            gc.enable()

    try:
        return _command(argv)
    except UsageError as exc:  # bad input, from the grammar or any command: its one line, exit code 2
        err(str(exc))
        return EXIT_USAGE


def _command(argv: list[str] | None) -> int:
    # The grammar and the command's module imported: tens of thousands of objects that live as long as the process.
    # The garbage collector's passes over them free nothing and cost ~5% of a short command's CPU, so it is off
    # meanwhile, and on into the commands of _COLLECTOR_OFF (turned on in between, its first pass would go over every
    # object the imports made, ~10 ms); on again when the command is done (a caller in-process).
    was_on = gc.isenabled()
    gc.disable()
    keep_off = False
    try:
        from console.cli.parser import build_parser, console_only

        words = sys.argv[1:] if argv is None else list(argv)
        # attach's and the fleet's grammar alone when one of them is asked for (their start is the console's).
        parser = build_parser(console_only(words, sys.stdin.isatty() and sys.stdout.isatty()))
        try:
            args = parser.parse_args(words)
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        command = args.command
        if command is None and sys.stdin.isatty() and sys.stdout.isatty():
            command = "fleet"
        keep_off = command in _COLLECTOR_OFF
        run: Any = None
        if command in _COMMANDS:
            module, name = _COMMANDS[command]
            run = getattr(importlib.import_module(f"console.cli.{module}"), name)
        elif command is not None:  # one of the operator's commands (the parser knows no other)
            from console.cli.control import cmd_control

            run = cmd_control
        if not keep_off and was_on:
            gc.enable()
        if run is not None:
            return int(run(args))
        parser.print_help()
        # Where a terminal would have opened the fleet: why it did not, and the commands that work from here.
        print("agent-console: no command given; the fleet console opens only on a terminal (stdin and stdout); "
              "from here: agent-console jobs (the runs), agent-console run JOB_FOLDER --headless", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if keep_off:  # what it made is set aside (as the console does at its start): no pass goes over it all now
            gc.freeze()
        if was_on:
            gc.enable()
