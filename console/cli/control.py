"""The operator's commands from the command line (approve, deny, checkpoint, rewind, pause, resume, stop): one
function for all of them, driven by the engine's command specs; and `resume` of a run no process runs."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from console.cli.common import (
    UsageError,
    check_flags,
    err,
    foreign_line,
    resume_hint,
    run_folder,
    say,
    where_runs_are,
)
from console.outcome import EXIT_FAILED, EXIT_OK


def cmd_control(args: argparse.Namespace) -> int:
    from console.engine.command_specs import BY_CLI
    from console.engine.commands import CommandError, parse_command
    from console.engine.control import write_inbox
    from console.engine.job_files import JobError, JobPaths, validate_job_folder
    from console.engine.runs import looks_like_a_path
    from console.engine.starting import await_start

    try:
        check_flags(args)
        read_secrets(args)
        settings = None
        away: str | None = None
        if not (looks_like_a_path(args.job) or os.path.isdir(args.job)):  # an id or a name: the store says whose
            settings = where_runs_are()
            if (code := remote_control(args, settings)) is not None:  # a run of another machine sharing the store
                return code
            away = getattr(args, "store_away", None)
        if settings is None:
            paths: JobPaths = validate_job_folder(run_folder(args.job, settings))
        else:  # with the store away, this machine's own runs are found from their folders
            from console.cli.common import find_run, say_away

            found, away = find_run(args.job, settings, away)
            paths = validate_job_folder(found)
            if away is not None:
                say_away(away, paths)
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if not paths.state.is_dir():
        raise UsageError(f"{paths.root}: this job has never run (no .console/ folder), so there is nothing to "
                         f"{args.command}; a run of it is another folder: give {args.command} the id `agent-console "
                         f"run` prints (or run this folder itself with: agent-console run --in-place {paths.root})")
    spec = BY_CLI[args.command]
    try:  # checked against the engine's typed commands before anything is queued
        body = parse_command(spec.name, {a.name: v for a in spec.args if (v := getattr(args, a.name)) is not None})
    except CommandError as exc:
        raise UsageError(str(exc)) from None
    # A run just handed to a runner (run --detach returns before its engine has loaded): waited for, and said.
    pid = await_start(paths, tell=lambda line: say(line, sys.stderr))
    if pid is None and spec.cli == "resume":
        return resume_run(paths, args)
    if pid is None and spec.live:
        from console.runner import job_done

        # A stop (approve, deny) belongs to a running run; left in the inbox it would act on the next one.
        if job_done(paths):
            err(f"{args.command}: run {paths.run_id} ({paths.root}) is complete: there is nothing to {args.command}")
        else:
            err(f"{args.command}: no process is running {paths.root} now, so there is nothing to {args.command}; "
                f"{resume_hint(paths)}")
        return EXIT_FAILED
    offset = 0
    if args.wait > 0 and pid is not None:
        from console.engine.log_file import line_end  # (not the events: their import would delay the command)

        # Its answer can only follow the command: read from the log's end now, never the whole log (any size).
        offset = line_end(paths.events)
    try:
        cmd = write_inbox(paths, body, source="cli")
    except OSError as exc:  # the inbox is full (no run reads it) or cannot be written
        err(f"{args.command}: cannot be queued for {paths.root}: {exc.strerror or exc}")
        return EXIT_FAILED
    if args.wait <= 0:
        say(f"{args.command}: queued for {paths.root}")
        return EXIT_OK
    if pid is None:
        say(f"{args.command}: queued; no process is running this job now, so it applies when the job runs again "
            f"(agent-console resume {paths.run_id})")
        return EXIT_OK
    import time

    from console.engine import events as ev  # only to read the run's answer

    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        new, offset = ev.read_new(paths.events, offset)
        for e in new:
            if isinstance(e, ev.OperatorCommand) and e.command_id == cmd.id and e.status != "received":
                say(f"{args.command}: {e.status}: {e.detail}")
                return EXIT_OK if e.status == "applied" else EXIT_FAILED
        time.sleep(0.1)
    say(f"{args.command}: sent to process {pid}; not confirmed within {args.wait:g}s ({when(args, paths.run_id)})")
    return EXIT_OK


def read_secrets(args: argparse.Namespace) -> None:
    """``answer --secret NAME``: each such field's value read from standard input (unseen at a terminal), added to
    the answer's ``--set`` values; never on the command line, where any user of the machine reads it (ps)."""
    names = getattr(args, "secret", None) or []
    if not names:
        return
    import getpass

    pairs = list(getattr(args, "set", None) or [])
    for name in names:
        if not name.strip() or "=" in name:
            raise ValueError(f"--secret {name[:64]!r}: a field's name is expected (its value is read from stdin)")
        if sys.stdin.isatty():
            value = getpass.getpass(f"{name}: ")
        else:
            line = sys.stdin.readline()
            if not line:
                raise ValueError(f"--secret {name}: no line for it on standard input")
            value = line.removesuffix("\n").removesuffix("\r")
        pairs.append(f"{name.strip()}={value}")
    args.set = pairs


def when(args: argparse.Namespace, rid: str) -> str:
    """When a command not confirmed yet applies (and for a stop, how to stop now)."""
    if args.command == "answer":  # applied at once while its question waits, refused when none does
        return f"an answer is taken while its question waits; whether it was: agent-console logs {rid}"
    return f"it applies at the next turn boundary{again(args, rid)}"


def again(args: argparse.Namespace, rid: str) -> str:
    """For a stop not confirmed yet (a tool call runs, or the model is slow to answer): how to stop it now."""
    if args.command != "stop":
        return ""
    return f"; a tool call may be running: agent-console stop {rid} again stops the run now, the call with it"


def remote_control(args: argparse.Namespace, settings: Any) -> int | None:
    """A command for a run of another machine: a row of the shared store's ``commands`` (and a NOTIFY); that run's
    link writes it into its inbox within a second. None when the run is not another machine's."""
    import uuid

    from console.engine.command_specs import BY_CLI
    from console.engine.commands import CommandError, parse_command
    from console.engine.control import make_command
    from console.engine.runs import run_id
    from console.engine.store import StoreError, is_shared, this_host
    from console.view.jobs import remote_run

    try:
        row = remote_run(args.job, settings)
    except StoreError as exc:  # this machine's own runs are found from their folders (console.cli.local_runs)
        args.store_away = str(exc)
        return None
    if row is None:
        return None
    spec = BY_CLI[args.command]
    rid = run_id(row.path)
    if spec.cli == "resume" and not row.leased:
        err(f"resume: run {rid} is {row.host}'s and no runner holds it now: resume it there (agent-console resume "
            f"{rid} on {row.host}), where its folder is")
        return EXIT_FAILED
    if spec.live and not row.leased:
        err(f"{args.command}: no runner holds run {rid} on {row.host} now, so there is nothing to {args.command}; "
            f"resume it there: agent-console resume {rid}")
        return EXIT_FAILED
    try:
        body = parse_command(spec.name, {a.name: v for a in spec.args if (v := getattr(args, a.name)) is not None})
        cmd = make_command(body, source=f"cli@{this_host()}"[:64], id=uuid.uuid4().hex)
    except CommandError as exc:
        raise UsageError(str(exc)) from None
    store = settings.open_store()
    assert is_shared(store)  # a run of another machine is found in a shared store only
    key = row.key
    try:
        # Read before the command goes: its answer comes after this, however soon the run takes it.
        since = store.last_seqs([key]).get(key, 0)
        store.send_command(key, cmd.model_dump(mode="json", include={"id", "command", "args", "source"}))
        if args.wait <= 0:
            say(f"{args.command}: queued for run {rid} on {row.host}")
            return EXIT_OK
        return _wait_remote(store, key, cmd.id, since, args, rid, row.host)
    except StoreError as exc:
        err(f"{args.command}: {exc}")
        return EXIT_FAILED
    finally:
        store.close()


def _wait_remote(store: Any, key: str, command_id: str, since: int, args: argparse.Namespace, rid: str,
                 host: str) -> int:
    """The run's answer to the command, from its events in the store after ``since`` (woken by their NOTIFY); or,
    when the run ends (or its runner holds its lease no more) without taking it, the command withdrawn and said."""
    import json
    import time

    from console.headless.store_logs import StoreLines

    lines = StoreLines(store, key)
    lines.seq = since
    deadline = time.monotonic() + args.wait
    try:
        while True:
            left = deadline - time.monotonic()
            if lines.changed() or left <= 0:
                # Looked at before the lines: what a runner ships before it lets go of its lease is in them.
                row = store.by_key(key)
                gone = row is None or not row.leased
                ended = False
                for raw in lines.lines():
                    e = json.loads(raw or b"{}")
                    if (e.get("type") == "operator_command" and e.get("command_id") == command_id
                            and e.get("status") != "received"):
                        say(f"{args.command}: {e.get('status')}: {e.get('detail', '')}")
                        return EXIT_OK if e.get("status") == "applied" else EXIT_FAILED
                    ended = ended or e.get("type") == "run_ended"
                if (ended or gone) and (code := _not_taken(store, command_id, args.command, rid, host, ended)
                                        ) is not None:
                    return code
            if left <= 0:
                break
            lines.wait(min(0.5, max(0.01, left)))
    finally:
        lines.close()
    say(f"{args.command}: sent to run {rid} on {host}; not confirmed within {args.wait:g}s ({when(args, rid)})")
    return EXIT_OK


def _not_taken(store: Any, command_id: str, command: str, rid: str, host: str, ended: bool) -> int | None:
    """The run ended, or its runner holds its lease no more, before it answered: the command is withdrawn if it was
    not delivered yet (no later run of this folder takes it then), and the operator told which; None when a runner
    holds the lease again (it takes the command: the wait goes on)."""
    why = (f"run {rid} on {host} ended" if ended
           else f"the runner of run {rid} on {host} holds its lease no more (killed, or cut off from the store)")
    match store.withdraw(command_id):
        case "held":
            return None
        case "withdrawn":
            err(f"{command}: {why} before it took the command: withdrawn, nothing was done")
        case _ if ended:
            err(f"{command}: {why} before it applied the command, which had reached its inbox: not applied (a "
                "later run of it discards it)")
        case _:
            err(f"{command}: {why}; the command had reached its inbox: it applies only if that runner goes on (a "
                "later run of it discards it)")
    return EXIT_FAILED


def resume_run(paths: Any, args: argparse.Namespace) -> int:
    """``resume ID`` of a run no process runs: start it again as a runner, with its recorded settings (and the
    flags given now), in the background or under a console; or say in one line why not (non-zero)."""
    from console.engine.job_files import JobError
    from console.engine.launch import LaunchError
    from console.engine.provenance import judge
    from console.engine.seal import Seal, SealError
    from console.runner import job_done
    from console.settings import load_settings

    try:  # a folder whose .console/ another operator made is no run of this one's: nothing in it is read
        settings = load_settings()
        verdict = judge(paths, Seal.of(settings.data_dir))
    except (LaunchError, SealError, JobError, ValueError) as exc:
        raise UsageError(f"resume: {exc}") from None
    if not verdict.usable:
        raise UsageError(f"resume: {foreign_line(paths.root, verdict.why)}")
    if job_done(paths):
        err(f"resume: run {paths.run_id} ({paths.root}) is complete: there is nothing to resume")
        return EXIT_FAILED
    if not paths.events.exists() and verdict.record is None:  # a record alone: a start whose runner never began
        raise UsageError(f"resume: {paths.root} has never run: start it with agent-console run {paths.root}")
    if args.console and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("resume --console needs a terminal; without --console the run goes on in the background")
    from console.cli.parser import build_parser
    from console.cli.run import cmd_run

    waive_fleet_hold(paths, settings)
    run_args = build_parser().parse_args(["run", "--in-place", str(paths.root)])
    for key, value in vars(args).items():
        if key in vars(run_args) and key not in ("command", "job"):
            setattr(run_args, key, value)
    run_args.detach = not args.console
    return cmd_run(run_args)


def waive_fleet_hold(paths: Any, settings: Any) -> None:
    """The operator's resume of a run whose process died held by the fleet's daily budget (its log ends waiting on
    that need) answers that hold, as their resume of a live held run does: that run alone goes on past today's
    holds of its scopes (the fleet's, its job's), recorded in the store for its next process. Without it the run
    started again would be held again at its first turn. The log says it, not the store's row: a runner killed
    may not have shipped its need to a shared store yet. A store that cannot be used waives nothing: the run is
    held again and asks, as before."""
    from datetime import UTC, datetime

    from console.cli.budget import _ledger
    from console.engine.guardrails.fleet import FLEET, local_day
    from console.engine.needs import open_need
    from console.engine.runs import job_name
    from console.engine.store.fleet import job_scope

    if open_need(paths.events) != "fleet_budget":
        return
    try:
        store = settings.open_store()
    except Exception:  # the store away: said by the run's start, which goes on without it
        return
    try:
        ledger = _ledger(store, settings)
        try:
            day = local_day(datetime.now(UTC))
            scopes = (FLEET, job_scope(job_name(paths.root)))
            for hold in ledger.holds(day):
                if hold.scope in scopes:
                    ledger.waive(day, hold.scope, hold.limit_usd, paths.root)
        finally:
            ledger.close()
    except Exception as exc:  # the run is held again and asks: said, never a traceback
        from console.engine.job_files import one_line

        err(f"resume: the fleet budget's hold could not be answered in the store ({one_line(str(exc))}): the run "
            "will be held again at its first turn; resume it again then")
    finally:
        store.close()
