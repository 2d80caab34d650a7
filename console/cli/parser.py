"""The command line's grammar: every subcommand and flag (the operator commands' from the engine's specs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console import __version__
from console.cli.common import RUN_HELP, Parser

if TYPE_CHECKING:
    from console.engine.run_setting_specs import RunSettingSpec

# The commands that open the console, whose grammar alone is built when the command line asks for one of them
# (see console_only): the others' grammar and what it imports (the run settings' and providers' tables, the
# subcommands' modules) cost ~12 ms of CPU before an attach's or the fleet's first frame.
CONSOLE_COMMANDS = ("fleet", "attach")

# Any theme the console's palette offers (Textual's own and the theme files); without it, the one last picked there.
THEME_HELP = ("console theme: any the palette's theme picker offers (agent-dark, agent-light, nord, ...; default: the "
              "one last picked there, else the config's theme)")


def console_only(argv: list[str], terminal: bool) -> str | None:
    """The console command ``argv`` asks for when its grammar alone parses it as the whole grammar would: "attach"
    or "fleet" (their words, none asking for help), or "" for no command at all on a terminal (the fleet). None:
    anything else (another command, help, --version, no command where the help is printed)."""
    if not argv:
        return "" if terminal else None
    if argv[0] in CONSOLE_COMMANDS and not any(a in ("-h", "--help") for a in argv):
        return argv[0]
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's grammar; ``only`` (from :func:`console_only`): that console command's alone ("": no
    command's)."""
    p = Parser(
        prog="agent-console",
        description="Run long LLM agent jobs under guardrails, and supervise them.",
    )
    p.add_argument("--version", action="version", version=f"agent-console {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    if only is not None:
        _console_parsers(sub, only)
        return p
    from console.cli.wait import WAIT_HELP
    from console.engine.command_specs import SPECS

    run = sub.add_parser("run", help="run a job (a folder with instructions.md)",
                         description="Copy JOB into a fresh run folder and run it (or run it in place).")
    run.add_argument("job", metavar="JOB", help="job folder (with instructions.md); with --in-place, also a run's "
                                                "id or the start of its folder name")
    run.add_argument("--headless", action="store_true", help="print a compact live log instead of the console")
    run.add_argument("--theme", metavar="NAME", help=THEME_HELP)
    run.add_argument("--in-place", action="store_true",
                     help="run in JOB itself instead of a fresh copy (resumes it if it has state)")
    run.add_argument("--fresh", action="store_true",
                     help="with --in-place: move the folder's .console/ aside (beside the folder) and start the job "
                          "over; the way to run in place a job folder whose .console/ another operator made")
    run.add_argument("--detach", action="store_true",
                     help="start the run in the background and return (follow it with attach, logs -f or wait)")
    _settings_flags(run)
    _run_flags(run)
    run.add_argument("--runner", action="store_true", help=argparse.SUPPRESS)  # a run started by a console

    for spec in SPECS:  # the operator's commands: one subcommand each, from the engine's command specs
        c = sub.add_parser(spec.cli, help=spec.help, description=spec.help)
        c.add_argument("job", metavar="JOB", help=RUN_HELP)
        for arg in spec.args:
            if arg.positional:
                c.add_argument(arg.name, help=arg.help)
            elif arg.flag:
                c.add_argument(f"--{arg.name}", action="store_true", help=arg.help)
            elif arg.many:
                c.add_argument(f"--{arg.name}", action="append", type=arg.type, metavar=arg.metavar, help=arg.help)
            else:
                c.add_argument(f"--{arg.name}", type=arg.type, metavar=arg.metavar, help=arg.help)
        if spec.cli == "answer":  # a value never on the command line (other users of the machine read argv)
            c.add_argument("--secret", action="append", metavar="NAME",
                           help="a field whose value is read from standard input (one line each, in the order "
                                "given; typed unseen at a terminal), never on the command line")
        if spec.cli == "resume":  # the command line's resume also goes on with a run no process runs
            c.add_argument("--console", action="store_true", help="open the console on the run it starts")
            c.add_argument("--theme", metavar="NAME", help=f"{THEME_HELP} (with --console)")
            _settings_flags(c)
        c.add_argument("--wait", type=float, default=5.0, metavar="SECONDS",
                       help="how long to wait for the run to confirm (default 5; 0 does not wait)")

    _console_parsers(sub, None)

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
                          description="List runs: those that need you first, then newest first. The table fits "
                                      "the terminal: on a narrow one the confidence, cost and started columns are "
                                      "left out (in that order) and a summary ends at a word with '…'; --json prints "
                                      "every field.")
    jobs.add_argument("--limit", type=int, default=30,
                      help="how many finished runs to show, the newest (default 30); every run not finished is "
                           "shown besides, and the last line says how many older ones are left out")
    jobs.add_argument("--json", action="store_true",
                      help="print JSON lines (every field, and the id) instead; the runs --limit leaves out are "
                           "counted on stderr")
    jobs.add_argument("--prune", action="store_true",
                      help="forget the runs whose folder is gone (state 'gone'): their rows are removed from the "
                           "list; each one is named")

    from console.cli.submit import add_parser as add_submit

    add_submit(sub, _settings_flags)
    from console.cli.store import add_parser as add_store

    add_store(sub)
    from console.cli.acknowledge import add_parser as add_ack

    add_ack(sub)
    from console.cli.serve import add_parser as add_serve

    add_serve(sub)
    from console.cli.costs import add_parser as add_costs

    add_costs(sub)
    from console.cli.budget import add_parser as add_budget

    add_budget(sub)

    wait = sub.add_parser("wait", help="wait until a run ends or needs you; the exit code says which",
                          description="Block until the run ends or needs its operator, print one line saying "
                                      "which, and exit with a code for scripts and cron. " + WAIT_HELP + ".")
    wait.add_argument("job", metavar="JOB", help=RUN_HELP)
    wait.add_argument("--timeout", type=float, metavar="SECONDS", help="give up after this long (exit code 5); "
                                                                         "default: wait as long as it takes")
    return p


def _console_parsers(sub: Any, only: str | None) -> None:
    """fleet's and attach's grammar (``only``: that one's alone, "" neither)."""
    if only in (None, "fleet"):
        fleet = sub.add_parser("fleet", help="the fleet view: every run, live (also: agent-console with no command)",
                               description="List every run of the jobs store, live: id, job, state, phase, "
                                           "context, cost, elapsed, last event. A run that needs you is listed "
                                           "first, highlighted, and rings the bell. enter attaches to the selected "
                                           "run (q comes back), a approves its restart, d denies it and s stops the "
                                           "run (both ask first), x forgets a run whose folder is gone (state "
                                           "'gone'; asks), / filters, q quits. Runs go on when it closes.")
        fleet.add_argument("--theme", metavar="NAME", help=THEME_HELP)

    if only in (None, "attach"):
        attach = sub.add_parser("attach", help="open the console on a job another process runs (or a finished one)",
                                description="Follow a job run elsewhere (e.g. run --headless over SSH) in the "
                                            "console. Keys act through the job's control inbox; closing never stops "
                                            "the run.")
        attach.add_argument("job", metavar="JOB", help=RUN_HELP)
        attach.add_argument("--theme", metavar="NAME", help=THEME_HELP)


def _settings_flags(p: argparse.ArgumentParser) -> None:
    """The flags that set how a run works; recorded with the run, so a resume keeps them (flags given to a
    resume override the record and are told in its launch_settings event). From the run settings' table
    (console.engine.run_setting_specs), in its order; `run` alone takes the run-only ones (:func:`_run_flags`)."""
    from console.engine.run_setting_specs import FLAGGED

    for spec in FLAGGED:
        if spec.flag is not None and not spec.flag.run_only:
            _add_flag(p, spec)


def _run_flags(p: argparse.ArgumentParser) -> None:
    """The settings flags only `run` takes (--script, --unconfined)."""
    from console.engine.run_setting_specs import FLAGGED

    for spec in FLAGGED:
        if spec.flag is not None and spec.flag.run_only:
            _add_flag(p, spec)


def _add_flag(p: argparse.ArgumentParser, spec: RunSettingSpec) -> None:
    flag = spec.flag
    assert flag is not None
    if spec.type is bool:
        where: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup = p
        if flag.off:  # on and off: one setting, two exclusive flags, the one that turns it off first
            where = p.add_mutually_exclusive_group()
            where.add_argument(flag.off, action="store_true", help=flag.off_help)
        where.add_argument(flag.option, action="store_true", help=flag.help)
        return
    kwargs: dict[str, Any] = {"metavar": flag.metavar, "help": flag.help}
    if flag.repeat:
        kwargs["action"] = "append"
    elif flag.path:
        kwargs["type"] = Path
    elif spec.type is not str:
        kwargs["type"] = spec.type
    if spec.name == "provider":  # the registry's names: the engine's table does not know the providers
        from console.providers.registry import NAMES as PROVIDER_NAMES

        kwargs["choices"] = list(PROVIDER_NAMES)
    p.add_argument(flag.option, **{k: v for k, v in kwargs.items() if v is not None})
