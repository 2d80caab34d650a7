"""What the conversation pane shows, item by item: an assistant message, the model's reasoning, a tool call (one
line, expandable to its arguments and result) and a notice in :mod:`console.view.present`'s words; how each is
measured and drawn as Content (text Textual never parses as markup). The pane itself
(:mod:`console.tui.widgets.conversation`) turns events into these items and keeps them."""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content

from console.engine.text import safe_text
from console.tui.widgets import markdown_lite
from console.tui.widgets.lines import Item, hang
from console.view import present
from console.view.format import clip

RESULT_PREVIEW = 4000
ARGS_PREVIEW = 1500
THINKING_PREVIEW = 1200  # the most of a turn's reasoning shown (its tail while it streams, its start after)
INDENT = 2  # an expanded call's labels, under its line; their text another INDENT further

# A notice's style: by its kind where the kind has its own, else by its severity.
SEVERITY_STYLE = {
    "info": "$text-muted",
    "caution": "$text-warning",
    "warning": "bold $text-warning",
    "error": "$text-error",
    "success": "bold $text-success",
}
KIND_STYLE = {
    "session": "bold $text-primary",
    "restart": "bold $text-warning",
    "restart-pending": "bold $text-warning",
    "restart-approved": "bold $text-warning",
    "wind-down": "bold $text-warning",
    "masked": "$text-warning",
    "compacted": "$text-secondary",
    "phase": "bold $text-accent",
    "blocked": "bold $text-warning",
    "budget": "bold $text-warning",
    "retry": "$text-warning",
}
FEEDBACK_STYLE = {"info": "$text-primary", "caution": "$text-warning", "warning": "bold $text-warning",
                  "error": "bold $text-error"}
RULED = frozenset({"restart", "restart-pending"})  # a heavy rule above and below: the context starts over


def notice_style(kind: str, severity: str) -> str:
    if kind == "feedback":
        return FEEDBACK_STYLE.get(severity, "$text-primary")
    if kind == "operator" and severity == "info":
        return "$text-secondary"
    return KIND_STYLE.get(kind) or SEVERITY_STYLE.get(severity, "")


# -- items: what the view knows about each message ---------------------------------------------------
@dataclass(eq=False)
class AssistantItem(Item):
    session: int = 0
    turn: int = 0
    text: str = ""
    final: bool = False
    width: int = 0  # set by the pane before rendering: lists and quotes wrap under their own text

    def __post_init__(self) -> None:
        self.gutter, self.margin = "▌ ", True

    def body(self) -> object:
        self.gutter_style = "$primary" if self.final else "$accent"
        return markdown_lite.render(self.text.strip() or "…", self.width)

    def estimate(self, width: int) -> int:
        return _text_lines(self.text, width)


@dataclass(eq=False)
class ThinkingItem(Item):
    """The model's reasoning for a turn (reasoning_content, thinking): dimmed and italic, apart from the answer."""

    session: int = 0
    turn: int = 0
    text: str = ""
    final: bool = False

    def __post_init__(self) -> None:
        self.gutter, self.margin = "┊ ", True
        self.gutter_style = "$text-muted"

    def shown(self) -> str:
        text = self.text.strip()
        if len(text) <= THINKING_PREVIEW:
            return text
        more = len(text) - THINKING_PREVIEW
        if not self.final:  # what it is thinking now
            return f"… {text[-THINKING_PREVIEW:]}"
        return f"{text[:THINKING_PREVIEW]} … ({more:,} more chars in .console/events.jsonl)"

    def body(self) -> object:
        return Content.assemble(("thinking ", "bold"), self.shown() or "…").stylize("italic $text-muted")

    def estimate(self, width: int) -> int:
        return _text_lines("thinking " + self.shown(), width)


@dataclass(eq=False)
class ToolItem(Item):
    call_id: str = ""
    tool: str = ""
    arguments: str = ""
    result: str | None = None
    ok: bool = True
    denied: str = ""  # "<policy>: <reason>"
    policy_error: str = ""
    refused: str = ""  # a job_complete the completion checker refused ("1 of 5")
    masked: bool = False
    expanded: bool = False
    width: int = 0  # set by the pane before rendering: the expanded text wraps to it

    def __post_init__(self) -> None:
        self.gutter = "   "

    def body(self) -> object:
        return render_tool(self, self.width)

    def estimate(self, width: int) -> int:
        if self.denied and not self.expanded:
            return _text_lines(render_tool(self).plain, width)
        if not self.expanded:
            return 1 if width >= 110 else _text_lines(self.tool + present.tool_args(self.tool, self.arguments)
                                                       + "  ✓ 12,345 chars", width)
        return _text_lines(render_tool(self).plain, width)


@dataclass(eq=False)
class NoticeItem(Item):
    """One event in console.view.present's words: an icon, the text, styled by its kind and severity."""

    icon: str = ""
    text: str = ""
    kind: str = "info"
    severity: str = "info"
    width: int = 0  # set by the pane before rendering: wrapped lines hang under the text, not the icon

    def __post_init__(self) -> None:
        self.margin = True
        self.rules = "$warning" if self.kind in RULED else ""

    def body(self) -> object:
        style = notice_style(self.kind, self.severity)
        head = Content.styled(f"{self.icon} ", f"bold {style}")
        text = Content.styled(self.text, style)
        if not self.width:
            return head + text
        return Content("\n").join(hang(head, text, self.width))

    def estimate(self, width: int) -> int:
        return _text_lines(f"{self.icon} {self.text}", width)


def _text_lines(text: str, width: int) -> int:
    width = max(1, width)
    return sum(max(1, -(-len(line) // width)) for line in (text or " ").split("\n"))


# -- an expanded call: its arguments and result as their text reads ----------------------------------------------
STRUCTURE = ("#", "- ", "* ", "+ ", "> ", "|", "```", "~~~")


def _structural(line: str) -> bool:
    """A line that starts something of its own (a heading, a list item, a table row, a fence)."""
    head = line.lstrip()
    if head.startswith(STRUCTURE):
        return True
    digits = len(head) - len(head.lstrip("0123456789"))
    return bool(digits) and head[digits:digits + 2] in (". ", ") ")


def reflow(text: str) -> list[str]:
    """``text``'s lines, with the lines of a hard-wrapped paragraph joined again, so that they wrap to the pane
    as the source text reads rather than as a long line and a stub, a long line and a stub.

    A line continues the prose line before it when the first word of it would not have fitted on that one at the
    width the text was wrapped at (about its longest line): the break was the wrap, not the writer's. Headings,
    list items, table rows, indented lines, code fences and what they enclose, and lines that are not prose (a
    listing, a CSV row: few spaces) keep their own lines.
    """
    lines = text.split("\n")
    wrapped_at = max((len(ln.rstrip()) for ln in lines if len(ln) <= 160), default=0)
    body = text.strip()
    if wrapped_at < 60 or body[:1] + body[-1:] in ("{}", "[]"):  # short lines, or JSON: as they are
        return lines
    out: list[str] = []
    prev = ""  # the previous source line (not what it was joined into)
    fenced = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        before = prev.rstrip()
        joins = (out and before and stripped and not fenced and not _structural(line) and not line[:1].isspace()
                 and not before.lstrip().startswith(("#", "|", "```", "~~~"))
                 and not before.endswith(("{", "}", ";", ":")) and before.count(" ") >= 4
                 and len(before) + 1 + len(stripped.split(" ", 1)[0]) > 0.95 * wrapped_at)
        if joins:
            out[-1] = out[-1].rstrip() + " " + stripped
        else:
            out.append(line.rstrip())
        prev = line
    return out


def wrap(content: Content, room: int) -> list[Content]:
    """``content`` wrapped to ``room`` cells without leaving one word alone on its last line (when a narrower wrap
    with as many lines avoids it)."""
    pieces = content.wrap(room) or [Content("")]
    if len(pieces) < 2 or " " in pieces[-1].plain.strip() or " " not in pieces[-2].plain.strip():
        return pieces
    for narrower in range(room - 1, max(10, room * 3 // 4), -1):
        again = content.wrap(narrower)
        if len(again) > len(pieces):
            break
        if " " in again[-1].plain.strip():
            return again
    return pieces


def _text_block(text: str, width: int, indent: int, style: str = "") -> list[Content]:
    """``text`` reflowed, each line wrapped to ``width`` at ``indent`` (its wrapped parts at the same indent)."""
    pad = Content(" " * indent)
    room = width - indent
    out: list[Content] = []
    for line in reflow(text.rstrip()):
        content = Content.styled(line, style) if style else Content(line)
        pieces = wrap(content, room) if width and room >= 20 else [content]
        out.extend(pad + piece for piece in pieces)
    return out


def _label(text: str) -> Content:
    return Content(" " * INDENT) + Content.styled(text, "bold $text-muted")


def render_tool(it: ToolItem, width: int = 0) -> Content:
    arrow = "▾" if it.expanded else "▸"
    args = present.tool_args(it.tool, it.arguments)
    tool = safe_text(it.tool, one_line=True, limit=120)  # one line, whatever the model named it
    parts: list[str | tuple[str, str]] = [(f"{arrow} ", "$text-muted"), (tool, "bold $text-secondary")]
    if args:
        parts += ["  ", (args, "$text-muted")]
    if it.denied:
        policy, _, reason = it.denied.partition(": ")
        parts += ["  ", (f"⊗ denied by {policy}:", "bold $text-warning"), " ",
                  (clip(reason, 100 if not it.expanded else 400), "$text-warning")]
    elif it.refused:
        count = f" ({it.refused})" if it.refused != "yes" else ""
        parts += ["  ", (f"↩ refused{count}: the job is not complete", "bold $text-warning")]
    elif it.result is None:
        parts += ["  ", ("…", "$text-muted")]
    elif it.ok:
        parts += ["  ", (f"✓ {len(it.result):,} chars", "$text-success")]
    else:
        first = it.result.strip().splitlines()[0] if it.result.strip() else "failed"
        parts += ["  ", (f"✗ {clip(first, 70)}", "$text-error")]
    if it.masked:
        parts += ["  ", ("⊘ masked", "bold $text-warning")]
    head = Content.assemble(*parts)
    if it.masked:
        head = head.stylize("italic")
    if not it.expanded:
        return head
    body: list[Content] = [head]
    items = present.argument_items(it.arguments)
    if items:
        body.append(_label("arguments"))
        left = ARGS_PREVIEW
        for key, value in items:
            if left <= 0:
                body.append(Content(" " * 2 * INDENT) + Content.styled("… (more arguments in .console/events.jsonl)",
                                                                       "$text-muted"))
                break
            shown = value if len(value) <= left else value[:left] + f"\n… ({len(value) - left:,} more chars)"
            left -= len(shown)
            if key and "\n" not in shown and len(key) + 2 + len(shown) <= max(20, width - 2 * INDENT):
                body.append(Content(" " * 2 * INDENT) + Content.assemble((f"{key}: ", "$text-muted"), shown))
                continue
            if key:
                body.append(Content(" " * 2 * INDENT) + Content.styled(f"{key}:", "$text-muted"))
            body += _text_block(shown, width, 3 * INDENT if key else 2 * INDENT)
    if it.denied:
        body.append(_label("not run") + Content(f": the {it.denied.partition(': ')[0]} policy refused it; the agent "
                                                "got the reason as the call's error result"))
        if it.policy_error:
            body.append(_label("the policy failed") + Content(f": {it.policy_error}"))
    if it.result is not None:
        result = it.result
        if len(result) > RESULT_PREVIEW:
            result = result[:RESULT_PREVIEW] + (f"\n… ({len(it.result) - RESULT_PREVIEW:,} more chars; the whole "
                                                "result is in .console/events.jsonl)")
        body.append(_label("result (masked: the agent now sees a placeholder)" if it.masked else "result"))
        body += _text_block(result, width, 2 * INDENT)
    return Content("\n").join(body)


# -- the view ------------------------------------------------------------------------------------------------
