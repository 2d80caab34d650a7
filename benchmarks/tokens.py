"""What a long job costs under context policies: ours (the real engine), none, and three peers', priced under
two prompt-cache rules, with the information each keeps checked.

Workloads (the model ignores what it is sent and follows a fixed script, so every policy sees the same turns):

- synthetic (default): 320 read_file calls over 60 data files, a todo_complete every 16 reads, the completion
  todos and job_complete (344 tool calls); tool output is ~80% of the conversation's tokens, as measured for
  real coding agents;
- ``--trajectory FILE [FILE ...]``: recorded SWE-agent / mini-swe-agent runs (shared/trajectories; MIT; format
  in its README.md), replayed one after another as one long job, one todo each (benchmarks/tokens_replay.py):
  each step's recorded thought and action are the reply, its recorded observation the tool result.

Policies:

- ours: the real engine (Supervisor, its ContextManager, masking, wind-down, restart with carryover) at the
  window (``--context-window``, several allowed) with its default settings;
- unmanaged: the same engine with an unbounded window: no masking, no restart (flagged when it overflows);
- swe-agent, anthropic, openhands: the peers' rules (benchmarks/tokens_peers.py, with their sources) applied
  to each of the unmanaged run's requests, as the peer would before the prompt reaches the model. Anthropic's
  ``clear_tool_uses_20250919`` is tuned for its best: every combination of trigger (ANTHROPIC_TRIGGERS below
  the window), clear_at_least (ANTHROPIC_CLEAR_AT_LEAST), keep (ANTHROPIC_KEEPS, never below our N) and
  reading of the docs (stateless / sticky) is priced, and the cheapest that fits the window and keeps the
  information is the peer, per cache rule.

Token counts are the project's estimator (console.engine.context.tokens). A prompt is the blocks tools, system,
conversation messages, then the protected layer (todo list, plan). Two cache rules:

- ``breakpoints`` (Anthropic's explicit prompt caching, as our adapter uses it): breakpoints after the tools,
  the system prompt and the last conversation message. The read is the longest prefix an earlier request wrote
  as a cache entry (ended at one of its breakpoints, byte-identical here) found at or at most 20 content blocks
  before one of this request's breakpoints; the rest up to the last breakpoint is a cache write (priced at
  cache write), what follows it plain input;
- ``prefix`` (automatic caching, as OpenAI and vLLM do): the read is the longest block prefix that any earlier
  request sent; everything else is plain input (no write premium).

Entries never expire (the requests follow each other within the 5-minute TTL) and the 1,024-token minimum is
met. Prices are US$ per million tokens; default Anthropic's Sonnet: input 3.00, cached 0.30, cache write 3.75,
output 15.00. The best peer under a rule is the cheapest peer whose peak fits the window and whose checks pass.

Information kept, checked on every prompt of every policy: no tool call split from its result; the protected
layers (system prompt, tools, todo list, plan) present; the agent's last N (INTACT_N) tool results intact,
i.e. each of the last N results the unmanaged run's prompt holds at that turn is in the prompt with its
original content. A check failing for ours ends the script with exit status 1 (after the report). Counted
too, for every policy, though no check fails on it: the agent's own earlier replies kept, i.e. of the assistant
messages the unmanaged run's prompt holds at each turn (all the agent said so far), the share the policy's prompt
holds with the same text and calls (a policy that compacts or restarts keeps fewer; the peers drop tool results
only).

    python benchmarks/tokens.py [--context-window 128000 ...] [--reads 320] [--trajectory FILE ...]
                                [--prices 3,0.3,3.75,15]

Before the last line, one line per window gives ours / best peer under both rules; the last line is a JSON
summary holding the same ratios.

It also reports what MCP's search-and-load step saves (issue 36, point 4): the first request's prompt tokens (tool
definitions and system prompt) with 5, 50 and 200 MCP tools offered all at once and behind ``mcp_tool_search``
(and with 3 loaded), the same computation as benchmarks/mcp_cost.py's (``prompt_tokens``), in the JSON summary as
``mcp_tool_search``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from console.engine.clock import FakeClock
from console.engine.context import pressure
from console.engine.context.carryover import split_pairs
from console.engine.context.pressure import DEFAULT_HARD, DEFAULT_SOFT
from console.engine.context.tokens import estimate_message, estimate_text, estimate_tools
from console.engine.cost import Prices
from console.engine.job import JobPaths
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import Stop, StreamEvent, TextDelta, ToolCallEvent, Usage
from console.engine.phases import COMPLETION_TODOS
from console.engine.run_settings import RunSettings
from console.engine.supervisor import Supervisor
from console.engine.todos import TodoManager

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tokens_peers as peers
import tokens_replay as replay
from mcp_cost import prompt_tokens as mcp_prompt_tokens

FILES = 60
READS_PER_TODO = 16
OBSERVATION_CHARS = 2_400  # ~600 tokens per read
REASONING = ("I compare this part with what the earlier parts said, note the fields it defines and how they "
             "relate to the records seen so far, check the edge cases it mentions, and decide what to read "
             "next so that the summary covers every section without reading anything twice. ") * 2
SONNET = Prices(input=3.00, output=15.00, cached_input=0.30, cache_write=3.75)
UNBOUNDED = 100_000_000
# Anthropic prompt caching looks for an earlier cache entry at most this many blocks before a breakpoint.
LOOKBACK_BLOCKS = 20
POLICIES = ("ours", "unmanaged", "swe-agent", "anthropic", "openhands")
PEERS = POLICIES[1:]
RULES = ("breakpoints", "prefix")
# The information check: the agent's last N tool results are in every prompt, whole (Anthropic's default keep).
INTACT_N = 3
# Anthropic's clear_tool_uses_20250919, the settings swept for its best (100k and keep 3 are its defaults).
ANTHROPIC_TRIGGERS = (100_000, 60_000, 40_000, 25_000, 15_000, 10_000, 6_000)
ANTHROPIC_CLEAR_AT_LEAST = (0, 5_000, 20_000)
ANTHROPIC_KEEPS = (INTACT_N, 5)
GOAL = 0.8


# -- the workloads ------------------------------------------------------------------------------------------


@dataclass
class Workload:
    """A fixed script of (reply text, tool call), the job folder's files and its todos."""

    name: str
    script: list[tuple[str, ToolCall]]
    files: dict[str, str]
    todos: list[str]
    goal: str


def script(reads: int) -> list[ToolCall]:
    """The synthetic run's fixed sequence of tool calls."""
    calls: list[tuple[str, dict]] = []
    for i in range(1, reads + 1):
        calls.append(("read_file", {"path": f"data/part{i % FILES:02d}.txt"}))
        if i % READS_PER_TODO == 0:
            calls.append(("todo_complete", {}))
    calls += [("todo_complete", {})] * len(COMPLETION_TODOS)
    calls.append(("job_complete", {"summary": "read every part", "confidence": 0.9}))
    return [ToolCall(id=f"t{n + 1}", name=name, arguments=json.dumps(args)) for n, (name, args) in enumerate(calls)]


def synthetic(reads: int) -> Workload:
    if reads < READS_PER_TODO:
        raise SystemExit(f"--reads must be at least {READS_PER_TODO} (one todo's worth)")
    line = "field_{i:03d}: a value that the parser keeps, with notes on its range and its unit.\n"
    body = "".join(line.format(i=i) for i in range(200))[:OBSERVATION_CHARS]
    return Workload(f"synthetic ({reads} reads)", [(REASONING, c) for c in script(reads)],
                    {f"data/part{f:02d}.txt": body for f in range(FILES)},
                    [f"Read parts, batch {i + 1}" for i in range(reads // READS_PER_TODO)],
                    "Read every part of the data set and summarise it.")


def recorded(paths: list[Path]) -> Workload:
    runs = [replay.load(p) for p in paths]
    r = replay.build(runs)
    return Workload(f"{len(runs)} recorded trajectories ({sum(len(x.steps) for x in runs)} steps)",
                    replay.calls(r.script), r.files, r.todos,
                    "Solve the tasks in tasks/ in order; each task's statement is its file.")


class Scripted:
    """A model that follows a fixed script, whatever the prompt says."""

    name, model = "scripted", "trajectory"

    def __init__(self, steps: list[tuple[str, ToolCall]]) -> None:
        self.steps = steps
        self.requests: list[ModelRequest] = []
        self.output_tokens: list[int] = []
        self.made: list[str] = []

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.requests.append(request)
        # The last call (job_complete) repeats if the harness refuses it.
        text, call = self.steps[min(len(self.requests), len(self.steps)) - 1]
        call = call.model_copy(update={"id": f"t{len(self.requests)}"})
        self.made.append(call.name)
        out = estimate_text(text) + estimate_text(call.arguments)
        self.output_tokens.append(out)
        yield TextDelta(text)
        yield ToolCallEvent(call)
        yield Usage(_prompt_tokens(request), out, 0)
        yield Stop("tool_use")


def make_job(root: Path, work: Workload) -> JobPaths:
    paths = JobPaths(root)
    root.mkdir(parents=True)
    paths.instructions.write_text(f"# {work.goal}\n")
    for rel, text in work.files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    paths.main_plan.write_text("# Execution Plan\n\n## Overview\n" + work.goal + "\n\n## Phase 1: Work ← CURRENT\n"
                               + "".join(f"- [ ] {t}\n" for t in work.todos))
    todo_list = TodoManager()
    todo_list.install(list(work.todos), kind="phase", phase_name="Work", phase_number=1, total_phases=1)
    paths.state.mkdir(parents=True, exist_ok=True)
    paths.todos.write_text(todo_list.state.model_dump_json())
    return paths


@dataclass
class Run:
    """One engine run: the requests the model saw, what it answered, how the run ended."""

    requests: list[ModelRequest]
    output_tokens: list[int]
    calls: list[str]
    restarts: int


@contextlib.contextmanager
def unmanaged() -> Iterator[None]:
    """The engine without its context policy: no batch masking, no compaction (with an unbounded window, the
    thresholds never fire either), so the peers' rules act on the whole history, as their clients send it.
    In-place compaction is off through its setting (compact_at = 0, see _run_engine)."""
    saved = pressure.MASK_BATCH, pressure.MASK_BATCH_MIN
    pressure.MASK_BATCH, pressure.MASK_BATCH_MIN = float(UNBOUNDED), UNBOUNDED
    try:
        yield
    finally:
        pressure.MASK_BATCH, pressure.MASK_BATCH_MIN = saved


def run_engine(window: int, work: Workload) -> Run:
    """The real engine, with its default context settings, at ``window`` (UNBOUNDED: unmanaged)."""
    if window >= UNBOUNDED:
        with unmanaged():
            return _run_engine(window, work)
    return _run_engine(window, work)


def _run_engine(window: int, work: Workload) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_job(Path(tmp) / "job", work)
        model = Scripted(work.script)
        settings = RunSettings(provider="scripted", model="trajectory", base_url=None, speed=0,
                               context_window=window, soft_threshold=DEFAULT_SOFT, hard_threshold=DEFAULT_HARD,
                               max_turns=100_000, max_restarts=1_000, auto_restart=True,
                               compact_at=0 if window >= UNBOUNDED else pressure.COMPACT_AT)
        result = Supervisor(paths, settings, model, clock=FakeClock()).run()
        if not result.ok:
            raise SystemExit(f"the engine's run at window {window:,} did not complete: {result.detail}")
        return Run(model.requests, model.output_tokens, model.made, result.restarts)


def _prompt_tokens(r: ModelRequest) -> int:
    return sum(n for _, n, _ in _blocks(r))


def _key(m: Message) -> tuple:
    """What of a message goes on the wire (meta is harness bookkeeping and never does)."""
    return (m.role, m.content, tuple((c.id, c.name, c.arguments) for c in m.tool_calls), m.tool_call_id, m.name)


def _wire_blocks(m: Message) -> int:
    """How many content blocks the Anthropic adapter makes of a message (for the 20-block lookback)."""
    return max(1, (1 if m.content.strip() else 0) + len(m.tool_calls))


_tools_keys: dict[int, tuple[object, str]] = {}


def _tools_key(r: ModelRequest) -> str:
    """The tool list as sent (one list object serves a whole session: serialise it once)."""
    got = _tools_keys.get(id(r.tools))
    if got is None or got[0] is not r.tools:
        got = _tools_keys[id(r.tools)] = (r.tools, json.dumps([t.model_dump() for t in r.tools]))
    return got[1]


def _blocks(r: ModelRequest) -> list[tuple[object, int, int]]:
    """The request as (wire key, tokens, content blocks), in the provider's cache-prefix order."""
    out: list[tuple[object, int, int]] = [
        (("tools", _tools_key(r)), estimate_tools(r), len(r.tools)),
        (("system", r.system), estimate_text(r.system), 1),
    ]
    out += [(_key(m), estimate_message(m), _wire_blocks(m)) for m in r.messages]
    out.append((("protected", r.protected), estimate_text(r.protected), 1))
    return out


# -- the peers, as transforms of the unmanaged run's requests -----------------------------------------------

Transform = Callable[[ModelRequest], ModelRequest]


def _swe_agent() -> Transform:
    return lambda r: r.model_copy(update={"messages": peers.swe_agent_last_n(r.messages)})


def _openhands() -> Transform:
    return lambda r: r.model_copy(update={"messages": peers.openhands_observation_masking(r.messages)})


@dataclass(frozen=True)
class AnthropicSetting:
    trigger: int
    keep: int
    clear_at_least: int
    mode: str  # "stateless" or "sticky"

    def __str__(self) -> str:
        return (f"trigger={self.trigger:,} keep={self.keep} clear_at_least={self.clear_at_least:,} "
                f"({self.mode})")

    def transform(self) -> Transform:
        if self.mode == "sticky":
            sticky = peers.StickyClearing(self.trigger, self.keep, self.clear_at_least)
            return lambda r: r.model_copy(update={"messages": sticky(r.messages, _prompt_tokens(r))})
        return lambda r: r.model_copy(update={"messages": peers.anthropic_clear_tool_uses(
            r.messages, _prompt_tokens(r), self.trigger, self.keep, self.clear_at_least)})


def anthropic_settings(window: int) -> list[AnthropicSetting]:
    triggers = [t for t in ANTHROPIC_TRIGGERS if t < window] or [min(ANTHROPIC_TRIGGERS)]
    return [AnthropicSetting(t, k, c, mode) for t, k, c, mode in itertools.product(
        triggers, ANTHROPIC_KEEPS, ANTHROPIC_CLEAR_AT_LEAST, ("stateless", "sticky"))
]


# -- measuring and pricing ---------------------------------------------------------------------------------


@dataclass
class Measure:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    peak: int = 0
    sent_peak: int = 0  # what the client sends (differs from peak only for server-side editing)
    protected: int = 0  # prompts with every protected layer
    splits: int = 0  # tool calls without their result, or results without their call, summed over prompts
    intact: int = 0  # prompts holding the agent's last INTACT_N results whole
    replies: int = 0  # the agent's earlier replies the unmanaged run's prompts hold, summed over prompts
    replies_kept: int = 0  # of those, the ones this policy's prompt holds as the agent wrote them
    cached: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    written: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    cost: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RULES, 0.0))
    label: str = ""

    @property
    def checks_pass(self) -> bool:
        return self.splits == 0 and self.protected == self.requests and self.intact == self.requests

    def fits(self, window: int) -> bool:
        return self.peak <= window

    @property
    def replies_kept_pct(self) -> float:
        return round(100 * self.replies_kept / self.replies, 1) if self.replies else 100.0


def _recent_results(r: ModelRequest, n: int) -> list[str]:
    return [m.tool_call_id or "" for m in r.messages if m.role == "tool"][-n:] if n else []


def _replies(r: ModelRequest) -> list[tuple]:
    """The agent's own replies a prompt holds, each as what went on the wire (its text and its calls): the same
    reply in two runs' prompts has the same key (the scripted model names its k-th call t<k> in every run)."""
    return [_key(m) for m in r.messages if m.role == "assistant"]


def measure(run: Run, prices: Prices, transform: Transform | None = None, label: str = "",
            expected: list[list[str]] | None = None, replies: list[list[tuple]] | None = None) -> Measure:
    """Price ``run``'s requests (after ``transform``) under both cache rules and check what they keep.

    ``expected[k]``: the call ids whose results request k must hold whole (the agent's last INTACT_N);
    ``replies[k]``: the agent's replies request k would hold if nothing were dropped (the unmanaged run's)."""
    out = Measure(label=label)
    bp_entries: set[int] = set()  # prefix hashes an earlier request wrote at a breakpoint
    seen: set[int] = set()  # every block-prefix hash any earlier request sent
    original: dict[str, str] = {}  # each result as the policy first sent it
    for k, (r, out_tokens) in enumerate(zip(run.requests, run.output_tokens, strict=True)):
        sent = _prompt_tokens(r)
        if transform is not None:
            r = transform(r)
        blocks = _blocks(r)
        sizes = [n for _, n, _ in blocks]
        total = sum(sizes)
        # Breakpoints (block indices whose end is cached): tools, system, the last conversation message.
        bps = [i for i in (0, 1) if sizes[i]] + ([len(blocks) - 2] if r.messages else [])
        last_bp = bps[-1] if bps else -1
        cum = [0]
        for n in sizes:
            cum.append(cum[-1] + n)
        hashes, h, wire = [], 0, [0]
        for key, _, nb in blocks:
            h = hash((h, key))
            hashes.append(h)
            wire.append(wire[-1] + nb)

        # Rule "prefix": the longest block prefix any earlier request sent.
        same = 0
        while same < len(hashes) and hashes[same] in seen:
            same += 1
        seen.update(hashes)
        read_prefix = cum[same]

        # Rule "breakpoints": a hit must be an entry an earlier request wrote, found from a breakpoint back.
        hit = 0  # number of blocks served from the cache
        for bp in bps:
            j = bp
            while j >= 0 and wire[bp + 1] - wire[j + 1] <= LOOKBACK_BLOCKS:
                if hashes[j] in bp_entries:
                    hit = max(hit, j + 1)
                    break
                j -= 1
        bp_entries.update(hashes[bp] for bp in bps)
        read_bp = cum[hit]

        for rule, read, written in (("prefix", read_prefix, 0),
                                    ("breakpoints", read_bp, max(0, cum[last_bp + 1] - read_bp))):
            out.cached[rule] += read
            out.written[rule] += written
            out.cost[rule] += prices.cost(Usage(total, out_tokens, read, True, written))

        out.requests += 1
        out.input_tokens += total
        out.output_tokens += out_tokens
        out.peak = max(out.peak, total)
        out.sent_peak = max(out.sent_peak, sent)
        out.protected += all(("ACTIVE TODO LIST" in r.protected, "MAIN PLAN (main_plan.md)" in r.protected,
                              bool(r.system), bool(r.tools)))
        out.splits += split_pairs(r.messages)
        results = {m.tool_call_id: m.content for m in r.messages if m.role == "tool" and m.tool_call_id}
        for cid, content in results.items():
            original.setdefault(cid, content)
        want = expected[k] if expected is not None else _recent_results(r, INTACT_N)
        out.intact += all(cid in results and results[cid] == original[cid] for cid in want)
        said = replies[k] if replies is not None else _replies(r)
        held = set(_replies(r))
        out.replies += len(said)
        out.replies_kept += sum(1 for key in said if key in held)
    return out


def parse_prices(text: str) -> Prices:
    try:
        inp, cached, write, output = (float(x) for x in text.split(","))
    except ValueError:
        raise SystemExit("--prices takes four numbers: input,cached,write,output (US$ per million tokens)") from None
    return Prices(input=inp, output=output, cached_input=cached, cache_write=write)


@dataclass
class Comparison:
    window: int
    runs: dict[str, Run]  # the run each policy's requests come from (the peers share the unmanaged one)
    measures: dict[str, Measure]  # anthropic: its best setting under the breakpoints rule
    anthropic: dict[str, Measure]  # every setting swept, by its label
    best_anthropic: dict[str, str]  # rule -> the label of anthropic's cheapest qualifying setting

    def peer(self, name: str, rule: str) -> Measure:
        return self.anthropic[self.best_anthropic[rule]] if name == "anthropic" else self.measures[name]

    def qualifies(self, m: Measure) -> bool:
        return m.fits(self.window) and m.checks_pass

    def best_peer(self, rule: str, fit: bool = True) -> str | None:
        """The cheapest peer under ``rule`` whose peak fits the window (``fit``) and whose checks pass."""
        ok = [p for p in PEERS if self.peer(p, rule).checks_pass and (self.peer(p, rule).fits(self.window)
                                                                      or not fit)]
        return min(ok, key=lambda p: self.peer(p, rule).cost[rule]) if ok else None

    def ratio(self, rule: str) -> float | None:
        best = self.best_peer(rule)
        return self.measures["ours"].cost[rule] / self.peer(best, rule).cost[rule] if best else None


def compare(window: int, work: Workload, prices: Prices) -> Comparison:
    ours_run = run_engine(window, work)
    base = run_engine(UNBOUNDED, work)
    # The agent's last N results, as the unmanaged run's prompt holds them at each turn.
    expected = [_recent_results(r, INTACT_N) for r in base.requests]
    # Every reply the agent made so far, as the unmanaged run's prompt holds them at each turn.
    said = [_replies(r) for r in base.requests]
    measures = {"ours": measure(ours_run, prices, label="ours", expected=expected, replies=said),
                "unmanaged": measure(base, prices, label="unmanaged", expected=expected, replies=said),
                "swe-agent": measure(base, prices, _swe_agent(), "swe-agent (n=5)", expected, said),
                "openhands": measure(base, prices, _openhands(), "openhands (attention_window=100)", expected,
                                     said)}
    sweep = {str(s): measure(base, prices, s.transform(), f"anthropic {s}", expected, said)
             for s in anthropic_settings(window)}
    best: dict[str, str] = {}
    for rule in RULES:
        ok = [k for k, m in sweep.items() if m.fits(window) and m.checks_pass] or list(sweep)
        best[rule] = min(ok, key=lambda k: sweep[k].cost[rule])
    measures["anthropic"] = sweep[best["breakpoints"]]
    return Comparison(window, {"ours": ours_run, **dict.fromkeys(PEERS, base)}, measures, sweep, best)


def _row(name: str, x: Measure, window: int) -> str:
    peak = f"{x.peak / 1000:,.1f}k" + (" OVER" if x.peak > window else "")
    checks = "ok" if x.checks_pass else (f"FAIL: splits {x.splits}, protected {x.protected}/{x.requests}, "
                                         f"last {INTACT_N} intact {x.intact}/{x.requests}")
    return (f"{name:<14} {x.input_tokens:>12,} {x.cached['breakpoints']:>12,} ${x.cost['breakpoints']:>8.2f} "
            f"{x.cached['prefix']:>12,} ${x.cost['prefix']:>8.2f} {peak:>10} {x.replies_kept_pct:>7.1f}% {checks}")


def report(c: Comparison, work: Workload) -> dict:
    m = c.measures
    print(f"\n== {work.name}: {len(c.runs['ours'].calls)} tool calls, window {c.window:,}, "
          f"ours restarted {c.runs['ours'].restarts} time(s)")
    head = (f"{'policy':<14} {'input tok':>12} {'cached (bp)':>12} {'cost (bp)':>9} {'cached (pfx)':>12} "
            f"{'cost (pfx)':>9} {'peak':>10} {'replies':>8} information kept")
    print(head)
    print("-" * len(head))
    rows = [("ours", m["ours"]), ("unmanaged", m["unmanaged"]), ("swe-agent", m["swe-agent"]),
            ("anthropic/bp", c.anthropic[c.best_anthropic["breakpoints"]]),
            ("anthropic/pfx", c.anthropic[c.best_anthropic["prefix"]]), ("openhands", m["openhands"])]
    for name, x in rows:
        print(_row(name, x, c.window))
    print("(replies: the agent's own earlier replies the prompts keep as it wrote them, of every one the unmanaged "
          "run's prompts hold; counted, not checked)")
    print(f"anthropic swept {len(c.anthropic)} settings; cheapest with the breakpoints rule: "
          f"{c.best_anthropic['breakpoints']}; with the prefix rule: {c.best_anthropic['prefix']}")
    for name in PEERS:
        for rule in RULES:
            x = c.peer(name, rule)
            if not c.qualifies(x) and (name != "anthropic" or rule == "breakpoints"):
                why = "overflows the window" if not x.fits(c.window) else "fails an information check"
                print(f"{name} is not counted as a peer: it {why} (peak {x.peak:,})")
                break
    ratios = {rule: c.ratio(rule) for rule in RULES}
    best = {rule: c.best_peer(rule) for rule in RULES}
    parts = []
    ratios_over: dict[str, float] = {}
    for rule in RULES:
        r, b = ratios[rule], best[rule]
        if r is None or b is None:
            b = c.best_peer(rule, fit=False)
            if b is None:
                parts.append(f"{rule}: no peer keeps the information")
                continue
            over = m["ours"].cost[rule] / c.peer(b, rule).cost[rule]
            parts.append(f"{rule} rule: no peer fits the window; vs the cheapest, which overflows it ({b}): "
                         f"{over:.3f}")
            ratios_over[rule] = over
            continue
        verdict = "met" if r <= GOAL else "NOT met"
        parts.append(f"{rule} rule {r:.3f} (best peer {b}: ${c.peer(b, rule).cost[rule]:.2f} vs ours "
                     f"${m['ours'].cost[rule]:.2f}; goal <= {GOAL}: {verdict})")
    print(f"ours / best peer at {c.window:,}: " + "; ".join(parts))
    return {
        "workload": work.name,
        "context_window": c.window,
        "restarts": c.runs["ours"].restarts,
        "policies": {name: {
            "setting": x.label,
            "requests": x.requests, "input_tokens": x.input_tokens, "output_tokens": x.output_tokens,
            "cached_tokens": x.cached, "written_tokens": x.written,
            "cost_usd": {k: round(v, 4) for k, v in x.cost.items()},
            "peak_context_tokens": x.peak, "fits_window": x.fits(c.window),
            "protected_layers_present_pct": round(100 * x.protected / x.requests, 1),
            "split_tool_pairs": x.splits,
            f"last_{INTACT_N}_results_intact_pct": round(100 * x.intact / x.requests, 1),
            # Of the agent's earlier replies (every one the unmanaged prompt holds), the share this prompt holds.
            "own_replies_kept_pct": x.replies_kept_pct,
        } for name, x in rows},
        "best_peer": best,
        "ours_to_best_peer": {k: round(v, 4) if v is not None else None for k, v in ratios.items()},
        "ours_to_cheapest_overflowing_peer": {k: round(v, 4) for k, v in ratios_over.items()},
        "ours_checks_pass": m["ours"].checks_pass,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--context-window", "--window", dest="windows", type=int, nargs="+", default=None,
                    help="the window(s) ours runs at (default 128000; 16000 32000 128000 with --trajectory)")
    ap.add_argument("--reads", type=int, default=320, help="the synthetic run's reads")
    ap.add_argument("--trajectory", type=Path, nargs="+", default=None,
                    help="recorded trajectories, replayed one after another as one job")
    ap.add_argument("--prices", default="3.00,0.30,3.75,15.00", help="input,cached,write,output in US$ per MTok")
    args = ap.parse_args()
    prices = parse_prices(args.prices)
    work = recorded(args.trajectory) if args.trajectory else synthetic(args.reads)
    windows = args.windows or ([16_000, 32_000, 128_000] if args.trajectory else [128_000])
    print(f"{work.name}; US$/MTok: input {prices.input:.2f}, cached {prices.cached_input:.2f}, cache write "
          f"{prices.cache_write:.2f}, output {prices.output:.2f}; bp = breakpoints rule (Anthropic), pfx = prefix "
          "rule (automatic, OpenAI/vLLM)")
    results = [report(compare(w, work, prices), work) for w in windows]
    failed = [r["context_window"] for r in results if not r["ours_checks_pass"]]
    worst = {rule: max((r["ours_to_best_peer"][rule] for r in results
                        if r["ours_to_best_peer"][rule] is not None), default=None) for rule in RULES}
    print("ours / best peer, worst over the windows: " + ", ".join(
        f"{rule} {v:.3f}" if v is not None else f"{rule} n/a" for rule, v in worst.items())
          + f" (goal <= {GOAL})")
    mcp = [mcp_prompt_tokens(n) for n in (5, 50, 200)]
    print("MCP tools, the first request's prompt tokens (tool definitions + system prompt): " + "; ".join(
        f"{row['tools']} tools: {row['all_offered']:,} all offered, {row['search']:,} behind mcp_tool_search "
        f"({row['all_offered'] - row['search']:,} saved; {row['search_3_loaded']:,} with 3 loaded)" for row in mcp))
    if failed:
        print(f"INFORMATION CHECK FAILED for ours at window(s) {failed}", file=sys.stderr)
    print(json.dumps({"workload": work.name, "goal": GOAL, "ours_to_best_peer_worst": worst,
                      "information_checks_pass": not failed, "windows": results,
                      "mcp_tool_search": [{**row, "saved": row["all_offered"] - row["search"]} for row in mcp]}))
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
