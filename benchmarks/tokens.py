"""Token use of one long trajectory, unmanaged vs managed by the context engine.

The trajectory is scripted and identical in both runs: 320 read_file calls
over 60 data files plus a todo_complete every 16 reads (340 tool calls), with
observations sized so that tool output is ~80% of the conversation's tokens,
as measured for real coding agents. The model ignores everything the harness
says, so the two runs differ only in what the harness sends:

- unmanaged: no masking, no wind-down, no restarts (an unbounded window);
- managed: the real engine with a context window (default 128k tokens) and the
  default thresholds (soft 70%, hard 85%).

For every request the model sees we record its size (the scripted provider
reports what a real one would), the share of it that is an unchanged prefix
of the previous request (what a provider's prompt cache can serve), whether
the protected layers (system prompt, tools, todo list, plan) are present, and
whether any tool call lacks its result.

    python benchmarks/tokens.py [--window 128000] [--reads 320]

The last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

from console.engine.clock import FakeClock
from console.engine.context.carryover import split_pairs
from console.engine.context.tokens import estimate_message, estimate_text, estimate_tools
from console.engine.job import JobPaths
from console.engine.messages import ModelRequest, ToolCall
from console.engine.model import Stop, StreamEvent, TextDelta, ToolCallEvent, Usage
from console.engine.run_settings import RunSettings
from console.engine.supervisor import Supervisor
from console.engine.todos import TodoManager

FILES = 60
READS_PER_TODO = 16
OBSERVATION_CHARS = 2_400  # ~600 tokens per read
REASONING = ("I compare this part with what the earlier parts said, note the fields it defines and how they "
             "relate to the records seen so far, check the edge cases it mentions, and decide what to read "
             "next so that the summary covers every section without reading anything twice. ") * 2


class Trajectory:
    """A model that follows a fixed script, whatever the prompt says."""

    name, model = "scripted", "trajectory"

    def __init__(self, reads: int) -> None:
        self.reads = reads
        self.step = 0
        self.done_reads = 0
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.requests.append(request)
        self.step += 1
        if self.done_reads >= self.reads:
            call = ToolCall(id=f"t{self.step}", name="job_complete", arguments=json.dumps(
                {"summary": "read every part", "confidence": 0.9}))
        elif self.done_reads and self.done_reads % READS_PER_TODO == 0 and not getattr(self, "_ticked", False):
            call = ToolCall(id=f"t{self.step}", name="todo_complete", arguments="{}")
            self._ticked = True
        else:
            self._ticked = False
            self.done_reads += 1
            call = ToolCall(id=f"t{self.step}", name="read_file",
                            arguments=json.dumps({"path": f"data/part{self.done_reads % FILES:02d}.txt"}))
        text = REASONING
        tokens_in = _prompt_tokens(request)
        yield TextDelta(text)
        yield ToolCallEvent(call)
        yield Usage(tokens_in, estimate_text(text) + estimate_text(call.arguments), 0)
        yield Stop("tool_use")


def _blocks(r: ModelRequest) -> list[tuple[str, int]]:
    """The request as the ordered blocks a provider caches by prefix, with their token sizes."""
    out = [(r.system, estimate_text(r.system)), (json.dumps([t.model_dump() for t in r.tools]), estimate_tools(r))]
    out += [(m.model_dump_json(), estimate_message(m)) for m in r.messages]
    out.append((r.protected, estimate_text(r.protected)))
    return out


def _prompt_tokens(r: ModelRequest) -> int:
    return sum(n for _, n in _blocks(r))


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


def run(window: int, reads: int, managed: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_job(Path(tmp) / "job", reads)
        model = Trajectory(reads)
        settings = RunSettings(provider="scripted", model="trajectory", base_url=None, speed=0,
                               context_window=window if managed else 100_000_000, soft_threshold=0.70,
                               hard_threshold=0.85, max_turns=10_000, max_restarts=100, auto_restart=True)
        result = Supervisor(paths, settings, model, clock=FakeClock()).run()
        assert result.ok, result.detail
        sizes, prefix, protected, splits = [], [], 0, 0
        prev: list[tuple[str, int]] | None = None
        for r in model.requests:
            blocks = _blocks(r)
            total = sum(n for _, n in blocks)
            shared = 0
            if prev is not None:
                for (a, n), (b, _) in zip(blocks, prev, strict=False):
                    if a != b:
                        break
                    shared += n
            sizes.append(total)
            prefix.append(shared)
            prev = blocks
            protected += all(("ACTIVE TODO LIST" in r.protected, "MAIN PLAN (main_plan.md)" in r.protected,
                              bool(r.system), bool(r.tools)))
            splits += split_pairs(r.messages)
        last = model.requests[-1]
        tool_tokens = sum(estimate_message(m) for m in last.messages if m.role == "tool")
        calls = sum(len(m.tool_calls) for r in model.requests[-1:] for m in r.messages)
        return {
            "turns": len(model.requests),
            "tool_calls": model.step,
            "input_tokens": sum(sizes),
            "peak_context_tokens": max(sizes),
            "restarts": result.restarts,
            "cacheable_prefix_pct": round(100 * sum(prefix) / sum(sizes), 1),
            "protected_layers_present_pct": round(100 * protected / len(model.requests), 1),
            "split_tool_pairs": splits,
            "tool_output_share_last_prompt": round(tool_tokens / max(1, sizes[-1]), 3) if not managed else None,
            "calls_in_last_prompt": calls,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", type=int, default=128_000)
    ap.add_argument("--reads", type=int, default=320)
    args = ap.parse_args()
    un = run(args.window, args.reads, managed=False)
    ma = run(args.window, args.reads, managed=True)
    ratio = ma["input_tokens"] / un["input_tokens"]
    print(f"trajectory: {un['tool_calls']} tool calls in {un['turns']} turns; tool output is "
          f"{un['tool_output_share_last_prompt']:.0%} of the unmanaged final prompt")
    for name, r in (("unmanaged", un), ("managed", ma)):
        print(f"{name:>9}: input {r['input_tokens']:>12,} tokens, peak context {r['peak_context_tokens']:>8,} "
              f"(window {args.window:,}), restarts {r['restarts']}, cacheable prefix {r['cacheable_prefix_pct']}%, "
              f"protected layers {r['protected_layers_present_pct']}%, split pairs {r['split_tool_pairs']}")
    print(f"managed / unmanaged input tokens: {ratio:.3f}; unmanaged peak is "
          f"{un['peak_context_tokens'] / args.window:.1f}x the window")
    print(json.dumps({
        "unmanaged_input_tokens": un["input_tokens"],
        "managed_input_tokens": ma["input_tokens"],
        "managed_to_unmanaged_ratio": round(ratio, 4),
        "context_window": args.window,
        "peak_context_tokens": ma["peak_context_tokens"],
        "unmanaged_peak_context_tokens": un["peak_context_tokens"],
        "restarts": ma["restarts"],
        "cacheable_prefix_pct": ma["cacheable_prefix_pct"],
        "unmanaged_cacheable_prefix_pct": un["cacheable_prefix_pct"],
        "protected_layers_present_pct": ma["protected_layers_present_pct"],
        "split_tool_pairs": ma["split_tool_pairs"] + un["split_tool_pairs"],
        "tool_calls": ma["tool_calls"],
        "tool_output_share": un["tool_output_share_last_prompt"],
    }))


if __name__ == "__main__":
    main()
