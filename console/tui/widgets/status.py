"""The status line: the run, its state, phase, context pressure and cost first; then session, elapsed, tokens,
turn and provider/model, as the width allows.

It fits what it can: parts have priorities and the least important drop first on a narrow terminal; it never
overflows. Cost is the whole job's, from the model's prices; when the price is unknown it is left out (the
feedback pane says so once), never "n/a". While the engine waits to retry a failed model call, the state says
so with a countdown ("waiting: rate limited, retry in 32 s"). A run that needs its operator says so at every
width, with why: "NEEDS YOU: stuck".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from textual.content import Content
from textual.widget import Widget

from console.engine.text import safe_text
from console.view import present
from console.view.format import clip, elapsed, tokens
from console.view.liveness import PROCESS_GONE, run_liveness
from console.view.state import ConsoleState

STATUS_STYLE = {
    "running": "bold $text-success",
    "starting": "$text-muted",
    "waiting": "bold reverse $text-warning",
    "paused": "bold reverse $text-warning",
    "restart pending": "bold reverse $text-warning",
    "needs you": "bold reverse $text-warning",
    "stopping": "bold $text-warning",
    "completed": "bold reverse $text-success",
    "stopped": "bold $text-warning",
    "interrupted": "bold $text-warning",
    "incomplete": "bold $text-warning",
    "gave up": "bold reverse $text-warning",
    "failed": "bold reverse $text-error",
}
TITLE_MAX = 28  # a long job name must leave room for the state
SEP = " │ "


@dataclass(frozen=True)
class Part:
    priority: int  # lower is kept longer
    content: Content
    shrink_to: int = 0  # > 0: may be cut (with an ellipsis) down to this many cells rather than dropped
    short: Content | None = None  # a shorter form, shown when the whole one does not fit

    @property
    def least(self) -> int:
        full = self.content.cell_length
        if self.short is not None:
            return min(full, self.short.cell_length)
        return min(full, self.shrink_to) if self.shrink_to else full

    def shown(self, cells: int) -> Content:
        if cells >= self.content.cell_length:
            return self.content
        if self.short is not None:
            return self.short
        return self.content.truncate(cells, ellipsis=True)


CORE = 4  # the run, its state, a pending command, the phase, context and cost: shown first, cut to fit if need be


def fit(parts: list[Part], width: int) -> Content:
    """The parts that fit in ``width`` cells, in display order; the line never overflows.

    The core parts (priority up to ``CORE``) go in first, each counted at its smallest (cut, or its short form);
    any other part only when everything more important fits whole with it. Then the room left goes back to the
    cut parts, most important first (a part with a short form takes its whole form only if it fits)."""
    sep = Content.styled(SEP, "$text-muted")
    order = sorted(range(len(parts)), key=lambda i: (parts[i].priority, i))
    chosen: list[int] = []
    least = whole = 0  # cells taken with the chosen parts at their smallest / whole
    for idx in order:
        part = parts[idx]
        gap = len(SEP) if chosen else 0
        full = part.content.cell_length
        if whole + gap + full <= width or (part.priority <= CORE and least + gap + part.least <= width):
            chosen.append(idx)
            least += gap + part.least
            whole += gap + full
    given = {i: parts[i].least for i in chosen}
    used = least
    for idx in chosen:  # most important first
        more = min(parts[idx].content.cell_length - given[idx], width - used)
        if more > 0 and (parts[idx].short is None or given[idx] + more >= parts[idx].content.cell_length):
            given[idx] += more
            used += more
    return sep.join([parts[i].shown(given[i]) for i in sorted(chosen)])


# An attached run no process runs (ended, or not started again): what the console shows is its record. (It said
# "review", which nothing explained.)
READ_ONLY = "read-only"
READ_ONLY_TIP = ("read-only: no process runs this job now; the console shows its record, and keys that command a run "
                 "(pause, checkpoint, stop...) have nothing to act on until it is resumed")


class StatusLine(Widget):
    DEFAULT_CSS = "StatusLine { height: 1; }"

    def __init__(self, state: ConsoleState, now: Callable[[], datetime], *, attached: bool = False,
                 run_id: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.run_id = run_id
        self.state = state
        self.now = now
        self.attached = attached
        self.runner_pid: int | None = None
        self.runner_host = ""  # a run of another machine: which one (its pid is that machine's)
        self.store_problem: str | None = None  # a run followed from a shared store that cannot be read now
        self.runner_known = False  # the run lock was asked at least once (until then nothing is said about it)
        self.resume_hint = ""  # a run no process runs that this console can start again: the key that does
        self.last_plain = ""

    def state_badge(self, short: bool = False) -> str:
        """The state as shown (`` running ``); ``short``: a shorter form for a narrow line, "" if there is none."""
        st = self.state
        status = st.status
        if status == "waiting" and st.retry is not None:
            left = (st.retry.ts - self.now()).total_seconds() + st.retry.delay_s
            status = present.retry_badge(st.retry, left, short=short)
        elif status == "needs you" and st.needs is not None:
            status = f"NEEDS YOU: {st.needs.label}"
            if short:
                return f" {status} "  # said at every width, whatever else gives way
        elif short:
            # A run whose process is gone: its state at every width; why, where there is room.
            return f" {self._gone_state()} " if self.gone else ""
        if self.attached and not st.ended:
            if self.runner_host and self.runner_pid:  # its pid is the other machine's: the machine says more
                return f" {status} · on {safe_text(self.runner_host, one_line=True)} "  # a store row's: any text
            if self.runner_pid:
                return f" {status} · pid {self.runner_pid} "
            if self.gone:  # no process: the engine's word for it, as `jobs` and the fleet say, and why
                return f" {self._gone_state()} · {PROCESS_GONE} "
            return f" not running ({READ_ONLY}) " if self.runner_known else f" {status} "  # (never started)
        if self.attached:
            return f" {status} · {READ_ONLY} "
        return f" {status} "

    def _gone_state(self) -> str:
        """The state of an attached run that no process runs and whose end is not logged (its process died)."""
        st = self.state
        live = run_liveness(st, None)
        if live.kind == "needs" and st.needs is not None:
            return f"NEEDS YOU: {st.needs.label}"
        return live.state

    @property
    def gone(self) -> bool:
        """Attached to a run whose process is gone without logging its end."""
        st = self.state
        return self.attached and self.runner_known and not self.runner_pid and not st.ended and st.session > 0

    def parts(self) -> list[Part]:
        """The parts in display order; lower priority numbers are kept longer."""
        st = self.state
        out: list[Part] = []
        if self.run_id:
            out.append(Part(0, Content.styled(self.run_id, "bold")))
        out.append(Part(1, Content.styled(clip(st.job_title or "job", TITLE_MAX), "bold $text-primary"), 12))
        status = run_liveness(st, None).state if self.gone else st.status
        style = STATUS_STYLE.get(status, "bold")
        short = self.state_badge(short=True)
        out.append(Part(0, Content.styled(self.state_badge(), style),
                        short=Content.styled(short, style) if short else None))
        if self.store_problem:  # what is shown may be behind the run: said at every width
            style = "bold reverse $text-error"
            problem = safe_text(self.store_problem, one_line=True)  # a server's words may quote what it was sent
            out.append(Part(0, Content.styled(f" STORE AWAY: {problem}; retrying ", style),
                            short=Content.styled(" STORE AWAY ", style)))
        sandbox = st.guards.sandbox
        if sandbox is not None and sandbox.mode != "confined":
            # Said at every width: the job's commands run without a sandbox, or are refused for want of one.
            word, style = (("UNCONFINED", "bold reverse $text-error") if sandbox.mode == "unconfined"
                           else ("commands refused: no sandbox", "bold $text-warning"))
            out.append(Part(0 if sandbox.mode == "unconfined" else 2, Content.styled(f" {word} ", style)))
        if (status == "paused" or (status == "needs you" and st.paused)) and not st.requested:
            out.append(Part(1, Content.styled("p resumes", "$text-warning")))
        if self.resume_hint:  # said by the state when there is room (the footer's key says it at every width)
            out.append(Part(5, Content.styled(self.resume_hint, "$text-warning")))
        if st.ended and not self.attached:
            out.append(Part(1, Content.styled("q quits", "$text-muted")))  # said here, not in a toast over the text
        for what in st.requested.values():
            out.append(Part(1, Content.styled(f"{what}…", "italic $text-warning")))
        if st.session:
            out.append(Part(5, Content(f"session {st.session}")))
        if st.phase:
            out.append(Part(2, Content(clip(st.phase, 34)), 14))
        if st.turn:
            out.append(Part(8, Content(f"turn {st.turn}")))
        g = st.gauge
        if g.limit:
            style = "$text-error" if g.pct >= g.hard else "$text-warning" if g.pct >= g.soft else ""
            out.append(Part(3, Content.assemble("ctx ", (present.fill(g.pct), style))))
        if st.job_cost is not None:
            out.append(Part(4, Content(present.cost(st.job_cost))))
        end = st.ended_at if st.ended else self.now()
        out.append(Part(6, Content(f"⏱ {elapsed(st.run_started, end)}")))
        tok = f"{tokens(st.input_tokens)} in"
        if st.cached_tokens:
            tok += f" ({tokens(st.cached_tokens)} cached)"
        tok += f" · {tokens(st.output_tokens)} out"
        out.append(Part(7, Content(tok)))
        if st.provider == "scripted":
            # Nobody should take the offline model's output for a real model's: said early, at every width.
            out.append(Part(4, Content.styled(present.DEMO, "italic $text-warning"),
                            short=Content.styled("demo, no AI", "italic $text-warning")))
        elif st.provider or st.model:
            out.append(Part(9, Content.styled(f"{st.provider}/{st.model}".strip("/"), "$text-muted")))
        return out

    def render(self) -> Content:
        line = fit(self.parts(), self.size.width or 80)
        self.last_plain = line.plain
        # The word in the line, explained where the operator points at it (its tooltip).
        tip = READ_ONLY_TIP if f"{READ_ONLY})" in line.plain or f"· {READ_ONLY}" in line.plain else None
        if self.tooltip != tip:
            self.tooltip = tip
        return line
