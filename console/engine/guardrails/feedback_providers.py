"""Built-in feedback providers: the seed's Static and Deadline, and the stuck detector (seed 000/001).

The stuck detector follows OpenHands' stuck patterns (openhands/controller/stuck.py): the same call with the
same result again and again, the same error again and again, two calls alternating, plus the harness's own
"no todo completed for many turns". It is a feedback provider, not a gate: it tells the agent, which decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from console.engine.guardrails.budgets import format_duration
from console.engine.guardrails.feedback import (
    RECENT_CALLS,
    Feedback,
    FeedbackContext,
    Observation,
    Severity,
    ToolCallSummary,
)
from console.engine.job_files import one_line


class StaticFeedbackProvider:
    """A fixed message; with ``on_file_created``, one-time guidance when a file appears (seed 002)."""

    kind = "static"

    def __init__(self, feedback: str, name: str = "Static", severity: Severity = "info") -> None:
        self.feedback = feedback
        self.name = name
        self.severity: Severity = severity

    def should_run(self, context: FeedbackContext) -> bool:
        return True

    def provide(self, context: FeedbackContext) -> Feedback:
        return Feedback(provider_name=self.name, summary=self.feedback, severity=self.severity,
                        timestamp=context.now, call_index=context.tool_call_count)


class DeadlineFeedback:
    """Time left until the job's deadline; below ``warning_threshold_seconds`` it says to prioritize."""

    kind = "deadline"
    SUGGESTION = "Prioritize completing critical remaining work."
    PAST_SUGGESTION = "Stop starting new work: record what is done (todo_complete) and finish now."

    def __init__(self, warning_threshold_seconds: float = 120, name: str = "Deadline") -> None:
        self.warning_threshold_seconds = warning_threshold_seconds
        self.name = name

    def should_run(self, context: FeedbackContext) -> bool:
        return context.deadline is not None

    def provide(self, context: FeedbackContext) -> Feedback:
        deadline = context.deadline
        if deadline is None:  # should_run said no; answer sensibly anyway
            return Feedback(provider_name=self.name, summary="There is no deadline.", timestamp=context.now,
                            call_index=context.tool_call_count)
        remaining = deadline.remaining(context.now).total_seconds()
        elapsed = deadline.elapsed(context.now)
        took = f"The work so far took {format_duration(elapsed.total_seconds())}. " if elapsed is not None else ""
        if remaining <= 0:
            summary = f"{took}The deadline has passed ({format_duration(-remaining)} ago)."
            severity: Severity = "warning"
            suggestions: tuple[str, ...] = (self.PAST_SUGGESTION,)
        else:
            summary = f"{took}You have {format_duration(remaining)} remaining."
            below = remaining <= self.warning_threshold_seconds
            severity = "warning" if below else "info"
            suggestions = (self.SUGGESTION,) if below else ()
        return Feedback(provider_name=self.name, summary=summary, suggestions=suggestions, severity=severity,
                        timestamp=context.now, call_index=context.tool_call_count)


@dataclass(frozen=True)
class Detection:
    pattern: str  # "repeat" | "error" | "alternation" | "idle"
    description: str
    suggestion: str
    errors: tuple[str, ...] = ()  # each distinct failing call of the pattern and its error (call_error)


# The idle observation carries the episode it reports, so the detector can tell "the same idle stretch,
# already reported at this level" from "a new stretch" after a restore, with no state of its own.
# Anchored, bounded digits, no nested repetition: linear on any text.
_IDLE_RE = re.compile(r"idle: no todo completed in the last (\d{1,9}) turns \(since turn (\d{1,12})\)")
REWIND_SUGGESTION = ("If this approach is not working, call todo_rewind(issue) describing the problem, "
                     "and re-plan.")


def _pattern(fb: Feedback) -> str:
    """The pattern a stuck feedback reported ("repeat", "idle", ...), from its first observation."""
    return fb.observations[0].description.split(":", 1)[0] if fb.observations else ""


def _call_text(call: ToolCallSummary) -> str:
    args = call.arguments if len(call.arguments) <= 80 else call.arguments[:77] + "..."
    return f"{call.name}({args})"


CALL_ERROR_CHARS = 240
# A command's first line when it only says how it ended: its output's first line says why.
_BARE_STATUS = re.compile(r"exit code -?\d{1,6}")
_LINE_BREAK = "\\n"  # a line break as one_line shows it


def _own_words(call: ToolCallSummary) -> str:
    """The call's error without the "read_file failed: " the registry's failures begin with
    (console.engine.tools.registry): a line that names the call and says "failed" says it once."""
    return call.error.removeprefix(f"{call.name} failed: ")


def call_error(call: ToolCallSummary) -> str:
    """One failed call for the operator: ``check({}) failed: <the first line of its error>``, on one line, at
    most CALL_ERROR_CHARS. ``call.error`` is the result's start made one line (a line break shown as ``\\n``);
    a denial's reason is its whole first line. After a bare ``exit code N`` the output's first line follows."""
    first, _, rest = _own_words(call).partition(_LINE_BREAK)
    if _BARE_STATUS.fullmatch(first) and rest.strip():
        first = f"{first}: {rest.partition(_LINE_BREAK)[0]}"
    return one_line(f"{_call_text(call)} failed: {first or '(no message)'}", CALL_ERROR_CHARS)


def _errors(*calls: ToolCallSummary) -> tuple[str, ...]:
    """The distinct failing calls among ``calls`` (a pattern's representatives), each with its error."""
    seen: dict[str, None] = {}
    for call in calls:
        if not call.ok:
            seen.setdefault(call_error(call))
    return tuple(seen)


class StuckDetector:
    """OpenHands' stuck patterns over the recent tool calls, plus idle turns.

    Patterns (checked in this order; the first match is reported):

    - repeat: the same call (tool + arguments) with the same result ``repeat_threshold`` times in a row;
    - error: ``error_threshold`` failed calls in a row of the same tool with the same error;
    - alternation: over the last ``alternation_window`` calls, A, B, A, B, ... with A != B, each A and each B
      with the same result;
    - idle: no todo completed in ``idle_turns`` turns (0: off).

    Not nagging: a call pattern already reported inside the same run of calls is reported again only once
    it has grown by its threshold again (4, 8, 12 ... repeats); idle is reported once per multiple of
    ``idle_turns`` of the same idle stretch. Both are decided from the detector's last feedback (the
    runner's recorded state), so the detector has no state of its own and a resume behaves the same.
    Recommended trigger: every_n_calls=1 (looked at after every tool call).
    """

    kind = "stuck"

    def __init__(self, name: str = "Stuck", repeat_threshold: int = 4, error_threshold: int = 3,
                 alternation_window: int = 6, idle_turns: int = 30) -> None:
        for label, value, low in (("repeat_threshold", repeat_threshold, 2), ("error_threshold", error_threshold, 2),
                                  ("alternation_window", alternation_window, 4)):
            if not low <= value <= RECENT_CALLS:
                raise ValueError(f"{label} must be in [{low}, {RECENT_CALLS}]")
        if idle_turns < 0:
            raise ValueError("idle_turns must be 0 (off) or more")
        self.name = name
        self._found: tuple[FeedbackContext, Detection] | None = None  # see should_run
        self.repeat_threshold = repeat_threshold
        self.error_threshold = error_threshold
        self.alternation_window = alternation_window
        self.idle_turns = idle_turns

    # -- patterns --------------------------------------------------------------------------------------------
    @staticmethod
    def _run_length(calls: Sequence[ToolCallSummary],
                    same: Callable[[ToolCallSummary, ToolCallSummary], bool]) -> int:
        """How many calls at the end of ``calls`` satisfy ``same(call, last)``."""
        last = calls[-1]
        n = 0
        for call in reversed(calls):
            if not same(call, last):
                break
            n += 1
        return n

    @staticmethod
    def _alternation_length(calls: Sequence[ToolCallSummary]) -> int:
        """How many calls at the end alternate between two different outcomes A, B (0 if the last two agree)."""
        if len(calls) < 2 or calls[-1].same_outcome(calls[-2]):
            return 0
        n = 2
        while n < len(calls) and calls[-1 - n].same_outcome(calls[-1 - n + 2]):
            n += 1
        return n

    def _fresh(self, context: FeedbackContext, run: int, threshold: int) -> bool:
        """False if the detector already reported a call pattern inside this run of ``run`` calls and the run
        has not grown by ``threshold`` calls since. (Idle reports are about turns, not calls: ignored here.)"""
        last = next((fb for fb in reversed(context.recent_feedback(provider=self.name)) if _pattern(fb) != "idle"),
                    None)
        if last is None:
            latest = context.last_feedback_for_provider(self.name)  # older than the kept history
            last = latest if latest is not None and _pattern(latest) != "idle" else None
        if last is None:
            return True
        count = context.tool_call_count
        run_start = count - run + 1
        return last.call_index < run_start or count - last.call_index >= threshold

    def _idle(self, context: FeedbackContext) -> Detection | None:
        idle, turns = self.idle_turns, context.turns_without_progress
        if not idle or turns < idle:
            return None
        since = context.turn - turns
        level = turns // idle
        # Looked at after every tool call: the report of this stretch may have left the short history (other
        # providers' blocks since), so the detector's own last feedback is looked at too.
        # Their observations' descriptions as recorded, not each record made a Feedback (two frozen dataclasses a
        # record, after every call of an idle stretch: a tenth of such a turn's instructions, turn_cost.py).
        for description in context.observed_by(self.name):
            match = _IDLE_RE.match(description)
            if match and int(match.group(2)) == since and int(match.group(1)) // idle >= level:
                return None  # this stretch was already reported at this level
        return Detection(
            "idle", f"idle: no todo completed in the last {turns} turns (since turn {since})",
            "Finish the current todo and call todo_complete, or, if it is blocked, call todo_rewind(issue) "
            "to re-plan.")

    def detect(self, context: FeedbackContext) -> Detection | None:
        calls = context.recent_tool_calls(RECENT_CALLS)
        if calls:
            last = calls[-1]
            run = self._run_length(calls, ToolCallSummary.same_outcome)
            if run >= self.repeat_threshold and self._fresh(context, run, self.repeat_threshold):
                return Detection(
                    "repeat", f"repeat: {_call_text(last)} returned the same result {run} times in a row",
                    f"Stop calling {last.name} with these arguments: the result will not change. "
                    "Use what it returned, or try a different approach.", _errors(last))
            if not last.ok:
                errors = self._run_length(
                    calls, lambda c, x: not c.ok and c.name == x.name and c.result_digest == x.result_digest)
                if errors >= self.error_threshold and self._fresh(context, errors, self.error_threshold):
                    return Detection(
                        "error", f"error: {last.name} failed {errors} times in a row with the same error: "
                        f"{_own_words(last)[:120]}",
                        f"Read the error: calling {last.name} the same way will fail again. "
                        "Change the arguments or try a different approach.", _errors(last))
            alternation = self._alternation_length(calls)
            if alternation >= self.alternation_window and self._fresh(context, alternation,
                                                                       self.alternation_window):
                a, b = calls[-2], calls[-1]
                return Detection(
                    "alternation", f"alternation: the last {alternation} calls alternate between "
                    f"{_call_text(a)} and {_call_text(b)} with the same results",
                    "You are going back and forth without progress: decide on a next step that is neither.",
                    _errors(a, b))
        return self._idle(context)

    # -- provider --------------------------------------------------------------------------------------------
    def should_run(self, context: FeedbackContext) -> bool:
        found = self.detect(context)
        # provide() is asked next, with the same context (FeedbackRunner.collect): what was found is handed on, not
        # looked for again. Kept for that context only (a later collect has its own), so never state of a run.
        self._found = (context, found) if found is not None else None
        return found is not None

    def provide(self, context: FeedbackContext) -> Feedback:
        kept, self._found = self._found, None
        found = kept[1] if kept is not None and kept[0] is context else self.detect(context)
        if found is None:  # should_run said no; answer sensibly anyway
            return Feedback(provider_name=self.name, summary="No stuck pattern detected.", timestamp=context.now,
                            call_index=context.tool_call_count)
        return Feedback(
            provider_name=self.name,
            summary="You appear to be stuck: the recent work repeats without progress.",
            observations=(Observation("pattern", found.description),),
            suggestions=(found.suggestion, REWIND_SUGGESTION),
            severity="warning", timestamp=context.now, call_index=context.tool_call_count, evidence=found.errors)
