"""What the harness adds to an MCP server's sampling request (docs/mcp.md), besides the model's own time.

A server of ours (tests/mcp_servers/sampler.py), started confined as a run starts it with ``sampling = true``, is
called through the engine's port: ``caps`` (no sampling), and ``flood`` asking 1 and 8 samplings in the call, each
answered at once by a stand-in for the engine's sampler (so what is measured is the round trip: the server's
request, the SDK's callback, the desk that hands it to the calling thread and back). Alternately, N calls each after
5 not counted: wall time per call, and the CPU time of this process and the server's tree per call.

    python benchmarks/mcp_sampling.py [--calls 200]

The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_sampling import SamplingAnswer, SamplingAsk
from console.mcp.client import start_servers

SERVERS = Path(__file__).resolve().parent.parent / "tests" / "mcp_servers"


def _cpu(pids: list[psutil.Process]) -> float:
    total = 0.0
    for p in pids:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    n = parser.parse_args().calls
    venv = os.path.realpath(sys.prefix)
    world = CommandWorld(read_only=(os.path.realpath(sys.base_prefix), venv, str(SERVERS)))
    config = McpServerConfig(name="sampler", command=[os.path.join(venv, "bin", "python"), str(SERVERS / "sampler.py")],
                             sampling=True, sampling_per_call=32)
    root = tempfile.mkdtemp(prefix="mcp-sampling-")
    (server,), _ = start_servers([config], root, world)

    def ask(request: SamplingAsk) -> SamplingAnswer:
        return SamplingAnswer("ok", "stand-in", "endTurn")

    me = psutil.Process()
    kinds: dict[str, tuple[str, dict[str, Any]]] = {"none": ("caps", {}), "1": ("flood", {"n": 1}),
                                                   "8": ("flood", {"n": 8})}
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, float] = dict.fromkeys(kinds, 0.0)
    try:
        for i in range(n + 5):
            for kind, (tool, args) in kinds.items():
                tree = [me, *me.children(recursive=True)]
                c0, t0 = _cpu(tree), time.perf_counter()
                server.call(tool, args, 30, ask=ask)
                t1, c1 = time.perf_counter(), _cpu(tree)
                if i >= 5:
                    wall[kind].append(t1 - t0)
                    cpu[kind] += c1 - c0
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {}
    for kind in kinds:
        xs = sorted(wall[kind])
        out[kind] = {"p50_ms": round(statistics.median(xs) * 1000, 2),
                     "p99_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1000, 2),
                     "cpu_ms": round(cpu[kind] / n * 1000, 2)}
        print(f"samplings in the call: {kind:>4}  wall p50 {out[kind]['p50_ms']:.2f} ms, p99 {out[kind]['p99_ms']:.2f} "
              f"ms; CPU {out[kind]['cpu_ms']:.2f} ms a call")
    per = {k: round((out["8"][k] - out["none"][k]) / 8, 2) for k in ("p50_ms", "cpu_ms")}
    print(f"added by one sampling: wall {per['p50_ms']:.2f} ms (p50), CPU {per['cpu_ms']:.2f} ms")
    print(json.dumps({"calls": n, **out, "per_sampling": per}))


if __name__ == "__main__":
    main()
