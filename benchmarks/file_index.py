"""What the file index (seed 003 phase 2, option A: console.engine.file_index) and its find_files tool cost.

For job folders of 100, 1,000 and 10,000 text files (source files and notes of about 1.5 KB in folders of 50,
their first lines saying what they are, mtimes in the past as for files not just written), through the sandbox
as in a run, with the page cache warm:

* build: the first refresh of a new index (one walk, the first lines of every file read);
* refresh with nothing changed (one walk, nothing read) and with one file changed (one walk, one read): what
  every find_files call pays before it answers;
* query: p50 and p99 of 400 queries (one, two or three words drawn from the folder's vocabulary, seeded), and of
  a whole find_files call (refresh, query, the answer's text);
* tokens: what the tool adds to every request (its JSON spec, and its line in the system prompt's tool guide),
  against all the tools' specs, and a typical answer (10 files) — estimated as the engine does (4 chars/token);
* a folder of 100,000 files in one folder: one refresh, bounded by MAX_FILES.

    python benchmarks/file_index.py [--sizes 100,1000,10000] [--queries 400] [--no-huge]

The last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from console.engine import events as ev
from console.engine.clock import SystemClock
from console.engine.context.tokens import estimate_text
from console.engine.file_index import FileIndex, index_for, terms_of
from console.engine.job import JobPaths
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.sandbox import Sandbox
from console.engine.tools import default_registry

PAST = time.time() - 3600
AREAS = ["auth", "billing", "parser", "storage", "network", "render", "config", "search", "report", "export",
         "import", "cache", "scheduler", "metrics", "users", "orders", "invoice", "session", "upload", "mailer"]
KINDS = ["handler", "model", "service", "client", "utils", "views", "tests", "schema", "worker", "routes"]
FILLER = "    value = compute(value) + offset  # keep the running total\n"


def make_tree(root: Path, n: int, seed: int = 7) -> list[str]:
    """``n`` files: instructions.md, then src/<area>/part<k>/<kind>_<i>.py with a docstring (3 in 4) and
    docs/<area>/part<k>/notes_<i>.md, in folders of about 50."""
    rng = random.Random(seed)
    rels = []
    (root / "instructions.md").write_text("# Job\n\nRefactor the billing module.\n")
    os.utime(root / "instructions.md", (PAST, PAST))
    for i in range(n - 1):
        area, kind = AREAS[i % len(AREAS)], rng.choice(KINDS)
        folder = f"{'src' if i % 4 else 'docs'}/{area}/part{i // 50 // len(AREAS)}"
        if i % 4:
            rel = f"{folder}/{kind}_{i}.py"
            text = (f'"""The {area} {kind}: {rng.choice(AREAS)} and {rng.choice(AREAS)} support."""\n\n'
                    f"import os\n\n\ndef {kind}_{i}(value):\n" + FILLER * 25)
        else:
            rel = f"{folder}/notes_{i}.md"
            text = f"# Notes on {area} {kind}\n\nDecisions about {rng.choice(AREAS)}.\n" + "Text line.\n" * 120
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (PAST, PAST))
        rels.append(rel)
    return rels


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * p))]


def queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    words = AREAS + KINDS + ["notes", "decisions", "support", "py", "md", "compute", "nothing-like-it"]
    return [" ".join(rng.sample(words, rng.choice((1, 1, 2, 3)))) for _ in range(n)]


def measure_size(n: int, nq: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "job"
        root.mkdir()
        rels = make_tree(root, n)
        with Sandbox(root) as sb:
            builds = []
            for _ in range(3):
                index = FileIndex()
                t = time.perf_counter()
                r = index.refresh(sb)
                builds.append((time.perf_counter() - t) * 1000)
            assert r.read == len(index) == n and not r.truncated, r
            same = []
            for _ in range(20):
                t = time.perf_counter()
                r = index.refresh(sb)
                same.append((time.perf_counter() - t) * 1000)
                assert r.read == 0, r
            one = []
            for k in range(20):
                path = root / rels[k * 7 % len(rels)]
                with path.open("a") as fh:
                    fh.write("# changed\n")
                os.utime(path, (PAST + k + 1, PAST + k + 1))
                t = time.perf_counter()
                r = index.refresh(sb)
                one.append((time.perf_counter() - t) * 1000)
                assert r.read == 1, r
            qs = queries(nq)
            q_ms = []
            for q in qs:
                terms = terms_of(q)
                t = time.perf_counter()
                index.query(terms, 10)
                q_ms.append((time.perf_counter() - t) * 1000)
        paths = JobPaths(root)
        clock = SystemClock()
        rt = Runtime(paths, clock, ev.EventStream(paths.events, clock))
        registry = default_registry(file_index=True)
        call_ms, answers = [], []
        index_for(rt.sandbox).refresh(rt.sandbox)  # built once, as by the run's first call
        for i, q in enumerate(qs[:100]):
            parsed = registry.parse(ToolCall(id=f"q{i}", name="find_files", arguments=json.dumps({"query": q})))
            t = time.perf_counter()
            out = registry.run(rt, *parsed)  # type: ignore[misc]
            call_ms.append((time.perf_counter() - t) * 1000)
            answers.append(out.content)
        typical = statistics.median(estimate_text(a) for a in answers)
    fig = {"files": n, "build_ms": round(min(builds), 2), "refresh_unchanged_ms": round(statistics.median(same), 2),
           "refresh_one_changed_ms": round(statistics.median(one), 2), "query_p50_ms": round(pct(q_ms, 0.5), 3),
           "query_p99_ms": round(pct(q_ms, 0.99), 3), "call_p50_ms": round(pct(call_ms, 0.5), 2),
           "call_p99_ms": round(pct(call_ms, 0.99), 2), "answer_tokens_p50": typical}
    print(f"{n:>6,} files: build {fig['build_ms']:.1f} ms; refresh unchanged {fig['refresh_unchanged_ms']:.2f} ms, "
          f"one changed {fig['refresh_one_changed_ms']:.2f} ms; query p50 {fig['query_p50_ms']:.3f} ms, "
          f"p99 {fig['query_p99_ms']:.3f} ms; whole find_files call p50 {fig['call_p50_ms']:.2f} ms, "
          f"p99 {fig['call_p99_ms']:.2f} ms; an answer ~{typical} tokens")
    return fig


def measure_tokens() -> dict[str, int]:
    registry = default_registry(file_index=True)
    specs = {s.name: estimate_text(json.dumps(s.model_dump(), separators=(",", ":"))) for s in registry.specs()}
    tool = registry.get("find_files")
    assert tool is not None
    guide = estimate_text(f"- {tool.name}: {tool.summary}\n")
    total = sum(specs.values())
    print(f"find_files in every request: spec ~{specs['find_files']} tokens + tool guide line ~{guide} tokens = "
          f"~{specs['find_files'] + guide}; all {len(specs)} tools' specs ~{total} tokens "
          f"(find_files is {specs['find_files'] / total:.1%} of them)")
    return {"spec_tokens": specs["find_files"], "guide_tokens": guide, "all_specs_tokens": total}


def measure_huge() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "job"
        (root / "big").mkdir(parents=True)
        (root / "instructions.md").write_text("# Job\n")
        fd = os.open(root / "big", os.O_RDONLY | os.O_DIRECTORY)
        try:
            for i in range(100_000):
                os.close(os.open(f"f{i:06d}.txt", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
        finally:
            os.close(fd)
        with Sandbox(root) as sb:
            index = FileIndex(wall=lambda: PAST + 10**9)  # files settled: the second refresh reads nothing
            t = time.perf_counter()
            r = index.refresh(sb)
            first = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            index.refresh(sb)
            again = (time.perf_counter() - t) * 1000
    print(f"100,000 files in one folder: first refresh {first:.0f} ms ({r.read:,} read, cut at {len(index):,}: "
          f"truncated={r.truncated}), then {again:.0f} ms a refresh")
    return {"huge_first_ms": round(first, 1), "huge_refresh_ms": round(again, 1), "huge_indexed": len(index)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--no-huge", action="store_true", help="skip the folder of 100,000 files")
    args = ap.parse_args()
    sizes = [measure_size(int(n), args.queries) for n in args.sizes.split(",")]
    tokens = measure_tokens()
    huge = {} if args.no_huge else measure_huge()
    print(json.dumps({"sizes": sizes, "tokens": tokens, **huge, "seed_003_query_goal_ms": 5}))


if __name__ == "__main__":
    main()
