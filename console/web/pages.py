"""serve's pages: HTML drawn from the same view model the console draws (console.view: the fleet's rows, what a key
offers a run), through Jinja2 with autoescape on, so no agent text, file name or store row reaches a page as markup.

Every value that comes from a run (a job's name, the last event, a need's message) is also put through the one
safe-text function first (console.engine.text.safe_text: control and escape characters out, lengths bounded), then
escaped for HTML by the template engine. The pages carry no inline script (the Content-Security-Policy forbids it):
``static/live.js`` replaces the fleet's list with the fragments the server sends (server-sent events).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

import jinja2

from console.engine.command_specs import PAUSE_WHEN
from console.engine.commands import MAX_TEXT
from console.engine.questions import MAX_VALUE
from console.engine.text import safe_text
from console.view import present
from console.view.fleet import FleetRow
from console.view.fleet_offers import applies
from console.view.ledger import run_today, today_line
from console.view.run_snapshot import RunSnapshot

# The actions a page offers for a run (each a POST with the session's CSRF token), in the fleet's words, only
# while it applies to the run (console.view.fleet_offers, as the console's keys).
WEB_ACTIONS = (("approve", "Approve restart"), ("deny", "Deny restart"), ("resume", "Resume"),
               ("pause", "Pause"), ("stop", "Stop"), ("acknowledge", "Acknowledge"))
# The actions that end or start a run: asked first, as the console asks (saying what happens and how to undo it).
ASK_FIRST = ("deny", "stop", "resume")
TEXT_LIMIT = 300
# A form's own token (each drawing of a page's forms gets one): the command it sends is the same if it is sent twice.
ONCE = re.compile(r"[A-Za-z0-9_-]{8,43}")


def new_once() -> str:
    return secrets.token_urlsafe(12)  # characters of one run's text on a page (the run's page has the whole of each)

ENV = jinja2.Environment(loader=jinja2.PackageLoader("console.web", "templates"),
                         autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                         undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def shown(text: object, limit: int = TEXT_LIMIT) -> str:
    """A run's text as a page shows it: safe_text's (no control characters), cut to ``limit``."""
    line = safe_text(str(text or ""))
    return line if len(line) <= limit else line[:limit - 1] + "…"


@dataclass(frozen=True)
class RowView:
    """One run as a page lists it: plain strings, each already through safe_text."""

    id: str
    job: str
    state: str
    kind: str
    phase: str
    ctx: str
    cost: str
    last: str
    need: str
    host: str
    actions: tuple[tuple[str, str], ...]


def row_view(row: FleetRow) -> RowView:
    return RowView(id=shown(row.id, 64), job=shown(row.job, 80), state=shown(row.state_text, 40), kind=row.kind,
                   phase=shown(row.phase, 20), ctx="" if row.ctx is None else present.fill(row.ctx),
                   cost=" ".join(filter(None, ("" if row.cost is None else present.cost(row.cost),
                                               run_today(row.today, row.cost)))), last=_last(row),
                   need=shown(row.need_line + _answered_elsewhere(row)), host=shown(row.host, 80),
                   actions=tuple((a, label) for a, label in WEB_ACTIONS if applies(a, row)))


def _answered_elsewhere(row: FleetRow) -> str:
    """For a need no button of the list answers (an MCP server's question: its fields are typed), where it is."""
    if row.needs == "mcp_question" and row.has_runner:
        return (f" · answer it on its page (open {row.id}), or from a shell: agent-console answer {row.id} --set "
                "NAME=VALUE (or --decline)")
    return ""


def _last(row: FleetRow) -> str:
    """The row's last event, unless it is the need the row already says (on a phone, the same sentence twice)."""
    if row.needs and row.needs_message and row.needs_message in row.last:
        return ""
    return shown(row.last)


def render(name: str, **context: Any) -> str:
    return ENV.get_template(name).render(**context)


def fleet_list(rows: list[FleetRow], csrf: str, error: str = "") -> str:
    """The fleet's list (what the live stream replaces): what needs the operator first, then every run, each with
    the actions that apply to it now (forms carrying the session's CSRF token: they work without script)."""
    views = [row_view(r) for r in rows]
    return render("fleet_list.html", needs=[v for v in views if v.kind == "needs"],
                  others=[v for v in views if v.kind != "needs"], error=shown(error), csrf=csrf, once=new_once(),
                  today=today_line([r.today for r in rows], [r.needs for r in rows]))


def fleet_page(rows: list[FleetRow], csrf: str, error: str = "") -> str:
    return render("fleet.html", listing=fleet_list(rows, csrf, error))


def message_page(title: str, line: str, status: int = 200) -> str:
    """A page that says one thing (a refused link, a login that did not work)."""
    return render("message.html", title=title, line=line, status=status)


def confirm_page(row: FleetRow, action: str, csrf: str, once: str) -> str:
    """The question before an action that ends or starts a run."""
    rid, job = shown(row.id, 64), shown(row.job, 80)
    what = {"deny": f"Run {rid} ends here instead of starting a fresh session; it can be resumed later.",
            "stop": f"Run {rid} stops after its current turn (at once while it waits); resume it later.",
            "resume": (f"Run {rid} goes on." if row.resume == "unpause" else
                       f"Run {rid} starts again in the background, with the provider, model and settings it was "
                       "started with; it comes back where it stopped.")}[action]
    return render("confirm.html", action=action, label=action.capitalize(), run=rid, job=job, what=what, csrf=csrf,
                  once=once)


def sent_line(row: FleetRow, action: str) -> str:
    """What an action sent does, said when it is sent (the fleet shows it done)."""
    rid = shown(row.id, 64)
    # Sent, not yet applied: another answer (a shell's, another phone's) may reach the run first, and the first
    # one decides (the run's page then says which).
    return {"approve": f"Run {rid}: approve sent; a fresh session starts with the carryover, unless another answer "
                       "reached the run first (its page says which).",
            "deny": f"Run {rid}: deny sent; the run ends (it can be resumed), unless another answer reached it "
                    "first (its page says which).",
            "stop": f"Run {rid}: stop sent; it stops after its current turn (at once if it waits or is paused).",
            "pause": f"Run {rid}: pause sent; it pauses {PAUSE_WHEN}.",
            "resume": f"Run {rid}: resume sent.",
            "acknowledge": f"Run {rid}: acknowledged; it asks for you no more.",
            "rewind": f"Run {rid}: rewind sent; at its next step the agent re-plans the phase around what you "
                      "wrote (every view shows it).",
            "answer": f"Run {rid}: answer sent; the run checks it against the question's form and its page says "
                      "whether it took it (if not, why: the question then waits on)."}.get(action, f"Run {rid}: sent.")


def run_body(snap: RunSnapshot, row: FleetRow | None, csrf: str) -> str:
    """A run's page without its frame (what the live stream replaces)."""
    return render("run_body.html", s=snap, v=row_view(row) if row is not None else None, csrf=csrf,
                  once=new_once())


def run_page(snap: RunSnapshot, row: FleetRow | None, csrf: str) -> str:
    """A run's page: its body (replaced live) and, outside it (what the operator types is never redrawn away),
    the form of an MCP server's question waiting now, and the rewind's form while one applies."""
    return render("run.html", rid=snap.id, body=run_body(snap, row, csrf), rewind=not snap.rewind_refused,
                  phase="" if snap.rewind_phase is None else str(snap.rewind_phase), csrf=csrf, once=new_once(),
                  limit=MAX_TEXT, question=snap.question, value_limit=MAX_VALUE)


def gone_body(rid: str) -> str:
    return render("gone.html", rid=shown(rid, 64))
