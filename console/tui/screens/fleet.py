"""The fleet view: every run of the jobs store, live, most urgent first.

A row per run: id, job, state, phase, context, cost, elapsed, and (from 100 columns) the last event. The
selected run's folder, state detail and last event are under the list at every width, so 80x24 loses
nothing but the column. A run that needs its operator ("needs you": a restart to approve, stuck, a budget
reached...) is listed first and highlighted, with why and since when; ``enter`` attaches to the selected run,
``a`` / ``d`` approve or deny its restart (when that is what it waits for), ``s`` stops it, ``r`` resumes it (a
paused run unpauses; a stopped, interrupted or failed one starts again in the background with the settings it was
started with), ``k`` acknowledges a run that gave up, crashed or failed (it asks no more;
``r`` still resumes it), ``x`` forgets a run whose folder is gone, ``/`` filters; the footer offers each of these
only while it applies to the selected run (:mod:`console.view.fleet_offers` decides it from the row's facts). The
app polls the store and hands the screen its rows; the screen's parts act on them: its actions
(:mod:`console.tui.screens.fleet_actions`: ask before anything that ends, starts or forgets a run, then act) and
its bell (:mod:`console.tui.screens.fleet_bell`: a run that needs its operator anew rings). Each is given only what it
needs (the store, a function to show a run's console...), never the app.

A run's folder name, its job's name, its state and its last event may hold anything (a name with ``[/]`` or an
escape sequence in it): each cell and line shows them through :func:`console.engine.text.safe_text`, as Rich
``Text`` or Textual ``Content``, never as markup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.content import Content
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from console.engine.text import safe_text
from console.tui.notices import retract
from console.tui.screens.fleet_actions import FleetActions, FleetStore, Hands
from console.tui.screens.fleet_bell import NeedsBell
from console.view.fleet import GONE, LIVE, FleetRow, Listed, matches
from console.view.fleet_offers import PALETTE, ROW_ACTIONS, applies, offered
from console.view.format import cost, fill, run_today, today_line

if TYPE_CHECKING:
    from console.tui.screens.dialog import Dialog
    from console.tui.screens.run import Run  # imported when a run is attached (the fleet's first frame never is)

T = TypeVar("T")  # a question's answer (_ask)

# The row fields each column shows (a cell is redrawn only when one of them changed).
CELL_FIELDS = {"id": ("id",), "job": ("job",), "state": ("state", "kind", "sandbox", "needs"), "phase": ("phase",),
               "ctx": ("ctx",), "cost": ("cost",), "elapsed": ("elapsed",),
               "last": ("last", "needs", "needs_message", "needs_since")}
PATCH_ROWS = 30  # more changed rows than this: the list is rebuilt (cheaper than hundreds of cell updates)
NARROW = 100  # under this many columns the last event is shown under the list only
COLUMNS = [("id", "id", 5), ("job", "job", 16), ("state", "state", 20), ("phase", "phase", 5), ("ctx", "ctx", 4),
           ("cost", "cost", 7), ("elapsed", "elapsed", 8)]


def cell_text(text: object) -> str:
    """A row's text as a cell or a line shows it: one line, safe for the terminal."""
    return safe_text(str(text), one_line=True)


# The widgets a redraw of the rows updates: all of them there, or no redraw.
PARTS = ("#runs", "#fleet-title", "#fleet-empty", "#fleet-detail")


class FleetScreen(Screen[None]):
    AUTO_FOCUS = "#runs"
    BINDINGS = [
        Binding("enter", "attach", "Attach", id="fleet_attach"),
        Binding("a", "approve", "Approve", id="fleet_approve"),
        Binding("d", "deny", "Deny", id="fleet_deny"),
        Binding("s", "stop", "Stop", id="fleet_stop"),
        Binding("p", "pause", "Pause", id="fleet_pause"),  # shown while the selected run is at work
        Binding("r", "resume", "Resume", id="fleet_resume"),  # shown while the selected run can be resumed
        Binding("k", "acknowledge", "Ack", id="fleet_acknowledge"),  # shown while a run that gave up is selected
        Binding("x", "forget", "Forget", id="fleet_forget"),  # shown while a gone run is selected
        Binding("slash", "filter", "Filter", key_display="/", id="fleet_filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("q", "app.quit_console", "Quit", id="fleet_quit"),
    ]

    class Act(Message):
        """The operator asked for ``action`` (attach | approve | deny | stop | pause | resume | acknowledge | forget)
        on the run ``row``."""

        def __init__(self, action: str, row: FleetRow) -> None:
            super().__init__()
            self.action = action
            self.row = row

    class Shown(Message):
        """The list is shown again (a run's console, or a dialog over it, closed)."""

    def __init__(self, rows: Listed | None, error: str, *, store: FleetStore, show_run: Callable[[Run], None],
                 run_on_top: Callable[[], Path | None], rung: dict[Path, int]) -> None:
        """``rows``: what the first frame lists (the store's rows, before any log is read). The parts' needs:
        ``store``: the jobs store listed; ``show_run``: push a run's console (q comes back); ``run_on_top``: the
        folder of the run whose console is on top (None: none is); ``rung``: the needs the bell rang for, per run
        (shared with the runs' consoles)."""
        super().__init__(id="fleet")
        self.actions = FleetActions(store, Hands(ask=self._ask, notify=self._notify, show_run=show_run,
                                                 in_thread=self._in_thread, from_thread=self._from_thread))
        self.needs = NeedsBell(rung, bell=self._bell, notify=self._notify, retract=self._retract,
                               run_on_top=run_on_top)
        self.rows: list[FleetRow] = rows if rows is not None else Listed(folded=False)
        self.shown: list[FleetRow] = []
        self.filter_text = ""
        self.error = error
        self.wide: bool | None = None
        self._style_cache: tuple[str, dict[str, Style]] = ("", {})
        self._shown_text: dict[str, Content] = {}
        self._keys_for: tuple[bool, ...] = ()  # which of ROW_ACTIONS the footer offers for the selected run

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-title")
        yield Input(placeholder="filter: id, job, state or event words (esc clears)", id="fleet-filter")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=False)
        yield Static(id="fleet-empty")
        yield Static(id="fleet-detail")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#fleet-filter").display = False
        self._set_columns(self.size.width)
        self._refresh_rows(mounting=True)  # the first frame lists the rows the screen was made with

    def on_screen_resume(self) -> None:
        self.post_message(self.Shown())

    # -- the parts' hands (late-bound: the screen meets its app when it is pushed) ----------------------------
    def _ask(self, dialog: Dialog[T], done: Callable[[T | None], None]) -> None:
        self.app.push_screen(dialog, done)

    def _notify(self, message: str, **kw: Any) -> None:
        self.app.notify(message, **kw)

    def _in_thread(self, work: Callable[[], None], group: str) -> None:
        self.app.run_worker(work, thread=True, exit_on_error=False, group=group)

    def _from_thread(self, callback: Callable[..., Any], *args: Any, **kw: Any) -> None:
        self.app.call_from_thread(callback, *args, **kw)

    def _bell(self) -> None:
        self.app.bell()

    def _retract(self, title: str) -> None:
        retract(self.app, title)

    def on_fleet_screen_shown(self, message: FleetScreen.Shown) -> None:
        message.stop()
        self.needs.list_back()

    def on_fleet_screen_act(self, message: FleetScreen.Act) -> None:
        message.stop()
        self.actions.act(message.action, message.row)

    def on_resize(self, event: Resize) -> None:
        if self._set_columns(event.size.width):
            self._fill_rows(keep=self.selected)
        self._show_detail()

    # -- what is shown --------------------------------------------------------------------------
    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#runs", DataTable)

    @property
    def selected(self) -> FleetRow | None:
        table = self.table
        if not self.shown or table.cursor_row < 0 or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def update_rows(self, rows: list[FleetRow], error: str = "") -> None:
        """New rows from the app's poll (the same list object is never handed twice)."""
        # Until every log is folded (the first paint is the store's rows alone, then the logs are read a slice at a
        # time) the order is not final: a cursor on the first row stays on the first row (the most urgent run), not
        # on whichever run was first then. A run the operator moved the cursor to stays selected.
        settling = not getattr(self.rows, "folded", True)
        at_top = self.is_mounted and bool(self.query("#runs")) and self.table.cursor_row <= 0
        self.rows = rows
        self.error = error
        self._refresh_rows(keep_selection=not (settling and at_top))

    def _set_columns(self, width: int) -> bool:
        wide = width >= NARROW
        if wide == self.wide:
            return False
        self.wide = wide
        table = self.table
        table.clear(columns=True)
        # Text, not str: a str label is read as Rich markup, whose first use imports Rich's emoji table (~2 ms of
        # CPU before the fleet's first frame) for words that hold no markup.
        for label, key, w in COLUMNS:
            table.add_column(Text(label), key=key, width=w)
        if wide:
            fixed = sum(w + 2 for _l, _k, w in COLUMNS)
            table.add_column(Text("last event"), key="last", width=max(10, width - fixed - 4))
        return True

    def _refresh_rows(self, keep_selection: bool = True, mounting: bool = False) -> None:
        if not (self.is_mounted or mounting) or not all(self.query(w) for w in PARTS):
            # Rows may come before the list is composed, or while the screen is taken down (CI: a poll's rows
            # arrived after #fleet-empty was removed, and its query raised out of the app at its exit).
            return
        keep, previous = self.selected if keep_selection else None, self.shown
        self.shown = [r for r in self.rows if matches(r, self.filter_text)] if self.filter_text else list(self.rows)
        self._fill_rows(keep=keep, previous=previous)
        waiting = sum(1 for r in self.rows if r.kind == "needs")
        live = sum(1 for r in self.rows if r.has_runner)  # a run a process runs, here or on its machine
        # Older finished runs beyond the list are counted ("500 of 1,240 runs"; `agent-console jobs` lists them).
        total = len(self.rows) + getattr(self.rows, "older", 0)
        count = f"{len(self.rows)} of {total:,}" if total > len(self.rows) else f"{len(self.rows)}"
        title = Content.assemble(("agent-console fleet", "bold $text-primary"),
                                 f"  ·  {count} run{'s' if total != 1 else ''}, {live} live")
        # The runs that need the operator first (on a narrow terminal the line is cut at its end), then what the
        # fleet spent today and the runs its daily budget holds (console.view.ledger).
        if waiting:
            title = Content.assemble(title, "  ·  ",
                                     (f" {waiting} {'run needs' if waiting == 1 else 'runs need'} you ",
                                      "bold reverse $text-warning"))
        if spent := today_line([r.today for r in self.rows], [r.needs for r in self.rows]):
            title = Content.assemble(title, f"  ·  {spent}")
        if self.filter_text:
            title = Content.assemble(title, (f" · filter: {cell_text(self.filter_text)} ({len(self.shown)} shown)",
                                             "$text-muted"))
        self._update("#fleet-title", title)
        if self.error:
            self._update("#fleet-empty", Content.styled(cell_text(self.error), "$text-error"))
        elif not self.rows:
            self._update("#fleet-empty", Content.styled(
                "No runs yet. Start one from a shell, e.g.\n  agent-console run sample_jobs/quickstart --headless\n"
                "It appears here as soon as it starts.", "$text-muted"))
        elif not self.shown:
            self._update("#fleet-empty", Content.styled(
                f"No run matches '{cell_text(self.filter_text)}' (esc clears the filter).", "$text-muted"))
        empty = self.query_one("#fleet-empty", Static)
        if empty.display != bool(self.error or not self.shown):
            empty.display = bool(self.error or not self.shown)
        self._show_detail()

    def _update(self, selector: str, content: Content) -> None:
        """Update a Static only when its text changes: each update lays the screen out again (the whole list)."""
        if self._shown_text.get(selector) != content:
            self._shown_text[selector] = content
            self.query_one(selector, Static).update(content)

    def _styles(self) -> dict[str, Style]:
        """The cell styles of the current theme (built once per theme: a poll redraws hundreds of cells)."""
        theme = self.app.current_theme
        if self._style_cache[0] != theme.name:
            styles = {
                "waiting": Style(color=theme.warning or "yellow", bold=True),
                "badge": Style(color=theme.background or "black", bgcolor=theme.warning or "yellow", bold=True),
                "plain": Style(),
            }
            for kind, colour in (("running", theme.success), ("completed", theme.success), ("failed", theme.error),
                                 ("interrupted", theme.warning), ("stopped", theme.warning),
                                 ("paused", theme.warning)):
                styles[f"state-{kind}"] = Style(color=colour or None)
            self._style_cache = (theme.name, styles)
        return self._style_cache[1]

    def _cell(self, r: FleetRow, key: str) -> Text:
        styles = self._styles()
        waiting = r.kind == "needs"
        base = styles["waiting"] if waiting else styles["plain"]
        if key == "id":
            return Text(cell_text(r.id), style=base + Style(bold=True))
        if key == "job":
            return Text(cell_text(r.job), style=base, overflow="ellipsis", no_wrap=True)
        if key == "state":
            cell = Text(cell_text(r.state_text), style=styles["badge"] if waiting
                        else styles.get(f"state-{r.kind}", base), no_wrap=True)
            if r.sandbox == "unconfined":  # its commands run without a sandbox (run --unconfined): said in the row,
                # first, where a narrow column never cuts it (after "needs you (restart approval)" it was cut)
                cell = Text.assemble(("UNCONFINED", Style(bold=True, reverse=True)), " ", cell, no_wrap=True)
            return cell
        if key == "phase":
            return Text(cell_text(r.phase), style=base)
        if key == "ctx":
            return Text(fill(r.ctx) if r.ctx is not None else "", style=base, justify="right")
        if key == "cost":
            # Under the column's "cost" heading an amount that is none (a forged log's) is "unknown": "cost unknown"
            # is wider than the column, which cut it to "cost un".
            text = cost(r.cost)
            return Text("unknown" if text == "cost unknown" else text, style=base, justify="right")
        if key == "elapsed":
            return Text(r.elapsed, style=base, justify="right")
        last = r.need_line if waiting else r.last  # why it needs you, and since when
        return Text(cell_text(last), style=base + Style(dim=r.state not in LIVE), overflow="ellipsis", no_wrap=True)

    def _keys(self) -> list[str]:
        return [key for _l, key, _w in COLUMNS] + (["last"] if self.wide else [])

    def _fill_rows(self, keep: FleetRow | None, previous: list[FleetRow] | None = None) -> None:
        """Show ``self.shown``. When the same runs are listed in the same order as ``previous`` (what a poll
        mostly brings: an elapsed time, a phase), only the cells that changed are redrawn."""
        table = self.table
        changed = sum(1 for old, new in zip(previous or [], self.shown, strict=False) if old != new)
        if previous is not None and [r.path for r in previous] == [r.path for r in self.shown] \
                and table.row_count == len(self.shown) and changed <= PATCH_ROWS:
            for old, new in zip(previous, self.shown, strict=True):
                if old == new:
                    continue
                for key in self._keys():
                    # The fields a column shows (the state's style follows the state; every cell's, waiting).
                    fields = CELL_FIELDS.get(key, (key,))
                    if old.kind != new.kind or any(getattr(old, f) != getattr(new, f) for f in fields):
                        table.update_cell(str(new.path), key, self._cell(new, key))
            return
        table.clear()
        for r in self.shown:
            table.add_row(*(self._cell(r, key) for key in self._keys()), key=str(r.path))
        if keep is not None:
            for n, r in enumerate(self.shown):
                if r.path == keep.path:
                    table.move_cursor(row=n, animate=False)
                    break

    def _show_detail(self) -> None:
        r = self.selected
        keys_for = offered(r)
        if keys_for != self._keys_for:  # the footer offers a run's keys only while they act on the selected run
            self._keys_for = keys_for
            self.refresh_bindings()
        if r is None:
            self._update("#fleet-detail", Content.styled(
                "enter attaches · a / d approve or deny a restart · s stops · p pauses · r resumes · k acknowledges "
                "· / filters · q quits",
                "$text-muted"))
            return
        width = max(20, self.size.width - 2)
        name = cell_text(r.name)
        where = cell_text(f"in {r.path.parent}")  # the folder is the name: where it lives is what the line adds
        room = width - len(r.id) - len(name) - 4
        if len(where) > room:  # the path's end says the most: "in …/agent-console/runs"
            where = "in …" + where[-(room - 4):] if room > 12 else ""
        lines = [Content.assemble((f"{cell_text(r.id)} ", "bold"), (name, "bold $text-primary"),
                                  (f"  {where}" if where else "", "$text-muted"))]
        runner = f" · pid {r.pid}" if r.pid else f" · on {cell_text(r.host)}" if r.host else ""
        state = (f"{r.state}: {r.needs_label}" + (f" since {r.needs_since}" if r.needs_since else "")
                 if r.needs else r.state) + runner
        if r.phase_long:
            state += f" · {r.phase_long}"
        if spent := run_today(r.today, r.cost):  # a run older than today: what it spent today, beside its cost
            state += f" · {spent}"
        if r.detail and r.state not in LIVE:
            state += f" · {r.detail}"
        if r.sandbox == "unconfined":
            state += " · UNCONFINED: its commands run without a sandbox (run --unconfined)"
        elif r.sandbox == "refused":
            state += " · its commands are refused: no sandbox works there"
        style = "bold $text-warning" if r.kind == "needs" else ""
        lines.append(Content.styled(cell_text(state), style))
        if r.kind == "needs" and r.pending_seq:
            lines.append(Content.styled("a approves the restart, d denies it (the run ends, resumable); "
                                        "enter attaches", "bold $text-warning"))
        elif r.state == GONE:
            lines.append(Content.styled("x forgets this run (its row only: the folder is already gone)",
                                        "$text-muted"))
        elif r.kind == "needs":
            lines.append(Content.styled(cell_text(f"{r.needs_message} · enter attaches" if r.needs_message
                                                  else "enter attaches"), "bold $text-warning"))
        elif r.last:
            lines.append(Content.assemble(("last: ", "$text-muted"), cell_text(r.last)))
        # One line each, cut to the width: a long line must not push the next one out of the box.
        self._update("#fleet-detail", Content("\n").join(line.truncate(width, ellipsis=True) for line in lines))

    # -- keys --------------------------------------------------------------------------------
    def on_data_table_row_highlighted(self, _message: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Which keys the footer offers: a run's only while they act on the selected run (as the run's console
        offers only what applies: approve and deny while its restart waits, resume while it can go on...)."""
        if action not in ROW_ACTIONS:
            return True
        return applies(action, self.selected)

    def system_commands(self) -> Iterator[SystemCommand]:
        """The palette's entries of the list: the selected run's commands, only those that act on it (as its
        footer), and the filter."""
        run = {"attach": self.action_attach, "approve": self.action_approve, "deny": self.action_deny,
               "acknowledge": self.action_acknowledge}
        for action, title, help_text in PALETTE:
            if self.check_action(action, ()):
                yield SystemCommand(title, help_text, run[action])
        yield SystemCommand("Filter runs", "Show only the runs matching some words", self.action_filter)

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        message.stop()
        self.action_attach()

    def _act(self, action: str) -> None:
        row = self.selected
        if row is None:
            self.notify("No run selected.", severity="warning")
            return
        self.post_message(self.Act(action, row))

    def action_attach(self) -> None:
        self._act("attach")

    def action_approve(self) -> None:
        self._act("approve")

    def action_deny(self) -> None:
        self._act("deny")

    def action_stop(self) -> None:
        self._act("stop")

    def action_resume(self) -> None:
        self._act("resume")

    def action_pause(self) -> None:
        self._act("pause")

    def action_acknowledge(self) -> None:
        self._act("acknowledge")

    def action_forget(self) -> None:
        self._act("forget")

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.display = False
        self.filter_text = ""
        self._refresh_rows()
        self.table.focus()

    def on_input_changed(self, message: Input.Changed) -> None:
        self.filter_text = message.value.strip()
        self._refresh_rows()

    def on_input_submitted(self, _message: Input.Submitted) -> None:
        self.table.focus()
