"""experiences.md in the console: seed 000's three sections, as the run recorded them.

Folded from ``experience_recorded`` events (console.view.state), so an attached console and a resumed run show
the same entries as the file. Each entry says who recorded it (the agent, a rewind, the operator's rewind, the
stuck detector) and where the run was; the text is the agent's: it arrives made safe by the fold and is drawn
as text (Content), never parsed as markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.content import Content

from console.tui.widgets.lines import Item, ItemView
from console.view.state import ExperienceItem

SECTIONS = (("failed", "Failed Approaches", "$text-error"), ("lesson", "Lessons Learned", "$text-primary"),
            ("pattern", "Patterns That Work", "$text-success"))
EMPTY = "No experiences yet: rewinds, stuck patterns and the agent's record_experience calls land here."


def render_entries(entries: list[ExperienceItem]) -> Content:
    if not entries:
        return Content.styled(EMPTY, "$text-muted italic")
    out: list[Content] = []
    for key, title, style in SECTIONS:
        mine = [e for e in entries if e.section == key]
        if not mine:
            continue
        if out:
            out.append(Content(""))
        out.append(Content.styled(f"{title} ({len(mine)})", f"bold {style}"))
        for e in reversed(mine):  # newest first: what the agent was last told
            again = f" ×{e.times}" if e.times > 1 else ""
            out.append(Content.assemble(("• ", style), e.text))
            meta = " · ".join(x for x in (e.source + again, e.where) if x)
            out.append(Content.styled(f"  {meta}", "$text-muted"))
    return Content("\n").join(out)


@dataclass(eq=False)
class ExperiencesItem(Item):
    entries: list[ExperienceItem] = field(default_factory=list)

    def body(self) -> object:
        return render_entries(self.entries)

    def estimate(self, width: int) -> int:
        return max(1, 2 * len(self.entries) + 6)


class ExperiencesPane(ItemView):
    """Scrollable; the newest entries of each section first."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        self.border_title = "Experiences · experiences.md"
        self.entries: list[ExperienceItem] = []

    def on_mount(self) -> None:
        super().on_mount()
        self.items = [ExperiencesItem()]
        self.relayout(0)

    def show(self, entries: list[ExperienceItem]) -> None:
        self.entries = entries
        self.items = [ExperiencesItem(entries=list(entries))]
        self.relayout(0)
        counts = {key: sum(1 for e in entries if e.section == key) for key, _, _ in SECTIONS}
        n_lesson, n_pattern = counts["lesson"], counts["pattern"]
        self.border_subtitle = (f"{counts['failed']} failed · {n_lesson} lesson{'s' if n_lesson != 1 else ''} · "
                                f"{n_pattern} pattern{'s' if n_pattern != 1 else ''}") if entries else ""
