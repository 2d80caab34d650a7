"""The guardrails view (``g``): what guards the run now, from the latest ``guardrails_status`` event.

Budgets (the deadline counting down on the console's clock, the token budget left, the money spent of its
budget), the completion checker
with its current verdict and the refused stops used, the tool policies (with the calls each denied), the
feedback providers with their trigger and next firing (with what each delivered), and the job's command tools
with their confinement. Everything comes from the event fold, so an attached console shows the same.

Wide terminals show two columns; narrow ones one column that scrolls.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, Static

from console.engine.text import safe_text
from console.tui.widgets.lines import hang
from console.view import present
from console.view.format import clip, clock_time, span, tokens
from console.view.state import ConsoleState, GuardrailsState

WIDE = 150  # two columns from this width
NAME_WIDTH = 22
BAR = 20

Lines = list[Content]


def _row(label: str, value: Content | str, width: int, label_width: int = 10) -> Lines:
    value = value if isinstance(value, Content) else Content(value)
    return hang(Content.styled(label.ljust(label_width) + " ", "$text-muted"), value, width)


def _none(text: str = "none") -> Content:
    return Content.styled(text, "$text-muted")


def _bar(share: float, style: str) -> Content:
    filled = round(max(0.0, min(1.0, share)) * BAR)
    return Content.assemble(("█" * filled, style), ("░" * (BAR - filled), "$text-muted"))


def deadline_line(g: GuardrailsState, now: datetime, ended_at: datetime | None = None) -> Content:
    """The deadline, counting down on the console's clock; ``ended_at``: the run has ended (then), and the deadline
    is told as it stood at its end, never counted further."""
    st = g.status
    at = st.deadline_at if st is not None else None
    if at is None:
        return _none()
    when = Content.styled(f"at {clock_time(at)}", "$text-muted")
    if ended_at is not None:
        left = (at - ended_at).total_seconds()
        stood = f"{span(left)} left when the run ended" if left > 0 else \
            f"passed {span(-left)} before the run ended" if left < 0 else "reached as the run ended"
        return Content.assemble((stood, "$text-muted"), " · ", when)
    left = (at - now).total_seconds()
    if left <= 0 or "deadline" in g.exhausted:
        ago = f"passed {span(-left)} ago" if left < 0 else "passed"
        return Content.assemble((ago, "bold reverse $text-error"), " · ", when,
                                (" · the agent was told to wrap up", "$text-muted") if "deadline" in g.exhausted
                                and g.exhausted["deadline"].wrap_up else "")
    style = "bold $text-error" if left < 120 else "bold $text-warning" if left < 600 else "bold $text-success"
    return Content.assemble((f"{span(left)} left", style), " · ", when)


def tokens_line(g: GuardrailsState) -> Content:
    st = g.status
    if st is None or not st.budget_tokens:
        spent = f" ({tokens(st.tokens_used)} used)" if st is not None and st.tokens_used else ""
        return Content.assemble(_none(), (spent, "$text-muted"))
    budget, used = st.budget_tokens, st.tokens_used
    left = max(0, budget - used)
    share = left / budget
    style = "$text-error" if share < 0.10 or "tokens" in g.exhausted else "$text-warning" if share < 0.25 \
        else "$text-success"
    # The bar is a fuel gauge: what is filled is what is left.
    return Content.assemble((f"{tokens(left)} left ({share:.0%})", f"bold {style}"), " of ", tokens(budget), "  ",
                            _bar(share, style.replace("text-", "")), (f"  {tokens(used)} used", "$text-muted"))


def cost_line(g: GuardrailsState, job_cost: float | None, priced: bool | None) -> Content:
    """Money: what the job cost so far, of its ``budget_usd`` when one is set."""
    st = g.status
    budget = st.budget_usd if st is not None else None
    used = job_cost if job_cost is not None else st.cost_usd if st is not None else None
    if priced is False and not used:
        unknown = Content.styled("not counted: no price is known for the model", "$text-muted")
        if budget:
            return Content.assemble((f"budget {present.cost(budget)} can never be reached", "bold $text-warning"),
                                    " · ", unknown)
        return unknown
    if not budget:
        return Content.assemble(_none(), (f" ({present.cost(used)} spent)" if used else "", "$text-muted"))
    used = used or 0.0
    share = max(0.0, budget - used) / budget
    style = "$text-error" if share < 0.10 or "cost" in g.exhausted else "$text-warning" if share < 0.25 \
        else "$text-success"
    return Content.assemble((f"{present.cost(max(0.0, budget - used))} left ({share:.0%})", f"bold {style}"),
                            " of ", present.cost(budget), "  ", _bar(share, style.replace("text-", "")),
                            (f"  {present.cost(used)} spent", "$text-muted"))


def budgets_lines(g: GuardrailsState, now: datetime, width: int, job_cost: float | None = None,
                  priced: bool | None = None, ended: datetime | None = None, fleet_hold: str = "") -> Lines:
    """The run's own budgets; and ``fleet_hold``, the message of the fleet's daily budget holding it (the run's
    own cost budget may be "none" while the fleet's, or its job's, holds it: the screen said only "Cost none")."""
    rows = [*_row("Deadline", deadline_line(g, now, ended), width), *_row("Tokens", tokens_line(g), width),
            *_row("Cost", cost_line(g, job_cost, priced), width)]
    if fleet_hold:
        held = safe_text(fleet_hold, one_line=True, limit=300)
        rows += _row("Fleet", Content.assemble(("HELD ", "bold $text-error"), held), width)
    return rows


def completion_lines(g: GuardrailsState, width: int) -> Lines:
    st = g.status
    checker = st.checker if st is not None else ""
    out = _row("Checker", Content.styled(checker, "bold") if checker else _none(), width)
    verdict = st.verdict if st is not None else ""
    if verdict == "complete":
        shown = Content.styled("complete", "bold $text-success")
    elif verdict.startswith("incomplete"):
        head, _, rest = verdict.partition(":")
        shown = Content.assemble((head, "bold $text-warning"), (f":{rest}" if rest else "", ""))
    else:
        shown = _none(verdict or "unknown")
    out += _row("Verdict", shown, width)
    blocks, most = (st.completion_blocks, st.max_completion_blocks) if st is not None else (0, 0)
    last = g.last_blocked
    if last is not None and last.max_blocks and (st is None or last.seq > st.seq):
        blocks, most = last.blocks, last.max_blocks
    if most:
        style = "bold $text-error" if blocks >= most else "bold $text-warning" if blocks else "$text-success"
        refused = Content.assemble((f"{blocks} of {most}", style), " refused stops used")
        if last is not None:
            refused = refused + Content.styled(f" · last {clock_time(last.ts)}", "$text-muted")
        out += _row("Stops", refused, width)
    if g.bypassed is not None:
        b = g.bypassed
        out += _row("Bypassed", Content.styled(f"{clock_time(b.ts)}: the {b.budget} budget is spent, "
                                               f"{b.stop_reason or 'a stop'} accepted unchecked", "$text-warning"),
                    width)
    return out


def _name(name: str, width: int) -> Content:
    return Content.styled(clip(name, width).ljust(width) + "  ", "bold")


def _dot() -> Content:
    return Content.styled(" · ", "$text-muted")


def policies_lines(g: GuardrailsState, width: int) -> Lines:
    st = g.status
    policies = st.policies if st is not None else []
    if not policies:
        return [_none("no tool policies: every call goes through")]
    name_w = min(NAME_WIDTH, max(len(p.name) for p in policies))
    out: Lines = []
    for p in policies:
        parts: list[Content] = []
        if p.kind and p.kind != p.name:
            parts.append(Content.styled(p.kind, "$text-secondary"))
        denied = g.denials.get(p.name, 0)
        parts.append(Content.styled(f"denied {denied}", "bold $text-warning") if denied
                     else Content.styled("nothing denied", "$text-muted"))
        out += hang(_name(p.name, name_w), _dot().join(parts), width)
        if p.detail:
            out += hang(Content(" " * (name_w + 2)), Content.styled(p.detail, "$text-muted"), width)
    return out


def feedback_lines(g: GuardrailsState, width: int, ended: bool = False) -> Lines:
    """The feedback providers; ``ended``: the run has ended, so none fires again (no next time is shown)."""
    st = g.status
    providers = st.feedback if st is not None else []
    listed = {f.name for f in providers}
    unlisted = sorted(set(g.delivered) - listed)  # e.g. a provider the status does not list (yet)
    if not providers and not unlisted:
        return [_none("no feedback providers")]
    name_w = min(NAME_WIDTH, max(len(n) for n in [*listed, *unlisted]))
    out: Lines = []
    for f in providers:
        parts = [Content.styled(f.kind, "$text-secondary")] if f.kind and f.kind != f.name.lower() else []
        parts.append(Content(f.trigger or "no trigger"))
        if f.next == "fired":
            parts.append(Content.styled("fired (once only)", "$text-muted"))
        elif ended:
            parts.append(Content.styled("fires no more: the run has ended", "$text-muted"))
        else:
            parts.append(Content.assemble(("next ", "$text-muted"), (f.next or "?", "$text-accent")))
        out += hang(_name(f.name, name_w), _dot().join(parts), width)
        tally = g.delivered.get(f.name)
        if tally is not None and tally.last_ts is not None:
            out += hang(Content(" " * (name_w + 2)), Content.styled(
                f"delivered {tally.count}, last {clock_time(tally.last_ts)} ({tally.last_severity})", "$text-muted"),
                width)
    for name in unlisted:
        tally = g.delivered[name]
        out += hang(_name(name, name_w), Content.styled(f"delivered {tally.count}", "$text-muted"), width)
    return out


def tools_lines(g: GuardrailsState, width: int) -> Lines:
    st = g.status
    if st is None or (not st.tools and not st.confinement):
        return [_none("no command tools")]
    conf = st.confinement or "?"
    unconfined = conf.startswith(("none", "UNCONFINED", "refused"))
    sandbox = Content.assemble(("sandbox ", "$text-muted"),
                               (conf, "bold reverse $text-warning" if unconfined else "bold $text-success"))
    tools = Content(", ".join(st.tools)) if st.tools else _none("no tools")
    out = hang(Content(""), tools + _dot() + sandbox, width)
    if g.sandbox is not None and g.sandbox.text:  # the run's header: what a command sees, its bounds
        out += hang(Content(""), Content.styled(present.flat(g.sandbox.text, 0), "$text-muted"), width)
    return out


MCP_STYLE = {"ready": "bold $text-success", "restarted": "bold $text-warning",
             "unavailable": "bold reverse $text-error", "starting": "$text-muted"}


def mcp_lines(g: GuardrailsState, width: int, ended: bool = False) -> Lines:
    """Each MCP server of the run (from its mcp_server events): its state, tools, calls and errors, confinement,
    and why its state last changed; ``ended``: the run has ended, and its servers with it (a "ready" would be
    untrue: the state they ended in is said as such)."""
    if not g.mcp:
        return [_none("no MCP servers")]
    name_w = min(NAME_WIDTH, max(len(n) for n in g.mcp))
    out: Lines = []
    for name, tally in g.mcp.items():
        e = tally.last
        unconfined = e.confined.startswith("UNCONFINED")
        calls = Content.assemble((f"{tally.calls} call{'s' if tally.calls != 1 else ''}", ""),
                                 (f", {tally.errors} failed", "bold $text-warning") if tally.errors else "")
        state = Content.styled(e.state, MCP_STYLE.get(e.state, "bold"))
        if ended:
            state = Content.assemble(("ended with the run", "$text-muted"), " (", state, ")")
        parts = [state,
                 Content.styled("required", "$text-secondary") if e.required else None, calls,
                 Content.styled(present.mcp_confinement(e),
                                "bold reverse $text-warning" if unconfined else
                                "bold $text-success" if e.confined else "$text-muted"),
                 Content.styled(present.mcp_may(e), "$text-accent") if e.may else None]
        out += hang(_name(name, name_w), _dot().join(p for p in parts if p is not None), width)
        indent = Content(" " * (name_w + 2))
        # Styled: a line of plain text would lose its indent in the box.
        out += hang(indent, Content.styled(present.mcp_tools_text(e), "$text"), width)
        if e.why:
            out += hang(indent, Content.styled(present.flat(e.why, 0), "$text-muted"), width)
    return out


def title_line(state: ConsoleState, now: datetime) -> Content:
    g = state.guards
    parts: list[Content] = [Content.styled(state.job_title or "job", "bold $text-primary"),
                            Content.styled(" Guardrails ", "bold reverse $text-primary")]
    if g.status is not None:
        parts.append(Content.styled(f"status of {clock_time(g.status.ts)} (session {g.status.session})",
                                    "$text-muted"))
    else:
        parts.append(Content.styled("no guardrails status yet (the engine reports one when a run starts)",
                                    "italic $text-muted"))
    ended = ended_at(state)
    if ended is not None:  # nothing counts down any more: said, rather than a clock that runs on
        parts.append(Content.styled(f"the run ended at {clock_time(ended)}", "bold $text-warning"))
    else:
        parts.append(Content.styled(f"now {clock_time(now)}", "$text-muted"))
    return Content.styled(" │ ", "$text-muted").join(parts)


SECTIONS: list[tuple[str, str]] = [
    ("g-budgets", "Budgets"),
    ("g-completion", "Task completion"),
    ("g-tools", "Command tools"),
    ("g-mcp", "MCP servers"),
    ("g-policies", "Tool policies"),
    ("g-feedback", "Feedback providers"),
]


def ended_at(state: ConsoleState) -> datetime | None:
    """When the run ended (None: it has not)."""
    if not state.ended:
        return None
    return state.ended_at or state.last_ts


def section_lines(state: ConsoleState, now: datetime, widths: dict[str, int] | None = None) -> dict[str, Lines]:
    g = state.guards
    w = (widths or {}).get
    ended = ended_at(state)
    return {
        "g-budgets": budgets_lines(g, now, w("g-budgets", 200), state.job_cost, state.priced, ended,
                                   state.needs.message if state.needs is not None
                                   and state.needs.reason == "fleet_budget" else ""),
        "g-completion": completion_lines(g, w("g-completion", 200)),
        "g-tools": tools_lines(g, w("g-tools", 200)),
        "g-mcp": mcp_lines(g, w("g-mcp", 200), ended=state.ended),
        "g-policies": policies_lines(g, w("g-policies", 200)),
        "g-feedback": feedback_lines(g, w("g-feedback", 200), ended=state.ended),
    }


def section_titles(state: ConsoleState) -> dict[str, str]:
    st = state.guards.status
    counts = {"g-policies": len(st.policies), "g-feedback": len(st.feedback), "g-tools": len(st.tools)} if st else {}
    counts["g-mcp"] = len(state.guards.mcp)
    return {sid: f"{title} · {counts[sid]}" if counts.get(sid) else title for sid, title in SECTIONS}


def plain_text(state: ConsoleState, now: datetime, width: int = 200) -> str:
    """The view as text, section by section (for tests)."""
    lines = section_lines(state, now, dict.fromkeys((sid for sid, _ in SECTIONS), width))
    titles = section_titles(state)
    out = [line.plain.rstrip() for line in title_line(state, now).wrap(width)]
    for sid, _title in SECTIONS:
        if sid == "g-mcp" and not state.guards.mcp:
            continue
        out.append(f"[{titles[sid]}]")
        out.extend(c.plain.rstrip() for c in lines[sid])
    return "\n".join(out)


class GuardrailsScreen(Screen[None]):
    BINDINGS = [Binding("escape,g,q", "close", "Close", id="guardrails_close")]
    DEFAULT_CSS = """
    GuardrailsScreen { layout: vertical; }
    GuardrailsScreen #g-title { height: auto; background: $panel; padding: 0 1; }
    GuardrailsScreen #g-body { height: 1fr; }
    GuardrailsScreen.-wide #g-body { layout: horizontal; }
    GuardrailsScreen .g-col { height: auto; width: 1fr; }
    GuardrailsScreen .g-section {
        height: auto;
        border: none;
        border-top: solid $border-blurred;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
    }
    GuardrailsScreen.-wide #g-left { margin-right: 1; }
    GuardrailsScreen.-wide .g-section {
        border: round $border-blurred;
        margin: 0 0 1 0;
    }
    """

    def __init__(self, state: ConsoleState, now: Callable[[], datetime]) -> None:
        super().__init__(id="guardrails")
        self.state = state
        self.now = now

    def compose(self) -> ComposeResult:
        yield Static(id="g-title")
        with VerticalScroll(id="g-body"):
            with Vertical(id="g-left", classes="g-col"):
                for sid, title in SECTIONS[:4]:
                    yield self._section(sid, title)
            with Vertical(id="g-right", classes="g-col"):
                for sid, title in SECTIONS[4:]:
                    yield self._section(sid, title)
        yield Footer(compact=True)

    @staticmethod
    def _section(sid: str, title: str) -> Static:
        box = Static(id=sid, classes="g-section")
        box.border_title = title
        return box

    def on_mount(self) -> None:
        self.set_class(self.size.width >= WIDE, "-wide")
        self.update_view()
        self.set_interval(1.0, self.update_view)  # the deadline counts down

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width >= WIDE, "-wide")
        self.call_after_refresh(self.update_view)  # wrapped to the new widths

    def _width(self, box: Static) -> int:
        """The section's text width: laid out, or estimated from the screen before the first layout."""
        if box.content_region.width:
            return box.content_region.width
        columns = 2 if self.has_class("-wide") else 1
        return max(20, (self.size.width or 80) // columns - 6)

    def update_view(self) -> None:
        if not self.is_attached or not self.children:
            return
        now = self.now()
        self.query_one("#g-title", Static).update(title_line(self.state, now))
        boxes = {sid: self.query_one(f"#{sid}", Static) for sid, _ in SECTIONS}
        lines = section_lines(self.state, now, {sid: self._width(box) for sid, box in boxes.items()})
        titles = section_titles(self.state)
        for sid, box in boxes.items():
            box.update(Content("\n").join(lines[sid]))
            box.border_title = titles[sid]
        boxes["g-mcp"].display = bool(self.state.guards.mcp)  # shown for a run that has MCP servers

    @property
    def text(self) -> str:
        return plain_text(self.state, self.now())

    def action_close(self) -> None:
        self.dismiss(None)
