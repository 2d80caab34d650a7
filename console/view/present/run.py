"""How the run's events read: its end, the job's outcome, operator commands, needs-you moments, recovery, errors,
launch settings and experiences."""

from __future__ import annotations

from console.engine import events as ev
from console.engine.job_files import one_line
from console.view.present.words import (
    END_SEVERITY,
    OUTCOME_SEVERITY,
    Presented,
    discarded_text,
    flat,
    need_label,
    run_ended_text,
)


def _run_ended(e: ev.RunEnded) -> Presented:
    severity = OUTCOME_SEVERITY.get(e.outcome or "", "") or END_SEVERITY.get(e.reason, "error")
    return Presented("■", "run-end", severity, run_ended_text(e), flat(e.detail, 0), "engine")


EXPERIENCE_SECTIONS = {"failed": "failed approach", "lesson": "lesson learned", "pattern": "pattern that works"}


def _experience(e: ev.ExperienceRecorded) -> Presented:
    """An entry of experiences.md: which section, who recorded it, its text (the agent's words: hostile)."""
    again = f" (seen {e.times} times)" if e.times > 1 else ""
    return Presented("✎", "experience", "caution" if e.section == "failed" else "info",
                     f"experience · {EXPERIENCE_SECTIONS.get(e.section, e.section)}{again}: {flat(e.text)}",
                     flat(e.where, 120), f"experiences · {one_line(e.source, 40)}")


def _launch(e: ev.LaunchSettings) -> Presented:
    """How this process runs the job: the settings it started with, and what a resume's flags changed."""
    restart = "auto-restart" if e.auto_restart else "restarts wait for approval"
    parts = [f"{one_line(e.provider, 40)}/{one_line(e.model, 80)}"]
    if e.base_url:
        parts.append(one_line(e.base_url, 120))
    if e.context_window:
        parts.append(f"window {e.context_window:,}")
    parts.append(restart)
    if e.unconfined:
        parts.append("UNCONFINED")
    if e.notify:
        parts.append("notify " + ", ".join(one_line(u, 80) for u in e.notify))
    head = "resumed with" if e.source == "resume" else "started with"
    changed = f"; changed at resume: {flat('; '.join(e.changes), 0)}" if e.changes else ""
    return Presented("⚙", "launch", "warning" if e.changes else "info", f"{head}: {', '.join(parts)}{changed}",
                     source="run")


def _operator(e: ev.OperatorCommand) -> Presented:
    source = one_line(e.source, 40)
    who = f"operator · {source}" if source else "operator"
    if e.status == "discarded":
        return Presented("⌘", "operator", "info", discarded_text(e), source=who)
    detail = f": {flat(e.detail, 0)}" if e.detail else ""
    text = f"{one_line(e.command.replace('_', ' '), 40)} {e.status}" + (f" ({source})" if source else "") + detail
    kind = "received" if e.status == "received" else "operator"
    return Presented("⌘", kind, "warning" if e.status == "rejected" else "info", text, source=who)


def _completed(e: ev.JobCompleted) -> Presented:
    if e.unmet:  # a free stop let it through: the agent's word, not the record's
        return Presented("✔", "done-unverified", "warning", f"job_complete accepted without a completion check "
                                                            f"(confidence {e.confidence:.2f}): {flat(e.summary, 0)}",
                         "the record shows work left: the run ends incomplete", "job",
                         lines=tuple(flat(x, 300) for x in e.unmet))
    return Presented("✔", "done", "success", f"job complete (confidence {e.confidence:.2f}): {flat(e.summary, 0)}",
                     source="job")


def _gave_up(e: ev.JobGaveUp) -> Presented:
    return Presented("⚐", "gave-up", "warning", f"the agent gave up (confidence {e.confidence:.2f}): "
                                                f"{flat(e.summary, 0)}", f"notes: {flat(e.notes, 0)}", "job",
                     lines=tuple(flat(x, 300) for x in e.unmet))


def _recovered(e: ev.StateRecovered) -> Presented:
    moved = f" (kept as {one_line(e.moved_to, 120)})" if e.moved_to else ""
    return Presented("‼", "recovered", "warning", f"recovered {one_line(e.file, 120)}: {flat(e.problem, 0)}{moved}",
                     flat(e.action, 0), "recovery")


def _error(e: ev.ErrorEvent) -> Presented:
    where = one_line(e.where, 40)
    return Presented("✗", "error", "error", f"error ({where}): {flat(e.message, 0)}" if where else
                     f"error: {flat(e.message, 0)}", source=f"error · {where}" if where else "error")


def _needs(e: ev.NeedsOperator) -> Presented:
    waits = ("the run is paused until you answer" if e.paused else
             "its call waits for your answer: agent-console answer (its --set for each field, --decline or --cancel), "
             "or the command palette's Answer question" if e.reason == "mcp_question" else "")
    return Presented("⚑", "needs-you", "warning", f"NEEDS YOU ({need_label(e.reason)}): {flat(e.message, 0)}",
                     waits, "needs",
                     lines=tuple(flat(x, 300) for x in e.evidence if x.strip()))


def _acknowledged(e: ev.RunAcknowledged) -> Presented:
    what = need_label(e.reason) if e.reason else "its end"
    by = f" (from the {flat(e.by, 40)})" if e.by.strip() in ("fleet", "console") else ""
    return Presented("✓", "acknowledged", "info", f"acknowledged by the operator ({what}){by}: it asks no more; "
                     "a resume goes on with it", source="operator")


def _needs_cleared(e: ev.NeedsOperatorCleared) -> Presented:
    by = f": {flat(e.by, 120)}" if e.by.strip() else ""
    return Presented("✓", "needs-cleared", "info", f"no longer needs you ({need_label(e.reason)}){by}",
                     source="needs")
