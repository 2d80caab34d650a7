"""The Layer 2 todo list: exactly the text the agent sees (``todos_changed.display``).

Only the presentation changes: the box rules follow the pane's width, the title
box becomes the pane's title, the current task is highlighted and finished ones
are dimmed. The progress also goes in the pane's subtitle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from textual.content import Content
from textual.events import Resize
from textual.strip import Strip

from console.engine import events as ev
from console.engine.text import safe_text
from console.tui.widgets.lines import Item, ItemView
from console.view.state import phase_label

RULE_CHARS = set("═─")
ITEM = re.compile(r"^\[(?P<mark>[ x])\] (?P<rest>.*)$")
CURRENT = "← CURRENT"


def _is_rule(line: str) -> bool:
    return bool(line) and set(line.strip()) <= RULE_CHARS


def progress_bar(done: int, total: int, width: int = 10) -> str:
    if total <= 0:
        return ""
    filled = round(width * done / total)
    return "▰" * filled + "▱" * (width - filled)


def render_display(display: str, width: int) -> Content:
    """The Layer 2 text, with rules as wide as the pane and the current task highlighted."""
    lines = display.splitlines()
    # The title box (rule, "ACTIVE TODO LIST", rule) is the pane's title here.
    if len(lines) >= 3 and _is_rule(lines[0]) and _is_rule(lines[2]):
        lines = lines[3:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    if not lines:
        return Content.styled("Waiting for the first todo list…", "$text-muted italic")
    out: list[Content] = []
    for line in lines:
        if _is_rule(line):
            out.append(Content.styled(("═" if "═" in line else "─") * width, "$text-muted"))
            continue
        m = ITEM.match(line)
        if m:
            rest = m.group("rest")
            if m.group("mark") == "x":
                out.append(Content.assemble(("[x] ", "$text-success"), (rest, "$text-muted")))
            elif CURRENT in rest:
                text = rest.replace(CURRENT, "").rstrip()
                item = Content.assemble(("[ ] ", "bold"), (text, "bold"), ("  ← CURRENT", "bold $text-accent"))
                if width > 0 and any(line.plain.rstrip().endswith("←") for line in item.wrap(width)):
                    # The marker would be cut in two at the pane's edge ("←" / "CURRENT"): its own line instead.
                    item = Content.assemble(("[ ] ", "bold"), (text, "bold"), ("\n    ← CURRENT", "bold $text-accent"))
                out.append(item.stylize("on $accent 20%"))
            else:
                out.append(Content.assemble("[ ] ", rest))
        elif line.startswith("Phase:"):
            out.append(Content.styled(line, "bold $text-primary"))
        elif line.startswith("Progress:"):
            out.append(Content.styled(line, "bold"))
        elif line.startswith("INSTRUCTION:"):
            out.append(Content.styled(line, "italic $text-muted"))
        elif line.startswith("("):
            out.append(Content.styled(line, "$text-warning"))
        else:
            out.append(Content(line))
    return Content("\n").join(out)


@dataclass(eq=False)
class TodoItem(Item):
    display: str = ""
    width: int = 60

    def body(self) -> object:
        return render_display(self.display, self.width)


class TodoPane(ItemView):
    """Scrollable; keeps the current task in view."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        self.border_title = "Todo list · Layer 2"
        self.todos: ev.TodosChanged | None = None

    def render_item(self, item: Item, width: int) -> list[Strip]:
        if isinstance(item, TodoItem):
            item.width = width
        return super().render_item(item, width)

    def on_mount(self) -> None:
        super().on_mount()
        self.items = [TodoItem(display="")]
        self.relayout(0)

    def show(self, todos: ev.TodosChanged | None) -> None:
        self.todos = todos
        self.items = [TodoItem(display=safe_text(todos.display) if todos else "")]
        self.relayout(0)
        if todos is None:
            self.border_subtitle = ""
            return
        done = sum(1 for i in todos.items if i.done)
        total = len(todos.items)
        label = safe_text(phase_label(todos), one_line=True)
        # The phase's name is the agent's: a Content (text), never a string Textual would parse as markup.
        self.border_title = Content(f"Todo list · {label}" if label else "Todo list · Layer 2")
        self.border_subtitle = f"{done}/{total} {progress_bar(done, total)}" if total else ""
        self.call_after_refresh(self.keep_current_visible)

    def on_resize(self, event: Resize) -> None:
        super().on_resize(event)
        self.call_after_refresh(self.keep_current_visible)

    def keep_current_visible(self) -> None:
        """The top of the list when the current task fits below it, else the current task a third down."""
        lines = self.plain_lines()
        current = next((n for n, text in enumerate(lines) if CURRENT in text), 0)
        height = max(1, self.scrollable_content_region.height)
        target = 0 if current < height - 3 else current - height // 3
        self.scroll_to(y=target, animate=False, immediate=True)
