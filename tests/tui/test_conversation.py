"""The conversation pane on its own: notices in console.view.present's words, masked results marked from the
``context_masked`` event's call ids, an expanded call's text reflowed like its source, assistant Markdown through
markdown-it in the theme's colours, and the plan pane (Textual's Markdown widget) with its phase markers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.color import Color
from textual.content import Content

from console.engine import events as ev
from console.tui.themes import load_themes
from console.tui.widgets import markdown_lite
from console.tui.widgets.conversation import ConversationPane
from console.tui.widgets.conversation_items import AssistantItem, NoticeItem, ToolItem, reflow, render_tool, wrap
from console.tui.widgets.plan_pane import PlanPane
from console.view import present
from tests.tui.guardrail_events import Log, spent_run

KICKOFF = Path(__file__).resolve().parents[2] / "sample_jobs" / "quickstart" / "notes" / "2026-03-02-kickoff.md"


class PaneApp(App):
    def __init__(self, theme: str = "agent-dark", plan: Path | None = None) -> None:
        super().__init__()
        self.wanted_theme = theme
        self.plan = plan

    def compose(self) -> ComposeResult:
        yield ConversationPane(id="conversation")
        if self.plan is not None:
            yield PlanPane(self.plan, id="plan")

    def on_mount(self) -> None:
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = self.wanted_theme


def run(body: Callable[[Any], Awaitable[None]], size: tuple[int, int] = (100, 60), **kw: Any) -> None:
    async def main() -> None:
        app = PaneApp(**kw)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await body(pilot)

    asyncio.run(main())


def tool_run(results: int) -> Log:
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-4.1")
    for n in range(1, results + 1):
        args = json.dumps({"path": f"f{n}.md"})
        log.add(ev.AssistantMessage, turn=n, text=f"Reading f{n}.",
                tool_calls=[ev.ToolCallRecord(id=f"c{n}", name="read_file", arguments=args)])
        log.add(ev.ToolCalled, turn=n, call_id=f"c{n}", tool="read_file", arguments=args)
        log.add(ev.ToolResult, turn=n, call_id=f"c{n}", tool="read_file", ok=True, content="x" * (10 * n))
    return log


def tools_of(pane: ConversationPane) -> dict[str, ToolItem]:
    return {i.call_id: i for i in pane.items if isinstance(i, ToolItem)}


# -- masking -----------------------------------------------------------------------------------------------------
def test_masked_results_are_the_ones_the_event_names():
    """The engine's rule is not re-derived: a short result, and the newest one, are marked when the event names them,
    and an old long one is not when it does not."""

    async def body(pilot: Any) -> None:
        pane = pilot.app.query_one(ConversationPane)
        log = tool_run(4)
        log.add(ev.ContextMasked, masked=2, tokens_freed=90, used_before=900, used_after=810, prompt_budget=1000,
                call_ids=["c1", "c4"])
        pane.ingest(log.events)
        await pilot.pause()
        tools = tools_of(pane)
        assert [cid for cid, t in tools.items() if t.masked] == ["c1", "c4"]
        text = "\n".join(pane.plain_lines())
        assert "▸ read_file  f4.md  ✓ 40 chars  ⊘ masked" in text and "f2.md  ✓ 20 chars  ⊘" not in text
        # A call id the view no longer holds (trimmed, or from before the log) is no error.
        more = Log()
        more.add(ev.ContextMasked, masked=1, call_ids=["gone"], at=100)
        more.events[-1] = more.events[-1].model_copy(update={"seq": 500})
        pane.ingest(more.events)
        assert sum(t.masked for t in tools_of(pane).values()) == 2

    run(body)


# -- notices -----------------------------------------------------------------------------------------------------
def test_notices_are_the_shared_lines():
    async def body(pilot: Any) -> None:
        pane = pilot.app.query_one(ConversationPane)
        log = spent_run()
        log.add(ev.ModelRetry, turn=8, attempt=2, delay_s=8.0, cause="rate limited")
        log.add(ev.OperatorCommand, command="pause", source="cli", status="received")  # its outcome says it
        log.add(ev.OperatorCommand, command="pause", source="cli", status="applied")
        log.add(ev.SessionEnded, reason="context_full", turns=8)  # the restart that follows says it
        pane.ingest(log.events)
        await pilot.pause()
        notices = [i for i in pane.items if isinstance(i, NoticeItem)]
        lines = [p.line for e in log.events if (p := present.describe(e)) is not None]
        assert all(n.text in lines for n in notices)
        kinds = [n.kind for n in notices]
        assert kinds == ["session", "blocked", "feedback", "feedback", "feedback", "budget", "bypassed", "retry",
                         "operator"]
        # The denial is on its call's line, not a notice; the stuck event's feedback block said it.
        text = " ".join(" ".join(pane.plain_lines()).split())
        assert "▸ write_file report.md ⊗ denied by read_before_write: report.md exists" in text
        assert "⚠ stuck" not in text

    run(body)


def test_the_console_says_when_the_prompts_carry_no_working_memory():
    """Seed 003's requires_context = false (and file_index = true) in the session's notice, once per process."""

    async def body(pilot: Any) -> None:
        pane = pilot.app.query_one(ConversationPane)
        log = Log()
        log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-4.1", working_memory=False,
                file_index=True)
        log.add(ev.SessionStarted, reason="restart", provider="openai", model="gpt-4.1", working_memory=False,
                file_index=True)
        pane.ingest(log.events)
        await pilot.pause()
        text = " ".join(" ".join(pane.plain_lines()).split())
        assert text.count("working memory off (requires_context = false): the prompts carry no task history or "
                          "blockers") == 1
        assert text.count("file index on: the agent has find_files") == 1

    run(body)


def test_a_long_notice_hangs_under_its_text():
    async def body(pilot: Any) -> None:
        pane = pilot.app.query_one(ConversationPane)
        log = Log()
        log.add(ev.WindDown, usage_pct=0.9)
        pane.ingest(log.events)
        await pilot.pause()
        lines = [ln for ln in pane.plain_lines() if ln.strip()]
        assert lines[0].startswith("⚠ context 90% full: wind-down sent;") and len(lines) > 1
        assert all(ln.startswith("  ") and not ln.startswith("   ") for ln in lines[1:])

    run(body, size=(50, 20))


# -- an expanded call ---------------------------------------------------------------------------------------------
def test_reflow_joins_a_hard_wrapped_paragraph_and_keeps_structure():
    text = KICKOFF.read_text(encoding="utf-8")
    lines = reflow(text)
    assert "The team agreed to ship the invoice export feature by the end of April. Customers have asked for CSV and " \
           "PDF exports of their monthly invoices, and support spends about six hours a week producing them by hand. " \
           "The first release covers CSV only; PDF follows once the layout is approved." in lines
    assert sum(ln.startswith("ACTION:") for ln in lines) == 3  # lines the writer broke stay broken
    assert lines[0] == "# Kickoff meeting, 2 March" and "" in lines
    code = "```\n" + " ".join(["x = 1"] * 20) + "\nvalue\n```"
    assert reflow("A prose line that is long enough to wrap somewhere around here, it says.\n" + code)[1:] == \
        code.split("\n")
    listing = "\n".join(f"notes/some-rather-long-file-name-{n}.md ({n * 100} bytes)" for n in range(5))
    assert reflow(listing) == listing.split("\n")
    data = json.dumps({"a": "b " * 50}, indent=1)
    assert reflow(data) == data.split("\n")
    items = "- first item that is long enough to look like a wrapped line of prose, really\n- second"
    assert reflow(items) == items.split("\n")


def test_wrap_leaves_no_word_alone_on_the_last_line():
    content = Content("Wrote workspace_summary.md (24 lines). Read it to see the state.")
    assert [c.plain for c in content.wrap(60)][-1] == "state."  # what a plain wrap does
    assert [c.plain for c in wrap(content, 60)] == ["Wrote workspace_summary.md (24 lines). Read it to see",
                                                   "the state."]


def test_an_expanded_call_reads_like_its_source():
    text = KICKOFF.read_text(encoding="utf-8")
    item = ToolItem(call_id="c", tool="write_file", expanded=True, result="Created notes.md",
                    arguments=json.dumps({"path": "notes.md", "content": text}))
    lines = render_tool(item, 70).plain.split("\n")
    assert lines[:4] == ["▾ write_file  notes.md  ✓ 16 chars", "  arguments", "    path: notes.md", "    content:"]
    body = [ln for ln in lines[4:lines.index("  result")]]
    assert all(ln.startswith("      ") or not ln.strip() for ln in body) and all(len(ln) <= 70 for ln in body)
    assert "      # Kickoff meeting, 2 March" in body
    # Every paragraph line is full but the last: no stub of a word or two after each source line.
    para = body[body.index("      The team agreed to ship the invoice export feature by the end of"):]
    para = para[:para.index("      ")]
    assert len(para) == 5 and all(len(ln) >= 55 for ln in para[:-1])
    assert lines[-2:] == ["  result", "    Created notes.md"]
    item.result = None
    item.arguments = "not json"
    assert render_tool(item, 70).plain.split("\n")[1:] == ["  arguments", "    not json"]


# -- Markdown -----------------------------------------------------------------------------------------------------
MARKDOWN = """## Findings

Use `requirements.md` and **bold**, *italic*, ~~old~~ and [a link](http://x).

- a list item long enough to wrap under its own text rather than under the bullet mark
- second
  1. nested

> quoted

```python
def f():
    return 1
```

| name | n |
|------|---|
| a    | 1 |

<b>not html</b>
"""


def test_markdown_is_parsed_not_matched_and_styled_with_theme_variables():
    content = markdown_lite.render(MARKDOWN, 40)
    lines = content.plain.split("\n")
    assert lines[0] == "Findings"  # the heading, its marks gone
    assert "Use requirements.md and bold, italic, old and a link." in " ".join(lines)
    bullet = next(n for n, ln in enumerate(lines) if ln.startswith("• a list item"))
    assert lines[bullet + 1].startswith("  ") and not lines[bullet + 1].startswith("   ")  # hangs under the text
    assert "  1. nested" in lines and "▎ quoted" in lines and "  def f():" in lines and "      return 1" in lines
    assert "name │ n" in lines and "a    │ 1" in lines and "<b>not html</b>" in lines
    styles = {str(span.style) for span in content.spans}
    assert "bold" in styles and "italic" in styles and "strike" in styles and "underline" in styles
    for style in styles:  # colours only through the theme: no Rich default (bold cyan on black) in any theme
        assert all(word.startswith("$") or word in ("bold", "italic", "strike", "underline", "not", "reverse")
                   or word.rstrip("%").isdigit() for word in style.split()), style
    assert any(s.startswith("bold $markdown-h2-color") for s in styles) and markdown_lite.CODE in styles


def test_plain_text_skips_the_parser_and_renders_the_same():
    text = "Reading the notes now.\nThen the plan.\n\nA second paragraph (with brackets) and 2024 in it."
    assert markdown_lite._plain(text)
    fast = markdown_lite.render(text, 30).plain
    parsed = markdown_lite._Renderer(30).render(markdown_lite.parser().parse(text)).plain
    assert fast == parsed
    for syntax in ("- a", "1. a", "a *b*", "    code", "---", "# h", "a\n===", "`x`", "&amp;", "<b>"):
        assert not markdown_lite._plain(syntax), syntax


def test_the_light_theme_colours_inline_code_and_headings_from_its_palette():
    async def body(pilot: Any) -> None:
        app = pilot.app
        pane = app.query_one(ConversationPane)
        pane.ingest([ev.AssistantMessage(ts=Log().start, seq=1, session=1, turn=1, text="# Title\n\nRun `make`.")])
        pane.flush()
        await pilot.pause()
        item = next(i for i in pane.items if isinstance(i, AssistantItem))
        segments = [seg for strip in item.lines or [] for seg in strip]
        variables = app.get_css_variables()
        code = next(seg for seg in segments if seg.text == "make")
        title = next(seg for seg in segments if seg.text == "Title")
        assert code.style is not None and title.style is not None
        assert code.style.color is not None and Color.from_rich_color(code.style.color) == Color.parse(
            variables["text-accent"])
        assert title.style.bold and Color.from_rich_color(title.style.color) == Color.parse(
            variables["markdown-h1-color"])
        assert code.style.bgcolor is None or Color.from_rich_color(code.style.bgcolor) != Color.parse("black")

    run(body, theme="agent-light")


# -- the plan pane ------------------------------------------------------------------------------------------------
PLAN = """# Execution Plan

## Phase 1: Review Inputs ✓ COMPLETE
- [x] Read the notes

## Phase 2: Write ← CURRENT
- [ ] Write `digest.md`
"""


def test_the_plan_pane_is_a_markdown_document_with_its_markers_in_the_theme(tmp_path: Path):
    path = tmp_path / "main_plan.md"

    async def body(pilot: Any) -> None:
        plan = pilot.app.query_one(PlanPane)
        await plan.reload()
        await pilot.pause()
        assert "main_plan.md has not been written yet" in " ".join(plan.plain_lines()) and plan.reloads == 1
        path.write_text(PLAN, encoding="utf-8")
        await plan.reload()  # a plan_changed event, or the watcher's change, reloads it
        await pilot.pause()
        assert plan.text == PLAN and plan.reloads == 2 and plan.border_subtitle == "1/2 phases complete"
        lines = plan.plain_lines()
        assert "Phase 1: Review Inputs ✓ COMPLETE" in lines and "Phase 2: Write ← CURRENT" in lines
        styled = {}
        for block in plan.document.query("MarkdownBlock"):
            content = block.content
            if isinstance(content, Content):
                for span in content.spans:
                    styled[content.plain[span.start:span.end]] = str(span.style)
        assert styled["✓ COMPLETE"] == "bold $text-success" and styled["← CURRENT"] == "bold reverse $text-accent"
        await plan.reload()  # unchanged: nothing is redrawn
        assert plan.reloads == 2

    run(body, plan=path)
