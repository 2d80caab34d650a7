"""A run's guardrail events, built by hand: what the engine emits when policies, feedback and the completion
checker act (the views are tested on these before and independently of the engine's loop)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from console.engine import events as ev
from tests.tui.conftest import FROZEN_NOW

T0 = FROZEN_NOW - timedelta(minutes=5)

DEADLINE_BLOCK = ("<feedback provider='Deadline'>\nThe work so far took 5 minutes. You have 3 minutes remaining.\n\n"
                  "-> Prioritize completing critical remaining work.\n</feedback>")
AGENTS_BLOCK = ("<feedback provider='AGENTS.md'>\nAGENTS.md detected. Follow the conventions defined within.\n"
                "</feedback>")


class Log:
    """Events numbered and stamped in order, a second apart from ``T0``."""

    def __init__(self, start: datetime = T0) -> None:
        self.start = start
        self.events: list[ev.EventBase] = []

    def add(self, kind: type[ev.EventBase], *, at: float | None = None, **fields: object) -> ev.EventBase:
        seq = len(self.events) + 1
        ts = self.start + timedelta(seconds=seq if at is None else at)
        e = kind(ts=ts, seq=seq, session=1, **fields)
        self.events.append(e)
        return e

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(e.model_dump_json() + "\n" for e in self.events), encoding="utf-8")


def status(log: Log, *, tokens_used: int = 588_000, blocks: int = 0, verdict: str | None = None) -> ev.EventBase:
    return log.add(
        ev.GuardrailsStatus,
        policies=[ev.PolicyInfo(name="read_before_write", kind="read_before_write",
                                detail="write_file, edit_file of an existing file need a prior read_file of it"),
                  ev.PolicyInfo(name="tests_first", kind="sequential_dependency", detail="deploy <- run_tests")],
        feedback=[ev.FeedbackInfo(name="Deadline", kind="deadline", trigger="every 30s", next="at 14:13:04"),
                  ev.FeedbackInfo(name="AGENTS.md", kind="static", trigger="once when AGENTS.md appears",
                                  next="fired"),
                  ev.FeedbackInfo(name="stuck", kind="stuck", trigger="every 5 calls", next="after 3 more calls")],
        checker="plan",
        verdict=verdict if verdict is not None else "incomplete: 3 tasks left: Write digest.md, Check digest.md, "
                                                    "Record a note",
        completion_blocks=blocks, max_completion_blocks=5,
        deadline_at=FROZEN_NOW + timedelta(minutes=3), budget_tokens=1_000_000, tokens_used=tokens_used,
        confinement="bubblewrap", tools=["run_tests", "lint"])


def guarded_run() -> Log:
    """A turn with a denied write, two feedback blocks, a refused stop; a stuck detection; a status after."""
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent", context_window=128_000,
            context_window_source="job.toml", priced=True)
    status(log)
    log.add(ev.TurnStarted, turn=7, prompt_tokens_est=4200)
    args = json.dumps({"path": "report.md", "content": "# Report\n"})
    log.add(ev.AssistantMessage, turn=7, text="Writing the report.",
            tool_calls=[ev.ToolCallRecord(id="c1", name="write_file", arguments=args),
                        ev.ToolCallRecord(id="c2", name="job_complete", arguments=json.dumps({"summary": "done"}))])
    log.add(ev.ToolCalled, turn=7, call_id="c1", tool="write_file", arguments=args)
    log.add(ev.ToolDenied, turn=7, call_id="c1", tool="write_file", policy="read_before_write",
            reason="report.md exists and was not read first")
    log.add(ev.ToolResult, turn=7, call_id="c1", tool="write_file", ok=False,
            content="Denied by the read_before_write policy: report.md exists and was not read first")
    log.add(ev.ToolCalled, turn=7, call_id="c2", tool="job_complete", arguments=json.dumps({"summary": "done"}))
    log.add(ev.CompletionBlocked, reason="plan: 3 tasks left: Write digest.md, Check digest.md, Record a note",
            checker="plan", feedback="3 tasks left: Write digest.md, Check digest.md, Record a note",
            stop_reason="job_complete", blocks=1, max_blocks=5)
    log.add(ev.ToolResult, turn=7, call_id="c2", tool="job_complete", ok=False,
            content="[job_complete was refused: the job is not complete (plan).]")
    log.add(ev.Feedback, source="Deadline", severity="warning",
            message="The work so far took 5 minutes. You have 3 minutes remaining.",
            suggestions=["Prioritize completing critical remaining work."], call_index=12, turn=7,
            block=DEADLINE_BLOCK)
    log.add(ev.Feedback, source="AGENTS.md", severity="info",
            message="AGENTS.md detected. Follow the conventions defined within.",
            observations=["AGENTS.md appeared after call 11"], call_index=12, turn=7, block=AGENTS_BLOCK)
    log.add(ev.TokenUsage, turn=7, input_tokens=4100, output_tokens=120, context_window=128_000,
            context_tokens=4400, cost_usd=0.0141, job_cost_usd=0.4217)
    # The stuck detector is a feedback provider: its block and the stuck event come together.
    log.add(ev.Feedback, source="stuck", severity="caution", message="No todo completed in 6 turns.",
            observations=["pattern: read_file x4 on the same file"], call_index=16, turn=8, block="<feedback/>")
    log.add(ev.StuckDetected, reason="No todo completed in 6 turns.", pattern="pattern")
    status(log, tokens_used=612_000, blocks=1)
    return log


def spent_run() -> Log:
    """The budgets run out: the deadline passes and the completion check is bypassed."""
    log = guarded_run()
    log.add(ev.BudgetExhausted, budget="deadline", limit=480.0, used=481.0,
            detail="deadline passed: 8 minutes since the job started, deadline 8 minutes")
    log.add(ev.CompletionBypassed, budget="deadline", stop_reason="job_complete",
            detail="deadline passed: 8 minutes since the job started, deadline 8 minutes")
    return log


def mcp_run() -> Log:
    """The guarded run with two MCP servers: ``time`` ready (confined, three calls, one failed, one denied) and
    ``tracker`` unavailable (an optional server that did not start; escape sequences in its last words)."""
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent", context_window=128_000,
            context_window_source="job.toml", priced=True)
    log.add(ev.McpServerEvent, server="time", state="ready", required=True,
            tools=["mcp__time__get_current_time", "mcp__time__convert_time"],
            confined="bubblewrap 0.11.0 (bundled with agent-console)")
    log.add(ev.McpServerEvent, server="tracker", state="unavailable", tools=["mcp__tracker__search_issues"],
            why="MCP server tracker did not start: it exited before answering (its last words: no token "
                "\\x1b[2J)")
    status(log)
    now = "mcp__time__get_current_time"
    for n, (ok, content) in enumerate([(True, '{"timezone": "UTC"}'), (False, "Invalid arguments"),
                                       (True, '{"timezone": "Asia/Tokyo"}')]):
        log.add(ev.ToolCalled, turn=n + 1, call_id=f"m{n}", tool=now, arguments='{"timezone": "UTC"}')
        log.add(ev.ToolResult, turn=n + 1, call_id=f"m{n}", tool=now, ok=ok, content=content)
    log.add(ev.ToolCalled, turn=4, call_id="m9", tool=now, arguments="{}")
    log.add(ev.ToolDenied, turn=4, call_id="m9", tool=now, policy="tests_first", reason="run_tests first")
    log.add(ev.ToolResult, turn=4, call_id="m9", tool=now, ok=False, content="Denied by tests_first")
    return log
