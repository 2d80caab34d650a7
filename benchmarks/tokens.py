"""What one long trajectory costs under four context policies: ours, none, SWE-agent's, Anthropic's.

The trajectory is scripted and identical under every policy: 320 read_file calls over 60 data files, a
todo_complete every 16 reads, the three final-review todo_completes and job_complete (344 tool calls), with
observations sized so that tool output is ~80% of the conversation's tokens, as measured for real coding
agents. The model ignores whatever the harness sends, so the policies differ only in what the model is sent:

- ours: the real engine with a context window (default 128k tokens) and the default thresholds (soft 70%:
  mask the oldest observations in batches; hard 85%: wind down and restart with carryover);
- unmanaged: no masking, no wind-down, no restarts (an unbounded window);
- swe-agent: SWE-agent's ``LastNObservations`` history processor with n=5, polling=1 (the setting of the
  SWE-agent paper and of its 0.7 config; sweagent/agent/history_processors.py). The instance template (the
  first user message) and the last 5 observations stay; every other observation's content becomes
  ``Old environment output: (N lines omitted)``, N being its line count. Assistant messages are never touched;
- anthropic: Anthropic's context editing ``clear_tool_uses_20250919`` with its documented defaults
  (build-with-claude/context-editing): once the prompt exceeds the trigger of 100,000 input tokens, the oldest
  tool results are cleared until only the 3 most recent tool uses keep theirs; clear_at_least none,
  exclude_tools none, clear_tool_inputs false (tool calls stay). Each cleared result is replaced by a
  placeholder whose exact text Anthropic does not publish; ``[cleared]`` (LangChain's mirror of this
  strategy) stands for it. The edit runs server-side on every request: the client sends its full history and
  the trigger is measured on it, so past the trigger every request clears all but the last 3 results.

The two peers are simulated, not run: each of the unmanaged run's requests is transformed by the peer's rule
before it is measured (what SWE-agent does to its history before a query, what Anthropic's server does before
the prompt reaches the model). The scripted model ignores content, so the trajectory is the same either way.
Token counts are the project's estimator (console.engine.context.tokens), as the engine's fallback uses.

Cost model (one rule for all four policies: Anthropic's explicit prompt caching, as our adapter uses it).
A prompt is the blocks tools, system, conversation messages, then the protected layer (todo list, plan), with
cache breakpoints after the tools, after the system prompt and after the last conversation message; the
protected layer follows the last breakpoint. For each request, ``input_tokens`` is the whole prompt; the
cache-read tokens are a prefix of it served from the cache (priced at cached input); the cache-write tokens are
the rest of the prompt up to this request's last breakpoint (priced at cache write); what follows that
breakpoint is plain input; output is priced as output. Which prefix is a read:

- ``breakpoints`` (default; how Anthropic serves hits): the longest prefix that an earlier request wrote as a
  cache entry, i.e. that ended at one of its breakpoints and is byte-identical here, found at or at most 20
  content blocks before one of this request's breakpoints. A change anywhere before the previous request's
  last breakpoint therefore costs a rewrite from the last entry still intact (usually the system prompt);
- ``prefix`` (looser; what an any-prefix cache such as OpenAI's automatic one would serve): every block that
  is byte-identical to the previous request's prompt, up to the previous request's last breakpoint.

Both are computed; the table shows ``--cache``, the lines under it the other rule. Entries never expire (the
requests follow each other within the 5-minute TTL, which each hit refreshes) and the 1,024-token minimum is
met (tools alone are ~1.4k tokens). Prices are US dollars per million tokens (console.engine.cost.Prices); the
default is Anthropic's published Sonnet price: input 3.00, cached input 0.30, 5-minute cache write 3.75,
output 15.00. The best peer is the cheapest of unmanaged, swe-agent and anthropic whose peak fits the window.

Also measured, as before: peak context (vs the window; a policy that would overflow it is flagged, not
hidden), the share of tokens that is an unchanged prefix of the previous request, whether the protected layers
(system prompt, tools, todo list, plan) are in every prompt, and tool calls without their result.

    python benchmarks/tokens.py [--window 128000] [--reads 320] [--prices 3,0.3,3.75,15] [--cache breakpoints]

The last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from console.engine.clock import FakeClock
from console.engine.context.carryover import split_pairs
from console.engine.context.tokens import estimate_message, estimate_text, estimate_tools
from console.engine.cost import Prices
from console.engine.job import JobPaths
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import Stop, StreamEvent, TextDelta, ToolCallEvent, Usage
from console.engine.phases import COMPLETION_TODOS
from console.engine.run_settings import RunSettings
from console.engine.supervisor import Supervisor
from console.engine.todos import TodoManager

FILES = 60
READS_PER_TODO = 16
OBSERVATION_CHARS = 2_400  # ~600 tokens per read
REASONING = ("I compare this part with what the earlier parts said, note the fields it defines and how they "
             "relate to the records seen so far, check the edge cases it mentions, and decide what to read "
             "next so that the summary covers every section without reading anything twice. ") * 2
SONNET = Prices(input=3.00, output=15.00, cached_input=0.30, cache_write=3.75)
UNBOUNDED = 100_000_000

# SWE-agent, sweagent/agent/history_processors.py, LastNObservations (n=5 in the paper and config 0.7).
SWE_AGENT_N = 5
SWE_AGENT_PLACEHOLDER = "Old environment output: ({lines} lines omitted)"
# Anthropic context editing, clear_tool_uses_20250919 defaults (build-with-claude/context-editing).
ANTHROPIC_TRIGGER = 100_000
ANTHROPIC_KEEP = 3
ANTHROPIC_PLACEHOLDER = "[cleared]"
# Anthropic prompt caching looks for an earlier cache entry at most this many blocks before a breakpoint.
LOOKBACK_BLOCKS = 20
POLICIES = ("ours", "unmanaged", "swe-agent", "anthropic")


def script(reads: int) -> list[ToolCall]:
    """The fixed sequence of tool calls the model makes, whatever it is told."""
    calls: list[tuple[str, dict]] = []
    for i in range(1, reads + 1):
        calls.append(("read_file", {"path": f"data/part{i % FILES:02d}.txt"}))
        if i % READS_PER_TODO == 0:
            calls.append(("todo_complete", {}))
    calls += [("todo_complete", {})] * len(COMPLETION_TODOS)
    calls.append(("job_complete", {"summary": "read every part", "confidence": 0.9}))
    return [ToolCall(id=f"t{n + 1}", name=name, arguments=json.dumps(args)) for n, (name, args) in enumerate(calls)]


class Trajectory:
    """A model that follows a fixed script, whatever the prompt says."""

    name, model = "scripted", "trajectory"

    def __init__(self, reads: int) -> None:
        self.calls = script(reads)
        self.requests: list[ModelRequest] = []
        self.output_tokens: list[int] = []
        self.made: list[str] = []

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.requests.append(request)
        # The last call (job_complete) repeats if the harness refuses it.
        call = self.calls[min(len(self.requests), len(self.calls)) - 1]
        call = call.model_copy(update={"id": f"t{len(self.requests)}"})
        self.made.append(call.name)
        out = estimate_text(REASONING) + estimate_text(call.arguments)
        self.output_tokens.append(out)
        yield TextDelta(REASONING)
        yield ToolCallEvent(call)
        yield Usage(_prompt_tokens(request), out, 0)
        yield Stop("tool_use")


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


def make_job(root: Path, reads: int) -> JobPaths:
    paths = JobPaths(root)
    (root / "data").mkdir(parents=True)
    paths.instructions.write_text("# Read every part of the data set and summarise it.\n")
    line = "field_{i:03d}: a value that the parser keeps, with notes on its range and its unit.\n"
    for f in range(FILES):
        body = "".join(line.format(i=i) for i in range(200))[:OBSERVATION_CHARS]
        (root / "data" / f"part{f:02d}.txt").write_text(body)
    todos = reads // READS_PER_TODO
    paths.main_plan.write_text("# Execution Plan\n\n## Overview\nRead the data set.\n\n## Phase 1: Reading ← CURRENT\n"
                               + "".join(f"- [ ] Read parts, batch {i + 1}\n" for i in range(todos)))
    todo_list = TodoManager()
    todo_list.install([f"Read parts, batch {i + 1}" for i in range(todos)], kind="phase", phase_name="Reading",
                      phase_number=1, total_phases=1)
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


def run_engine(window: int, reads: int) -> Run:
    if reads < READS_PER_TODO:
        raise SystemExit(f"--reads must be at least {READS_PER_TODO} (one todo's worth)")
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_job(Path(tmp) / "job", reads)
        model = Trajectory(reads)
        settings = RunSettings(provider="scripted", model="trajectory", base_url=None, speed=0,
                               context_window=window, soft_threshold=0.70, hard_threshold=0.85,
                               max_turns=10_000, max_restarts=100, auto_restart=True)
        result = Supervisor(paths, settings, model, clock=FakeClock()).run()
        assert result.ok, result.detail
        return Run(model.requests, model.output_tokens, model.made, result.restarts)


# -- the peers' rules, applied to a request's messages ----------------------------------------------------


def swe_agent_last_n(messages: list[Message], n: int = SWE_AGENT_N) -> list[Message]:
    """SWE-agent's LastNObservations(n, polling=1): elide all observations but the template and the last n.

    In SWE-agent the observations are the instance template (the first user message) and every tool
    output; ``observation_indices[1:len - n]`` are elided, so the template always stays.
    """
    observations = [i for i, m in enumerate(messages) if m.role == "tool"]
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    if first_user is not None and (not observations or first_user < observations[0]):
        observations.insert(0, first_user)
    omit = set(observations[1:max(0, len(observations) - n)])
    if not omit:
        return messages
    return [m.model_copy(update={"content": SWE_AGENT_PLACEHOLDER.format(lines=len(m.content.splitlines()))})
            if i in omit else m for i, m in enumerate(messages)]


def anthropic_clear_tool_uses(messages: list[Message], prompt_tokens: int, trigger: int | None = None,
                              keep: int = ANTHROPIC_KEEP) -> list[Message]:
    """clear_tool_uses_20250919 with its defaults: past the trigger, clear all tool results but the last ``keep``.

    ``prompt_tokens`` is the whole prompt as the client sent it (the trigger counts input tokens).
    """
    if prompt_tokens <= (ANTHROPIC_TRIGGER if trigger is None else trigger):
        return messages
    results = [i for i, m in enumerate(messages) if m.role == "tool"]
    clear = set(results[:max(0, len(results) - keep)])
    return [m.model_copy(update={"content": ANTHROPIC_PLACEHOLDER}) if i in clear else m
            for i, m in enumerate(messages)]


Transform = Callable[[ModelRequest], ModelRequest]


def _swe_agent(r: ModelRequest) -> ModelRequest:
    return r.model_copy(update={"messages": swe_agent_last_n(r.messages)})


def _anthropic(r: ModelRequest) -> ModelRequest:
    return r.model_copy(update={"messages": anthropic_clear_tool_uses(r.messages, _prompt_tokens(r))})


# -- measuring and pricing ---------------------------------------------------------------------------------


@dataclass
class Measure:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    peak: int = 0
    sent_peak: int = 0  # what the client sends (differs from peak only for server-side editing)
    shared: int = 0  # tokens that are an unchanged prefix of the previous request (any prefix)
    protected: int = 0
    splits: int = 0
    full_observations_max: int = 0
    cached: dict[str, int] = field(default_factory=lambda: {"prefix": 0, "breakpoints": 0})
    written: dict[str, int] = field(default_factory=lambda: {"prefix": 0, "breakpoints": 0})
    cost: dict[str, float] = field(default_factory=lambda: {"prefix": 0.0, "breakpoints": 0.0})


def measure(run: Run, prices: Prices, transform: Transform | None = None) -> Measure:
    out = Measure()
    prev: list[tuple[object, int, int]] | None = None
    prev_last_bp = 0
    entries: set[int] = set()  # prefix hashes an earlier request wrote at a breakpoint
    for r, out_tokens in zip(run.requests, run.output_tokens, strict=True):
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

        # Rule "prefix": the longest block prefix identical to the previous request's, up to its last breakpoint.
        same = 0
        if prev is not None:
            for (a, _, _), (b, _, _) in zip(blocks, prev, strict=False):
                if a != b:
                    break
                same += 1
        out.shared += cum[same]
        read_prefix = cum[min(same, prev_last_bp + 1, last_bp + 1)] if prev is not None else 0

        # Rule "breakpoints": a hit must be an entry an earlier request wrote, found from a breakpoint back.
        hashes, h, wire = [], 0, [0]
        for key, _, nb in blocks:
            h = hash((h, key))
            hashes.append(h)
            wire.append(wire[-1] + nb)
        hit = 0  # number of blocks served from the cache
        for bp in bps:
            j = bp
            while j >= 0 and wire[bp + 1] - wire[j + 1] <= LOOKBACK_BLOCKS:
                if hashes[j] in entries:
                    hit = max(hit, j + 1)
                    break
                j -= 1
        entries.update(hashes[bp] for bp in bps)
        read_bp = cum[hit]

        for rule, read in (("prefix", read_prefix), ("breakpoints", read_bp)):
            written = max(0, cum[last_bp + 1] - read)
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
        out.full_observations_max = max(out.full_observations_max, sum(
            1 for m in r.messages if m.role == "tool" and "\nfield_000: " in m.content))
        prev, prev_last_bp = blocks, last_bp
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
    measures: dict[str, Measure]

    def best_peer(self, rule: str) -> str | None:
        """The cheapest peer under ``rule`` whose peak fits the window."""
        fits = [p for p in POLICIES[1:] if self.measures[p].peak <= self.window]
        return min(fits, key=lambda p: self.measures[p].cost[rule]) if fits else None

    def ratio(self, rule: str) -> float | None:
        best = self.best_peer(rule)
        return self.measures["ours"].cost[rule] / self.measures[best].cost[rule] if best else None


def compare(window: int, reads: int, prices: Prices) -> Comparison:
    ours_run = run_engine(window, reads)
    base = run_engine(UNBOUNDED, reads)
    return Comparison(
        window,
        {"ours": ours_run, "unmanaged": base, "swe-agent": base, "anthropic": base},
        {"ours": measure(ours_run, prices), "unmanaged": measure(base, prices),
         "swe-agent": measure(base, prices, _swe_agent), "anthropic": measure(base, prices, _anthropic)},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", type=int, default=128_000)
    ap.add_argument("--reads", type=int, default=320)
    ap.add_argument("--prices", default="3.00,0.30,3.75,15.00", help="input,cached,write,output in US$ per MTok")
    ap.add_argument("--cache", choices=("breakpoints", "prefix"), default="breakpoints",
                    help="which cache-read rule the table prices (both go into the JSON)")
    args = ap.parse_args()
    prices = parse_prices(args.prices)
    rule = args.cache
    other = "breakpoints" if rule == "prefix" else "prefix"
    c = compare(args.window, args.reads, prices)
    m, base = c.measures, c.runs["unmanaged"]

    late = base.requests[-READS_PER_TODO]  # a late prompt of the unmanaged run, before the final compaction
    tool_share = sum(estimate_message(x) for x in late.messages if x.role == "tool") / _prompt_tokens(late)
    print(f"trajectory: {len(base.calls)} tool calls; tool output is {tool_share:.0%} of a late unmanaged prompt; "
          f"window {args.window:,}; US$/MTok: input {prices.input:.2f}, cached {prices.cached_input:.2f}, "
          f"cache write {prices.cache_write:.2f}, output {prices.output:.2f}; cache rule: {rule}")
    head = (f"{'policy':<10} {'requests':>8} {'input tok':>12} {'cached':>12} {'written':>11} {'output':>9} "
            f"{'peak / window':>18} {'cost':>9} {'x ours':>7}")
    print(head)
    print("-" * len(head))
    ours_cost = m["ours"].cost[rule]
    for name in POLICIES:
        x = m[name]
        peak = f"{x.peak / 1000:,.0f}k / {args.window / 1000:,.0f}k" + (" OVER" if x.peak > args.window else "")
        print(f"{name:<10} {x.requests:>8} {x.input_tokens:>12,} {x.cached[rule]:>12,} {x.written[rule]:>11,} "
              f"{x.output_tokens:>9,} {peak:>18} ${x.cost[rule]:>8.2f} {x.cost[rule] / ours_cost:>7.2f}")
    for p in POLICIES[1:]:
        if m[p].peak > args.window:
            print(f"{p} overflows the window: its peak of {m[p].peak:,} tokens is {m[p].peak / args.window:.2f}x "
                  f"{args.window:,} (priced as if the model took it; not counted as a peer)")
    if m["anthropic"].sent_peak > m["anthropic"].peak:
        print(f"anthropic: the model sees at most {m['anthropic'].peak:,} tokens; the client still sends its full "
              f"history, up to {m['anthropic'].sent_peak:,}")
    for name in POLICIES:
        x = m[name]
        print(f"{name:>10}: {other} rule: cost ${x.cost[other]:.2f} (cached {x.cached[other]:,}, written "
              f"{x.written[other]:,}); unchanged prefix {100 * x.shared / x.input_tokens:.1f}%, protected layers "
              f"in {100 * x.protected / x.requests:.0f}% of prompts, split pairs {x.splits}, at most "
              f"{x.full_observations_max} full observations in a prompt")
    best, ratio = c.best_peer(rule), c.ratio(rule)
    best_other, ratio_other = c.best_peer(other), c.ratio(other)
    if best is not None and ratio is not None:
        line = (f"ours / best peer = {ratio:.3f} (best peer: {best}, ${ours_cost:.2f} vs "
                f"${m[best].cost[rule]:.2f})")
        if ratio_other is not None:
            line += f"; with the {other} rule: {ratio_other:.3f} (best peer: {best_other})"
        print(line)
    print(json.dumps({
        "context_window": args.window,
        "tool_calls": {name: len(run.calls) for name, run in c.runs.items()},
        "prices_per_mtok": {"input": prices.input, "cached_input": prices.cached_input,
                            "cache_write": prices.cache_write, "output": prices.output},
        "cache_rule": rule,
        "policies": {name: {
            "requests": x.requests, "input_tokens": x.input_tokens, "output_tokens": x.output_tokens,
            "cached_tokens": x.cached, "written_tokens": x.written,
            "cost_usd": {k: round(v, 4) for k, v in x.cost.items()},
            "peak_context_tokens": x.peak, "fits_window": x.peak <= args.window,
            "cacheable_prefix_pct": round(100 * x.shared / x.input_tokens, 1),
            "protected_layers_present_pct": round(100 * x.protected / x.requests, 1),
            "split_tool_pairs": x.splits,
            "max_full_observations": x.full_observations_max,
        } for name, x in m.items()},
        "restarts": c.runs["ours"].restarts,
        "anthropic_sent_peak_tokens": m["anthropic"].sent_peak,
        "best_peer": best,
        "ours_to_best_peer": round(ratio, 4) if ratio is not None else None,
        "best_peer_" + other: best_other,
        "ours_to_best_peer_" + other: round(ratio_other, 4) if ratio_other is not None else None,
        "managed_to_unmanaged_input_tokens": round(m["ours"].input_tokens / m["unmanaged"].input_tokens, 4),
        "tool_output_share": round(tool_share, 3),
    }))


if __name__ == "__main__":
    main()
