"""`run`: check everything a run needs, make its folder, and start it (headless here, or as a runner)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.cli.common import (
    MAX_SCRIPT_BYTES,
    UsageError,
    check_console_options,
    check_flags,
    err,
    foreign_line,
    run_folder,
    say,
    state_error,
)
from console.cli.lifecycle import (
    RUNNER_BY_ENV,
    RUNNER_FLAGS_ENV,
    RUNNER_NOTIFY_ENV,
    interrupted_start,
    notify_key,
    run_headless,
    start_runner,
)
from console.interrupts import is_interrupt
from console.outcome import EXIT_FAILED, EXIT_INTERRUPTED

if TYPE_CHECKING:  # imported where a run is launched: the command line starts without it
    from console.engine.launch import Launch


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



def explicit_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The run settings the operator gave as flags (None: not given), by the run settings' table: every setting a
    flag sets and a resume keeps (not --switch-model, which only allows a change)."""
    from console.engine.run_setting_specs import FLAGGED

    out: dict[str, Any] = {}
    for spec in FLAGGED:
        flag = spec.flag
        if flag is None or spec.resume == "no":
            continue
        value = getattr(args, spec.dest, None)
        if spec.type is bool:  # on, off (its other flag), or not given
            value = True if value else False if flag.off and getattr(args, _dest(flag.off), False) else None
        elif flag.repeat:
            value = tuple(value) if value else None
        elif flag.path and value is not None:
            value = str(Path(value).absolute())
        out[spec.name] = value
    return out


def _dest(option: str) -> str:
    return option.removeprefix("--").replace("-", "_")


def launch_flags(recorded: Launch | None, given: dict[str, Any], switch: bool) -> dict[str, Any]:
    """The flags a run starts with: its record (a resume) overridden by what was given now.

    ValueError (one line) when the flags would change the run's provider or model without --switch-model."""
    from console.engine.launch import identity_change

    if recorded is None:
        return dict(given)
    if (changed := identity_change(recorded, given)) and not switch:
        # Each change names what the run was started with (console.engine.launch.identity_change).
        raise ValueError(f"resuming this run with {'; '.join(changed)} makes it another model's run: add "
                         "--switch-model to do so")
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


def _notify_checked(raw: str) -> dict[str, str]:
    """:data:`RUNNER_NOTIFY_ENV` as the starter wrote it (anything else: nothing checked, all checked again)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _shown_notify(urls: tuple[str, ...], checked: dict[str, str]) -> list[tuple[str, str]]:
    """(notify_key(url), what may be shown of it) of each of ``urls``, in order: from ``checked`` (the starter's),
    else as console.notify shows it (which loads Apprise: only for a URL its starter did not show)."""
    shown = []
    for url in urls:
        key = notify_key(url)
        if key not in checked:
            from console.notify import shown_url

            checked = {**checked, key: shown_url(url)}
        shown.append((key, checked[key]))
    return shown


def cmd_run(args: argparse.Namespace) -> int:
    from console.engine.clock import SystemClock
    from console.engine.command_check import check_commands
    from console.engine.job import JobError, one_line, prepare_run, validate_job_folder
    from console.engine.job_config import load_job_config
    from console.engine.job_files import check_instructions
    from console.engine.launch import Launch, LaunchError, LaunchStart, begun, changes, kept_settings
    from console.engine.provenance import Verdict, adopt, judge, set_aside
    from console.engine.run_setting_specs import BY_NAME
    from console.engine.seal import Seal, SealError
    from console.engine.store import StoreError
    from console.providers import ProviderError, make_provider
    from console.settings import load_settings, resolve_run_settings

    clock = SystemClock()
    job_arg = Path(args.job)
    runner = bool(args.runner)
    # A runner's notification URLs its starter checked (and what may be shown of each): not checked again here.
    checked = _notify_checked(os.environ.pop(RUNNER_NOTIFY_ENV, "")) if runner else {}
    if runner:  # the flags the starting process was given (never argv: ps shows it to every user)
        with contextlib.suppress(ValueError, TypeError):
            for key, value in json.loads(os.environ.pop(RUNNER_FLAGS_ENV, "{}") or "{}").items():
                flag = BY_NAME[key].flag if key in BY_NAME else None
                if flag is not None and flag.off:  # one setting, two flags
                    setattr(args, _dest(flag.option), bool(value))
                    setattr(args, _dest(flag.off), not value)
                elif hasattr(args, key) and value is not None:
                    setattr(args, key, value)
    try:
        check_flags(args)
        settings = load_settings()
        use_console = not args.headless and not args.detach and sys.stdin.isatty() and sys.stdout.isatty()
        check_console_options(args.theme, settings, console=use_console)
        if args.fresh and not args.in_place:
            raise ValueError("--fresh goes with --in-place (run JOB always starts from a fresh copy)")
        if args.in_place:  # a run to go on with: its folder, id or name; a copy is made of a job folder only
            job_arg = run_folder(args.job, settings)
        source = validate_job_folder(job_arg)
        check_instructions(source)  # a binary task: exit 2 now, not a run that reads it in vain until stuck
        seal = Seal.of(settings.data_dir)
        # Whose the folder's .console/ is (console.engine.provenance): another's is never resumed nor read.
        try:
            verdict = judge(source, seal) if args.in_place and not args.fresh else Verdict("new")
        except LaunchError as exc:  # a record of this operator's that does not read (a damaged disk)
            raise ValueError(f"{exc}; start the job over with its .console/ moved aside: agent-console run "
                             f"--in-place {shlex.quote(str(source.root))} --fresh") from None
        if not verdict.usable:
            raise ValueError(foreign_line(source.root, verdict.why))
        job = load_job_config(source)
        recorded = verdict.record
        from console.engine.launch import store_change
        from console.engine.store import shown_store_url

        if recorded is not None and (why := store_change(recorded, shown_store_url(settings.store_url))):
            raise ValueError(why)
        given = explicit_flags(args)
        flags = launch_flags(recorded, given, args.switch_model)
        if not flags.get("notify"):
            flags["notify"] = tuple(settings.notify.urls)
        from console.engine.launch import notify_timing

        on_end, remind = notify_timing(recorded, settings.notify.on_end, tuple(settings.notify.remind_minutes))
        # console.notify (the notifier, the run's events) is loaded only for URLs to check, and Apprise with it; a
        # runner's were checked by its starter (this command, a moment before), unless they have changed since.
        if flags["notify"] and not all(notify_key(u) in checked for u in flags["notify"]):
            from console.notify import check_urls

            if problems := check_urls(flags["notify"]):
                raise ValueError(f"--notify / [notify] urls: {problems[0]}")
        script = Path(flags["script"]) if flags.get("script") else None
        rs = resolve_run_settings(settings, job, job_toml=one_line(str(source.job_toml), 0),
                                  **{k: v for k, v in flags.items() if k not in ("script", "notify")})
        check_commands(source, rs.tools, rs.commands)  # a program that cannot be found: exit 2 now, not stuck later
        if job.mcp:  # what the operator's [mcp] allows jobs to declare: exit 2 now
            from console.engine.tools.mcp_config import caps_problem

            if refused := caps_problem(job.mcp, settings.mcp):
                raise ValueError(f"{one_line(str(source.job_toml), 0)}: {refused}")
        if recorded is not None and given.get("context_window") is None and recorded.context_window_source:
            rs = replace(rs, context_window_source=f"as started ({recorded.context_window_source})")
        if script is not None and rs.provider != "scripted":
            if not (args.switch_model and recorded is not None and given.get("script") is None):
                raise ValueError("--script replays turns with the scripted provider only")
            # A run started on a script, resumed on a real model: the script stays behind (it cannot be replayed
            # by another provider), and the record no longer names it.
            say(f"the recorded --script {one_line(str(script), 0)} is left behind: the run goes on with "
                f"{rs.provider} {rs.model}", sys.stderr)
            script = flags["script"] = None
        if script is not None:
            check_script(script)
        secret = getattr(settings, f"{rs.provider}_api_key", None)  # AGENT_CONSOLE_<PROVIDER>_API_KEY
        api_key = secret.get_secret_value() if secret is not None else None
        keyed = {"key_variable": _key_source(rs.provider)} if api_key else {}
        provider: Any = None
        try:
            # Built here to check its settings (an SDK refusing a URL form); a run handed to its own process (a
            # runner) builds its own, and the scripted model has nothing to check (its --script is, above).
            if not ((use_console or args.detach) and rs.provider == "scripted"):
                provider = make_provider(rs.provider, rs.model, base_url=rs.base_url, api_key=api_key,
                                         speed=rs.speed, clock=clock, script=script,
                                         max_tokens_param=settings.max_tokens_param, **keyed)
        except (ProviderError, RecursionError):
            raise
        except Exception as exc:  # an SDK refusing its settings (e.g. a URL form only it rejects)
            what = "base_url (--base-url, job.toml or settings)" if rs.base_url else f"--provider {rs.provider}"
            raise ValueError(f"{what}: the {rs.provider} client cannot be set up ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None
    except (JobError, ValueError, ProviderError, LaunchError, SealError) as exc:
        raise UsageError(str(exc)) from None
    except RecursionError:
        raise UsageError(f"{job_arg}: a job or settings file is nested too deeply to be read") from None
    try:
        store = settings.open_store(lenient=True)  # a shared store away now: the run goes on, the store catches up
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    except (sqlite3.Error, OSError) as exc:
        raise UsageError(f"{settings.store_path}: the jobs database cannot be used ({exc}); move it aside and a new "
                         "one is made") from None
    from console.engine.atomic import private_dir

    # The data folder (made by the store) and runs/ hold every run: the operator's only (0700), or said once why not.
    for problem in (*store.not_private, private_dir(settings.runs_dir)):
        if problem and not runner:
            err(f"warning: not private: {problem}")
    if store.error is not None:
        err(f"warning: {store.error}; the run goes on from its folder and the store catches up when it is back")
        store.error = None
    try:
        # Copy only once everything checked out: a failed start leaves no stray run folder.
        # Bounded by the run's own max_job_mb; what it skips or changes (a device, a repository's hook) is said.
        paths = source if args.in_place else prepare_run(job_arg, settings.runs_dir, clock.now(),
                                                         max_job_mb=rs.max_job_mb,
                                                         say=lambda line: say(line, sys.stderr))
    except JobError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # the data folder cannot be written, or a file of the job cannot be copied
        raise UsageError(f"{job_arg}: cannot be copied to a run folder under {settings.runs_dir}: "
                         f"{str(exc)[:300]}") from None
    if args.fresh and os.path.lexists(paths.state):
        try:
            aside = set_aside(paths, clock.now().astimezone())
        except OSError as exc:  # its line names both folders and what to do
            raise UsageError(str(exc.strerror)) from None
        # On stderr: a run's first line on stdout stays `run ID: FOLDER` (scripts read it).
        say(f"{paths.state} moved aside to {aside}: the run starts fresh, with nothing of it", sys.stderr)
    elif verdict.whose in ("earlier", "ours"):
        try:
            adopt(paths, verdict, seal)  # a run of this operator from before seals: sealed now
        except OSError as exc:
            raise UsageError(f"{paths.state}: its records cannot be sealed ({exc.strerror or exc})") from None
    if args.in_place and not runner:  # found from the data dir with the store away (console.cli.local_runs)
        from console.cli.local_runs import remember_in_place

        remember_in_place(settings.runs_dir, paths.root)
        _say_what_git_would_run(paths.root)
    try:
        record = Launch(**kept_settings(rs),
                        context_window_source=(recorded.context_window_source if recorded is not None and
                                               given.get("context_window") is None else rs.context_window_source),
                        unconfined=bool(flags.get("unconfined")),
                        script=str(script) if script is not None else None, notify=tuple(flags.get("notify") or ()),
                        notify_on_end=on_end, notify_remind=remind, budgets=_budgets(job),
                        store=shown_store_url(settings.store_url),
                        started_at=recorded.started_at if recorded is not None else clock.now())
        # A record in a folder whose run has not begun (no event yet) is the start its starter wrote (`run --detach`,
        # below): the run this process starts is that start, not a resume of it.
        starting = recorded is not None and not begun(paths)
        if use_console or args.detach:
            # The run is a process of its own (a runner); this one only watches it, and may go away.
            say(f"run {paths.run_id}: {paths.root}")
            if recorded is None and args.detach:
                try:
                    write_start(paths, record, seal, store, clock.now())
                except OSError as exc:  # a full or read-only disk: no run was made (a copy made for it goes)
                    if not args.in_place:
                        import shutil

                        shutil.rmtree(paths.root, ignore_errors=True)
                    err(f"the run could not be started: its launch record cannot be written in {paths.state} "
                        f"({exc.strerror or exc}); once it can, start it with: "
                        f"{_again(source.root, args.in_place)}")
                    return EXIT_FAILED
            given = {k: v for k, v in given.items() if v is not None}
            if args.switch_model:
                given["switch_model"] = True
            # Who asked: the fleet's `r` runs `resume` with this variable set to "fleet" (in launch_settings).
            by = os.environ.pop(RUNNER_BY_ENV, "") or ("console" if use_console else "detach")
            theme = ""
            if use_console:
                from console.tui.theme_choice import chosen_theme

                theme = chosen_theme(args.theme, settings)
            mcp_wait = 0.0
            if use_console and job.mcp:
                # The run's process starts the job's MCP servers before it takes the run (console.mcp.client): the
                # console waits for them (drawn before, it would show the run as "not running (read-only)"), and
                # the terminal says what it waits for.
                from console.mcp.client import START_SECONDS

                names = [m.name for m in job.mcp]
                mcp_wait = START_SECONDS
                say(f"the run's process starts MCP server{'s' if len(names) > 1 else ''} {', '.join(names)} first "
                    f"(together, each up to {START_SECONDS:g} s)...", sys.stderr)
            return start_runner(paths, given, by=by, console=use_console, theme=theme, extra_patience=mcp_wait,
                                data_dir=settings.data_dir,
                                made=not args.in_place, again=_again(source.root, args.in_place), store=store,
                                notify_checked=dict(_shown_notify(record.notify, {})))
        launch = LaunchStart(record, seal, source="resume" if recorded is not None and not starting else "start",
                             changes=tuple(changes(recorded, record)) if recorded is not None and not starting
                             else (),
                             by=os.environ.pop(RUNNER_BY_ENV, "") if runner else "headless",
                             shown_notify=tuple(shown for _, shown in _shown_notify(record.notify, checked)))
        # Imported here: a start that hands the run to a runner (--detach, the console) does not load the
        # supervisor and its loop (the runner does).
        from console.engine.supervisor import Supervisor

        # The job's MCP servers, started confined by the process that runs the run (never by a start that hands it
        # over), ended with it; a required one that does not start refuses the run (exit 2).
        servers = _start_mcp(job, paths, rs, _again(source.root, args.in_place), made=not args.in_place,
                             caps=settings.mcp)
        try:
            try:
                from console.cli.budget import run_fleet_budget

                sup = Supervisor(paths, rs, provider, clock=clock, store=store, launch=launch, mcp=servers,
                                 tool_search_share=settings.mcp.tool_search_share,
                                 fleet=run_fleet_budget(settings, store, paths.root, paths.run_id))
            except sqlite3.Error as exc:
                raise UsageError(f"{settings.store_path}: the jobs database cannot be used ({exc}); move it aside "
                                 "and a new one is made") from None
            except (ValueError, OSError) as exc:
                raise UsageError(state_error(paths, exc)) from None
            # The run's id, then its folder: `run ID: FOLDER` (a script takes the folder after the first ": ").
            say(f"run {paths.run_id}: {paths.root}")
            if not args.headless and not runner and not use_console:
                say("not a terminal: running headless (the console needs one)", sys.stderr)
        except BaseException:
            _close_mcp(servers)  # the servers' loops would hold the process open
            raise
    except BaseException as exc:
        # Ctrl+C between the run folder and the run's own handling of it: nothing of the run has happened yet.
        if not is_interrupt(exc):  # what a library made of a Ctrl+C is one too
            raise
        err(interrupted_start(paths, not args.in_place, _again(source.root, args.in_place), store))
        return EXIT_INTERRUPTED
    try:
        return run_headless(sup, paths, store, clock, runner=runner, notify=record.notify,
                            notify_on_end=on_end, notify_remind=remind, made=not args.in_place,
                            again=_again(source.root, args.in_place))
    finally:
        _close_mcp(servers)


def _close_mcp(servers: list[Any]) -> None:
    for server in servers:
        server.close()


def _start_mcp(job: Any, paths: Any, rs: Any, again: str, *, made: bool, caps: Any) -> list[Any]:
    """The job's ``[[mcp]]`` servers, started confined (console.mcp); an optional one that does not start is said
    on stderr (its tools are not offered); a required one is a UsageError naming it (the others are ended, and the
    run folder this start ``made``, a copy nothing ran in yet, is removed: no run was made)."""
    if not job.mcp:
        return []
    from console.engine.tools.mcp_config import allowed_urls, resolve
    from console.mcp.client import START_SECONDS, start_servers
    from console.mcp.http import HttpServer
    from console.mcp.world import McpStartError

    def reach(config: Any, start_seconds: float) -> HttpServer:
        # Its requests go only where [mcp] urls (or the operator's own [[mcp.servers]] entry) allows; its
        # credentials are the operator's environment's.
        return HttpServer(config, allowed_urls(config, caps), os.environ, start_seconds=start_seconds)

    configs = resolve(job.mcp, caps)  # a name alone is the operator's [[mcp.servers]] entry

    def slow(names: list[str]) -> None:
        # On stderr (stdout's first line is the run's `run ID: FOLDER`), once the start is slow: why nothing else
        # shows meanwhile, and for how long at most (a quick start says nothing: a refusal stays one line).
        say(f"starting MCP server{'s' if len(names) > 1 else ''} {', '.join(names)} (together, each up to "
            f"{START_SECONDS:g} s)...", sys.stderr)

    try:
        with _terminated_is_interrupted():
            servers, problems = start_servers(configs, str(paths.root), rs.commands, reach=reach, slow=slow)
    except McpStartError as exc:
        if made:
            import shutil

            shutil.rmtree(paths.root, ignore_errors=True)
        raise UsageError(f"{exc}; fix [[mcp]] in job.toml, then start it again: {again}") from None
    for line in problems:
        say(line, sys.stderr)
    try:
        from console.engine.tools import BUILTIN_TOOL_NAMES
        from console.engine.tools.mcp_tools import build_mcp_tools, guardrail_problem

        # A clash of names (with a harness tool, a [[tools]] command or another MCP tool): refused now, in one line.
        offered = build_mcp_tools(servers, reserved={*BUILTIN_TOOL_NAMES, *(t.name for t in job.tools)})
    except ValueError as exc:
        _close_mcp(servers)
        raise UsageError(f"{exc}; fix [[mcp]] in job.toml, then start it again: {again}") from None
    # A tool policy naming an MCP tool the server does not offer would gate nothing: refused now, in one line.
    if refused := guardrail_problem(job.guardrails, offered.tools, servers):
        _close_mcp(servers)
        if made:
            import shutil

            shutil.rmtree(paths.root, ignore_errors=True)
        raise UsageError(f"job.toml: {refused}; fix [guardrails] in job.toml, then start it again: {again}")
    return servers


@contextlib.contextmanager
def _terminated_is_interrupted() -> Iterator[None]:
    """SIGTERM while the MCP servers start is a Ctrl+C: the starts are abandoned, the servers ended, and the command
    ends as an interrupted start (exit 130, nothing made), at once. Without it, the process died by the signal
    (143, silent) and left the run folder it had made, which no command lists. A second signal meanwhile is not
    another interrupt (it would cut the first one's unwinding)."""
    import signal

    taken = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal taken
        if not taken:
            taken = True
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (a test calling the command from one): its signals are not ours
        yield
        return
    try:
        yield
    finally:
        # Once taken, the unwinding (the servers ended, the folder removed) is not cut by the next one either.
        signal.signal(signal.SIGTERM, signal.SIG_IGN if taken else previous)


def write_start(paths: Any, record: Any, seal: Any, store: Any, now: Any) -> None:
    """A detached start's record of itself, before its runner exists: the sealed launch record (atomic, durable: the
    folder is this operator's run from here on, which `resume ID` starts whatever became of its runner), then the
    jobs table's row (`jobs` lists it; the runner's liveness says whether it runs). Written before the runner is
    spawned, so that the command returns at once (the runner's engine takes seconds to load) and a stop, a kill or
    a crash of the runner at any moment leaves a run that is found."""
    from console.engine.launch import write_launch

    write_launch(paths, record, seal)
    with contextlib.suppress(Exception):  # a store away: the run's folder is its record, the runner tells the store
        store.started(paths.root, paths.root.name, record.provider, record.model, now)


def _say_what_git_would_run(root: Path) -> None:
    """A folder run in place is the operator's own (or someone's they were handed): what its repositories hold that
    their own git runs outside every sandbox (``core.fsmonitor`` at every ``git status``, an executable hook) is left
    as it is, as it must be for their own repository; said before the run, on stderr, with how to look. (A copy,
    ``run JOB``, is made without it and says so; what the agent's calls make is removed after each call.)"""
    from console.engine.tools.repos import would_run_in

    found = would_run_in(str(root))
    if not found:
        return
    listed = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
    where = shlex.quote(str(root))
    err(f"warning: {where} holds what your own git may run, outside every sandbox: {listed}. It was there before "
        f"the run, which leaves it as it is (what the agent's calls add is undone after each): read it before you "
        f"run git there (git -C {where} config --list --local; ls -l {where}/.git/hooks)")


def _again(job: Path, in_place: bool) -> str:
    """The command that starts the job again, after a start interrupted before its run was one."""
    return f"agent-console run {'--in-place ' if in_place else ''}{shlex.quote(str(job))}"


def _key_source(provider: str) -> str:
    """Where the operator set the key agent-console's settings gave the provider, for the fix an authentication
    failure names (it named the provider's own OPENAI_API_KEY, which a key set here does not read): the
    environment's AGENT_CONSOLE_<PROVIDER>_API_KEY, else the config file's key."""
    variable = f"AGENT_CONSOLE_{provider.upper()}_API_KEY"
    if os.environ.get(variable):
        return variable
    from console.settings import config_path

    return f"{provider}_api_key in {config_path()}"
