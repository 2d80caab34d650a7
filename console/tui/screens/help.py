"""Help: the keys as currently mapped, and what each pane shows."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from console.tui.host import ConsoleHost

PANES = [
    ("Todo list", "the Layer 2 list exactly as the agent sees it; the current task is highlighted"),
    ("main_plan.md", "the agent's plan, reloaded whenever the file changes on disk"),
    ("Token pressure", "next prompt size vs the window, soft (mask) and hard (wind-down) marks, trend, last action"),
    ("Feedback", "newest at the bottom: feedback providers' blocks as the agent got them (click one for the exact "
                 "<feedback> text), tool denials, refused stops, budgets, stuck detections, the engine's notices"),
    ("Conversation", "assistant text, tool calls (e expands the last, E all, click one), harness markers "
                     "(denied calls, refused stops, feedback delivered); follows the tail unless you scroll up "
                     "(end follows again)"),
    ("Experiences", "experiences.md: failed approaches, lessons learned, patterns that work (rewinds, stuck "
                    "detections, the agent's record_experience); drawn at the bottom right on a wide terminal, in "
                    "the plan's place while focused at 120 columns (tab to it), behind its tab at 80"),
    ("Guardrails (g)", "the latest guardrails status: policies, feedback providers and their next firing, the "
                       "completion verdict, refused stops, deadline and tokens left, command tools' confinement"),
]


class HelpScreen(ModalScreen[None]):
    # q closes it (it asks nothing; the run screen's q is one key away); Ctrl+C, the way out wherever the operator
    # is, closes it and asks the quit question (a modal screen takes none of the app's keys, its Ctrl+C included).
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", id="help_close"),
                Binding("ctrl+c", "quit_console", show=False, system=True)]

    def __init__(self, keys: list[tuple[str, str]], *, attached: bool = False) -> None:
        super().__init__(classes="modal")
        self.keys = keys
        self.attached = attached

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog") as box:
            box.border_title = "agent-console · help"
            box.border_subtitle = "esc closes"
            yield Static(Content.styled("Keys", "bold $text-primary"))
            yield Static(self._table(self.keys), classes="help-table")
            yield Static(Content.styled("Panes", "bold $text-primary"))
            yield Static(self._table(PANES), classes="help-table")
            yield Static(self._text(), id="message")

    @staticmethod
    def _table(rows: list[tuple[str, str]]) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_column(no_wrap=True, style="bold")
        table.add_column(ratio=1)
        for left, right in rows:
            table.add_row(left, right)
        return table

    def _text(self) -> Content:
        lines: list[Content] = []
        how = ("Attached: keys go through the job's control inbox; q detaches and the run goes on. On a run no "
               "process runs (interrupted, stopped) that has not completed, p resumes it (asks first; "
               "agent-console resume) and this console follows it."
               if self.attached else
               "Keys act at the agent's next turn boundary; the Feedback pane shows when each one is applied.")
        lines.append(Content.styled(how, "$text-muted"))
        lines.append(Content.styled("Remap keys in the config file's [keys] table, e.g. checkpoint = \"ctrl+k\". "
                                    "ctrl+p opens the command palette.", "$text-muted"))
        lines.append(Content.styled("A dialog takes no key in its first half second, and a letter typed into a field "
                                    "is text; a restart's approval waits until the question open is answered. q or "
                                    "ctrl+c in a question leaves it open and asks the quit question; deny asks first.",
                                    "$text-muted"))
        return Content("\n").join(lines)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_quit_console(self) -> None:
        self.dismiss(None)
        if isinstance(self.app, ConsoleHost):
            self.app.call_next(self.app.action_quit_console)
