"""MCP's figures (issue 36, point 8): the prompt tokens the search-and-load step saves, what confinement adds to an
MCP call, and a server's start time confined and unconfined.

1. Prompt tokens: the tool definitions and the system prompt of a run's first request (the harness's own tools and
   N synthetic MCP tools whose schemas are shaped like real servers': three typed, described properties, a
   description of a sentence or two), all offered at once vs behind ``mcp_tool_search`` (and with 3 tools loaded),
   for N = 5, 50 and 200, by the harness's own estimate (the one its context budget uses).
2. A call: ``get_current_time`` of the real ``mcp-server-time`` (PyPI), started once confined (bubblewrap, as a run
   starts it) and once unconfined (``run --unconfined``), called alternately N times each through the port the
   engine uses (console.mcp's client: the SDK's session over our stdio transport). Per call: wall time, and CPU time
   of this process (the client's loop thread) plus the server's whole process tree (bwrap and the server).
3. Start: the time from spawning the server until its tool list is read, confined and unconfined, alternately.

    python benchmarks/mcp_cost.py [--calls 500] [--starts 10]

The last line is a JSON summary. (Not benchmarks/mcp.py: a script's folder comes first on sys.path, and that
name would hide the ``mcp`` SDK.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from console.engine.context.layers import DEFAULT_SYSTEM_PROMPT, build_system
from console.engine.context.tokens import estimate_text
from console.engine.tools import default_registry
from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo, build_mcp_tools
from console.engine.tools.tool_search import LOADED_KEY, offer_mcp_tools

WINDOW = 128_000


# -- 1. prompt tokens -----------------------------------------------------------------------------------------
class Synthetic:
    """A server's port listing ``count`` tools shaped like a real server's (git, issue tracker, files)."""

    VERBS = ("list", "get", "create", "update", "delete", "search", "diff", "show")
    THINGS = ("issues", "commits", "branches", "files", "comments", "labels", "pull_requests", "releases")

    def __init__(self, name: str, count: int) -> None:
        self.config = McpServerConfig(name=name, command=["srv"])
        self.tools = [self._tool(i) for i in range(count)]

    def _tool(self, i: int) -> McpToolInfo:
        verb, thing = self.VERBS[i % 8], self.THINGS[(i // 8) % 8]
        schema = {"type": "object", "properties": {
            "repo": {"type": "string", "description": "The repository, as owner/name or a path to its folder."},
            "query": {"type": "string", "description": f"Which {thing} to {verb}: words, a number or a name."},
            "limit": {"type": "integer", "description": "The most entries to return.", "default": 20,
                      "minimum": 1, "maximum": 100}},
            "required": ["repo"]}
        return McpToolInfo(f"{verb}_{thing}_{i}", f"{verb.capitalize()} {thing.replace('_', ' ')} of a repository. "
                                                 f"Returns them as JSON, newest first; at most `limit` entries.",
                           schema)

    def call(self, *a: Any, **k: Any) -> McpCallResult:
        return McpCallResult(True, "")

    def close(self) -> None:
        pass


def prompt_tokens(count: int) -> dict[str, int]:
    base = default_registry().tools()
    # Servers of at most 100 tools each (a server's list is considered up to 128).
    tools = build_mcp_tools([Synthetic(f"gh{i}", min(100, count - i * 100)) for i in range((count + 99) // 100)]).tools

    def tokens(registry: Any) -> int:
        specs = json.dumps([s.model_dump() for s in registry.specs()], separators=(",", ":"))
        return estimate_text(specs) + estimate_text(build_system(DEFAULT_SYSTEM_PROMPT, registry))

    plain = tokens(default_registry())
    everything = tokens(offer_mcp_tools(base, tools, WINDOW, 1.0))
    deferred_registry = offer_mcp_tools(base, tools, WINDOW, 1e-9)
    deferred = tokens(deferred_registry)
    assert deferred_registry.search is not None
    record = [LOADED_KEY + t.name for t in tools[:3]]
    deferred_registry.search.bind(lambda: record)
    loaded = tokens(deferred_registry)
    return {"tools": count, "no_mcp": plain, "all_offered": everything, "search": deferred, "search_3_loaded": loaded,
            "deferred_by_default": offer_mcp_tools(base, tools, WINDOW, None).search is not None}


# -- 2 and 3. a real server, confined and unconfined ----------------------------------------------------------
def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and every descendant still alive."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        for p in [root, *root.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def servers(root: str) -> tuple[McpServerConfig, dict[str, CommandWorld]]:
    py_home = os.path.realpath(sys.base_prefix)  # the Python the venv was made from: visible to the server
    venv = os.path.realpath(sys.prefix)
    program = shutil.which("mcp-server-time", path=os.path.join(venv, "bin"))
    if program is None:
        sys.exit("mcp-server-time is not installed in this venv: pip install -e '.[test]'")
    config = McpServerConfig(name="time", command=[program, "--local-timezone", "UTC"], required=True)
    worlds = {"confined": CommandWorld(read_only=(py_home, venv)), "unconfined": CommandWorld(unconfined=True)}
    return config, worlds


def measure_starts(root: str, starts: int) -> dict[str, list[float]]:
    from console.mcp.client import start_servers

    config, worlds = servers(root)
    out: dict[str, list[float]] = {m: [] for m in worlds}
    for _ in range(starts):
        for mode, world in worlds.items():
            began = time.perf_counter()
            (server,), _ = start_servers([config], root, world)
            out[mode].append(time.perf_counter() - began)
            server.close()
    return out


def measure_calls(root: str, calls: int) -> dict[str, dict[str, list[float]]]:
    from console.mcp.client import start_servers

    config, worlds = servers(root)
    started = {mode: start_servers([config], root, world)[0][0] for mode, world in worlds.items()}
    out: dict[str, dict[str, list[float]]] = {m: {"wall": [], "cpu": []} for m in worlds}
    try:
        pids = {m: s._process.pid for m, s in started.items()}  # type: ignore[union-attr]
        for i in range(calls + 10):
            for mode, server in started.items():
                cpu0, tree0, wall0 = self_cpu(), tree_cpu(pids[mode]), time.perf_counter()
                answer = server.call("get_current_time", {"timezone": "UTC"}, 30.0)
                wall = time.perf_counter() - wall0
                cpu = self_cpu() - cpu0 + tree_cpu(pids[mode]) - tree0
                assert answer.ok, answer.text
                if i >= 10:  # the first calls warm both sides up (imports, caches)
                    out[mode]["wall"].append(wall)
                    out[mode]["cpu"].append(cpu)
    finally:
        for s in started.values():
            s.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--starts", type=int, default=10)
    args = parser.parse_args()
    summary: dict[str, Any] = {"tokens": [prompt_tokens(n) for n in (5, 50, 200)]}
    print("prompt tokens of the first request (tool definitions + system prompt):")
    print(f"  {'MCP tools':>9} {'no MCP':>8} {'all offered':>12} {'search':>8} {'search+3 loaded':>16} "
          f"{'deferred at 10% of 128k':>24}")
    for row in summary["tokens"]:
        print(f"  {row['tools']:>9} {row['no_mcp']:>8,} {row['all_offered']:>12,} {row['search']:>8,} "
              f"{row['search_3_loaded']:>16,} {'yes' if row['deferred_by_default'] else 'no':>24}")
    root = tempfile.mkdtemp(prefix="mcp-bench-")
    try:
        Path(root, "instructions.md").write_text("# bench\n")
        calls = measure_calls(root, args.calls)
        starts = measure_starts(root, args.starts)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary["calls"] = args.calls
    print(f"\nget_current_time of mcp-server-time, {args.calls} calls per mode, alternating (ms):")
    for what in ("wall", "cpu"):
        for mode in ("confined", "unconfined"):
            v = calls[mode][what]
            summary[f"call_{what}_{mode}"] = {"p50": round(pct(v, 50) * 1000, 3), "p99": round(pct(v, 99) * 1000, 3),
                                              "mean": round(statistics.fmean(v) * 1000, 3)}
            s = summary[f"call_{what}_{mode}"]
            print(f"  {what:>4} {mode:>10}: p50 {s['p50']:.3f}  p99 {s['p99']:.3f}  mean {s['mean']:.3f}")
        added = {p: round(summary[f"call_{what}_confined"][p] - summary[f"call_{what}_unconfined"][p], 3)
                 for p in ("p50", "p99")}
        summary[f"call_{what}_added"] = added
        print(f"  {what:>4}  confinement adds: p50 {added['p50']:+.3f}  p99 {added['p99']:+.3f}")
    print(f"\nstart until the tool list is read, {args.starts} starts per mode, alternating (ms):")
    for mode in ("confined", "unconfined"):
        v = starts[mode]
        summary[f"start_{mode}"] = {"p50": round(pct(v, 50) * 1000, 1), "max": round(max(v) * 1000, 1)}
        print(f"  {mode:>10}: p50 {summary[f'start_{mode}']['p50']:.1f}  max {summary[f'start_{mode}']['max']:.1f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
