"""The plan pane against a plan written to be expensive: many small blocks.

Textual's Markdown widget makes a widget or more of every block (four of a list item). Measured before the pane
drew long plans as one widget: 1,000 one-word steps (a 4 KB main_plan.md) took 12 s to lay out and most of a
second per key after; 15,000 (60 KB, under the pane's size limit) hung the console and grew it to 8 GB."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult

from console.tui.widgets.plan_pane import PLAN_MAX_BLOCKS, PlanPane, too_many_blocks

HEAD = "# Execution Plan\n\n## Phase 1: Steps ← CURRENT\n"


class PlanApp(App):
    def __init__(self, plan: Path) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        yield PlanPane(self.plan, id="plan")


def run(plan: Path, body: Any) -> None:
    async def main() -> None:
        app = PlanApp(plan)
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause()
            await body(pilot, app.query_one(PlanPane))

    asyncio.run(main())


def steps(n: int) -> str:
    return HEAD + "".join(f"- [ ] step {i}\n" for i in range(1, n + 1))


def test_a_plan_of_many_small_blocks_is_drawn_whole_as_one_widget(tmp_path: Path) -> None:
    path = tmp_path / "main_plan.md"
    path.write_text(steps(400), encoding="utf-8")  # ~800 blocks: over the widget's share, a tenth of the attack

    async def body(pilot: Any, plan: PlanPane) -> None:
        await plan.reload()
        await pilot.pause()
        assert plan.long.display and not plan.document.display
        assert len(plan.document.query("MarkdownBlock")) <= 1  # no widget per step
        lines = plan.plain_lines()
        assert "Phase 1: Steps ← CURRENT" in lines
        assert lines[-1].endswith("step 400")  # whole: the last step too, not cut
        marked = [plan.long_content.plain[s.start:s.end] for s in plan.long_content.spans
                  if str(s.style) == "bold reverse $text-accent"]
        assert marked == ["← CURRENT"]  # the phase marker stands out as in the Markdown widget
        # The agent shortens it again: back to the Markdown widget.
        path.write_text(steps(3), encoding="utf-8")
        await plan.reload()
        await pilot.pause()
        assert plan.document.display and not plan.long.display
        assert "step 3" in " ".join(plan.plain_lines()) and "step 400" not in " ".join(plan.plain_lines())

    run(path, body)


def test_a_real_plan_keeps_the_markdown_widget() -> None:
    # 20 phases of 10 steps, each with a line of notes: what a long honest plan looks like.
    plan = "# Execution Plan\n\n" + "".join(
        f"## Phase {p}: Part {p}\nWhy this phase comes here.\n" + "".join(f"- [ ] step {s}\n" for s in range(10))
        for p in range(1, 21))
    assert not too_many_blocks(plan)
    assert too_many_blocks(steps(PLAN_MAX_BLOCKS))  # a list item is two blocks (the item, its paragraph)
    assert too_many_blocks("| a |\n|---|\n" + "| x |\n" * PLAN_MAX_BLOCKS)  # a row and its cell


def test_a_plan_nested_past_the_parsers_limit_hides_nothing(tmp_path: Path) -> None:
    path = tmp_path / "main_plan.md"
    path.write_text(HEAD + "- [ ] step one\n\n" + ">" * 25 + " the hidden step\n\n## Phase 2: After\n",
                    encoding="utf-8")

    async def body(pilot: Any, plan: PlanPane) -> None:
        await plan.reload()
        await pilot.pause()
        text = " ".join(plan.plain_lines())
        assert "the hidden step" in text and "Phase 2: After" in text and "step one" in text

    run(path, body)
