"""The supervisor: the outer session loop (seed 004) and the operator's control API.

It runs sessions until the job completes or cannot go on. A session that ends
with ContextFull is followed by a new one: the system prompt is re-read from
disk, the conversation restarts from a fresh summary, the restart marker and
the carryover turns. ``max_restarts`` caps that; with ``auto_restart`` off the
supervisor emits ``restart_pending`` and waits for the operator's approve or
deny. Resuming a job folder that has state is the same move: a new session
with carryover from the last checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.engine import events as ev
from console.engine.checkpoint import Checkpoint, Conversation, SessionStore
from console.engine.clock import Clock, SystemClock
from console.engine.context.carryover import extract_carryover
from console.engine.context.pressure import RESTART_MARKER
from console.engine.context.summary import build_summary, summary_message
from console.engine.context.tokens import estimate_message
from console.engine.control import ControlChannel, RunLock
from console.engine.job import JobPaths
from console.engine.loop import (
    CARRYOVER_BUDGET,
    CARRYOVER_TURNS,
    SessionDeps,
    SessionResult,
    ShutdownReason,
    run_agent_session,
)
from console.engine.messages import Message
from console.engine.operator import OperatorState
from console.engine.runtime import JobOutcome, Runtime
from console.engine.store import JobStore
from console.engine.tools import ToolRegistry, default_registry
from console.providers.base import Provider
from console.settings import RunSettings

STATUS_FOR = {
    ShutdownReason.JOB_COMPLETE: "completed",
    ShutdownReason.USER_SHUTDOWN: "stopped",
    ShutdownReason.MAX_TURNS: "failed",
    ShutdownReason.ERROR: "failed",
    ShutdownReason.CONTEXT_FULL: "failed",
}


MAX_IDLE_RESTARTS = 3


class JobBusy(Exception):
    """Another process is running this job."""


@dataclass
class RunResult:
    reason: ShutdownReason
    detail: str
    sessions: int
    outcome: JobOutcome | None
    restarts: int = 0

    @property
    def ok(self) -> bool:
        return self.reason is ShutdownReason.JOB_COMPLETE


class Supervisor:
    def __init__(
        self,
        paths: JobPaths,
        settings: RunSettings,
        provider: Provider,
        *,
        clock: Clock | None = None,
        store: JobStore | None = None,
        registry: ToolRegistry | None = None,
        channel: ControlChannel | None = None,
    ) -> None:
        self.paths = paths
        self.settings = settings
        self.provider = provider
        self.clock = clock or SystemClock()
        self.store = store
        self.registry = registry or default_registry()
        self.operator = OperatorState(channel or ControlChannel(paths.inbox))
        self.events = ev.EventStream(paths.events, self.clock)
        self.runtime = Runtime(paths, self.clock, self.events, store)
        self.lock = RunLock(paths)
        self.sessions = SessionStore(paths.state)
        self.session = 0
        self.deps: SessionDeps | None = None
        self.result: RunResult | None = None

    # -- the control API (thread-safe: applied by the engine at its next turn boundary) --------
    def subscribe(self, fn: ev.Subscriber):
        return self.events.subscribe(fn)

    def command(self, name: str, source: str = "console", **args: Any) -> None:
        self.operator.channel.submit(name, args, source)

    def force_checkpoint(self, note: str | None = None) -> None:
        self.command("checkpoint", note=note)

    def rewind(self, issue: str) -> None:
        self.command("rewind", issue=issue)

    def approve_restart(self) -> None:
        self.command("approve_restart")

    def deny_restart(self) -> None:
        self.command("deny_restart")

    def pause(self) -> None:
        self.command("pause")

    def resume(self) -> None:
        self.command("resume")

    def stop(self) -> None:
        self.command("stop")

    # -- running ---------------------------------------------------------------------------------
    def _new_session_conversation(self, carry: list[Message], before: int, session: int, why: str) -> list[Message]:
        """Summary, restart marker, then the carried turns (already whole turns within budget)."""
        rt = self.runtime
        text = build_summary(self.paths, rt.workspace, self.clock.now(), memory=rt.memory)
        carried = f"The last {sum(1 for m in carry if m.role == 'assistant')} turns are carried over." if carry else ""
        marker = RESTART_MARKER.format(session=session, carried=carried)
        if why == "resume":
            marker = marker.replace("Previous session context was full.", "The previous session was interrupted.")
        self.events.emit(ev.ContextCompacted, messages_before=before, messages_after=2 + len(carry),
                         summary_chars=len(text), reason=why)
        return [summary_message(text), Message.user(marker, kind="restart_marker"), *carry]

    def _await_restart_decision(self, result: SessionResult, carry_tokens: int) -> str:
        op, rt = self.operator, self.runtime
        self.events.emit(ev.RestartPending, usage_pct=round(result.used_tokens / max(1, result.budget), 4),
                         used_tokens=result.used_tokens, context_window=self.settings.context_window,
                         prompt_budget=result.budget,
                         carryover_messages=len(result.carryover), carryover_tokens=carry_tokens,
                         next_session=self.session + 1)
        if self.store is not None:
            self.store.ended(self.paths.root, "awaiting approval", self.clock.now(), "restart pending")
        op.awaiting_restart, op.restart_decision = True, None
        try:
            while op.restart_decision is None and not op.stop_requested:
                op.channel.wait(0.2)
                op.apply(rt)
        finally:
            op.awaiting_restart = False
        decision = op.restart_decision or "deny"
        if decision == "approve":
            self.events.emit(ev.RestartApproved, by="operator")
            if self.store is not None:
                self.store.started(self.paths.root, self.paths.root.name, self.provider.name, self.provider.model,
                                   self.clock.now())
        else:
            self.events.emit(ev.RestartDenied, by="operator")
        return decision

    def run(self) -> RunResult:
        if not self.lock.acquire():
            raise JobBusy(f"{self.paths.root} is already being run by process {self.lock.holder()}")
        try:
            self.result = self._run()
            return self.result
        finally:
            self.events.close()
            self.lock.release()

    def _run(self) -> RunResult:
        rt = self.runtime
        loaded = self.sessions.load()
        cp, previous = loaded if loaded else (None, [])
        if rt.job_done or (cp is not None and cp.job_done):
            if self.store is not None and rt.outcome is not None:
                # A crash right after job_complete: make sure the jobs table says so.
                self.store.started(self.paths.root, self.paths.root.name, self.provider.name, self.provider.model,
                                   self.clock.now())
                self.store.completed(self.paths.root, self.clock.now(), rt.outcome.confidence, rt.outcome.summary)
            return RunResult(ShutdownReason.JOB_COMPLETE, "the job was already complete", cp.session if cp else 0,
                             None)
        self.session = (cp.session + 1) if cp else 1
        turn = cp.turn if cp else 0
        self.events.session = self.session
        if self.store is not None:
            self.store.started(self.paths.root, self.paths.root.name, self.provider.name, self.provider.model,
                               self.clock.now())
        conversation = Conversation()
        if cp is not None:
            carry = extract_carryover(previous, CARRYOVER_TURNS, int(self.settings.context_window * CARRYOVER_BUDGET))
            conversation = Conversation(self._new_session_conversation(carry, len(previous), self.session, "resume"))
        self.events.emit(ev.SessionStarted, reason="resume" if cp else "new", provider=self.provider.name,
                         model=self.provider.model, carryover_messages=len(conversation))
        if not rt.phases.ensure_bootstrap():
            rt.phases.publish_todos("resume")  # views rebuild from events: show the list at once
            rt.phases.recover()
        deps = self.deps = SessionDeps(rt, self.provider, self.registry, self.settings, self.operator,
                                       self.sessions)
        restarts = 0
        idle_restarts = 0  # consecutive sessions that filled up without completing a single todo
        while True:
            tasks_before = rt.memory.state.next_id
            try:
                result = run_agent_session(deps, self.session, conversation, start_turn=turn)
            except Exception as exc:  # last line of defence: a readable reason, and the log says why
                detail = f"internal error: {type(exc).__name__}: {exc}"
                self.events.emit(ev.ErrorEvent, message=detail, where="supervisor", recoverable=False)
                result = SessionResult(ShutdownReason.ERROR, 0, self.session, detail=detail)
            turn += result.turns
            self.events.emit(ev.SessionEnded, reason=result.reason.value, turns=result.turns, detail=result.detail)
            if result.reason is not ShutdownReason.CONTEXT_FULL:
                break
            carry_tokens = sum(estimate_message(m) for m in result.carryover)
            idle_restarts = idle_restarts + 1 if rt.memory.state.next_id == tasks_before else 0
            if idle_restarts >= MAX_IDLE_RESTARTS:
                result.reason = ShutdownReason.ERROR
                result.detail = (f"restart loop: {idle_restarts} sessions in a row filled the context without "
                                 "completing a task; raise --context-window or split the work")
                self.events.emit(ev.ErrorEvent, message=result.detail, where="supervisor", recoverable=False)
                break
            if restarts >= self.settings.max_restarts:
                result.reason = ShutdownReason.ERROR
                result.detail = f"context full and max_restarts ({self.settings.max_restarts}) reached"
                self.events.emit(ev.ErrorEvent, message=result.detail, where="supervisor", recoverable=False)
                break
            if not self.settings.auto_restart:
                if self._await_restart_decision(result, carry_tokens) != "approve":
                    result.reason = ShutdownReason.USER_SHUTDOWN
                    result.detail = "restart denied by the operator"
                    break
            else:
                self.events.emit(ev.RestartApproved, by="auto")
            restarts += 1
            self.session += 1
            self.events.session = self.session
            conversation = Conversation(self._new_session_conversation(result.carryover, len(result.carryover),
                                                                       self.session, "restart"))
            # The carried turns are already whole; the new session's checkpoint starts from them.
            self.sessions.save(Checkpoint(session=self.session, turn=turn, updated_at=self.clock.now()),
                               conversation, durable=True)
            self.events.emit(ev.SessionStarted, reason="restart", provider=self.provider.name,
                             model=self.provider.model, carryover_messages=len(result.carryover))
        self.events.emit(ev.RunEnded, reason=result.reason.value, detail=result.detail, sessions=self.session,
                         restarts=restarts)
        self.events.sync()
        self.sessions.sync()
        if self.store is not None and result.reason is not ShutdownReason.JOB_COMPLETE:
            self.store.ended(self.paths.root, STATUS_FOR[result.reason], self.clock.now(), result.detail)
        return RunResult(result.reason, result.detail, self.session, rt.outcome, restarts)
