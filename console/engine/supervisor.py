"""The supervisor: sets a job run up, runs sessions, records how the run ended."""

from __future__ import annotations

from dataclasses import dataclass

from console.engine import events as ev
from console.engine.checkpoint import load_checkpoint
from console.engine.clock import Clock, SystemClock
from console.engine.job import JobPaths
from console.engine.loop import Controls, SessionDeps, SessionResult, ShutdownReason, run_agent_session
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


@dataclass
class RunResult:
    reason: ShutdownReason
    detail: str
    sessions: int
    outcome: JobOutcome | None

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
        controls: Controls | None = None,
        registry: ToolRegistry | None = None,
    ) -> None:
        self.paths = paths
        self.settings = settings
        self.provider = provider
        self.clock = clock or SystemClock()
        self.store = store
        self.controls = controls or Controls()
        self.registry = registry or default_registry()
        self.events = ev.EventStream(paths.events, self.clock)
        self.runtime = Runtime(paths, self.clock, self.events, store)

    def subscribe(self, fn: ev.Subscriber):
        return self.events.subscribe(fn)

    def run(self) -> RunResult:
        rt = self.runtime
        cp = load_checkpoint(self.paths.checkpoint)
        if cp is not None and cp.job_done:
            return RunResult(ShutdownReason.JOB_COMPLETE, "the job was already complete", cp.session, None)
        session = (cp.session + 1) if cp else 1
        conversation = list(cp.conversation) if cp else []
        turn = cp.turn if cp else 0
        nudges = cp.nudges if cp else 0
        self.events.session = session
        if self.store is not None:
            self.store.started(self.paths.root, self.paths.root.name, self.provider.name, self.provider.model,
                               self.clock.now())
        self.events.emit(ev.SessionStarted, reason="resume" if cp else "new", provider=self.provider.name,
                         model=self.provider.model, carryover_messages=len(conversation))
        if rt.phases.ensure_bootstrap() is False:
            # A resumed run shows its current list at once (views rebuild from events).
            rt.phases.publish_todos("resume")
        deps = SessionDeps(rt, self.provider, self.registry, self.settings, self.controls)
        result: SessionResult
        try:
            result = run_agent_session(deps, session, conversation, start_turn=turn, nudges=nudges)
        except Exception as exc:
            # Last line of defence: the run ends with a readable reason and the log says why.
            detail = f"internal error: {type(exc).__name__}: {exc}"
            self.events.emit(ev.ErrorEvent, message=detail, where="supervisor", recoverable=False)
            result = SessionResult(ShutdownReason.ERROR, 0, session, detail=detail)
        self.events.emit(ev.SessionEnded, reason=result.reason.value, turns=result.turns, detail=result.detail)
        self.events.sync()
        if self.store is not None and result.reason is not ShutdownReason.JOB_COMPLETE:
            self.store.ended(self.paths.root, STATUS_FOR[result.reason], self.clock.now(), result.detail)
        self.events.close()
        return RunResult(result.reason, result.detail, session, rt.outcome)
