"""The supervisor: the outer session loop (seed 004), resumes, and the operator's control API.

It runs sessions until the job completes or cannot go on. A session that ends
with ContextFull is followed by a new one: the system prompt is re-read from
disk, the conversation restarts from a fresh summary, the restart marker and
the carryover turns. ``max_restarts`` caps the sessions, as seed 004 counts them
(a context full in session N >= max_restarts ends the run); with ``auto_restart`` off the
supervisor emits ``restart_pending`` and waits for the operator's approve or
deny.

Resuming a job folder that has state continues the run exactly where its
journal's last commit left it: the same session, conversation and system
prompt, mid-turn if need be (see :mod:`console.engine.journal`). On the way in
it repairs what a kill or a damaged disk left: committed events the log never
got are appended, the last commit's file effects are applied again, temp files
are removed, and any harness file that cannot be read is moved to
``.console/corrupt/`` and reported (a ``state_recovered`` event) rather than
trusted or deleted. Only when the journal itself is lost does the run continue
from the state files with a fresh conversation built from the summary.

How a run ended is :mod:`console.engine.run_end`, the repairs before it starts :mod:`console.engine.repair`, and what
it sets up for its tools :mod:`console.engine.tool_setup`.

Why one module of ~605 lines: the run's life between sessions (start, recovery, the restart and its approval,
the deadline while it waits, the end) is one sequence over one lock, one journal and one link to the store; each
step that could stand alone already does (the modules above), and what is left shares the run's state.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from console.engine import commands as cmds
from console.engine import events as ev
from console.engine import record
from console.engine.atomic import clean_temp, make_private
from console.engine.clock import Clock, SystemClock
from console.engine.context.pressure import restart_marker
from console.engine.context.summary import archived_phases, build_summary, check_archives, summary_message
from console.engine.context.tokens import estimate_message
from console.engine.control import ControlChannel, RunLock
from console.engine.guardrails import build_guardrails, default_guardrails
from console.engine.guardrails.fleet import FleetBudget, Telling
from console.engine.job import JobPaths, keep_out_of_version_control
from console.engine.journal import JOURNAL_NAME, Checkpoint, Conversation, Journal
from console.engine.launch import LaunchStart, write_launch
from console.engine.loop import SessionDeps, SessionResult, ShutdownReason, run_agent_session
from console.engine.messages import Message
from console.engine.model import Provider
from console.engine.needs import answered, ask_operator, restart_message
from console.engine.operator import Aborted, OperatorState
from console.engine.repair import clear_the_way
from console.engine.run_end import FAILED_REASONS, STATUS_FOR, RunResult, outcome_of, status_for, where_resumed
from console.engine.run_settings import RunSettings
from console.engine.runtime import Runtime
from console.engine.sandbox import Sandbox
from console.engine.session import DEADLINE_ENDS_WAIT, first_prompt, window_too_small
from console.engine.state import COMPONENT_NAMES, COMPONENTS, load_projections
from console.engine.store import NEEDS_YOU, Store
from console.engine.store.link import LeaseHeld, link_run
from console.engine.text import safe_text
from console.engine.tool_setup import announce_commands, write_tool_docs
from console.engine.tools import BUILTIN_TOOL_NAMES, ToolRegistry, default_registry
from console.engine.tools.commands import build_command_tools

if TYPE_CHECKING:  # the MCP tools (and jsonschema) load only for a run that has servers
    from console.engine.tools.mcp_tools import McpServer, McpWatch

MAX_IDLE_RESTARTS = 3
# How often (seconds of the run's clock) a running job's cost goes to its row in the jobs table (_follow_needs).
COST_EVERY = 30.0

# Re-exported: the supervisor's callers and tests import them from here.
__all__ = ["FAILED_REASONS", "STATUS_FOR", "JobBusy", "RunResult", "Supervisor", "outcome_of", "status_for"]


class JobBusy(Exception):
    """Another process is running this job."""


class Supervisor:
    def __init__(
        self,
        paths: JobPaths,
        settings: RunSettings,
        provider: Provider,
        *,
        clock: Clock | None = None,
        store: Store | None = None,
        registry: ToolRegistry | None = None,
        channel: ControlChannel | None = None,
        seed: int | None = None,
        launch: LaunchStart | None = None,
        mcp: Sequence[McpServer] = (),
        tool_search_share: float | None = None,
        fleet: FleetBudget | None = None,
    ) -> None:
        # How the run was started (console.engine.launch): recorded once the lock is held, told in an event.
        self.launch = launch
        self.seed = seed  # the retry jitter's seed (tests); None: the system's randomness
        self.paths = paths
        self.settings = settings
        self.provider = provider
        self.clock = clock or SystemClock()
        self.store = store
        self.fleet = fleet  # the fleet's daily budget (console.engine.guardrails.fleet), asked at each turn boundary
        # The hold this run tells and whether the operator's channels took it: the runner's notifier says so
        # (telling.confirms, telling.heard), or it is marked told as soon as it is recorded.
        self.telling = Telling()
        self.registry = registry or default_registry(file_index=settings.file_index)
        # The job definition's guardrails and declared commands (job.toml; the agent cannot change them).
        self.guardrails = (build_guardrails(settings.guardrails) if settings.guardrails is not None
                           else default_guardrails())
        if settings.tools:
            commands = build_command_tools(settings.tools, settings.commands, reserved=BUILTIN_TOOL_NAMES)
            base = [t for n in self.registry.names if (t := self.registry.get(n)) is not None]
            self.registry = ToolRegistry([*base, *commands])
        # The tools of the job's MCP servers (started, confined, by whoever runs the run: the command line), through
        # the same registry and gate; what was not offered (a hostile name, a schema bomb) is said at the start.
        self.mcp_notes: list[str] = []
        self.mcp_watch: McpWatch | None = None
        self.operator = OperatorState(channel or ControlChannel(paths.inbox))
        if mcp:
            from console.engine.tools.mcp_elicitation import Questioner
            from console.engine.tools.mcp_sampling import Sampler
            from console.engine.tools.mcp_tools import build_mcp_tools
            from console.engine.tools.tool_search import offer_mcp_tools
            from console.engine.turn import call_limits

            # The run's model answers the sampling of a server the operator enabled it for (counted as spend).
            sampler = Sampler(provider, settings.prices, call_limits(settings))
            # The operator answers the questions of a server they enabled elicitation for (agent-console answer).
            offered = build_mcp_tools(mcp, reserved=self.registry.names, sampler=sampler,
                                      questioner=Questioner(self.operator))
            base = [t for n in self.registry.names if (t := self.registry.get(n)) is not None]
            # Too many to offer at once (more than tool_search_share of the window): found and loaded instead.
            self.registry = offer_mcp_tools(base, offered.tools, settings.context_window, tool_search_share)
            self.mcp_notes = offered.skipped
            self.mcp_watch = offered.watch
        self.not_private = make_private(paths.state)  # 0700/0600; what could not be made so, to report
        self.lock = RunLock(paths)
        # Repairs happen only when no process runs the job (then run() refuses anyway).
        self.file_problems = clear_the_way(paths, self.clock) if self.lock.holder() is None else []
        self.events = ev.EventStream(paths.events, self.clock)
        # The need the run waits on (reason, message, since), for the jobs table; the one its last process died
        # waiting on (read from the table once, at the start: see _waited_before).
        self._need: tuple[str, str, datetime] | None = None
        # When the jobs table last took the job's cost as a turn left it (the run's clock; see _follow_needs).
        self._cost_stored: datetime | None = None
        self._carried_need: tuple[str, datetime] | None = None
        self._looked_back = False
        # The jobs table says "needs you" (or "paused") while it holds.
        self.events.subscribe(self._follow_needs, text=False)
        mb = 2**20
        self.sandbox = Sandbox(paths.root, max_write_bytes=int(getattr(settings, "max_write_mb", 4.0) * mb),
                               max_job_bytes=int(getattr(settings, "max_job_mb", 1024.0) * mb))
        self.journal = Journal(paths)
        self.runtime: Runtime | None = None
        self.session = 0
        self._said_start = 0  # the last restarted session whose session_started was emitted
        self.deps: SessionDeps | None = None
        self.result: RunResult | None = None

    # -- the control API (thread-safe: applied by the engine at its next turn boundary) --------
    def subscribe(self, fn: ev.Subscriber, *, deferred: bool = False, text: bool = True) -> Callable[[], None]:
        return self.events.subscribe(fn, deferred=deferred, text=text)

    def command(self, name: str, source: str = "console", **args: Any) -> None:
        """Send the command ``name`` with ``args`` (:mod:`console.engine.commands`); CommandError if it is none."""
        self.operator.channel.submit(name, args, source)

    def submit(self, command: cmds.AnyCommand, source: str = "console") -> None:
        self.operator.channel.submit(command, source=source)

    # Shorthands for the engine's own callers and tests (a new command needs none: command() takes every one).
    def force_checkpoint(self, note: str | None = None) -> None:
        self.submit(cmds.Checkpoint(note=note))

    def rewind(self, issue: str) -> None:
        self.submit(cmds.Rewind(issue=issue))

    def approve_restart(self) -> None:
        self.submit(cmds.ApproveRestart())

    def deny_restart(self) -> None:
        self.submit(cmds.DenyRestart())

    def pause(self) -> None:
        self.submit(cmds.Pause())

    def resume(self) -> None:
        self.submit(cmds.Resume())

    def stop(self) -> None:
        self.submit(cmds.Stop())

    def _new_session_conversation(self, carry: list[Message], before: int, session: int, why: str,
                                  previous_turns: int | None = None) -> list[Message]:
        """Summary, restart marker (the session's number, the previous session's turns), then the carried turns
        (already whole turns within budget)."""
        messages = self._new_session_messages(carry, session, why, previous_turns)
        self.events.emit(ev.ContextCompacted, messages_before=before, messages_after=len(messages),
                         summary_chars=len(messages[0].content), reason=why, carried=len(carry))
        return messages

    def _new_session_messages(self, carry: list[Message], session: int, why: str,
                              previous_turns: int | None = None) -> list[Message]:
        rt = self._rt
        text = build_summary(self.paths, rt.workspace, self.clock.now(),
                             memory=rt.memory if self.settings.requires_context else None)
        marker = restart_marker(session, previous_turns, sum(1 for m in carry if m.role == "assistant"),
                                interrupted=why == "resume")
        return [summary_message(text), Message.user(marker, kind="restart_marker"), *carry]

    def _restart_too_small(self, result: SessionResult) -> str | None:
        """Why the session a restart would start could not run in this window (its first prompt, estimated now
        as it would be built, is already past the hard threshold): a restart, asked for or not, would only end
        the run in its first step. None when it fits."""
        assert self.deps is not None
        n = self.session + 1
        try:
            cm = first_prompt(self.deps, n, self._new_session_messages(result.carryover, n, "restart",
                                                                        result.session_turns))
        except Exception:  # a foresight, not a step: what failed here fails in the new session, which says so
            return None
        too_small = window_too_small(cm, self.settings, n, self.paths.run_id)
        return None if too_small is None else f"a restart would not help: {too_small}"

    @property
    def _rt(self) -> Runtime:
        assert self.runtime is not None
        return self.runtime

    def _store(self, what: str, *args: Any) -> None:
        """Update the jobs table; a database problem is reported once and never stops the run."""
        if self.store is None:
            return
        getattr(self.store, what)(self.paths.root, *args)
        if self.store.error is not None:
            self.events.emit(ev.ErrorEvent, message=f"jobs table not updated: {self.store.error}", where="store",
                             recoverable=True)
            self.store.error = None

    def _waited_before(self) -> tuple[str, datetime] | None:
        """The need this run's last process died waiting on, as the jobs table kept it (its reason, since when):
        asked again by this process, it keeps its "since" (the notification does: `jobs` must say the same)."""
        if self.store is None:
            return None
        try:
            row = self.store.get(self.paths.root)
            if row is None or row.status != NEEDS_YOU or not row.needs_since:
                return None
            since = datetime.fromisoformat(row.needs_since)
            return (row.detail or "").partition(": ")[0], since if since.tzinfo else since.replace(tzinfo=UTC)
        except Exception:  # a store away or a row from elsewhere: the need is told from now, as before
            return None

    def _follow_needs(self, e: ev.EventBase) -> None:
        """The jobs table follows the run's needs (console.engine.needs): "needs you" since when, and why; and the
        operator's pause: "paused" until they resume it (``jobs`` reads no log, so the store must say it). A
        notification channel failing while a need waits is said in it too: nobody may have been told."""
        kind = type(e)  # (exact types: a failed isinstance on an event costs ~1,200 instructions, five events a turn)
        if kind is ev.TokenUsage:
            assert isinstance(e, ev.TokenUsage)
            # `jobs` reads no log: the job's cost so far goes to its row while it runs, at most every COST_EVERY
            # seconds (a row is a write to a shared store), and at once when the run holds or pauses below. It was
            # written at a session's end only: a paused, held or killed run's row had no cost (the console and the
            # fleet said $0.06).
            if e.job_cost_usd is not None and not e.source and (
                    self._cost_stored is None or (e.ts - self._cost_stored).total_seconds() >= COST_EVERY):
                self._cost_stored = e.ts
                self._store("cost", e.job_cost_usd)
            return
        if kind is ev.NeedsOperator or kind is ev.OperatorCommand:  # (rare: isinstance below costs nothing a turn)
            pausing = isinstance(e, ev.OperatorCommand) and e.status == "applied" and e.command == "pause"
            if (pausing or isinstance(e, ev.NeedsOperator)) and (usd := self.job_cost()) is not None:
                self._store("cost", usd)
        if isinstance(e, ev.NeedsOperator):
            carried, self._carried_need = self._carried_need, None
            since = min(e.ts, carried[1]) if carried is not None and carried[0] == e.reason else e.ts
            self._need = (e.reason, e.message, since)
            self._store("needs", e.reason, e.message, e.ts, since)
        elif isinstance(e, ev.ErrorEvent) and e.where == "notify" and self._need is not None:
            reason, message, since = self._need  # (from the notifier's thread: the stores take any thread)
            self._store("needs", reason, f"[not told: {e.message}] {message}", e.ts, since)
        elif isinstance(e, ev.NeedsOperatorCleared):
            self._need = None
            self._store("answered", e.ts)
            if self.operator.paused:  # answered, but the operator's own pause still holds the run
                self._store("paused", e.ts)
        elif isinstance(e, ev.OperatorCommand) and e.status == "applied" and e.command in ("pause", "resume"):
            self._store("paused" if e.command == "pause" else "unpaused", e.ts)

    def job_cost(self) -> float | None:
        """US dollars the whole job has cost so far (None when the model's price is unknown)."""
        if self.runtime is None or self.settings.prices is None:
            return None
        return self.runtime.guardrails.budget_state.cost_usd

    def _restarted(self, carried: int, prompt_tokens: int, budget: int) -> None:
        self._said_start = self.session
        self.events.emit(ev.SessionStarted, reason="restart", provider=self.provider.name, model=self.provider.model,
                         carryover_messages=carried, prompt_tokens_est=prompt_tokens, prompt_budget=budget,
                         **self._session_info())

    def _session_info(self) -> dict[str, Any]:
        st = self.settings
        return {"context_window": st.context_window, "context_window_source": st.context_window_source,
                "priced": st.prices is not None, "working_memory": st.requires_context,
                "file_index": st.file_index,
                "fleet_uncounted": not self._fleet_counts() and self.fleet is not None and self.fleet.limited()}

    def _fleet_counts(self) -> bool:
        """Whether the fleet's daily budget counts this run: a turn without a price has no cost, so a run of an
        unpriced model is neither counted nor held by it (docs/guardrails.md): its runtime is given no fleet. Nor is
        one of a free model (the demo's price is 0): holding it would save nothing (a fleet over its budget held
        the offline quickstart, which docs/guardrails.md says is never held)."""
        return any(p is not None and not p.free for p in (self.settings.prices, self.settings.fleet_prices))

    def _forget_an_earlier_end(self) -> None:
        """A new run in a folder where an earlier one completed (the folder made again at the same path: its record
        went with it): the jobs table's row of that run is forgotten, or it would go on saying "completed" (a
        completed row is final to every later update) of a run that has not."""
        if self.store is None:
            return
        try:
            row = self.store.get(self.paths.root)
            if row is not None and row.status == "completed":
                self.store.forget([self.paths.root])
        except Exception:  # a store away: said by the updates that follow, as for any other
            return

    def _store_started(self) -> None:
        if not self._looked_back:
            self._looked_back = True
            self._carried_need = self._waited_before()
        self._store("started", self.paths.root.name, self.provider.name, self.provider.model, self.clock.now())
        if self.operator.paused and self.operator.needs is None:
            # Paused by its operator while a restart waited for approval: the new session holds, and says so.
            self._store("paused", self.clock.now())

    def _start_guardrails(self, rt: Runtime) -> None:
        """The guardrails' clock starts (once per job), the operator reads what the job's commands see and
        their bounds (the run's header), and the console gets what guards the run."""
        rt.should_stop = self._tool_should_stop
        if self.settings.tools:
            announce_commands(self.settings, rt, self.events)
        for note in self.mcp_notes:
            self.events.emit(ev.ErrorEvent, message=note, where="mcp", recoverable=True)
        if self.mcp_watch is not None:  # each server's state (mcp_server events): the views list them
            self.mcp_watch.report(self.events)
        rt.guards.start(priced=self.settings.prices is not None)
        rt.guards.status(force=True)

    def _tool_should_stop(self) -> bool:
        """Asked by a long tool (a job-declared command) while it runs: the operator's commands are read now, a
        first stop lets the turn's tool calls finish (the run stops after them), a second stop ends this one at
        once (as a stop while paused or waiting does). Other commands wait for the turn's end. The operator's
        confirmation reaches the log with the call's result (events of a step in flight are not written before
        its commit: a resume would log them twice)."""
        op = self.operator
        if op.abort:
            return True
        try:
            op.apply(self._rt, streaming=True)
        except Aborted:
            return True
        return op.abort

    def _await_restart_decision(self, result: SessionResult, carry_tokens: int) -> tuple[str, str]:
        """The operator's answer to a restart the context calls for: (decision, the run's end detail if it ends).
        "approve", "deny", "stop" (their stop: not a denial, but it ends the run); "interrupted" (a signal: no one
        answered, the need stays open and the next process asks again); "deadline" (it passed, before or while
        the restart waited: the run ends out of time, as a deadline reached while working ends it)."""
        op, rt = self.operator, self._rt
        if op.stop_requested:
            # Stopped in the session's last turn: not asked (its next process asks, the restart still due).
            if (by := op.interrupted_by) is not None:
                return "interrupted", f"interrupted by {by}"
            return "stop", "stopped by the operator before a context restart was asked for"
        if (late := rt.guards.deadline_while_waiting()) is not None:
            # Not asked: a restart approved now would be cut at its first boundary.
            self.events.observe()
            return "deadline", late
        self.events.emit(ev.RestartPending, usage_pct=round(result.used_tokens / max(1, result.budget), 4),
                         used_tokens=result.used_tokens, context_window=self.settings.context_window,
                         prompt_budget=result.budget,
                         carryover_messages=len(result.carryover), carryover_tokens=carry_tokens,
                         next_session=self.session + 1)
        self.events.observe()
        self._store("ended", "awaiting approval", self.clock.now(), "restart pending")
        op.awaiting_restart, op.restart_decision = True, None
        ask_operator(self.events, op, "restart_approval", restart_message(result.used_tokens, self.session + 1),
                     [f"carryover: {len(result.carryover)} messages, ~{carry_tokens:,} tokens"], pause=False)
        late = None
        try:
            while op.restart_decision is None and not op.stop_requested:
                if (late := rt.guards.deadline_while_waiting()) is not None:
                    break
                op.channel.wait(op.channel.look_every)  # a command's sender rings (console.engine.doorbell)
                op.apply(rt, between_sessions=True)
                self.events.observe()
        finally:
            op.awaiting_restart = False
        if late is not None:
            answered(self.events, op, DEADLINE_ENDS_WAIT)
            self.events.observe()
            return "deadline", late
        if op.restart_decision is None and (by := op.interrupted_by) is not None:
            # A signal (a shutdown, a closed terminal) is nobody's answer: the need stays open, the run ends
            # interrupted, and its next process asks again (its session's last step calls for the restart).
            return "interrupted", f"interrupted by {by} while a context restart waited for approval"
        answered(self.events, op, {"approve": "restart approved", "deny": "restart denied"}.get(
            op.restart_decision or "", "operator's stop"))
        # A stop while the restart waits is not a denial, but it ends the run all the same (and says so).
        decision = op.restart_decision or "stop"
        if decision == "approve":
            self.events.emit(ev.RestartApproved, by="operator")
            self._store_started()
        else:
            self.events.emit(ev.RestartDenied, by="operator" if decision == "deny" else "operator's stop")
        return decision, ("restart denied by the operator" if decision == "deny" else
                          "stopped by the operator while a context restart waited for approval")

    def run(self) -> RunResult:
        if not self.lock.acquire():
            raise JobBusy(f"{self.paths.root} is already being run by process {self.lock.holder()}")
        self.operator.channel.run_id = self.lock.run_id
        # Only the process that holds the run writes its record (a refused one never does). A new run's sealed
        # record is the first thing it writes in .console/ (console.engine.provenance: a .console/ without one is
        # not a run of this operator, so a kill -9 right after it must not leave the store id before it); a
        # resume's is written once the store's lease is held too (another machine may run it).
        first = self.launch is not None and self.launch.source == "start"
        link = None
        failed: BaseException | None = None
        try:
            if first and self.launch is not None:
                write_launch(self.paths, self.launch.record, self.launch.seal)
            keep_out_of_version_control(self.paths)
            try:  # a shared store: its link ships the log, takes commands in and holds the lease (a thread)
                link = link_run(self.store, self.paths, self.events, self.operator, self.lock.run_id,
                                self.clock.now)
            except LeaseHeld as exc:
                raise JobBusy(str(exc)) from None
            if self.launch is not None and not first:
                write_launch(self.paths, self.launch.record, self.launch.seal)
            self.operator.channel.listen()  # its doorbell: made after the record (a .console/ with none is foreign)
            self.result = self._run()
            return self.result
        except JobBusy as exc:  # another machine runs it: nothing of this process's happened
            failed = exc
            raise
        except BaseException as exc:
            failed = exc
            # Interrupted mid-step (a third Ctrl+C): what the step would have recorded is dropped with it,
            # and its events must not reach the log (the resume redoes the step and logs them once).
            if self.runtime is not None:
                self.runtime.rollback()
            if isinstance(exc, Exception):  # a crash, not an interrupt: the operator is told
                with contextlib.suppress(Exception):
                    ask_operator(self.events, self.operator, "crashed", "the run crashed; resume it once the cause "
                                 "is fixed", [f"{type(exc).__name__}: {exc}"], pause=False)
            raise
        finally:
            # Each is closed whatever the others do: a disk that takes no more writes fails the event log's last
            # lines, and the run's lock must still be let go (its next process, or this one's next run, takes it).
            # A failure here is raised only when nothing else is (the run's own error says more).
            closing: BaseException | None = None
            if self.runtime is not None:  # a run that began: its last commands are answered in its log
                with contextlib.suppress(Exception):
                    self.operator.answer_the_rest(self.events)
                    self.events.observe()
            for close in (self.journal.close, self.events.close, link.close if link is not None else None,
                          self.sandbox.close, self.operator.channel.close, self.lock.release):
                if close is None:
                    continue
                try:
                    close()
                except Exception as exc:
                    closing = closing or exc
            if closing is not None and failed is None:
                raise closing

    def _recover(self) -> tuple[Runtime, Any]:
        """Read back the run's state, repairing what a kill or a damaged disk left behind."""
        now = self.clock.now()
        # .console/tmp itself is emptied by the sandbox, which owns it; these are older versions' temps.
        clean_temp(self.paths.state, self.paths.archive, self.paths.state / "blobs")
        with contextlib.suppress(OSError):
            self.sandbox.clean_tmp()
        loaded = self.journal.load(now, logged_seq=self.events.seq)
        self.events.append_committed(loaded.unlogged)
        projections, problems = load_projections(self.paths, now)
        state = projections.overlay(loaded.state)
        if self.fleet is not None:  # a run with no channel takes no hold's telling (console.engine.guardrails.fleet)
            self.fleet.tells = self.telling.confirms
        rt = self.runtime = Runtime(self.paths, self.clock, self.events, self.store, self.sandbox, self.journal,
                                    state, guardrails=self.guardrails,
                                    fleet=self.fleet if self._fleet_counts() else None,
                                    fleet_prices=self.settings.fleet_prices, fleet_telling=self.telling)
        for line in self.not_private:  # said once a run: another user of this machine may read or hold these
            self.events.emit(ev.ErrorEvent, message=f"not private: {line}", where="permissions", recoverable=True)
        for p in self.file_problems:
            self.events.emit(ev.StateRecovered, file=p.file, problem=p.problem, moved_to=p.moved_to,
                             action=("the log goes on with every line that is an event" if p.component == "log"
                                     else "a new one is started"))
        for p in check_archives(self.paths, now):
            self.events.emit(ev.StateRecovered, file=p.file, problem=p.problem, moved_to=p.moved_to,
                             action="the summaries no longer list that todo list")
        for p in problems:
            what = COMPONENT_NAMES.get(p.component or "", "its content")
            if getattr(loaded.state, p.component or "", None) is not None:
                action = f"{what} is rebuilt from the journal; nothing is lost"
            else:
                action = f"{what} starts over: there is no journal to rebuild it from"
            self.events.emit(ev.StateRecovered, file=p.file, problem=p.problem, moved_to=p.moved_to, action=action)
        if loaded.problem:
            self.events.emit(ev.StateRecovered, file=f".console/{JOURNAL_NAME}", problem=loaded.problem,
                             moved_to=loaded.moved_to, action="the run continues from the state files with a "
                                                              "conversation rebuilt from the summary")
        # A kill may have come between the last commit and its files: write them again (same content).
        rt.apply_effects(loaded.effects)
        if rt.todos.state.closed is None:
            # A run from before the harness kept its record of closed phases: read it back from its own archives.
            rt.todos.state.closed = record.from_archives(archived_phases(self.paths))
            rt.todos.save()
        rt.tool_names = frozenset(self.registry.names)
        if (search := self.registry.search) is not None:  # what is loaded is the phase's record, journaled
            search.bind(lambda: rt.todos.state.evidence)
        # Tasks marked done without the evidence they name (a run from before the rule: its archived lists too)
        # are owed: the job is not complete until the record holds it (console.engine.evidence).
        archived_done = ([str(i.get("text", "")) for a in archived_phases(self.paths) for i in a.get("items") or []
                          if isinstance(i, dict) and i.get("done")] if rt.todos.state.owed is None else [])
        rt.judge_evidence(archived_done)
        for comp in COMPONENTS:
            rt.project(comp)
        rt.redo = dict(loaded.intents)
        return rt, loaded

    def _run(self) -> RunResult:
        rt, loaded = self._recover()
        cp: Checkpoint | None = loaded.cp
        # An outcome the record does not bear out (the agent gave up, or a free stop's job_complete with work
        # left) is not the job's end: a resume is the operator's word that it goes on.
        reopen = rt.outcome is not None and (rt.outcome.gave_up or bool(rt.guards.unmet()))
        if (rt.job_done or (cp is not None and cp.job_done)) and not reopen:
            if rt.outcome is not None:
                # A kill right after job_complete: make sure the jobs table says so.
                self._store_started()
                self._store("completed", self.clock.now(), rt.outcome.confidence, rt.outcome.summary)
            return RunResult(ShutdownReason.JOB_COMPLETE, "the job was already complete", cp.session if cp else 0,
                             None, ended="completed", already=True)
        # From here every event goes through the journal's outbox (see EventStream).
        self.events.holding = True
        system: str | None = None
        if cp is not None:
            # Continue the recorded session exactly: same conversation, same system prompt, same turn.
            conversation = Conversation(loaded.conversation, journaled=True)
            system = loaded.system
            self.session = cp.session
            reason, detail = "resume", where_resumed(cp, loaded.conversation, loaded.cut)
        elif rt.todos.exists:
            # State without a journal (lost or damaged): a fresh conversation from the summary.
            self.session = 1
            conversation = Conversation()
            reason, detail = "resume", "from the summary (the conversation could not be restored)"
            cp = Checkpoint(session=1)
        else:
            self.session = 1
            conversation = Conversation()
            reason, detail = "new", ""
            cp = Checkpoint(session=1)
        self.events.session = self.session
        if reason == "new":
            self._forget_an_earlier_end()
        self._store_started()
        if reason == "resume" and loaded.cp is None:
            conversation = Conversation(self._new_session_conversation([], 0, self.session, "resume"))
        self.events.emit(ev.SessionStarted, reason=reason, provider=self.provider.name, model=self.provider.model,
                         carryover_messages=len(conversation), detail=detail, **self._session_info())
        if self.launch is not None:
            self.events.emit(ev.LaunchSettings, **self.launch.event_fields())
        if reopen and rt.reopen_outcome() is not None:
            # The operator's resume is their answer to the give-up: the job goes on from where it was.
            cp.job_done = False
        if not rt.phases.ensure_bootstrap():
            rt.phases.publish_todos("resume")  # views rebuild from events: show the list at once
            rt.phases.recover()
        if cp.tasks_at_start == 0:
            cp.tasks_at_start = rt.memory.state.next_id
        self._start_guardrails(rt)
        crashed = ""  # the internal error that ended the run, if one did
        deps = self.deps = SessionDeps(rt, self.provider, self.registry, self.settings, self.operator,
                                           seed=self.seed)
        on_start: Callable[[int, int], None] | None = None  # a restart's new session says its start
        while True:
            write_tool_docs(self.paths, self.settings, self.registry, self.sandbox, rt, self.events)
            try:
                result = run_agent_session(deps, self.session, conversation, cp, system, on_start)
            except Exception as exc:  # last line of defence: a readable reason, and the log says why
                rt.rollback()
                if on_start is not None and self._said_start != self.session:
                    on_start(0, 0)  # the new session failed before its estimate: its start is said all the same
                detail = f"internal error: {type(exc).__name__}: {exc}"[:2000]
                self.events.emit(ev.ErrorEvent, message=detail, where="supervisor", recoverable=False)
                # Its turns as its context counted them (a resumed session's earlier ones too): "an error after 0
                # turns" was said of a session 16 turns in.
                turns = deps.context.turns if deps.context is not None else 0
                result = SessionResult(ShutdownReason.ERROR, 0, self.session, detail=detail, session_turns=turns)
                crashed = detail
            # The session's turns in all: a resumed session's started in an earlier process count too.
            self.events.emit(ev.SessionEnded, reason=result.reason.value, turns=max(result.turns, result.session_turns),
                             detail=result.detail)
            if (usd := self.job_cost()) is not None:
                self._store("cost", usd)  # `jobs` shows what the job has cost, session by session
            self.events.observe()
            if result.reason is not ShutdownReason.CONTEXT_FULL:
                break
            carry_tokens = sum(estimate_message(m) for m in result.carryover)
            cp.idle_restarts = cp.idle_restarts + 1 if rt.memory.state.next_id == cp.tasks_at_start else 0
            if cp.idle_restarts >= MAX_IDLE_RESTARTS:
                result.reason = ShutdownReason.ERROR
                result.detail = (f"restart loop: {cp.idle_restarts} sessions in a row filled the context without "
                                 "completing a task; raise --context-window or split the work")
                self.events.emit(ev.ErrorEvent, message=result.detail, where="supervisor", recoverable=False)
                break
            if self.session >= (most := self.settings.max_restarts):
                # Seed 004 counts sessions: "if session_number >= max { Max restarts ({max}) reached }".
                result.reason = ShutdownReason.ERROR
                result.detail = (f"context full in session {self.session} and max_restarts ({most}) reached: "
                                 f"a run has at most {max(1, most)} session{'s' if most > 1 else ''}")
                self.events.emit(ev.ErrorEvent, message=result.detail, where="supervisor", recoverable=False)
                break
            if (too_small := self._restart_too_small(result)) is not None:
                # Not asked for: approving it would end the run in the new session's first step all the same.
                result.reason, result.detail = ShutdownReason.ERROR, too_small
                self.events.emit(ev.ErrorEvent, message=too_small, where="context", recoverable=False)
                break
            if not self.settings.auto_restart:
                decision, detail = self._await_restart_decision(result, carry_tokens)
                if decision != "approve":
                    result.reason = {"deadline": ShutdownReason.BUDGET_EXHAUSTED,
                                     "interrupted": ShutdownReason.INTERRUPTED}.get(decision,
                                                                                   ShutdownReason.USER_SHUTDOWN)
                    result.detail = detail
                    break
            else:
                self.events.emit(ev.RestartApproved, by="auto")
            self.session += 1
            self.events.session = self.session
            # The ended session's conversation (what it compacts), not its carryover, is what it had before.
            conversation = Conversation(self._new_session_conversation(result.carryover, len(conversation),
                                                                       self.session, "restart", result.session_turns))
            # The new session's first commit records its system prompt, this conversation and checkpoint.
            cp = Checkpoint(session=self.session, turn=cp.turn, restarts=cp.restarts + 1,
                            idle_restarts=cp.idle_restarts, tasks_at_start=rt.memory.state.next_id)
            system = None
            # Said by the new session once it has estimated its first prompt: the views show that figure at once,
            # not the old session's full context until the first turn.
            on_start = functools.partial(self._restarted, len(result.carryover))
        if crashed:  # the operator is told (and their channels): it ended on an internal error, resumable
            ask_operator(self.events, self.operator, "crashed", "the run stopped on an internal error; resume it "
                         "once the cause is fixed", [crashed], pause=False)
        ended = outcome_of(result.reason, rt.outcome, rt.guards.unmet())
        if ended == "gave_up" and rt.outcome is not None:
            # Seed 000's unrecoverable case is the operator's to decide: they are told, with the agent's words.
            go = rt.outcome
            said = safe_text(go.summary, one_line=True, join=True, limit=300)
            said = said[:-1] if said.endswith(".") and not said.endswith("..") else said  # "...; resume it"
            ask_operator(self.events, self.operator, "gave_up", "the agent gave up: "
                         f"{said}; resume it once the cause "
                         "is fixed (the job goes on from where it was), or leave it",
                         [f"notes: {safe_text(go.notes, one_line=True, join=True, limit=280)}",
                          f"confidence {go.confidence:g}", *rt.guards.unmet()], pause=False)
        self.events.emit(ev.RunEnded, reason=result.reason.value, detail=result.detail, sessions=self.session,
                         restarts=cp.restarts, outcome=ended, **({"fix": result.fix} if result.fix else {}))
        self.events.observe()
        if self.operator.channel.gone is None:  # else its folder is gone: nothing is made again at its path
            rt.refresh_projections()
        self.events.sync()
        self.journal.sync()
        if ended == "completed" and rt.outcome is not None:
            self._store("completed", self.clock.now(), rt.outcome.confidence, rt.outcome.summary)
        elif ended == "gave_up" and rt.outcome is not None:  # `jobs` shows what the agent said, its confidence
            self._store("gave_up", self.clock.now(), rt.outcome.confidence,
                        f"{rt.outcome.summary} (notes: {rt.outcome.notes})"[:2000])
        else:
            detail = result.detail
            if rt.outcome is not None:  # a job_complete the record does not bear out (a free stop's)
                detail = f"{rt.outcome.summary} (a job_complete with work left)"[:2000]
            self._store("ended", status_for(result.reason, ended), self.clock.now(), detail)
        return RunResult(result.reason, result.detail, self.session, rt.outcome, cp.restarts, ended, fix=result.fix)
