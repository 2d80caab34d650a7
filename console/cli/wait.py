"""`wait`: block until a run ends or needs its operator; the exit code says which (for scripts and cron)."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from console.cli.common import (
    MAX_WAIT_SECONDS,
    UsageError,
    err,
    refuse_foreign,
    resume_hint,
    say,
)
from console.outcome import EXIT_INTERRUPTED

# `agent-console wait`: how its exit code says what became of the run (for scripts and cron).
WAIT_COMPLETED, WAIT_ENDED, WAIT_STOPPED, WAIT_NEEDS, WAIT_TIMEOUT, WAIT_INTERRUPTED = 0, 1, 3, 4, 5, 6
WAIT_FAILED = 7  # the same code as a run that failed (console/outcome.py)
WAIT_HELP = ("Exit codes: 0 the job completed; 1 the run ended without completing; 2 bad input (no such run, a "
             "folder that never ran); 3 stopped by the operator (or a denied restart); 4 the run needs you (a "
             "restart to approve, stuck, a budget reached, the provider down, a crash, the agent gave up...: the "
             "reason and message are printed); 5 --timeout passed first; 6 interrupted (no process runs it any more: "
             "killed, a signal stopped it, or a stop answered its provider down; resume it); 7 failed (an internal "
             "error)")
WAIT_POLL = 0.25  # seconds between two looks at the log and the run's lock (a poll: no busy loop, no watcher)
WAIT_GONE_GRACE = 1.0  # no process holds the lock for this long, with nothing new logged: it is not running
# A folder whose log is still empty: how long a run just launched may take to start (beside a CPU hog a run took
# over 5 s to log its first event, and `wait` called as it was launched said "never run").
WAIT_START_GRACE = 30.0


class _WaitFold:
    """What `wait` needs of a run's log: how its last process ended, and what it needs its operator for."""

    def __init__(self) -> None:
        self.end: Any = None  # the last process's run_ended
        self.completed: Any = None  # job_completed (a completed job stays completed)
        self.need: Any = None  # needs_operator not yet answered
        self.gave_up: Any = None  # the agent's job_gave_up: what it said
        self.paused = False  # the operator paused it (the timeout's line says so)
        self.events = 0

    def apply(self, e: Any) -> None:
        from console.engine import events as ev

        self.events += 1
        if isinstance(e, ev.OperatorCommand) and e.status == "applied" and e.command in ("pause", "resume"):
            self.paused = e.command == "pause"
        if isinstance(e, ev.SessionStarted) and e.reason in ("new", "resume"):
            self.end = self.need = None  # a process (re)starts the run
            self.paused = False
        elif isinstance(e, ev.NeedsOperator):
            self.need = e
        elif isinstance(e, ev.NeedsOperatorCleared):
            self.need = None
        elif isinstance(e, ev.OperatorCommand) and e.status == "applied" and self.need is not None:
            # The answer is applied before its needs_operator_cleared reaches the log: `approve; wait` must not
            # see the need it just answered.
            restart = self.need.reason == "restart_approval"
            answers = (("approve_restart", "deny_restart") if restart else
                       ("answer",) if self.need.reason == "mcp_question" else ("resume",))
            if e.command == "stop" or e.command in answers:
                self.need = None
        elif isinstance(e, ev.RestartPending) and self.need is None:  # a log from before needs_operator
            from console.engine.needs import restart_message

            # Its need comes in the next lines (or never, in a log from before needs): the same words meanwhile.
            self.need = ev.NeedsOperator(ts=e.ts, seq=e.seq, session=e.session, reason="restart_approval",
                                         message=restart_message(e.used_tokens, e.next_session), paused=False)
        elif isinstance(e, ev.RestartApproved | ev.RestartDenied):
            if self.need is not None and self.need.reason == "restart_approval":
                self.need = None
        elif isinstance(e, ev.JobCompleted):
            self.completed, self.need = e, None
        elif isinstance(e, ev.JobGaveUp):
            self.gave_up = e
        elif isinstance(e, ev.RunEnded):
            self.end, self.need = e, None


def _left_behind(fold: _WaitFold, lock: Any, paths: Any) -> bool:
    """Whether the need the log ends with was left by a process that no longer runs the run: a runner is being
    started for it (run --detach, resume), or the process holding it took it after the need was logged (its lock
    says up to which seq the log was there). `resume ID; wait ID` said "needs you" at once, of the need the dead
    process had left, while the new one was starting."""
    from console.engine.starting import starting

    logged = fold.need.seq if fold.need is not None else fold.end.seq if fold.end is not None else None
    if logged is None:
        return False
    info = lock.holder_info()
    if info is None:  # nobody holds it: a runner handed the run that has not taken it yet (its mark stays after)
        return starting(paths) is not None
    taken_at = info.get("seq")  # the log's last seq when the holder took the run (console.engine.run_lock)
    return type(taken_at) is int and logged <= taken_at


def _wait_verdict(fold: _WaitFold, rid: str, alive: bool) -> tuple[int, str] | None:
    """(exit code, line) once the log and the lock say how the run stands; None: it runs on, or nothing is logged
    yet that decides (the caller's grace periods then tell an interrupted run from one starting).

    The state is :func:`console.engine.runs.liveness`'s, the answer every view gives; this adds the exit code and
    the line, with what the log says in it."""
    from console.engine import runs
    from console.engine.needs import label
    from console.engine.run_end import ended_status

    end, need = fold.end, fold.need
    if end is None and need is None and fold.completed is None:
        return None  # nothing logged decides: running, starting, or dead without a word (the grace decides)
    outcome = "" if end is None else (end.outcome or "").replace("_", " ")
    if not outcome and fold.completed is not None:
        outcome = runs.COMPLETED  # job_completed logged, the process gone before its run_ended
    seen = runs.Seen(needs=need.reason if need is not None else "", outcome=outcome, ended=end is not None)
    stored = ended_status(end) if end is not None else runs.RUNNING
    # alive with an end logged: the process that ended is exiting, or a resume started anew (it runs on).
    # (liveness asks only whether a process holds the run's lock; the lock says so, not which pid: ours stands in)
    state = runs.liveness(stored, os.getpid() if alive else None, seen=seen).state
    detail = f": {end.detail}" if end is not None and end.detail else ""
    if state == runs.COMPLETED:
        summary = f": {fold.completed.summary}" if fold.completed is not None else detail
        return WAIT_COMPLETED, f"run {rid} completed{summary}"
    if state == runs.NEEDS and end is not None and end.outcome == "gave_up":
        said = f": {fold.gave_up.summary} (notes: {fold.gave_up.notes})" if fold.gave_up is not None else detail
        return WAIT_NEEDS, f"run {rid} needs you (the agent gave up){said}"
    if state == runs.NEEDS and need is not None:
        since = f" since {need.ts.astimezone():%H:%M}"
        return WAIT_NEEDS, f"run {rid} needs you ({label(need.reason)}){since}: {need.message}"
    if end is None or state in runs.LIVE:
        return None
    if state == runs.FAILED:
        return WAIT_FAILED, f"run {rid} failed ({end.reason}){detail}"
    if state == runs.STOPPED:
        return WAIT_STOPPED, f"run {rid} stopped{detail}"
    if state == runs.INTERRUPTED:
        if end.reason == "interrupted" and end.detail.startswith("interrupted"):
            return WAIT_INTERRUPTED, f"run {rid} {end.detail}: resume it with agent-console resume {rid}"
        return WAIT_INTERRUPTED, (f"run {rid} interrupted: the model could not be reached{detail}; resume it with "
                                  f"agent-console resume {rid}")
    return WAIT_ENDED, f"run {rid} ended without completing ({end.reason}){detail}"


def cmd_wait(args: argparse.Namespace) -> int:
    """Block until the run ends or needs its operator; the exit code says which (:data:`WAIT_HELP`)."""
    import time

    from console.cli.lifecycle import launched
    from console.engine import events as ev
    from console.engine.job_files import JobError, validate_job_folder
    from console.engine.run_lock import RunLock
    from console.engine.starting import starting

    try:
        if args.timeout is not None and not (math.isfinite(args.timeout) and 0 <= args.timeout <= MAX_WAIT_SECONDS):
            raise ValueError(f"--timeout {args.timeout:g}: expected a number of seconds from 0 to {MAX_WAIT_SECONDS}")
        if (code := _remote(args)) is not None:  # a run of another machine sharing the store
            return code
        from console.settings import load_settings

        settings = load_settings()
        from console.cli.common import find_run, say_away

        found, away = find_run(args.job, settings, getattr(args, "store_away", None))
        paths = validate_job_folder(found)
        refuse_foreign(paths, settings.data_dir)
        if away is not None:
            say_away(away, paths)
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    rid, lock, fold = paths.run_id, RunLock(paths), _WaitFold()
    started = time.monotonic()
    deadline = None if args.timeout is None else started + args.timeout
    offset, gone_since = 0, None
    if not os.path.lexists(paths.state) and lock.holder() is None:
        # Nothing has run here (yet): `run --in-place JOB & wait JOB` may be that moment, so the wait gives a run
        # its start's grace, and says so rather than sit silent for it.
        grace = WAIT_START_GRACE if args.timeout is None else min(WAIT_START_GRACE, args.timeout)
        err(f"{paths.root}: no run here yet; waiting up to {grace:g} s for one to start (a run of "
            "`agent-console run JOB` is a copy: wait for the id it prints)")
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
            # A runner being started (run --detach returned before its engine loaded) is a run that goes on.
            alive = lock.holder() is not None or starting(paths) is not None
            verdict = _wait_verdict(fold, rid, alive)
            if verdict is not None and verdict[0] == WAIT_NEEDS and _left_behind(fold, lock, paths):
                verdict = None  # an earlier process's: the run started again asks it anew, or goes on
            if verdict is not None:
                say(verdict[1])
                return verdict[0]
            now = time.monotonic()
            if alive or batch:
                gone_since = None
            elif gone_since is None:
                gone_since = now
            # A launch record with no event: a detached start whose runner ended before it began (its starter
            # marked it starting until then: `alive`), a run resume finds.
            elif now - gone_since >= (WAIT_GONE_GRACE if fold.events or launched(paths) else WAIT_START_GRACE):
                if not fold.events and not launched(paths):
                    raise UsageError(f"{paths.root}: this folder has never run (no events); a run of it is another "
                                     "folder: wait for the id `agent-console run` prints")
                say(f"run {rid} interrupted: no process runs it ({resume_hint(paths)})")
                return WAIT_INTERRUPTED
            if deadline is not None and now >= deadline:
                what = ((f"paused (agent-console resume {rid} unpauses it)" if fold.paused else "still running")
                        if alive else "no process holds it and no end is logged (yet)")
                say(f"run {rid}: {what} after {args.timeout:g}s (timeout)")
                return WAIT_TIMEOUT
            time.sleep(WAIT_POLL if deadline is None else max(0.0, min(WAIT_POLL, deadline - now)))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _remote(args: argparse.Namespace) -> int | None:
    """``wait ID`` of a run of another machine (None: not one, the local wait goes on). A store that cannot be
    read leaves the local lookup to say what ``ID`` is (a run of this machine is waited for without the store)."""
    from console.engine.runs import RunLookupError, looks_like_a_path
    from console.engine.store import StoreError
    from console.settings import load_settings
    from console.view.jobs import remote_run

    if looks_like_a_path(args.job) or os.path.isdir(args.job):
        return None
    settings = load_settings()
    try:
        row = remote_run(args.job, settings)
    except StoreError as exc:  # this machine's own runs are found from their folders (console.cli.local_runs)
        args.store_away = str(exc)
        return None
    except RunLookupError:
        return None
    if row is None:
        return None
    return _wait_remote(row, settings, args)


def _wait_remote(row: Any, settings: Any, args: argparse.Namespace) -> int:
    """The local wait's verdict, from the store: the run's events (each batch its link ships wakes this through
    LISTEN/NOTIFY; the store is looked at every few seconds anyway) and its lease for the lock. A lease that
    expired, with no end shipped, is an interrupted run (its runner was killed, or its machine went down)."""
    import time

    from console.engine import events as ev
    from console.engine.runs import run_id
    from console.engine.store import StoreError
    from console.headless.store_logs import StoreLines

    rid = run_id(row.path)
    store = settings.open_store()
    lines = StoreLines(store, row.key)
    fold = _WaitFold()
    started = time.monotonic()
    deadline = None if args.timeout is None else started + args.timeout
    away = False

    def read() -> None:
        for raw in lines.lines():
            with contextlib.suppress(ValueError, RecursionError):  # a row that is no event: passed over
                fold.apply(ev.parse_event((raw or b"").decode("utf-8", "replace")))

    def look() -> bool:
        """Read what is new and whether a runner holds the run (on a thread: see below)."""
        if lines.changed():
            read()
        alive = store.runner_of(row.key)[0] is not None
        if not alive:
            read()  # the link ships a run's last events before it lets go of its lease: they are in now
        return alive

    pending: Future[bool] | None = None
    asked = started  # when the look in flight was made
    try:
        while True:
            try:
                # A query on an open connection has no time limit (a server stopped, a network cut): it is made
                # on a daemon thread, so --timeout and Ctrl+C still act, and a store that does not answer is said.
                if pending is None:
                    pending = _in_thread(look)
                    asked = time.monotonic()
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                alive = pending.result(timeout=min(STALL, left) if left is not None else STALL)
                pending = None
                verdict = _wait_verdict(fold, rid, alive)
                if verdict is not None:
                    say(verdict[1])
                    return verdict[0]
                if not alive and (fold.events or time.monotonic() - started >= WAIT_START_GRACE):
                    say(f"run {rid} interrupted: its runner on {row.host} holds its lease no more (killed, or its "
                        f"machine went down); resume it there: agent-console resume {rid}")
                    return WAIT_INTERRUPTED
                away = False
            except FutureTimeout:
                # Away once a look has gone unanswered that long: not the whole wait's time (a look made as the
                # --timeout came, cut short by it, made the store "away" while it answered).
                if not away and time.monotonic() - asked >= STALL:
                    err(f"the store {store.shown} has not answered for {STALL:g} s; waiting for it")
                    away = True
            except StoreError as exc:
                pending = None
                if not away:
                    err(f"{exc}; waiting for it to come back")
                away = True
                lines.woken = True
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                what = "the store cannot be reached" if away else (
                    f"paused (agent-console resume {rid} unpauses it)" if fold.paused else "still running")
                say(f"run {rid} on {row.host}: {what} after {args.timeout:g}s (timeout)")
                return WAIT_TIMEOUT
            if pending is None:
                lines.wait(WAIT_POLL * 4 if deadline is None else max(0.01, min(WAIT_POLL * 4, deadline - now)))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        if pending is None:  # else a call is stuck on the store: the process leaves without closing it
            lines.close()
            store.close()


STALL = 3.0  # seconds: a store that has not answered a look for this long is said to be away


def _in_thread(fn: Any) -> Future[Any]:
    import threading

    done: Future[Any] = Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as exc:  # handed to the waiter
            done.set_exception(exc)

    threading.Thread(target=run, daemon=True, name="store-look").start()
    return done
