"""The status line: job, session, phase, provider/model, elapsed, tokens and cost, and the run's state.

It fits what it can: parts have priorities and the least important drop first on
a narrow terminal. Cost is "n/a": the console keeps no price table (prices change
and differ per account), so it shows token counts, which are exact.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from textual.content import Content
from textual.widget import Widget

from console.tui.format import clip, elapsed, tokens
from console.tui.state import ConsoleState

STATUS_STYLE = {
    "running": "bold $text-success",
    "starting": "$text-muted",
    "paused": "bold reverse $text-warning",
    "restart pending": "bold reverse $text-warning",
    "stopping": "bold $text-warning",
    "completed": "bold reverse $text-success",
    "stopped": "bold $text-warning",
    "failed": "bold reverse $text-error",
}


class StatusLine(Widget):
    DEFAULT_CSS = "StatusLine { height: 1; }"

    def __init__(self, state: ConsoleState, now: Callable[[], datetime], *, attached: bool = False,
                 **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.state = state
        self.now = now
        self.attached = attached
        self.runner_pid: int | None = None
        self.last_plain = ""

    def parts(self) -> list[tuple[int, Content]]:
        """(priority, content) in display order; lower priority numbers are kept longer."""
        st = self.state
        out: list[tuple[int, Content]] = []
        out.append((0, Content.styled(st.job_title or "job", "bold $text-primary")))
        status = st.status
        badge = f" {status} "
        if self.attached and not st.ended:
            badge = f" {status} · pid {self.runner_pid} " if self.runner_pid else " not running (review) "
        elif self.attached:
            badge = f" {status} · review "
        out.append((0, Content.styled(badge, STATUS_STYLE.get(status, "bold"))))
        if status == "paused" and not st.requested:
            out.append((1, Content.styled("p resumes", "$text-warning")))
        for what in st.requested.values():
            out.append((1, Content.styled(f"{what}…", "italic $text-warning")))
        if st.session:
            out.append((2, Content(f"session {st.session}")))
        if st.phase:
            out.append((3, Content(clip(st.phase, 34))))
        if st.turn:
            out.append((6, Content(f"turn {st.turn}")))
        if st.provider or st.model:
            out.append((7, Content.styled(f"{st.provider}/{st.model}".strip("/"), "$text-muted")))
        end = st.ended_at if st.ended else self.now()
        out.append((4, Content(f"⏱ {elapsed(st.run_started, end)}")))
        tok = f"{tokens(st.input_tokens)} in"
        if st.cached_tokens:
            tok += f" ({tokens(st.cached_tokens)} cached)"
        tok += f" · {tokens(st.output_tokens)} out"
        out.append((5, Content(tok)))
        out.append((8, Content.styled("cost n/a", "$text-muted")))
        return out

    def render(self) -> Content:
        width = self.size.width or 80
        parts = self.parts()
        sep = Content.styled(" │ ", "$text-muted")
        chosen: set[int] = set()
        used = 0
        for idx in sorted(range(len(parts)), key=lambda i: (parts[i][0], i)):
            need = parts[idx][1].cell_length + (3 if chosen else 0)
            if used + need <= width:
                chosen.add(idx)
                used += need
        shown = [parts[i][1] for i in range(len(parts)) if i in chosen]
        line = sep.join(shown)
        self.last_plain = line.plain
        return line
