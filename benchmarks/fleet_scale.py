"""A hundred runs on one machine (issue 37, point 5): N concurrent headless runs against a loopback model.

Each run is a real ``agent-console run JOB --detach`` (a watcher process and its runner, console/watcher.py and
console/runner.py) with the OpenAI provider (the real SDK, over HTTP) pointed at a loopback model server on
127.0.0.1: a process of its own that answers every request after 2-5 s (``--delay``; seeded), streaming the turn
in pieces over that time, with usage as a real server reports it (prompt tokens of the whole conversation, so they
grow with it, most of them cached; 200-800 output tokens). Its agent is the scripted demo agent
(console/providers/scripted_agent.py) deciding from the request as it came over the wire, so every run works the
quickstart job (reads, plans, writes, ticks its todos) as the offline model would. Everything lives in one
hermetic home (HOME, data dir, config under a temporary folder), whose config sends every need to a loopback
notification sink (a ``json://`` channel).

Some runs ask for their operator (``--needs-every``): one in that many gets a ``budget_tokens`` in its job.toml
(the budget need), the next a small window with ``--no-auto-restart`` (the restart approval). For each need in a
run's log: when the fleet model (console/view/fleet.py, what the TUI fleet and `serve` poll once a second) first
showed it, when the channel got it, and when the store's row said "needs you"; a need never shown is *missed*.

Over the steady window (``--duration`` seconds once every run is started, after ``--warmup``):

- RSS per run, runner + watcher: Pss (/proc/PID/smaps_rollup: shared pages split among the processes that map
  them, so N runs add up to what they cost the machine) and Rss (each process counted whole);
- the harness's CPU share: utime + stime of every runner and watcher over the window / its wall, % of one core
  (per-process CPU time: it holds on a loaded machine), split runner vs watcher;
- events/s across the fleet (lines appended to the runs' events.jsonl);
- the fleet's refresh: one ``Fleet.poll()`` over the N runs every second, its CPU time (this thread's) and wall;
- the store's lag: embedded (the default): a need's event -> its row in jobs.db says "needs you"; with
  ``--store pg`` (a PostgreSQL server of tests/pg_server.py): every event -> its row in the store's events table
  (sampled every 0.25 s, so the figure's resolution is that);
- needs missed or late.

Goals (issue 37): 100 runs held, harness CPU at most 25% of one core, at most 60 MB per run, fleet refresh at most
200 ms, no need missed. A goal missed prints what dominates (the CPU split, the runner's heaviest imports by RSS).

    python benchmarks/fleet_scale.py [--sizes 25,50,100] [--duration 60] [--warmup 20] [--store embedded|pg]

Prints figures per size with the goals, then one JSON line. Not a timed test
(tests/integration/test_bench_fleet_scale.py runs it at a tiny size and checks what it did, never how fast).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GOALS = {"cpu_pct": 25.0, "pss_mb_per_run": 60.0, "fleet_ms": 200.0, "missed": 0}
TICK = os.sysconf("SC_CLK_TCK")
MODEL = "gpt-6.2-sol"  # the openai provider's default: priced, so the fleet shows each run's cost
# The job every run works: seed 000's example (a specification read in chunks), its specification four times over
# (8,300 lines, ~185 turns): long enough for a run to outlast its fleet's start, warm-up and window at 2-5 s a turn.
JOB = "requirements-extraction"
SPEC_TIMES = 4
BUDGET_TOKENS = 150_000  # a budget run's job.toml: reached after some twenty turns
APPROVAL_WINDOW = 10_000  # an approval run's --context-window: full (wind-down, restart to approve) within minutes
LATE_S = 2.0  # a need the fleet shows more than two of its polls after its event is late
LATE_CHANNEL_S = 10.0


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


# -- the loopback model ---------------------------------------------------------------------------------------
def wire_request(body: dict[str, Any]) -> Any:
    """The engine's request rebuilt from a Chat Completions body (console/providers/openai_provider.py's
    to_openai_messages, read back): the system message, the conversation, the protected layer (the last user
    message holds it). What the wire does not carry (each message's harness bookkeeping) is read from its text,
    as a model would: a kickoff, a transition prompt, a summary, a masked result."""
    from console.engine.messages import Message, ModelRequest, ToolCall, ToolSpec
    from console.engine.session import KICKOFF

    msgs = [m for m in body.get("messages", []) if isinstance(m, dict)]
    system = str(msgs[0].get("content") or "") if msgs and msgs[0].get("role") == "system" else ""
    rest = msgs[1:] if system else msgs
    names: dict[str, str] = {}
    out: list[Message] = []
    for m in rest:
        role, content = m.get("role"), m.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content)
        if role == "assistant":
            calls = [ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
                     for c in m.get("tool_calls") or []]
            names.update({c.id: c.name for c in calls})
            out.append(Message.assistant(content, calls))
        elif role == "tool":
            cid = str(m.get("tool_call_id") or "")
            meta = {"masked": True} if content.startswith("[masked: ") else {}
            out.append(Message(role="tool", content=content, tool_call_id=cid, name=names.get(cid), meta=meta))
        elif content.startswith("<system-notice>") and content.endswith("</system-notice>"):
            out.append(Message.system(content[len("<system-notice>"):-len("</system-notice>")]))
        else:
            kind = ("kickoff" if content.startswith(KICKOFF) else
                    "summary" if content.startswith("PREVIOUS SUMMARY") else
                    "transition_prompt" if content.startswith(("PHASE TRANSITION", "PLANNING COMPLETE", "REWIND:",
                                                               "CHECKPOINT", "ALL PHASES COMPLETE")) else "")
            out.append(Message.user(content, **({"kind": kind} if kind else {})))
    protected = out[-1].content if out and out[-1].role == "user" else ""
    tools = [ToolSpec(name=t["function"]["name"], description=t["function"].get("description", ""),
                      parameters=t["function"].get("parameters", {})) for t in body.get("tools") or []]
    return ModelRequest(system=system, messages=out, tools=tools, protected=protected)


FILLER = ("I will keep the plan in view, check what the last result showed against the current task, and note "
          "anything the next phase needs before moving on. ")


def serve_model(seed: int, delay: tuple[float, float], tokens_per_chunk: int) -> None:
    """The loopback model server (run as ``fleet_scale.py --serve-model``): prints its port, serves until killed."""
    from console.providers.scripted_agent import ScriptedAgent
    from tests.wire.loopback import CannedToolCall, CannedUsage, Reply, openai_events, tokens

    agent = ScriptedAgent()
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            data = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 1700000000,
                                                           "owned_by": "bench"}]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.loads(raw)
            messages = body.get("messages", [])
            # Seeded per conversation and turn: the same run's same turn waits and answers alike.
            key = f"{seed}:{len(messages)}:{json.dumps(messages[1:2])[:2000]}".encode()
            rng = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))
            wait = rng.uniform(*delay)
            decision = agent.decide(wire_request(body))
            output = rng.randint(200, 800)
            calls = [CannedToolCall.of(f"call_{rng.getrandbits(40):x}_{i}", c.name, c.args, size=24)
                     for i, c in enumerate(decision.calls)]
            said = sum(len(c.arguments) for c in calls) // 4
            text = decision.text
            if output > said + len(text) // 4:  # the rest of its output tokens as prose, as a model writes
                text += "\n\n" + (FILLER * (1 + (output - said) * 4 // len(FILLER)))[: (output - said) * 4]
            prompt = len(raw) // 4
            usage = CannedUsage(input_tokens=prompt, output_tokens=output, cached_tokens=prompt * 4 // 5)
            words = tokens(text)
            pieces = ["".join(words[i:i + tokens_per_chunk]) for i in range(0, len(words), tokens_per_chunk)]
            events = openai_events(Reply(text=pieces, tool_calls=calls, usage=usage), body)
            time.sleep(wait * 0.3)  # the time to the first token; the rest streams over the remaining time
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            gap = wait * 0.7 / max(1, len(events))
            try:
                for event in events:
                    data = event.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                    time.sleep(gap)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                return
            served[0] += 1

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.handle_error = lambda *_: None  # type: ignore[method-assign]  # a runner gone mid-stream (the end)
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.2)


class ModelProcess:
    """The loopback model server, a child process (its CPU is not the harness's, and is read apart)."""

    def __init__(self, seed: int, delay: tuple[float, float], tokens_per_chunk: int) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve-model", "--seed", str(seed), "--delay",
                                      f"{delay[0]},{delay[1]}", "--tokens-per-chunk", str(tokens_per_chunk)],
                                     stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if line[:1] != ["port"]:
            self.stop()
            raise SystemExit("the loopback model server did not start")
        self.url = f"http://127.0.0.1:{line[1]}/v1"

    def cpu_s(self) -> float:
        return cpu_seconds(self.proc.pid) or 0.0

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()


# -- the notification sink ------------------------------------------------------------------------------------
@dataclass
class Sink:
    """A loopback ``json://`` channel: each message's arrival time and title."""

    got: list[tuple[float, str]] = field(default_factory=list)

    def start(self) -> None:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                with contextlib.suppress(ValueError, AttributeError):
                    sink.got.append((time.time(), str(json.loads(raw).get("title", ""))))
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *_: None  # type: ignore[method-assign]
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    def first(self, run_id: str, after: float) -> float | None:
        """When a message saying run ``run_id`` needs its operator first came, at or after ``after``."""
        return next((t for t, title in self.got if f"run {run_id} " in title and "needs you" in title
                     and t >= after - 1), None)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- processes ------------------------------------------------------------------------------------------------
def cpu_seconds(pid: int, tid: int | None = None) -> float | None:
    """utime + stime of the process ``pid``, or of its thread ``tid`` alone."""
    try:
        where = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
        fields = Path(where).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def wakes(pid: int, tid: int | None = None) -> int:
    """The times the process ``pid``'s threads (or its thread ``tid`` alone) gave up the CPU to wait
    (voluntary_ctxt_switches: a wake-up each): a count a loaded machine does not inflate, where a wake-up's CPU
    (the switch, and the caches it finds cold) is what a thread that waits often pays most (issue 37)."""
    total = 0
    tids = [tid] if tid is not None else []
    if tid is None:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            return 0
    for t in tids:
        try:
            for line in Path(f"/proc/{pid}/task/{t}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return total


def memory_kb(pid: int) -> tuple[int, int]:
    """(Pss, Rss) of ``pid`` in kB, from /proc/PID/smaps_rollup ((0, 0): gone)."""
    pss = rss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
            elif line.startswith("Rss:"):
                rss = int(line.split()[1])
    except OSError:
        pass
    return pss, rss


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@dataclass
class Run:
    index: int
    kind: str  # plain | budget | approval
    path: Path
    run_id: str
    watcher: int
    runner: int | None = None
    events_offset: int = 0
    seqs: dict[int, float] = field(default_factory=dict)  # seq -> its event's time (for the store's lag)
    needs: list[tuple[int, float, str]] = field(default_factory=list)  # (seq, time, reason) of each need
    turns: list[float] = field(default_factory=list)  # when each turn began (turn_started): the CPU a turn


# -- a fleet --------------------------------------------------------------------------------------------------
@dataclass
class Home:
    root: Path
    store: str = ""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_CONSOLE_", "OPENAI_"))}
        env.update(HOME=str(self.root / "home"), AGENT_CONSOLE_DATA_DIR=str(self.root / "data"),
                   AGENT_CONSOLE_CONFIG=str(self.root / "config.toml"), PYTHONPATH=str(REPO),
                   AGENT_CONSOLE_STORE=self.store, OPENAI_API_KEY="sk-bench-loopback-only")
        return env


def make_jobs(work: Path) -> dict[str, Path]:
    jobs = {}
    for kind in ("plain", "budget", "approval"):
        job = work / "jobs" / f"fleet-{kind}"
        shutil.copytree(REPO / "sample_jobs" / JOB, job)
        spec = job / "docs" / "specification.md"
        spec.write_text(spec.read_text() * SPEC_TIMES)
        toml = (job / "job.toml").read_text().replace('provider = "scripted"\nspeed = 0.5\n', "")
        if kind == "budget":
            toml += f"\n[guardrails]\nbudget_tokens = {BUDGET_TOKENS}\n"
        (job / "job.toml").write_text(toml)
        jobs[kind] = job
    return jobs


def kind_of(i: int, every: int) -> str:
    if every <= 0:
        return "plain"
    return {1: "budget", 2: "approval"}.get(i % every, "plain") if every > 2 else ("budget" if i % every else
                                                                                   "plain")


def start_runs(home: Home, jobs: dict[str, Path], n: int, model_url: str, every: int,
               parallel: int = 6) -> list[Run]:
    """``n`` runs started with ``run --detach``, ``parallel`` starts at a time; each one's watcher and runner."""
    from console.engine.runs import run_id

    runs: list[Run] = []
    lock = threading.Lock()
    todo = list(range(n))
    failed: list[BaseException] = []

    def starter() -> None:
        try:
            start_some()
        except BaseException as exc:  # said by the caller, once every start has ended
            failed.append(exc)

    def start_some() -> None:
        while not failed:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            kind = kind_of(i, every)
            argv = [sys.executable, "-m", "console.cli", "run", str(jobs[kind]), "--detach", "--provider", "openai",
                    "--model", MODEL, "--base-url", model_url, "--max-turns", "5000"]
            if kind == "approval":
                argv += ["--context-window", str(APPROVAL_WINDOW), "--no-auto-restart"]
            done = subprocess.run(argv, env=home.env(), capture_output=True, text=True, timeout=120)
            said = re.search(r"process (\d+) starts it\); watch it: agent-console attach (\w+)", done.stdout)
            if done.returncode != 0 or said is None:
                raise SystemExit(f"run {i}: exit {done.returncode}: {done.stdout[-300:]!r} {done.stderr[-600:]!r}")
            rid = said.group(2)
            path = next(p for p in (home.root / "data" / "runs").iterdir() if run_id(p) == rid)
            with lock:
                runs.append(Run(i, kind, path, rid, int(said.group(1))))

    threads = [threading.Thread(target=starter, daemon=True) for _ in range(parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        stop_runs(runs)
        raise SystemExit(f"a run could not be started: {failed[0]!r}")
    return sorted(runs, key=lambda r: r.index)


def find_runners(runs: list[Run], patience: float) -> None:
    """Each run's runner: the process holding its lock, a child of its watcher."""
    from console.engine.job import JobPaths
    from console.engine.run_lock import RunLock
    from console.runner import parent_of

    end = time.monotonic() + patience
    while time.monotonic() < end and any(r.runner is None for r in runs):
        for r in runs:
            pid = RunLock(JobPaths(r.path)).holder() if r.runner is None else None
            if pid is not None and pid > 0 and parent_of(pid) == r.watcher:
                r.runner = pid
        time.sleep(0.2)


def read_logs(runs: list[Run]) -> int:
    """Read what each run's log gained (its events' seq and time, its needs); the number of events read."""
    n = 0
    for r in runs:
        log = r.path / ".console" / "events.jsonl"
        try:
            with log.open("rb") as fh:
                fh.seek(r.events_offset)
                data = fh.read()
        except OSError:
            continue
        end = data.rfind(b"\n") + 1
        r.events_offset += end
        for raw in data[:end].splitlines():
            try:
                e = json.loads(raw)
                seq, ts = int(e["seq"]), datetime.fromisoformat(e["ts"]).timestamp()
            except (ValueError, KeyError, TypeError):
                continue
            n += 1
            r.seqs[seq] = ts
            if e.get("type") == "needs_operator":
                r.needs.append((seq, ts, str(e.get("reason", ""))))
            elif e.get("type") == "turn_started":
                r.turns.append(ts)
    return n


class StoreWatch(threading.Thread):
    """The store's lag, sampled every ``every`` seconds: embedded, when each need's row first says "needs you";
    PostgreSQL, when each event's seq is first in the store's events table."""

    def __init__(self, home: Home, runs: list[Run], url: str, every: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.home, self.runs, self.url, self.every = home, runs, url, every
        self.need_rows: dict[str, float] = {}  # run path -> when its row first said "needs you"
        self.stored: dict[str, int] = {}  # run path -> the last seq the store holds
        self.lags: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        conn: Any = None
        if self.url:
            import psycopg

            conn = psycopg.connect(self.url, autocommit=True)
        db = self.home.root / "data" / "jobs.db"
        while not self.halt.wait(self.every):
            now = time.time()
            try:
                if conn is not None:
                    # runs.last_seq: the last event the store holds of each run (console/engine/store/schema.py)
                    rows = conn.execute("SELECT path, status, last_seq FROM runs").fetchall()
                else:
                    with contextlib.closing(sqlite3.connect(db, timeout=5)) as c:
                        rows = [(p, s, None) for p, s in c.execute("SELECT path, status FROM jobs").fetchall()]
            except Exception:  # the store busy or the database not there yet: the next sample
                continue
            for path, status, last in rows:
                if status == "needs you":
                    self.need_rows.setdefault(path, now)
                if last is not None:
                    run = next((r for r in self.runs if str(r.path) == path), None)
                    if path not in self.stored:  # the first sample: what came before it is no lag of its
                        self.stored[path] = last
                        continue
                    before = self.stored[path]
                    if run is not None and last > before:
                        self.lags += [now - run.seqs[s] for s in range(before + 1, last + 1) if s in run.seqs]
                    self.stored[path] = max(before, last)
        if conn is not None:
            conn.close()


def fleet_polls(home: Home, url: str, window: list[float],
                seen: dict[tuple[str, int], float]) -> dict[str, Any]:
    """The fleet model polled once a second until ``window``'s end (monotonic), as the TUI fleet and `serve` poll
    it: the CPU (this thread's) and wall of each poll in the window; when each need was first shown (``seen``:
    (run path, need seq) -> time), from the first poll on."""
    from console.view.fleet import Fleet

    fleet = Fleet(home.root / "data" / "jobs.db", now=lambda: datetime.now().astimezone(), url=url or None)
    t, c = time.perf_counter(), time.thread_time()
    rows = fleet.poll()
    first = {"first_poll_ms": (time.perf_counter() - t) * 1e3, "first_poll_cpu_ms": (time.thread_time() - c) * 1e3,
             "first_poll_at": time.time()}
    walls: list[float] = []
    cpus: list[float] = []
    listed = 0
    while True:
        for row in rows:
            if row.needs_seq:
                seen.setdefault((str(row.path), row.needs_seq), time.time())
        if time.monotonic() >= window[0]:
            listed = max(listed, len(rows))
        if time.monotonic() >= window[1]:
            break
        time.sleep(max(0.0, 1.0 - (walls[-1] if walls else 0.0)))
        begun, t, c = time.monotonic(), time.perf_counter(), time.thread_time()
        rows = fleet.poll()
        if begun >= window[0]:
            walls.append(time.perf_counter() - t)
            cpus.append(time.thread_time() - c)
    live = sum(1 for r in rows if r.has_runner)
    fleet.close()
    return {**first, "fleet_polls": len(walls), "fleet_ms_p50": statistics.median(walls) * 1e3 if walls else 0.0,
            "fleet_ms_max": max(walls, default=0.0) * 1e3,
            "fleet_cpu_ms_p50": statistics.median(cpus) * 1e3 if cpus else 0.0,
            "fleet_cpu_ms_max": max(cpus, default=0.0) * 1e3, "fleet_rows": listed, "fleet_live": live}


def snapshot_cpu(runs: list[Run]) -> dict[str, float]:
    out = {"runner": 0.0, "watcher": 0.0}
    main = 0.0  # the runners' main threads (the run's loop), the rest of "runner" their other threads
    woke = woke_main = 0  # the runners' threads' wake-ups (a thread that ended within the window is not counted)
    for r in runs:
        for role, pid in (("runner", r.runner), ("watcher", r.watcher)):
            if pid is not None:
                out[role] += cpu_seconds(pid) or 0.0
        if r.runner is not None:
            main += cpu_seconds(r.runner, r.runner) or 0.0
            woke += wakes(r.runner)
            woke_main += wakes(r.runner, r.runner)
    return out | {"runner_main": main, "wakes": woke, "wakes_main": woke_main}


def stop_runs(runs: list[Run]) -> list[int]:
    """SIGTERM to each watcher (it hands it on to its runner), SIGKILL to what is left after 5 s; the pids still
    there after that (none, or the benchmark says so)."""
    pids = [p for r in runs for p in (r.watcher, r.runner) if p is not None]
    for r in runs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(r.watcher, signal.SIGTERM)
    end = time.monotonic() + 5
    while time.monotonic() < end and any(alive(p) for p in pids):
        time.sleep(0.1)
    for p in pids:
        if alive(p):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
    for r in runs:  # the watchers are the detached starts' children's children: reaped by init; wait a little
        with contextlib.suppress(ChildProcessError):
            os.waitpid(r.watcher, os.WNOHANG)
    end = time.monotonic() + 5
    while time.monotonic() < end and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def bench_size(n: int, args: argparse.Namespace, url: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="agent-console-bench-fleet-"))
    home = Home(work, url)
    for name in ("home", "data"):
        (work / name).mkdir()
    sink = Sink()
    sink.start()
    (work / "config.toml").write_text(f'[notify]\nurls = ["json://127.0.0.1:{sink.port}/fleet"]\n')
    model = ModelProcess(args.seed, args.delay, args.tokens_per_chunk)
    runs: list[Run] = []
    out: dict[str, Any] = {"runs": n, "store": "pg" if url else "embedded"}
    try:
        jobs = make_jobs(work)
        t = time.perf_counter()
        runs = start_runs(home, jobs, n, model.url, args.needs_every)
        find_runners(runs, patience=60 + n)
        out["start_s"] = round(time.perf_counter() - t, 1)
        out["runners_found"] = sum(r.runner is not None for r in runs)
        # The fleet is watched from now on (every need raised from its first poll on is counted); the figures of
        # CPU, memory, events and the fleet's refresh are the window's, after the warm-up.
        # A list, not a tuple: --warmup-until-need moves it earlier while the poller reads it.
        window = [time.monotonic() + args.warmup, time.monotonic() + args.warmup + args.duration]
        watch = StoreWatch(home, runs, url)
        read_logs(runs)
        watch.start()
        seen: dict[tuple[str, int], float] = {}
        poller = threading.Thread(target=lambda: out.update(fleet_polls(home, url, window, seen)), daemon=True)
        poller.start()
        while time.monotonic() < window[0]:
            read_logs(runs)
            if args.warmup_until_need and any(r.needs for r in runs):
                # The window starts now: the need is counted (raised after the fleet's first poll, well before
                # the window's end) and each view has the window and the grace to show it.
                window[1] = time.monotonic() + args.duration
                window[0] = time.monotonic()
                break
            time.sleep(0.25)
        load_before = os.getloadavg()
        cpu0, model0, t0, start_wall = snapshot_cpu(runs), model.cpu_s(), time.monotonic(), time.time()
        events0 = sum(len(r.seqs) for r in runs)
        end = time.monotonic() + args.duration
        while time.monotonic() < end:
            read_logs(runs)  # the seqs' times for the store's lag
            time.sleep(0.25)
        end_wall = time.time()
        poller.join(60)
        read_logs(runs)
        cpu1, model1, wall = snapshot_cpu(runs), model.cpu_s(), time.monotonic() - t0
        events = sum(len(r.seqs) for r in runs) - events0
        turns = sum(1 for r in runs for ts in r.turns if start_wall <= ts < end_wall)
        held = sum(1 for r in runs if r.runner is not None and alive(r.runner))
        mem = [(memory_kb(r.runner) if r.runner else (0, 0), memory_kb(r.watcher)) for r in runs]
        mem = [m for m, r in zip(mem, runs, strict=True) if r.runner and alive(r.runner)]
        # The needs raised from the fleet's first poll until two of its polls before the window's end: each should
        # have reached the fleet by then, and the channel and the store by a grace period after it.
        time.sleep(args.grace)
        watch.halt.set()
        watch.join(10)
        read_logs(runs)
        first_poll = out.get("first_poll_at", float("inf"))
        needs = [(r, seq, ts, reason) for r in runs for seq, ts, reason in r.needs
                 if first_poll <= ts <= end_wall - LATE_S]
        shown = [seen[(str(r.path), seq)] - ts for r, seq, ts, _ in needs if (str(r.path), seq) in seen]
        told = [got - ts for r, _, ts, _ in needs if (got := sink.first(r.run_id, ts)) is not None]
        rowed = [watch.need_rows[str(r.path)] - ts for r, _, ts, _ in needs if str(r.path) in watch.need_rows]
        pss = [(a[0] + b[0]) / 1024 for a, b in mem]
        rss = [(a[1] + b[1]) / 1024 for a, b in mem]
        out.update({
            "held": held, "load_avg_1m": round(load_before[0], 1), "load_avg_1m_end": round(os.getloadavg()[0], 1),
            "window_s": round(wall, 1), "events": events, "events_per_s": round(events / wall, 1),
            "cpu_pct": round((cpu1["runner"] + cpu1["watcher"] - cpu0["runner"] - cpu0["watcher"]) / wall * 100, 1),
            "cpu_pct_runners": round((cpu1["runner"] - cpu0["runner"]) / wall * 100, 1),
            "cpu_pct_watchers": round((cpu1["watcher"] - cpu0["watcher"]) / wall * 100, 1),
            "cpu_pct_model_server": round((model1 - model0) / wall * 100, 1),
            "turns": turns,
            "cpu_ms_per_turn": round((cpu1["runner"] - cpu0["runner"]) / turns * 1e3, 1) if turns else 0.0,
            "cpu_ms_per_turn_main": round((cpu1["runner_main"] - cpu0["runner_main"]) / turns * 1e3, 1) if turns
            else 0.0,
            "wakes_per_turn": round((cpu1["wakes"] - cpu0["wakes"]) / turns, 1) if turns else 0.0,
            "wakes_per_turn_main": round((cpu1["wakes_main"] - cpu0["wakes_main"]) / turns, 1) if turns else 0.0,
            "pss_mb_per_run_p50": round(statistics.median(pss), 1) if pss else 0.0,
            "pss_mb_per_run_max": round(max(pss, default=0.0), 1),
            "rss_mb_per_run_p50": round(statistics.median(rss), 1) if rss else 0.0,
            "pss_mb_runner_p50": round(statistics.median(a[0] / 1024 for a, _ in mem), 1) if mem else 0.0,
            "pss_mb_watcher_p50": round(statistics.median(b[0] / 1024 for _, b in mem), 1) if mem else 0.0,
            "rss_mb_runner_p50": round(statistics.median(a[1] / 1024 for a, _ in mem), 1) if mem else 0.0,
            "rss_mb_watcher_p50": round(statistics.median(b[1] / 1024 for _, b in mem), 1) if mem else 0.0,
            "needs": len(needs), "needs_by_reason": _count(reason for *_, reason in needs),
            "needs_missed_fleet": len(needs) - len(shown), "needs_missed_channel": len(needs) - len(told),
            "needs_missed_store": len(needs) - len(rowed),
            "need_fleet_lag_p50_s": round(pct(shown, 50), 2), "need_fleet_lag_max_s": round(max(shown, default=0), 2),
            "needs_late_fleet": sum(x > LATE_S for x in shown),
            "need_channel_lag_p50_s": round(pct(told, 50), 2), "need_channel_lag_max_s": round(max(told, default=0), 2),
            "needs_late_channel": sum(x > LATE_CHANNEL_S for x in told),
            "need_store_lag_p50_s": round(pct(rowed, 50), 2), "need_store_lag_max_s": round(max(rowed, default=0), 2),
        })
        if url:
            out.update({"store_events_lag_p50_s": round(pct(watch.lags, 50), 2),
                        "store_events_lag_p99_s": round(pct(watch.lags, 99), 2),
                        "store_events_lag_max_s": round(max(watch.lags, default=0), 2),
                        "store_events_sampled": len(watch.lags)})
        out["runners_ended_early"] = [r.run_id for r in runs if r.runner is not None and not alive(r.runner)]
        if out["cpu_pct"] > GOALS["cpu_pct"] and args.profile:
            # After the window (its CPU figures are taken): what the runners' Python work is made of.
            out["profile"] = [(f, round(share, 1)) for f, share in profile_runners(runs)[:200]]
    finally:
        out["left_running"] = stop_runs(runs)
        model.stop()
        sink.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            out["kept"] = str(work)
    return out


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def profile_runners(runs: list[Run], seconds: float = 10.0, count: int = 3) -> list[tuple[str, float]]:
    """Where the runners' CPU goes: ``py-spy record --gil`` (sampling, only the thread holding the GIL: the
    Python work) on ``count`` working runners at once for ``seconds``; each function's share of the samples that
    pass through it, heaviest first. Empty when py-spy is not installed (``pip install py-spy``: not a
    dependency of the project)."""
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    pids = [r.runner for r in runs if r.kind == "plain" and r.runner is not None and alive(r.runner)][:count]
    if spy is None or not pids:
        return []
    with tempfile.TemporaryDirectory(prefix="agent-console-bench-spy-") as tmp:
        procs = [subprocess.Popen([spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "200", "--gil",
                                   "-f", "raw", "-o", f"{tmp}/{pid}.txt"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for pid in pids]
        for proc in procs:
            try:
                proc.wait(seconds + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        through: dict[str, int] = {}
        total = 0
        for raw in Path(tmp).glob("*.txt"):
            for line in raw.read_text().splitlines():
                stack, _, n = line.rpartition(" ")
                total += int(n)
                for frame in {f.split(" (")[0] for f in stack.split(";")}:
                    through[frame] = through.get(frame, 0) + int(n)
    return sorted(((f, n / total * 100) for f, n in through.items()), key=lambda fn: -fn[1]) if total else []


# A runner's outer frames (every sample passes through them): left out of what the profile prints.
SCAFFOLD = ("<module>", "_run_module_as_main", "_run_code", "main", "_main", "_command", "cmd_run", "run_headless",
            "_run_headless", "Supervisor.", "run_agent_session", "Session.run", "Thread.", "_Workers._serve",
            "ModelAsking.")


def dominates(out: dict[str, Any]) -> list[str]:
    """What a missed goal is made of."""
    lines = []
    if out.get("cpu_pct", 0) > GOALS["cpu_pct"]:
        lines.append(f"CPU: runners {out['cpu_pct_runners']:.1f}%, watchers {out['cpu_pct_watchers']:.1f}% of one "
                     f"core ({out['events_per_s']:.0f} events/s); a runner's turn {out.get('cpu_ms_per_turn', 0):.1f} "
                     f"ms, {out.get('cpu_ms_per_turn_main', 0):.1f} of it its main thread's (the loop), the rest its "
                     "other threads' (the model call's worker among them: the request and the provider's stream)")
    if out.get("pss_mb_per_run_p50", 0) > GOALS["pss_mb_per_run"]:
        lines.append(f"memory: runner Pss {out['pss_mb_runner_p50']:.1f} MB (Rss {out['rss_mb_runner_p50']:.1f}), "
                     f"watcher Pss {out['pss_mb_watcher_p50']:.1f} MB (Rss {out['rss_mb_watcher_p50']:.1f})")
    if out.get("fleet_ms_p50", 0) > GOALS["fleet_ms"]:
        lines.append(f"fleet refresh: {out['fleet_cpu_ms_p50']:.0f} ms of its {out['fleet_ms_p50']:.0f} ms is CPU")
    return lines


def report(out: dict[str, Any]) -> None:
    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISS"

    n = out["runs"]
    print(f"\n{n} runs ({out['store']} store): started in {out['start_s']} s; held {out['held']}/{n} over a "
          f"{out['window_s']} s window; load average {out['load_avg_1m']} -> {out['load_avg_1m_end']}")
    print(f"  harness CPU: {out['cpu_pct']:.1f}% of one core (runners {out['cpu_pct_runners']:.1f}%, watchers "
          f"{out['cpu_pct_watchers']:.1f}%; goal {GOALS['cpu_pct']:.0f}%): "
          f"{verdict(out['cpu_pct'] <= GOALS['cpu_pct'])}; the loopback model server "
          f"{out['cpu_pct_model_server']:.1f}% (not the harness)")
    if out["turns"]:
        # The goal's share of a run: 25% of a core over 100 runs, 2.5 ms of CPU a second, times a turn's seconds.
        pace = out["window_s"] * max(1, out["held"]) / out["turns"]
        print(f"  a runner's CPU a turn: {out['cpu_ms_per_turn']:.1f} ms ({out['turns']} turns began in the window, "
              f"one every {pace:.1f} s a run: the goal allows {GOALS['cpu_pct'] * 10 / 100 * pace:.1f} ms); its main "
              f"thread {out['cpu_ms_per_turn_main']:.1f} ms (the run's loop: the engine's turn, its events, the "
              f"operator's looks), its other threads {out['cpu_ms_per_turn'] - out['cpu_ms_per_turn_main']:.1f} ms "
              "(the model call's worker, which sends the request and reads the provider's stream; the views' feeds, "
              "the state files' writer, the notifier)")
        print(f"  a runner's wake-ups a turn (its threads' voluntary context switches: a count load does not move): "
              f"{out['wakes_per_turn']:.1f}, {out['wakes_per_turn_main']:.1f} of them its main thread's")
    print(f"  events: {out['events']:,} in the window, {out['events_per_s']:.1f}/s across the fleet")
    print(f"  memory per run (runner + watcher): Pss p50 {out['pss_mb_per_run_p50']:.1f} MB, max "
          f"{out['pss_mb_per_run_max']:.1f} MB (goal {GOALS['pss_mb_per_run']:.0f} MB): "
          f"{verdict(out['pss_mb_per_run_p50'] <= GOALS['pss_mb_per_run'])}; Rss p50 {out['rss_mb_per_run_p50']:.1f} "
          f"MB (runner {out['rss_mb_runner_p50']:.1f}, watcher {out['rss_mb_watcher_p50']:.1f}; shared pages "
          "counted in each)")
    print(f"  fleet refresh over {out['fleet_rows']} rows ({out['fleet_live']} live), {out['fleet_polls']} polls: "
          f"p50 {out['fleet_ms_p50']:.0f} ms wall / {out['fleet_cpu_ms_p50']:.0f} ms CPU, max "
          f"{out['fleet_ms_max']:.0f} / {out['fleet_cpu_ms_max']:.0f} ms (goal {GOALS['fleet_ms']:.0f} ms): "
          f"{verdict(out['fleet_ms_p50'] <= GOALS['fleet_ms'])}; first poll (every log folded) "
          f"{out['first_poll_ms']:.0f} ms")
    missed = out["needs_missed_fleet"] + out["needs_missed_channel"] + out["needs_missed_store"]
    print(f"  needs: {out['needs']} in the window {out['needs_by_reason']}; missed by the fleet "
          f"{out['needs_missed_fleet']}, by the channel {out['needs_missed_channel']}, by the store "
          f"{out['needs_missed_store']} (goal 0): {verdict(missed == 0)}")
    print(f"    event -> fleet p50 {out['need_fleet_lag_p50_s']} s, max {out['need_fleet_lag_max_s']} s "
          f"({out['needs_late_fleet']} later than {LATE_S:g} s); -> channel p50 {out['need_channel_lag_p50_s']} s, "
          f"max {out['need_channel_lag_max_s']} s ({out['needs_late_channel']} later than {LATE_CHANNEL_S:g} s); "
          f"-> store row p50 {out['need_store_lag_p50_s']} s, max {out['need_store_lag_max_s']} s")
    if "store_events_lag_p50_s" in out:
        print(f"  store lag (PostgreSQL, every event, sampled each 0.25 s): p50 {out['store_events_lag_p50_s']} s, "
              f"p99 {out['store_events_lag_p99_s']} s, max {out['store_events_lag_max_s']} s over "
              f"{out['store_events_sampled']:,} events")
    if out["runners_ended_early"]:
        print(f"  runs whose runner ended in the window: {', '.join(out['runners_ended_early'])}")
    for line in dominates(out):
        print(f"  what dominates: {line}")
    shown = [(f, share) for f, share in out.get("profile", []) if not f.startswith(SCAFFOLD)][:12]
    if shown:
        print("  the runners' Python work (py-spy --gil, share of samples through each function): "
              + ", ".join(f"{f} {share:.0f}%" for f, share in shown))
    if out["left_running"]:
        print(f"  PROCESSES LEFT RUNNING: {out['left_running']}")


# What a runner imports, in the order it needs them: the RSS each adds is what dominates a runner's memory. The
# openai SDK is counted with its adapter, imported as the runner imports it (console.providers.lean_import).
RUNNER_IMPORTS = ("pydantic", "console.engine.events", "console.engine.supervisor", "console.settings",
                  "console.providers.openai_provider", "apprise", "console.notify", "console.cli.run",
                  "console.headless")
RSS_BY_IMPORT = """
import importlib, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
print(f"python {rss():.1f}")
for name in sys.argv[1:]:
    before = rss()
    importlib.import_module(name)
    print(f"{name} {rss() - before:.1f}")
"""


def rss_by_import() -> list[tuple[str, float]]:
    """The RSS (MB) each of a runner's imports adds, in a fresh interpreter, in :data:`RUNNER_IMPORTS` order."""
    done = subprocess.run([sys.executable, "-c", RSS_BY_IMPORT, *RUNNER_IMPORTS], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    return [(name, float(mb)) for name, mb in (line.rsplit(" ", 1) for line in done.stdout.splitlines())]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="25,50,100", help="numbers of concurrent runs, one fleet each")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of the steady window")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds after every run started, before it")
    ap.add_argument("--warmup-until-need", action="store_true",
                    help="end the warm-up as soon as a run has asked for its operator (at most --warmup seconds): "
                         "a tiny fleet's check that a need reaches every view, not a measure")
    ap.add_argument("--grace", type=float, default=5.0, help="seconds a need has to reach every view after it")
    ap.add_argument("--delay", default="2,5", help="the model's answer takes LOW,HIGH seconds")
    ap.add_argument("--tokens-per-chunk", type=int, default=8, help="words of the model's text per streamed chunk")
    ap.add_argument("--needs-every", type=int, default=5,
                    help="of each this many runs, one has a token budget and one a restart to approve")
    ap.add_argument("--store", choices=("embedded", "pg"), default="embedded")
    ap.add_argument("--url", default="", help="with --store pg: this server (default: one of tests/pg_server.py)")
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--keep", action="store_true", help="keep the runs' folder (its path is printed)")
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="when the CPU goal is missed, do not sample the runners with py-spy (if installed)")
    ap.add_argument("--serve-model", action="store_true", help=argparse.SUPPRESS)
    return ap


def run(args: argparse.Namespace) -> dict[str, Any]:
    if isinstance(args.delay, str):
        low, high = (float(x) for x in args.delay.split(","))
        args.delay = (low, high)
    server = None
    url = args.url
    if args.store == "pg" and not url:
        from tests.pg_server import PgServer

        server = PgServer()
        server.start()
        url = server.new_database()
    results = []
    try:
        for n in (int(x) for x in str(args.sizes).split(",")):
            fig = bench_size(n, args, url if args.store == "pg" else "")
            report(fig)
            results.append(fig)
    finally:
        if server is not None:
            server.remove()
    out: dict[str, Any] = {"fleet_scale": results, "goals": GOALS}
    if any(o.get("pss_mb_per_run_p50", 0) > GOALS["pss_mb_per_run"] for o in results):
        weights = rss_by_import()
        print("\nwhat a runner's memory is made of: the RSS each import adds in a fresh interpreter (MB): "
              + ", ".join(f"{name} {mb:.1f}" for name, mb in weights)
              + f"; {sum(mb for _, mb in weights):.1f} MB before the run has begun")
        out["rss_by_import_mb"] = dict(weights)
    return out


def main() -> int:
    args = parser().parse_args()
    if args.serve_model:
        low, high = (float(x) for x in args.delay.split(","))
        serve_model(args.seed, (low, high), args.tokens_per_chunk)
        return 0
    print(json.dumps(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
