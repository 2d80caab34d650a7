"""Tools from Model Context Protocol servers, offered to the agent like every other tool and passing the one gate.

The engine owns the port (:class:`McpServer`, as it owns the provider protocol); ``console.mcp`` implements it
with the official SDK, the server confined as job commands are. Here, a live server's list of tools becomes
:class:`~.registry.Tool` entries:

- each named ``mcp__SERVER__TOOL``, valid for both providers (``^[a-zA-Z0-9_-]{1,64}$``); a tool whose own name
  cannot make such a name (escape sequences, markup, too long) is not offered, and said once (escaped); two tools
  of the same name, or one named like a tool of the harness, refuse the run at its start;
- its JSON schema checked and bounded (an object schema of at most :data:`MAX_SCHEMA_CHARS` and
  :data:`MAX_SCHEMA_DEPTH` levels): a schema bomb is not offered; its description made safe
  (:func:`console.engine.text.safe_text`) and cut;
- each call: the arguments checked against the schema, the intent recorded in the journal before the server is
  asked (a call a kill -9 interrupted is never sent again: the agent is told its outcome is unknown), the answer
  bounded in time (the server's ``timeout``) and size (``max_output_kb``: first and last halves kept); its images,
  audio and embedded resources saved into the job folder, and named after its text (:mod:`.mcp_content`).

Policies, budgets, the deadline, feedback and the stuck detector see these calls as they see every call: they go
through the registry's parse and run, in the loop's one dispatch path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import jsonschema
from pydantic import ConfigDict

from console.engine import events as ev
from console.engine.events.stream import LOGGED_EARLY
from console.engine.job_files import one_line
from console.engine.text import safe_text
from console.engine.tools.mcp_config import TOOL_NAME, McpServerConfig
from console.engine.tools.mcp_content import McpBlock, folder, new_stem, save, saved_before
from console.engine.tools.registry import Failure, Tool, ToolArgs, ToolOutcome

if TYPE_CHECKING:
    from console.engine.guardrails.config import GuardrailsConfig
    from console.engine.runtime import Runtime
    from console.engine.tools.mcp_elicitation import Questioner
    from console.engine.tools.mcp_sampling import Sampler

PREFIX = "mcp"
MAX_SCHEMA_CHARS = 16_384
MAX_SCHEMA_DEPTH = 12
MAX_DESCRIPTION = 1024
MAX_TOOLS_PER_SERVER = 128


@dataclass(frozen=True)
class McpToolInfo:
    """One tool as a server listed it: raw, untrusted (checked by :func:`build_mcp_tools`)."""

    name: str
    description: str
    input_schema: Any


@dataclass(frozen=True)
class McpCallResult:
    """What a server answered: whether the tool succeeded, its text content, and its other blocks (images, audio,
    resources: saved into the job folder by the call, :mod:`.mcp_content`)."""

    ok: bool
    text: str
    blocks: tuple[McpBlock, ...] = ()


class McpServer(Protocol):
    """A live server of the run (console.mcp's client implements it). Optional members, read when present (a port
    without them is a server that is ready while it answers): ``news()`` (:class:`McpNews`, drained), ``state``
    ("ready", "restarted", "unavailable") and ``confined_by`` (how it runs: told in its ``mcp_server`` events)."""

    @property
    def config(self) -> McpServerConfig: ...

    @property
    def tools(self) -> Sequence[McpToolInfo]: ...

    def call(self, tool: str, arguments: dict[str, Any], timeout: float,
             should_stop: Callable[[], bool] = lambda: False) -> McpCallResult:
        """The server's answer; raises :class:`McpUnavailable` if it could not be had (timeout, gone, garbage, or
        ``should_stop`` said the operator stops the run now: the call is then cancelled). A server whose config
        enables ``sampling`` is called with one more keyword, ``ask`` (console.engine.tools.mcp_sampling.Ask): the
        engine's answer to its sampling requests during this call, run on the caller's thread; one whose config
        enables ``elicitation``, with ``elicit`` (console.engine.tools.mcp_elicitation.Elicit), the same for its
        questions to the operator (the call's own timeout is then lengthened by the time a question waits)."""
        ...

    def close(self) -> None: ...


class McpUnavailable(Exception):
    """A call got no answer (the message says why, one line). ``sent``: whether the server may have got it (False:
    it was never sent, e.g. the server did not start: nothing was done)."""

    def __init__(self, message: str = "", *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass(frozen=True)
class McpNews:
    """What happened to a server since the engine last asked (the port's optional ``news()``, drained): a new
    ``state`` ("ready", "restarted", "unavailable") with why, and the raw names of the tools that no longer work
    (``lost``: a restart whose list changed them); or, without a state, a note for the operator (a request of the
    server that was refused)."""

    state: str | None
    why: str = ""
    lost: tuple[str, ...] = ()


def news_of(server: McpServer) -> list[McpNews]:
    """The server's news (none from a server whose port has no ``news``: it is ready while it answers)."""
    news = getattr(server, "news", None)
    return list(news()) if callable(news) else []


@dataclass
class _Watched:
    server: McpServer
    tools: list[str]  # the full names of its tools the agent is offered
    state: str = ""
    calls: int = 0
    errors: int = 0


class McpWatch:
    """Each server's state, told as ``mcp_server`` events (the views rebuild their list of servers from them): at
    the start, and after each of its calls when something changed (a restart, unavailable, a refused request)."""

    def __init__(self) -> None:
        self.servers: dict[str, _Watched] = {}

    def add(self, server: McpServer, tools: list[str]) -> None:
        self.servers[server.config.name] = _Watched(server, tools)

    def report(self, events: ev.EventStream, only: str | None = None) -> None:
        for name, w in self.servers.items():
            if only is not None and name != only:
                continue
            news = news_of(w.server)
            if not w.state and not any(n.state for n in news):
                news.insert(0, McpNews("ready"))
            for n in news:
                if n.state is None:
                    events.emit(ev.ErrorEvent, where="mcp", recoverable=True,
                                message=f"MCP server {name}: {safe_text(n.why, one_line=True, limit=300)}")
                    continue
                w.state = n.state
                gone = {full_name(name, t) for t in n.lost}
                w.tools = [t for t in w.tools if t not in gone]
                config = w.server.config
                events.emit(ev.McpServerEvent, server=name, state=n.state, tools=list(w.tools),
                            known=bool(w.tools) or config.tools is not None or n.state != "unavailable",
                            confined=str(getattr(w.server, "confined_by", "") or ""), required=config.required,
                            why=safe_text(n.why, one_line=True, limit=400), calls=w.calls, errors=w.errors,
                            may=[k for k in ("sampling", "elicitation") if getattr(config, k, False)])

    def called(self, events: ev.EventStream, server: str, ok: bool) -> None:
        w = self.servers.get(server)
        if w is None:
            return
        w.calls += 1
        w.errors += not ok
        self.report(events, only=server)


class McpArgs(ToolArgs):
    """Any object: the server's schema, not a model of ours, says what its tool takes (checked by the handler)."""

    model_config = ConfigDict(extra="allow")


@dataclass
class McpTools:
    """The tools a run's servers offer, and what was not offered (one escaped line each, for the operator)."""

    tools: list[Tool[Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # Each server's state, told as events (the supervisor reports it at the start; each call, after it).
    watch: McpWatch = field(default_factory=McpWatch)


def full_name(server: str, tool: str) -> str:
    return f"{PREFIX}__{server}__{tool}"


def _depth(node: Any, limit: int) -> int:
    """How deeply ``node`` nests (stops counting past ``limit``: never recurses without end)."""
    stack = [(node, 1)]
    most = 0
    while stack:
        value, d = stack.pop()
        most = max(most, d)
        if d > limit:
            return d
        if isinstance(value, dict):
            stack.extend((v, d + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, d + 1) for v in value)
    return most


def check_schema(schema: Any) -> tuple[dict[str, Any] | None, str]:
    """(the schema to offer, "") or (None, why it is refused)."""
    if not isinstance(schema, dict):
        return None, "its input schema is not a JSON object"
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError, RecursionError):
        return None, "its input schema is not plain JSON"
    if len(text) > MAX_SCHEMA_CHARS:
        return None, f"its input schema is {len(text):,} characters, more than the {MAX_SCHEMA_CHARS:,} allowed"
    if _depth(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        return None, f"its input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
    if schema.get("type") != "object":
        return None, "its input schema is not of type object"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return None, f"its input schema is not a valid JSON schema ({one_line(exc.message, 120)})"
    except (RecursionError, ValueError, TypeError):
        return None, "its input schema cannot be read"
    out: dict[str, Any] = json.loads(text)
    out.setdefault("properties", {})
    return out, ""


def _keep(text: str, keep: int) -> str:
    """At most ``keep`` characters: the first and last halves, and a note of what was cut."""
    if len(text) <= keep:
        return text
    half = keep // 2
    return (text[:half] + f"\n[... {len(text) - 2 * half:,} characters omitted ...]\n" + text[-half:]
            + f"\n[result truncated: showed {2 * half:,} of {len(text):,} characters]")


def _interrupted(name: str, saved: Sequence[str] = ()) -> str:
    text = (f"{name} was interrupted by a crash of the harness before its result was recorded: whether the server "
            "did it is unknown. Check its effects, and call it again if it is needed.")
    if saved:  # its answer had come: these files of it were saved (each whole), the rest of it is lost
        text += (" Files of its answer saved before the crash (the rest of the answer is lost): "
                 + ", ".join(saved[:32]) + (f" and {len(saved) - 32} more" if len(saved) > 32 else "") + ".")
    return text


def _with_blocks(rt: Runtime, server: str, stem: str, answer: McpCallResult, keep: int) -> str:
    """The answer's text (bounded to ``keep``), then a line for each of its other blocks: where it was saved, or
    why not. The lines come last, so that cutting a long text never hides them."""
    if not answer.blocks:
        return _keep(answer.text, keep)
    lines = save(rt, server, stem, answer.blocks)
    notes = "\n".join(["[the answer's images, audio and resources: saved into the job folder, or why not:]", *lines])
    text = _keep(answer.text, max(256, keep - len(notes) - 1)) if answer.text else ""
    return f"{text}\n{notes}" if text else notes


def _handler(server: McpServer, tool: str, name: str, schema: dict[str, Any],
             keep: Callable[[Runtime], int], watch: McpWatch,
             sampler: Sampler | None = None, questioner: Questioner | None = None
             ) -> Callable[[Runtime, McpArgs], ToolOutcome]:
    config = server.config

    def handler(rt: Runtime, args: McpArgs) -> ToolOutcome:
        arguments = args.model_dump()
        try:
            jsonschema.validate(arguments, schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
            return ToolOutcome(False, f"Invalid arguments for {name}: '{one_line(where, 100)}': "
                                      f"{one_line(exc.message, 300)}. Call {name} again with corrected arguments.")
        except (jsonschema.SchemaError, RecursionError):
            return ToolOutcome(False, f"{name} could not check its arguments against the server's schema.")
        # The job's deadline bounds a call as it bounds a command: none is sent once it passed, and one in flight
        # gets at most the time left.
        guards = getattr(rt, "guards", None)
        left = guards.seconds_to_cut() if guards is not None else None
        if left is not None and left <= 0:
            return ToolOutcome(False, f"{name} was not run: the job's time is up (its deadline passed); the run is "
                                      "winding down.")
        timeout = config.timeout if left is None else min(config.timeout, left)
        # Recorded before the server is asked: a kill -9 from here on is a call of unknown outcome, never resent.
        # "files": the stem of the names its non-text content is saved under (mcp_content), known after a kill.
        facts, redo = rt.intent(lambda: {"mcp": config.name, "tool": tool, "started": True, "files": new_stem()})
        stem = str(facts.get("files", ""))
        call_id = rt.current_call or ""
        if redo:
            if config.sampling:  # what its server's sampling cost before the kill: counted now, once
                from console.engine.tools.mcp_sampling import JOURNAL_KEY, count_journaled

                # What a question of the call wrote to the log before the kill is in it already: counted, not logged.
                logged = _sampling_logged(rt, call_id) if facts.get(ASKED_KEY) else 0
                count_journaled(rt, config.name, call_id, facts.get(JOURNAL_KEY), logged=logged)
            return ToolOutcome(False, _interrupted(name, saved_before(rt, config.name, stem)))
        extra: dict[str, Any] = {}
        record = _CallRecord(rt, facts)
        if config.sampling and sampler is not None:
            extra["ask"] = sampler.for_call(rt, config, tool, call_id, record.sampled, timeout)
        if config.elicitation and questioner is not None:
            # A question waits for the operator: the call may take that much longer (within the job's deadline).
            wait = config.elicitation_timeout if left is None else max(0.0, min(config.elicitation_timeout, left))
            extra["elicit"] = questioner.for_call(rt, config, tool, call_id, record.asked, wait)
        try:
            answer = server.call(tool, arguments, timeout, rt.should_stop, **extra)
        except McpUnavailable as exc:
            watch.called(rt.events, config.name, False)
            if exc.sent:
                _forget_size(rt)
            if not exc.sent:
                return ToolOutcome(False, f"{name} is unavailable: {one_line(str(exc), 300)}. It was not run; do "
                                          "other work without it.")
            return ToolOutcome(False, f"{name} is unavailable: {one_line(str(exc), 300)}. Nothing is known of its "
                                      "effects; do other work, or call it again later.")
        watch.called(rt.events, config.name, answer.ok)
        _forget_size(rt)
        return ToolOutcome(answer.ok, _with_blocks(rt, config.name, stem, answer, keep(rt)) or "(no output)")

    return handler


# The intent's key under which the questions a call asked are journaled (console.engine.tools.mcp_elicitation: each
# wrote the step's events so far to the log, which the resume of the call knows by it: console.engine.runtime).
ASKED_KEY = LOGGED_EARLY


def _sampling_logged(rt: Runtime, call_id: str) -> int:
    """How many of the sampling usages of the interrupted call ``call_id`` are in the log already (a question of
    the call wrote them before the kill)."""
    logged = getattr(rt.events, "logged_of_call", None)
    if logged is None:
        return 0
    return sum(1 for e in logged(call_id) if e.get("type") == "token_usage" and e.get("source") == "mcp_sampling")


class _CallRecord:
    """The intent of one call in flight, journaled again as the call learns more: its sampling's usage so far
    (console.engine.tools.mcp_sampling: the last intent of a call wins), the questions it asked."""

    def __init__(self, rt: Runtime, facts: dict[str, Any]) -> None:
        self.rt, self.facts = rt, dict(facts)
        self.had: list[Any] = []

    def _journal(self) -> None:
        rt = self.rt
        if rt.journal is not None and rt.current_call is not None:
            rt.journal.intent(rt.current_call, self.facts)

    def sampled(self, had: list[Any]) -> None:
        from console.engine.tools.mcp_sampling import JOURNAL_KEY

        self.had = had
        self.facts[JOURNAL_KEY] = had
        self._journal()

    def asked(self, questions: list[str]) -> None:
        """A question waits for the operator (or was answered): the step's events so far are written to the log now
        (a human must see the need while the call waits), the intent first saying that the call wrote some early
        (a resume then counts its sampling the log already holds without logging it again)."""
        self.facts[ASKED_KEY] = questions
        self._journal()
        self.rt.events.observe()


def _forget_size(rt: Runtime) -> None:
    """A server writes the job folder behind the file tools (as a command does): their account of its size is counted
    again at their next write, so max_job_mb holds for what they write after it."""
    sandbox = getattr(rt, "sandbox", None)
    if sandbox is not None:
        sandbox.forget_job_bytes()


def _observation_budget(config: McpServerConfig) -> Callable[[Runtime], int]:
    def keep(rt: Runtime) -> int:
        # Within the context budget of one observation too (the loop cuts longer results at their start).
        budget = max(1024, int(getattr(rt, "observation_chars", 60_000)) - 400)
        return max(256, min(config.max_output_kb * 1024, budget))

    return keep


_ERRORS = (
    Failure("its arguments do not match the server's schema", "the result says which; call it again corrected"),
    Failure("the server is unavailable or did not answer in time", "nothing is known of its effects; do other work "
            "and call it again later"),
    Failure("a crash of the harness interrupted it", "its outcome is unknown: check its effects, call it again if "
            "needed"),
)


def build_mcp_tools(servers: Sequence[McpServer], *, reserved: Collection[str] = (),
                    sampler: Sampler | None = None, questioner: Questioner | None = None) -> McpTools:
    """The tools of ``servers`` (each one's ``tools`` allow-list applied). ValueError (one line) for a name two
    tools would share, or a harness tool's name: the run is refused at its start, never half-offered.
    ``sampler``: the run's model, lent to the calls of a server whose operator's config enables ``sampling``
    (without it, or for any other server, its sampling requests are refused); ``questioner``: the run's operator, lent
    likewise to the calls of a server whose operator's config enables ``elicitation``."""
    out = McpTools()
    taken = set(reserved)
    for server in servers:
        config = server.config
        offered = set(config.tools) if config.tools is not None else None
        listed = list(server.tools)
        shown_server = safe_text(config.name, one_line=True, limit=40)
        if len(listed) > MAX_TOOLS_PER_SERVER:
            out.skipped.append(f"MCP server {shown_server}: {len(listed)} tools listed, only the first "
                               f"{MAX_TOOLS_PER_SERVER} considered")
            listed = listed[:MAX_TOOLS_PER_SERVER]
        seen_here: set[str] = set()
        first = len(out.tools)
        for info in listed:
            raw = info.name if isinstance(info.name, str) else repr(info.name)
            shown = safe_text(raw, one_line=True, limit=80)
            if offered is not None and raw not in offered:
                continue
            name = full_name(config.name, raw)
            if not TOOL_NAME.fullmatch(raw) or not TOOL_NAME.fullmatch(name):
                out.skipped.append(f"MCP server {shown_server}: tool '{shown}' not offered: its name cannot make a "
                                   "tool name both providers accept (letters, digits, '_', '-'; 64 in all)")
                continue
            schema, why = check_schema(info.input_schema)
            if schema is None:
                out.skipped.append(f"MCP server {shown_server}: tool '{shown}' not offered: {why}")
                continue
            if name in taken or raw in seen_here:
                raise ValueError(f"MCP server {shown_server}: two tools would be named {name}; the run cannot offer "
                                 "both (the server's tool list is not usable as it is)")
            taken.add(name)
            seen_here.add(raw)
            text = info.description if isinstance(info.description, str) else ""
            description = safe_text(text, limit=MAX_DESCRIPTION) or f"Tool {raw} of the MCP server {config.name}."
            summary = f"{safe_text(text, one_line=True, join=True, limit=100) or raw} (MCP server {config.name})"
            out.tools.append(Tool(name, description, McpArgs,
                                  _handler(server, raw, name, schema, _observation_budget(config), out.watch,
                                           sampler, questioner),
                                  summary, errors=_ERRORS, schema=schema,
                                  details=(f"A tool of the MCP server '{config.name}' declared in job.toml, "
                                           + ("reached over HTTP (it runs elsewhere, not in the job folder). "
                                              if config.url is not None else
                                              "run confined as the job's commands are. ")
                                           + "Its arguments are the server's schema (in the tool's definition). "
                                           + "Images, audio and resources it answers are saved under "
                                           + f"{folder(config.name)}/ (its result names each file).")))
        out.watch.add(server, [t.name for t in out.tools[first:]])
        if offered is not None:
            missing = sorted(offered - seen_here - {i.name for i in listed if isinstance(i.name, str)})
            if missing:
                out.skipped.append(f"MCP server {shown_server}: does not list "
                                   f"{safe_text(', '.join(missing), one_line=True, limit=200)} (tools = [...] in "
                                   "job.toml)")
    return out


def guardrail_problem(guardrails: GuardrailsConfig, tools: Sequence[Tool[Any]],
                      servers: Sequence[McpServer]) -> str | None:
    """One line when a tool policy of the job names an MCP tool (``mcp__SERVER__TOOL``) that the started servers do
    not offer, or offer without the argument the policy needs (read_before_write's ``path_param``); else None.

    job.toml's check accepted these names for a declared server; here they meet what the server lists. The tools of
    an optional server that did not start are not known: its names pass (they gate a tool that answers
    "unavailable", or none)."""
    from console.engine.guardrails.config import GuardrailsConfig, KnownTool

    down = {s.config.name for s in servers if getattr(s, "state", "ready") == "unavailable"}
    offered = {t.name: t for t in tools if t.name.startswith(f"{PREFIX}__")}
    known: dict[str, KnownTool] = {}
    for i, entry in enumerate(guardrails.policies):
        for name in GuardrailsConfig(policies=[entry]).tool_names():
            server = name.removeprefix(f"{PREFIX}__").partition("__")[0]
            if not name.startswith(f"{PREFIX}__") or server in down:
                known[name] = KnownTool(pending=True)  # a harness tool or a command: job.toml's check saw to it
            elif name in offered:
                known[name] = KnownTool(frozenset((offered[name].schema or {}).get("properties", {})))
            else:
                has = sorted(n.removeprefix(f"{PREFIX}__{server}__") for n in offered
                             if n.startswith(f"{PREFIX}__{server}__"))
                return (f"key 'guardrails.policies.{i}': '{safe_text(name, one_line=True, limit=80)}' is not a tool "
                        f"the MCP server {safe_text(server, one_line=True, limit=40)} offers (it offers: "
                        f"{safe_text(', '.join(has), one_line=True, limit=300) or 'none'})")
    problems = guardrails.tool_problems(known)
    if problems:
        loc, why = problems[0]
        return f"key 'guardrails.{'.'.join(str(p) for p in loc)}': {why}"
    return None
