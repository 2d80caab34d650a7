"""A run once started: as a runner process (and a console on it), or headless in this process, to its closing
lines and exit code."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import signal
import sys
from typing import Any

from console.cli.common import (
    UsageError,
    err,
    go_on_hint,
    resume_hint,
    say,
)
from console.engine.text import safe_text
from console.interrupts import is_interrupt
from console.outcome import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, exit_code

RUNNER_FLAGS_ENV = "AGENT_CONSOLE_RUNNER_FLAGS"  # a runner's flags: the environment, not argv (ps shows argv)
RUNNER_BY_ENV = "AGENT_CONSOLE_RUNNER_BY"
# The notification URLs the starter checked, as {notify_key(url): what may be shown of it}: the runner needs neither
# check them again nor ask Apprise what to show (loading Apprise is ~20 MB of a runner's memory: console.notify).
RUNNER_NOTIFY_ENV = "AGENT_CONSOLE_RUNNER_NOTIFY"


def notify_key(url: str) -> str:
    """How :data:`RUNNER_NOTIFY_ENV` names a notification URL: its digest, never the URL (its tokens)."""
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def start_runner(paths: Any, given: dict[str, Any], *, by: str, console: bool, theme: str = "", made: bool = False,
                 again: str = "", store: Any = None, notify_checked: dict[str, str] | None = None,
                 extra_patience: float = 0.0, data_dir: Any = None) -> int:
    """Start the run in ``paths`` as a runner process; then open a console on it (``console``) or say how to
    follow it. Exit code: the run's own once it has ended under the console; 0 when it goes on. ``made``,
    ``again``, ``store``: for a Ctrl+C before the runner took the run over (:func:`interrupted_start`).
    ``notify_checked``: the notification URLs this process checked (:data:`RUNNER_NOTIFY_ENV`).
    ``extra_patience``: seconds the runner may take beyond the usual before it holds the run (the job's MCP servers
    start first). ``data_dir``: the operator's, whose key reads the run's launch record (:func:`after_console`)."""
    import subprocess

    from console.engine.run_lock import RunLock
    from console.engine.starting import START_PATIENCE
    from console.runner import HARD_EXIT_AFTER, log_tail, spawn_runner, wait_started

    holder = RunLock(paths).holder()
    if holder is not None:
        raise UsageError(f"{paths.root} is already being run by process {holder} (run {paths.run_id}); watch it with: "
                         f"agent-console attach {paths.run_id}")
    env = dict(os.environ)
    env[RUNNER_FLAGS_ENV] = json.dumps(given)
    env[RUNNER_BY_ENV] = by
    env[RUNNER_NOTIFY_ENV] = json.dumps(notify_checked or {})
    try:
        proc = spawn_runner(paths, env=env)
    except OSError as exc:
        found = recorded_start(paths, store) or launched(paths)
        err(f"the run could not be started: {exc.strerror or exc}"
            + (f"; once that is fixed, {resume_hint(paths)}" if found else ""))
        return EXIT_FAILED
    if not console:
        return handed_over(paths, proc)
    try:
        code = wait_started(paths, proc, START_PATIENCE + extra_patience)
        if code is None and console:
            from console.tui.launch import attach_console

            attach_console(paths, theme=theme, job_title=paths.root.name, quit_asks=True)
    except BaseException as exc:
        # Ctrl+C before the console has the terminal (there it is a key, and quit asks): the run this command
        # started is stopped as a headless run's is on SIGTERM (at once, resumable), and its process gone.
        if not is_interrupt(exc):  # what a library made of a Ctrl+C is one too
            raise
        with contextlib.suppress(OSError):
            proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=HARD_EXIT_AFTER + 1.0)
        if proc.poll() is None:  # still stopping: a run, resumable once it is done
            err(f"interrupted; {resume_hint(paths)}")
        else:
            err(interrupted_start(paths, made, again, store))
        return EXIT_INTERRUPTED
    if code is not None:
        for line in log_tail(paths):
            err(line.removeprefix("agent-console: "))
        err(f"the run did not start (exit code {code}); its log: {paths.state / 'runner.log'}")
        return code or EXIT_FAILED
    return after_console(paths, data_dir)


def handed_over(paths: Any, proc: Any) -> int:
    """A detached start's end: the run is handed to its runner's watcher ``proc`` and this command returns at once,
    without waiting for the runner's engine to load (seconds). The run's start is on disk already (its sealed
    record and its jobs row: console.cli.run.write_start; a resume's run is one already), so whatever becomes of the
    runner, `jobs` lists the run and `resume ID` finds it; a command for it waits while the runner starts
    (console.engine.starting.await_start), and the runner's log says why it did not, if it did not."""
    from console.engine.starting import mark_starting

    try:
        mark_starting(paths, proc.pid)
        say(f"running in the background (process {proc.pid} starts it); watch it: agent-console attach "
            f"{paths.run_id}; its story: agent-console logs -f {paths.run_id}; stop it: agent-console stop "
            f"{paths.run_id}")
    except BaseException as exc:
        # A Ctrl+C now: the run this command started is stopped (its watcher hands the SIGTERM on), and stays a run.
        if not is_interrupt(exc):
            raise
        with contextlib.suppress(OSError):
            proc.terminate()
        err(f"interrupted; {resume_hint(paths)}")
        return EXIT_INTERRUPTED
    return EXIT_OK


def launched(paths: Any) -> bool:
    """Whether the folder holds a launch record (a detached start writes it before its runner: a run found)."""
    return bool((paths.state / "launch.json").exists())


def recorded_start(paths: Any, store: Any = None) -> bool:
    """Whether the run in ``paths`` is a run `jobs` lists and `resume ID` finds: the jobs table has its row, or its
    log a session_started (which the engine writes once the table was told: console.engine.supervisor)."""
    if store is not None:
        with contextlib.suppress(Exception):  # a store away: the log says it
            if store.get(paths.root) is not None:
                return True
    try:
        with open(paths.events, "rb") as fh:
            return b'"type":"session_started"' in fh.read(1 << 20)  # among a run's first events
    except OSError:
        return False


def interrupted_start(paths: Any, made: bool, again: str, store: Any = None) -> str:
    """The one line for a start a Ctrl+C ended, and what is left of it: a run `jobs` lists and `resume ID` finds
    (:func:`recorded_start`), or nothing. A run folder this command made (a fresh copy of the job, ``made``) that
    never became a run is removed: left, no command could find it by its id (`jobs` did not list it, `resume ID`
    said no such run). ``again``: the command that starts the job again."""
    import shlex
    import shutil

    from console.engine.run_lock import RunLock

    if recorded_start(paths, store):
        return f"interrupted; {resume_hint(paths)}"
    if not made:  # the operator's own folder (run --in-place): left as it is, started by the same command
        return (f"interrupted before run {paths.run_id} started; start it with: agent-console run --in-place "
                f"{shlex.quote(str(paths.root))}")
    if RunLock(paths).holder() is None:
        try:
            shutil.rmtree(paths.root)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return (f"interrupted before run {paths.run_id} started; its folder {paths.root} could not be removed "
                    f"({exc.strerror or exc}): remove it, and start again with: {again}")
        return f"interrupted before run {paths.run_id} started: nothing was made; start it again with: {again}"
    return f"interrupted; {resume_hint(paths)}"  # a process holds it after all: a run, stopping


# Ends after which the run goes on where it was with the same command (a budget raised in job.toml first).
RESUMABLE = ("user_shutdown", "interrupted", "model_unavailable", "budget_exhausted", "agent_stopped", "max_turns",
             "completion_blocked")


def demo_run(paths: Any, data_dir: Any) -> bool:
    """Whether the run is the offline demo model's own (the scripted provider, no --script replayed), as its launch
    record sealed with the operator's key (in ``data_dir``) says; False when that cannot be read."""
    from console.engine.launch import read_launch
    from console.engine.seal import Seal

    if data_dir is None:
        return False
    try:
        record = read_launch(paths, Seal.of(data_dir))
    except Exception:  # (another's record, an unreadable one, no key: no claim is made of it)
        return False
    return record is not None and record.provider == "scripted" and record.script is None


def gave_up_hint(paths: Any, demo: bool) -> str:
    """What to do once the agent gave up. The demo model's own give-up (``demo``) is the demo model's limit: a plain
    resume would give up again, and the resume that goes on with a real model must say so (it is refused without
    --switch-model)."""
    if demo:
        return (f"a real model can go on from where it stopped: agent-console resume {paths.run_id} --provider "
                "anthropic --switch-model (or --provider openai), with the provider's API key set")
    return f"once the cause is fixed, {resume_hint(paths)}"


def after_console(paths: Any, data_dir: Any = None) -> int:
    """The lines a console's command leaves once the console is gone (run, attach); the run's exit code, or
    EXIT_OK while it goes on. ``data_dir``: the operator's (:func:`demo_run`)."""
    from console.engine.store import folder_gone
    from console.runner import ended_code, last_end

    if folder_gone(paths.root):  # deleted or moved away under the console: its log went with it
        err(f"run {paths.run_id}: its folder {paths.root} was deleted or moved away: there is nothing left there to "
            "resume")
        return EXIT_INTERRUPTED
    code = ended_code(paths)
    if code is None:
        say(f"detached: run {paths.run_id} goes on; come back with: agent-console attach {paths.run_id} "
            f"(or agent-console, the fleet); follow it: agent-console logs -f {paths.run_id}")
        return EXIT_OK
    end, _ = last_end(paths)
    if code == EXIT_OK and end is not None:
        # As a headless run's closing line: where the results are, once the console that showed them is gone.
        say(f"run {paths.run_id} completed; results in {paths.root}")
    if code != EXIT_OK and end is not None:
        # The run ended under the console, which is gone now: what a headless run's closing lines say.
        detail = safe_text(end.detail, one_line=True, join=True, limit=300)
        err(ended_line(paths.run_id, end.outcome, present_reason(end.reason), detail))
        if end.outcome == "gave_up":
            err(gave_up_hint(paths, demo_run(paths, data_dir)))
        elif end.fix:
            err(f"{end.fix}, then {resume_hint(paths)}")
        elif end.reason in RESUMABLE:
            err(go_on_hint(paths, end.reason, end.detail))
    return code



GAVE_UP_WORDS = "the agent gave up"


def ended_line(rid: str, outcome: str | None, why: str, detail: str) -> str:
    """How a run ended, each thing said once: its outcome, why (unless the outcome says it) and the detail (less
    what was said already). It said "run ek5qc ended gave up (the agent gave up): the agent gave up (job_complete
    with confidence 0)"; now "run ek5qc ended: the agent gave up (job_complete with confidence 0)"."""
    if outcome != "gave_up":
        head = f"run {rid} ended {(outcome or 'incomplete').replace('_', ' ')} ({why})"
        return f"{head}: {detail}" if detail and detail != why else head
    head = f"run {rid} ended: {GAVE_UP_WORDS}" + ("" if why == GAVE_UP_WORDS else f" ({why})")
    if detail.startswith(GAVE_UP_WORDS):  # the engine's detail begins with the same words
        detail = detail[len(GAVE_UP_WORDS):].lstrip(" :;,")
        if detail.startswith("("):  # "(job_complete with confidence 0)": about the words just said
            return f"{head} {detail}"
    return f"{head}: {detail}" if detail and detail != why else head


def with_cost(text: str, cost: str) -> str:
    """``text`` (an agent's summary, a detail: often a sentence) followed by ``cost`` ("; cost $0.29"), without
    the sentence's full stop before it (it said "... --provider openai.; cost $0.29")."""
    if cost and text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    return f"{text}{cost}"


def _finish(sup: Any, paths: Any, interrupted_by: str | None = None) -> int:
    """The closing lines of a run, and its exit code.

    ``interrupted_by`` names the signal that stopped the run (headless: Ctrl+C, SIGTERM, SIGHUP). The engine
    ends a run stopped by a signal and one stopped by the operator (a `stop` from the console or another
    shell, a denied restart) alike, as user_shutdown: the signal is what tells an interrupt (130) from the
    operator's decision (3)."""
    result = sup.result
    if result is None:
        err(f"the run was stopped before it started; {resume_hint(paths)}")
        return EXIT_INTERRUPTED
    cost = _job_cost(sup)
    if result.ok:
        if result.already:  # nothing ran: an earlier run completed it
            say(f"job already complete: {paths.root}")
        elif result.outcome is None:  # a free stop ([guardrails.completion] type = "none") with the work done
            say(f"done: the agent stopped with the plan done in {result.sessions} session(s){cost}; results in "
                f"{paths.root}")
        else:
            say(f"done: job complete in {result.sessions} session(s){cost}; results in {paths.root}")
        return EXIT_OK
    reason = result.reason.value
    if result.ended == "gave_up" and result.outcome is not None:
        said = safe_text(result.outcome.summary, one_line=True, join=True, limit=300)
        err(with_cost(f"the agent gave up (confidence {result.outcome.confidence:g}): {said}", cost))
        err(f"its notes: {safe_text(result.outcome.notes, one_line=True, join=True, limit=600)}")
        from console.providers.scripted import ScriptedProvider

        # (Not a replayed --script: that one's script is a list.)
        err(gave_up_hint(paths, isinstance(sup.provider, ScriptedProvider) and sup.provider.script is None))
        return exit_code(result, interrupted_by)
    stopped = reason in ("user_shutdown", "interrupted")
    detail = f"interrupted by {interrupted_by}" if stopped and interrupted_by else result.detail
    if result.ended == "failed":
        err(with_cost(f"run failed: {detail}", cost))
    else:
        why = f"interrupted by {interrupted_by}" if stopped and interrupted_by else present_reason(reason)
        if reason in ("job_complete", "agent_stopped"):  # a free stop ([guardrails.completion] type = "none")
            why = f"{why}, with work left: the record does not show the plan done"
        said = "" if not detail or detail == why else f": {detail}"
        err(with_cost(f"run ended incomplete ({why}){said}", cost))
    if (gone := sup.operator.channel.gone) is not None:
        err(f"{gone}: there is nothing left there to resume")
    elif result.fix:  # a key to set, credit to add: then the same resume goes on where it was
        err(f"{result.fix}, then {resume_hint(paths)}")
    elif reason in RESUMABLE:
        # Nothing is lost: the exact command that goes on (a budget raised in job.toml first).
        err(go_on_hint(paths, reason, result.detail))
    return exit_code(result, interrupted_by)


def present_reason(reason: str) -> str:
    from console.view.present import REASON_WORDS

    return REASON_WORDS.get(reason, reason)


def _job_cost(sup: Any) -> str:
    """"; cost $0.42" for the closing line, when the model's price is known."""
    from console.engine.cost import format_cost

    usd = sup.job_cost()
    return "" if usd is None else f"; cost {format_cost(usd)}"


def run_headless(sup: Any, paths: Any, store: Any, clock: Any, *, runner: bool = False,
                 notify: tuple[str, ...] = (), notify_on_end: bool = True,
                 notify_remind: tuple[float, ...] | None = None, made: bool = False, again: str = "") -> int:
    """Run in this process, telling its story on stdout (a runner's goes to its log).

    Ctrl+C stops after the turn in flight (a second one at once); SIGTERM (kill, systemd, a console's stop
    of its run) stops at once and the process is gone within 2 s either way, the run resumable; SIGHUP (the
    terminal went away) is no reason to stop: the run goes on, its story into .console/runner.log.

    A run in the foreground (not a runner, which its watcher started) with channels to tell starts a watcher
    beside it (console.runner.watch_foreground): a kill -9 or the out-of-memory killer, which leave this process
    no line to tell them, are told by it. This process tells it its exit code as it ends."""
    watch = None
    if notify and not runner:
        from console.runner import watch_foreground
        from console.watcher import log_mark

        watch = watch_foreground(paths, log_mark(str(paths.root)))
        if watch is None:
            err("the run's watcher could not be started: a kill -9 of this process would not be told to its "
                "channels")
    code = 1  # what leaves by an exception: Python's code for a traceback, which the watcher judges by the log
    try:
        code = _run_headless(sup, paths, store, clock, runner=runner, notify=notify, notify_on_end=notify_on_end,
                             notify_remind=notify_remind, watch=watch, made=made, again=again)
        return code
    except KeyboardInterrupt:  # Ctrl+C as the process leaves: an interrupt, not a traceback
        code = EXIT_INTERRUPTED
        raise
    except UsageError:  # the run cannot be run as asked (another process holds it): said by the command's main
        code = EXIT_USAGE
        raise
    except Exception as exc:
        if is_interrupt(exc):  # what a library made of a Ctrl+C
            code = EXIT_INTERRUPTED
            raise
        code = failed_past_the_engine(paths, store, clock, exc)
        return code
    finally:
        if watch is not None:
            watch.say(code)


# A disk that takes no more writes: the run cannot record its steps, and the operator's fix is room, not code.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})
CRASH_LOG = "crash.log"


def failed_past_the_engine(paths: Any, store: Any, clock: Any, exc: Exception) -> int:
    """The run's process failed past the engine's own defences (which told the run's channels, as a crash need):
    a disk that takes no more writes, or a defect. The operator reads one line with the resume, never a traceback;
    a defect's traceback goes to ``.console/crash.log`` (0600) when the disk takes it. The jobs table says the run
    is interrupted (resumable). Exit code 7: the run failed, not the work."""
    import traceback

    storage = isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS
    what = (f"{exc.strerror or exc}" + (f": {exc.filename}" if getattr(exc, "filename", None) else "")
            if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}")
    what = safe_text(what, one_line=True, join=True, limit=300)
    saved = ""
    if not storage:
        try:
            fd = os.open(paths.state / CRASH_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
                fh.write(f"{clock.now().isoformat()} run {paths.run_id}\n")
                fh.write("".join(traceback.format_exception(exc)) + "\n")
            saved = f"; its traceback is in {paths.state / CRASH_LOG}"
        except OSError:
            saved = ""
    with contextlib.suppress(Exception):  # the jobs table may be on the same full disk
        store.ended(paths.root, "interrupted", clock.now(), f"stopped: {what}"[:2000])
    if storage:
        err(f"run {paths.run_id} stopped: its record cannot be written ({what}); what it did up to its last "
            f"recorded step is kept: make room, then: agent-console resume {paths.run_id}")
    else:
        err(f"run {paths.run_id} stopped on an internal error ({what}){saved}; resume it once the cause is fixed: "
            f"agent-console resume {paths.run_id}")
    return EXIT_RUN_FAILED


def _run_headless(sup: Any, paths: Any, store: Any, clock: Any, *, runner: bool, notify: tuple[str, ...],
                  notify_on_end: bool, notify_remind: tuple[float, ...] | None, watch: Any, made: bool = False,
                  again: str = "") -> int:
    notifier = telemetry = None
    try:
        from console.engine.supervisor import JobBusy
        from console.headless import HeadlessLog, use_color
        from console.runner import HardExit, detach_output

        # Deferred: the story is told while the run waits, on a thread of its own (its formatting is not the
        # agent's time, and a terminal that stops reading does not stop the run).
        story = HeadlessLog(sys.stdout, color=use_color(sys.stdout), run_id=paths.run_id, provider=sup.provider.name)
        sup.subscribe(story, deferred=True, text=False)
        if sup.launch is not None:  # the view's fold kept every so often: an attach folds only the log's tail
            from console.view.state.kept import FoldKeeper

            sup.subscribe(FoldKeeper(paths, sup.launch.seal), deferred=True, text=False)
        notifier = _notifier(sup, paths, notify, notify_on_end, notify_remind)
        # OTLP traces and metrics when the operator turned them on (console.telemetry): said on stderr, never an event.
        from console.telemetry import attach

        telemetry = attach(sup, paths, err)
        interrupts = 0
        signal_name: str | None = None  # the first signal that stopped the run: an interrupt, not an operator stop
        def before_hard_exit() -> None:
            store.ended(paths.root, "interrupted", clock.now(), "stopped by SIGTERM")
            if watch is not None:
                watch.say(EXIT_INTERRUPTED)  # a stop, not a death: told before the process is cut

        hard_exit = HardExit(before=before_hard_exit)

        def on_signal(signum: int, frame: object) -> None:
            nonlocal interrupts, signal_name
            if signum == signal.SIGHUP:
                detach_output(paths)  # the terminal is gone: the run is not
                story.color = False  # its story goes on in the run's log: plain text, as a runner's
                return
            interrupts += 1
            if signal_name is None:
                signal_name = "Ctrl+C" if signum == signal.SIGINT else signal.Signals(signum).name
            # Sent as the signal's stop (its source): the run ends interrupted in every view, as its exit code says.
            sup.command("stop", source=signal_name)
            if signum == signal.SIGTERM:
                sup.command("stop", source=signal_name)  # at once: whoever sent it expects the process gone
                hard_exit.arm()
                return
            if interrupts == 1:
                print("\nstopping: at once if the model is being asked, else after the turn's tool calls (Ctrl+C "
                      "again to stop now)", file=sys.stderr, flush=True)
            elif interrupts > 2:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # one is enough: the next would cut its unwinding
                raise KeyboardInterrupt

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    except BaseException as exc:  # Ctrl+C before the run's own handling of it: the run has not started
        if not is_interrupt(exc):  # what a library made of a Ctrl+C is one too
            raise
        if notifier is not None:
            notifier.close()
        if telemetry is not None:
            telemetry.close()
        err(interrupted_start(paths, made, again, store))
        return EXIT_INTERRUPTED
    try:
        sup.run()
    except JobBusy as exc:
        raise UsageError(f"{exc} (run {paths.run_id}); send it commands (agent-console pause|stop|... {paths.root}) or "
                         f"watch it with: agent-console attach {paths.root}") from None
    except KeyboardInterrupt:
        store.ended(paths.root, "interrupted", clock.now(), "interrupted by Ctrl+C")
        err(interrupted_start(paths, made, again, store))  # a run, unless the interrupt came before it was one
        return EXIT_INTERRUPTED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if notifier is not None:
            notifier.close()
        if telemetry is not None:
            telemetry.close()  # bounded: a dead collector does not hold the process
    return _finish(sup, paths, signal_name)


def _notifier(sup: Any, paths: Any, urls: tuple[str, ...], on_end: bool = True,
              remind: tuple[float, ...] | None = None) -> Any:
    """The operator's channels (Apprise URLs) told when the run needs them, and reminded while nobody answers
    (``remind``: the gaps in minutes; None: the defaults); None when there are none. A channel that fails is
    reported once, as an error event naming its scheme and host only; the run goes on. It learns the run's earlier
    needs from its log first (a resumed run: since when it waits, a need back right after its answer). With a
    public URL in the operator's config (``[serve] public_url``), the needs' messages carry action links."""
    if not urls:
        return None
    from console.engine import events as ev
    from console.engine.runs import job_name
    from console.notify import Notifier, history, link_settings
    from console.settings import load_settings

    def failed(line: str) -> None:
        with contextlib.suppress(Exception):  # the run may be closing its log: the line is in runner.log anyway
            sup.events.emit(ev.ErrorEvent, message=line, where="notify")
        err(line)

    try:
        # The operator's config and environment (read when the run started, so sound): never the job's.
        links = link_settings(load_settings())
    except ValueError as exc:
        links = None
        err(f"the notifications carry no action links: {exc}")
    def told(need: ev.NeedsOperator) -> None:  # a channel's thread: the engine marks the hold at its next look
        if need.reason == "fleet_budget":
            sup.telling.heard(need.seq)

    # checked: the URLs were checked before the run started (console.cli.run.cmd_run, in this process or in the
    # runner's starter), so Apprise is loaded at the first message, not here: most runs never need their operator.
    notifier = Notifier(list(urls), paths.run_id, job_name(paths.root), clock=sup.clock, on_error=failed,
                        notify_on_end=on_end, remind=remind, folder=paths.root, links=links, on_told=told,
                        checked=True)
    # The fleet budget's hold this run tells is marked told once a channel took it (a kill before: another run
    # tells it); with no channel to send to, at once.
    sup.telling.confirms = notifier.tells
    notifier.prime(history(paths.events))
    sup.subscribe(notifier, text=False)
    return notifier
