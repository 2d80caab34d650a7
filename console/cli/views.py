"""The commands that watch a run: `attach` (the console), `fleet` (every run) and `logs` (a run's story)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from console.cli.common import (
    MAX_LIST,
    UsageError,
    check_console_options,
    err,
    refuse_foreign,
    resume_hint,
    run_folder,
)
from console.outcome import EXIT_INTERRUPTED, EXIT_OK
from console.tui.theme_choice import chosen_theme


@contextlib.contextmanager
def console_start() -> Iterator[None]:
    """The console's start: the settings, Textual and the console's screens imported, the app built, tens of
    thousands of objects that live as long as the process. The garbage collector's passes over them free nothing
    and cost ~10% of the start (~40 ms on 2 busy cores), so it is off until the console is up: the app's mount
    turns it back on (and freezes what exists then: ConsoleApp._tune_gc), and so does the command's end."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def cmd_attach(args: argparse.Namespace) -> int:
    with console_start():
        return _attach(args)


def _attach(args: argparse.Namespace) -> int:
    from console.cli.common import where_runs_are
    from console.engine.job_files import JobError, validate_job_folder
    from console.engine.runs import run_id
    from console.engine.store import StoreError
    from console.view.jobs import remote_run

    away: str | None = None
    try:
        settings = where_runs_are()  # where the runs are, the theme and the [keys]: all an attach reads of them
        check_console_options(args.theme, settings)
        try:
            row = remote_run(args.job, settings)
        except StoreError as exc:  # this machine's own runs are found from their folders (console.cli.local_runs)
            row, away = None, str(exc)
        if row is not None:  # a run of another machine sharing the store
            if not (sys.stdin.isatty() and sys.stdout.isatty()):
                raise UsageError(f"attach opens the console and needs a terminal; for the story use: agent-console "
                                 f"logs -f {run_id(row.path)}")
            from console.tui.launch import attach_remote_console

            return attach_remote_console(settings.store_url or "", row, theme=chosen_theme(args.theme, settings),
                                         data_dir=settings.data_dir)
        from console.cli.common import find_run, say_away

        found, away = find_run(args.job, settings, away)
        paths = validate_job_folder(found)
        refuse_foreign(paths, settings.data_dir)
        if away is not None:
            say_away(away, paths)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    from console.engine.starting import await_start

    await_start(paths, tell=lambda line: err(line))  # a run just handed to its runner (run --detach): its start
    if not paths.events.exists():
        raise UsageError(f"{paths.root}: this job has no events yet (never run); a run of it is another folder: attach "
                         f"to the id `agent-console run` prints (or run this folder itself with: agent-console run "
                         f"--headless --in-place {paths.root})")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(f"attach opens the console and needs a terminal; for the story use: agent-console logs -f "
                         f"{paths.run_id}")
    from console.cli.lifecycle import after_console
    from console.tui.launch import attach_console

    code = attach_console(paths, theme=chosen_theme(args.theme, settings), job_title=paths.root.name)
    # What `run` says once its console is gone: that the run goes on and how to come back, or how it ended and
    # where its results are. Not to a terminal that hung up (the console closed because it is gone).
    with contextlib.suppress(OSError):
        after_console(paths, settings.data_dir)
    return code


def cmd_fleet(args: argparse.Namespace) -> int:
    with console_start():
        return _fleet(args)


def _fleet(args: argparse.Namespace) -> int:
    from console.cli.common import where_runs_are
    from console.engine.job_files import JobError

    theme = getattr(args, "theme", None)
    try:
        settings = where_runs_are()  # where the runs are, the theme and the [keys]: all the fleet reads of them
        check_console_options(theme, settings)
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    # textual-serve's web driver (serve's /console/) talks to the browser over pipes: that is its terminal.
    if not (sys.stdin.isatty() and sys.stdout.isatty()) and "web_driver" not in os.environ.get("TEXTUAL_DRIVER", ""):
        raise UsageError("the fleet view needs a terminal; for a list use: agent-console jobs")
    from console.engine.seal import Seal, SealError
    from console.tui.launch import fleet_console

    try:  # with the operator's key, each run's first fold starts from the view's fold its runner kept
        seal: Seal | None = Seal.of(Path(settings.data_dir))
    except (SealError, OSError):
        seal = None  # every log folded from its start, as without a kept fold
    return fleet_console(settings.store_path, theme=chosen_theme(theme, settings), url=settings.store_url,
                         seal=seal)



def local_run_folder(ref: str, settings: Any, away: str) -> Path:
    """The folder ``ref`` names among this machine's runs, read from their folders while the shared store is
    away (``away``: why); ValueError (one line naming what works) when none or several are."""
    from console.cli.local_runs import STORE_AWAY, own_rows
    from console.engine.runs import RunLookupError, looks_like_a_path, resolve_run

    if looks_like_a_path(ref) or os.path.isdir(ref):
        return Path(ref)
    try:
        return resolve_run(ref, own_rows(settings))
    except RunLookupError as exc:
        raise ValueError(f"{STORE_AWAY} ({away}), and {exc}: this machine's runs are listed by agent-console jobs "
                         "(from their folders); give logs the run's folder (agent-console logs RUN_FOLDER)") from None


def cmd_logs(args: argparse.Namespace) -> int:
    """`logs JOB [-f] [--json] [--since SEQ] [-n N]`: a run's story (or its events), whole or followed.

    0 when the story is printed (followed: the run ended, or no process runs it any more), also when the reader
    of the output went away (`| head`); 2 for a run that never ran or a bad flag; 130 on Ctrl+C."""
    import stat

    from console.engine.job_files import JobError, validate_job_folder
    from console.engine.run_lock import RunLock
    from console.headless import LogEnd, StoryPrinter, use_color

    try:
        if args.since < 0:
            raise ValueError(f"--since {args.since}: expected an event's seq (0 or more)")
        if args.lines is not None and not 1 <= args.lines <= MAX_LIST:
            raise ValueError(f"--lines {args.lines}: expected a whole number from 1 to {MAX_LIST}")
        from console.headless.store_logs import remote_logs

        if (code := remote_logs(args)) is not None:  # a run of another machine sharing the store
            return code
        from console.settings import load_settings

        settings = load_settings()
        away = getattr(args, "store_away", None)
        paths = validate_job_folder(local_run_folder(args.job, settings, away) if away else
                                    run_folder(args.job, settings))
        refuse_foreign(paths, settings.data_dir)
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if away:  # the first line: where this story is read from
        from console.cli.local_runs import STORE_AWAY

        err(f"{STORE_AWAY} ({away}): run {paths.run_id} read from its folder {paths.root}")
    lock = RunLock(paths)
    if args.follow:  # a run just handed to its runner (run --detach): followed once it has started
        from console.engine.starting import await_start

        await_start(paths, tell=lambda line: err(line))
    try:
        mode: int | None = os.stat(paths.events).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"{paths.events}: not a regular file, so not a log of events")
    if mode is None and not (args.follow and lock.holder() is not None):  # a run just starting has no log yet
        raise UsageError(f"{paths.root}: no events: this job never ran (a run of it is another folder: give logs the "
                         "id `agent-console run` or `agent-console jobs` prints)")
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
        err(f"no process runs {paths.run_id} any more and it did not end cleanly (killed, or its machine went "
            f"down); {resume_hint(paths)}")
    return EXIT_OK
