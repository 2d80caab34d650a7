"""One MCP server over the whole run: started, restarted once after a crash, then unavailable; the engine's port.

:class:`ManagedServer` owns the live connection (a :class:`~console.mcp.client.StdioServer`, or none) and how to
start one (the very confinement of the start: the same function, config, job folder and world). It tells the engine
what changed through ``news()`` (drained after each call: console.engine.tools.mcp_tools.McpWatch makes them
``mcp_server`` events):

- an optional server that did not start is ``unavailable`` from the start: the tools job.toml names in its ``tools``
  are offered and each call answers "unavailable" (never sent); with no ``tools`` its tools are not known, and none
  is offered (said in its event);
- a server that dies (during a call, or between two) is restarted once: its tools are listed and checked again;
  a tool it no longer lists, or lists with another input schema, answers "unavailable" for the rest of the run (the
  agent's tool definitions never change mid-run, and its arguments were checked against the first schema); a tool
  it lists anew is not offered. The call it died in is never sent again: its outcome is unknown;
- a second death, or a restart that fails, makes it ``unavailable`` for the rest of the run;
- each kind of request it made that this client refuses (sampling, elicitation, roots) is said once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from console.engine.text import safe_text
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_elicitation import Elicit
from console.engine.tools.mcp_sampling import Ask
from console.engine.tools.mcp_tools import McpCallResult, McpNews, McpToolInfo, McpUnavailable
from console.mcp.world import McpStartError

MAX_RESTARTS = 1
# How long a failed call waits to see whether the server died (rather than timed out while it lives on).
EXIT_WAIT = 1.0
# After a call that timed out (its own timeout, or the deadline's), the SDK told the server to abandon it
# (notifications/cancelled); a server that then does not answer a ping within this long has not stopped (a handler
# blocking its loop): it is killed, and restarted as after a crash. A hang guard, generous for a busy machine.
CANCEL_GRACE = 10.0
# A tool of a server that did not start: its arguments are not known, so none is checked (none is sent).
_ANY = {"type": "object", "properties": {}}


class Live(Protocol):
    """A started server (console.mcp.client.StdioServer), as this module uses it."""

    confined_by: str
    stderr_tail: bytes
    refused: list[str]
    killed_why: str

    @property
    def tools(self) -> Sequence[McpToolInfo]: ...

    def call(self, tool: str, arguments: dict[str, Any], timeout: float,
             should_stop: Callable[[], bool] = lambda: False, *, ask: Ask | None = None,
             elicit: Elicit | None = None) -> McpCallResult: ...

    def exited(self, wait: float = 0.0) -> bool: ...

    def responsive(self, wait: float) -> bool: ...

    def close(self) -> None: ...


def _last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return safe_text(lines[-1], one_line=True, limit=200) if lines else ""


def _schema_key(info: McpToolInfo) -> str:
    try:
        return json.dumps(info.input_schema, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(info.input_schema)


class ManagedServer:
    """The port the engine calls (config, tools, call, close, news, confined_by) for one server of the run."""

    def __init__(self, config: McpServerConfig, start: Callable[[], Live], live: Live | None,
                 why: str = "") -> None:
        self._config = config
        self._start = start
        self._live = live
        self._news: list[McpNews] = []
        self._told: set[str] = set()  # the kinds of refused request already said (once per server)
        self.restarts = 0
        self._lost: set[str] = set()
        if live is not None:
            self._tools: list[McpToolInfo] = list(live.tools)
            self._news.append(McpNews("ready"))
        else:
            self._tools = [McpToolInfo(t, f"Unavailable in this run: the MCP server {config.name} did not start.",
                                       _ANY) for t in config.tools or ()]
            self._news.append(McpNews("unavailable", why + ("" if config.tools else
                                                            " (its tools are not known: none is offered)")))
        self._why = why

    @classmethod
    def start(cls, config: McpServerConfig, start: Callable[[], Live]) -> ManagedServer:
        """Started now: :class:`McpStartError` if it does not start."""
        return cls(config, start, start())

    @classmethod
    def unstarted(cls, config: McpServerConfig, start: Callable[[], Live], why: str) -> ManagedServer:
        """An optional server that did not start (``why``): unavailable for the whole run."""
        return cls(config, start, None, why)

    @property
    def config(self) -> McpServerConfig:
        return self._config

    @property
    def tools(self) -> Sequence[McpToolInfo]:
        return self._tools

    @property
    def confined_by(self) -> str:
        """How the running server is confined (as at its start); "" when none runs."""
        return self._live.confined_by if self._live is not None else ""

    @property
    def state(self) -> str:
        return "unavailable" if self._live is None else "restarted" if self.restarts else "ready"

    def news(self) -> list[McpNews]:
        live = self._live
        for kind in live.refused if live is not None else ():
            if kind not in self._told:
                self._told.add(kind)
                self._news.append(McpNews(None, f"it asked for {kind}, which this client refuses (answered with "
                                                "an error; said once)"))
        out, self._news = self._news, []
        return out

    def call(self, tool: str, arguments: dict[str, Any], timeout: float,
             should_stop: Callable[[], bool] = lambda: False, *, ask: Ask | None = None,
             elicit: Elicit | None = None) -> McpCallResult:
        live = self._live
        if live is not None and live.exited():  # it died since its last call: restarted first (nothing was sent)
            self._died(f"{live.killed_why or 'it exited'} between two calls")
            live = self._live
        if live is None:
            raise McpUnavailable(self._why, sent=False)
        if tool in self._lost:
            raise McpUnavailable("since its restart the server no longer offers this tool as it was first listed",
                                 sent=False)
        try:
            more = {"elicit": elicit} if elicit is not None else {}  # a Live of before questions takes none
            return live.call(tool, arguments, timeout, should_stop, ask=ask, **more)
        except McpUnavailable as exc:
            if str(exc).startswith("stopped by the operator"):
                raise  # the run is ending: its end kills every server that has not stopped
            if live.exited(EXIT_WAIT):
                killed = live.killed_why
                self._died(f"{killed} during a call of {tool}" if killed else f"it exited during a call of {tool}")
                raise McpUnavailable(f"{killed or 'the server exited'} during the call ({self._after()})") from None
            if exc.sent and not live.responsive(CANCEL_GRACE):
                self._died(f"it did not stop after a call of {tool} was abandoned (no answer to a ping within "
                           f"{CANCEL_GRACE:g} s): killed")
                raise McpUnavailable(f"{exc}; the server did not stop working on it, so it was killed "
                                     f"({self._after()})") from None
            raise

    def _after(self) -> str:
        return "it was restarted" if self._live is not None else "it is unavailable for the rest of the run"

    def _died(self, how: str) -> None:
        """Its process has ended: restarted if it has not been yet, else unavailable for the rest of the run."""
        old = self._live
        assert old is not None
        said = _last_line(old.stderr_tail)
        last = f" (its last words: {said})" if said else ""
        old.close()
        self._live = None
        if self.restarts >= MAX_RESTARTS:
            self._why = f"{how}{last}, after its restart"
            self._news.append(McpNews("unavailable", self._why + ": not restarted again"))
            return
        self.restarts += 1
        try:
            new = self._start()
        except McpStartError as exc:
            self._why = f"{how}{last}, and its restart failed: {exc}"
            self._news.append(McpNews("unavailable", self._why))
            return
        offered = self._config.tools
        before = {t.name: _schema_key(t) for t in self._tools
                  if isinstance(t.name, str) and (offered is None or t.name in offered)}
        after = {t.name: _schema_key(t) for t in new.tools if isinstance(t.name, str)}
        lost = sorted(n for n, key in before.items() if after.get(n) != key and n not in self._lost)
        added = sorted(n for n in set(after) - set(before) if offered is None or n in offered)
        self._lost.update(lost)
        self._live = new
        notes = [f"{how}{last}"]
        if lost:
            notes.append(f"{', '.join(lost)} no longer listed as before: unavailable")
        if added:
            notes.append(f"{len(added)} tool(s) it now lists are not offered mid-run")
        self._news.append(McpNews("restarted", "; ".join(notes), tuple(lost)))

    def close(self) -> None:
        if self._live is not None:
            self._live.close()
