"""`agent-console serve`'s figures (issue 35, point 6), against a real `serve` process on 127.0.0.1.

Every `serve` here is a process of its own (``python -m console.cli serve --no-console``) in a hermetic home (its
own HOME, data dir and config file under one temporary folder), logged in through the link it prints, with a
cookie jar as a browser keeps; its CPU time and memory are read from /proc. On this shared 2-core machine CPU
time is the figure to read beside the wall times (another session's work lengthens a wall time, not a CPU time).

1. The fleet page: ``--runs`` sealed run folders (a launch record sealed with the data dir's key, a log of ~20
   turns each, a quarter each completed, failed, stopped and interrupted) plus one live run (its lock held by
   this process): from `serve`'s exec until ``GET /`` lists every run with its last event; then ``GET /`` once
   warm (the HTML of every row; goal 1 s) and the live feed's first frame (``GET /live/fleet``).
2. An action: ``POST /run/ID/act`` (pause, with the session's CSRF token and a form's own id, as the page's form
   sends it) until the command's file is in the run's inbox (goal 2 s). Then a real headless run (the scripted
   model, ``--speed 0``, a 10,000-token window, no auto-restart) that waits for restart approval: approve from
   the page until its log has the ``operator_command`` event received, and applied. Then across machines: a run
   of machine "bench-a" with its store link (PostgreSQL: ``--url``, or a server of its own from tests/pg_server.py),
   a `serve` of machine "bench-b" on the same store: pause until the command's file is in that run's inbox,
   through the store (goal 2 s).
3. A live run page: events appended to the live run's log at ``--rate`` a second for ``--seconds`` (a turn's five
   events, the assistant's message numbered) while ``GET /live/run/ID`` (the run page's server-sent events) is
   read as a browser does: each message written, until the first frame that shows it (or a newer one); at each
   frame, how many events were written and not yet shown; how soon the page shows the last event once the writing
   stops; `serve`'s CPU share meanwhile. The page is drawn again each time the fleet's poll (once a second) sees
   the run changed, so "not falling behind" is: every event is on the page within a poll or two of its writing,
   however long the stream (goal 2 s), and the last one is shown.
4. `serve` idle: CPU seconds over ``--idle-seconds`` and resident memory, with no run, with ``--idle-runs``, and
   with as many, one of them live (its log still), its page and the fleet page open (the frames each page was
   sent while nothing it shows changed).

Each figure is printed with its goal and PASS or MISS; the last line is one JSON object. Not a timed test
(tests/web/test_bench_serve.py runs this machinery at tiny sizes and checks what it did, never how fast).

    python benchmarks/serve.py [--runs 200] [--rate 2000] [--seconds 10] [--idle-seconds 10] [--idle-runs 50]
                               [--samples 10] [--approvals 3] [--url URL | --no-remote]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import queue
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import aiohttp  # noqa: E402

from console.engine import events as ev  # noqa: E402
from console.engine.job import JobPaths  # noqa: E402
from console.engine.launch import Launch, write_launch  # noqa: E402
from console.engine.run_lock import RunLock  # noqa: E402
from console.engine.runs import run_id  # noqa: E402
from console.engine.seal import Seal  # noqa: E402
from console.engine.store import JobStore  # noqa: E402

GOALS = {"page_s": 1.0, "action_s": 2.0, "remote_action_s": 2.0, "live_lag_s": 2.0}
T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
MARK = re.compile(r"bench event (\d+)")
TICK = os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- a hermetic home and its runs ---------------------------------------------------------------------------
@dataclass
class Home:
    """One operator's home: HOME, data dir, config file and run folders under ``root``, never the real ones."""

    root: Path
    store: str | None = None  # a shared store's URL (None: the embedded one in the data dir)
    host: str | None = None  # the machine's name in a shared store (AGENT_CONSOLE_HOST)

    def __post_init__(self) -> None:
        for name in ("home", "data", "runs"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        (self.root / "config.toml").touch()

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")}
        env.update(HOME=str(self.root / "home"), AGENT_CONSOLE_DATA_DIR=str(self.data),
                   AGENT_CONSOLE_CONFIG=str(self.root / "config.toml"), PYTHONPATH=str(REPO),
                   AGENT_CONSOLE_STORE=self.store or "")
        if self.host:
            env["AGENT_CONSOLE_HOST"] = self.host
        return env


def turn_lines(seq: int, turn: int, ts: str) -> list[str]:
    """One turn's five events as a run logs them, from ``seq`` on; the assistant's message says ``bench event
    SEQ`` (the page's story shows it: what a reader of the page looks for)."""
    base: dict[str, Any] = {"v": 1, "ts": ts, "session": 1, "turn": turn}
    call = f"c{turn}"
    kinds: tuple[dict[str, Any], ...] = (
        {"type": "turn_started", "prompt_tokens_est": 12_000},
        {"type": "assistant_message", "text": f"Reading part {turn}: bench event {seq + 1}",
         "tool_calls": [{"id": call, "name": "read_file", "arguments": "{}"}]},
        {"type": "tool_called", "call_id": call, "tool": "read_file",
         "arguments": json.dumps({"path": f"notes/part-{turn}.md"})},
        {"type": "tool_result", "call_id": call, "tool": "read_file", "ok": True, "content": "x" * 200},
        {"type": "token_usage", "input_tokens": 12_000, "output_tokens": 300, "context_tokens": 12_300,
         "context_window": 128_000, "prompt_budget": 110_000, "job_cost_usd": round(0.01 * turn, 4)},
    )
    return [json.dumps({**base, **fields, "seq": seq + i}) for i, fields in enumerate(kinds)]


def write_run(paths: JobPaths, turns: int, started: datetime) -> int:
    """A run's log: its session, a todo list and ``turns`` turns; returns the last seq."""
    stream = ev.EventStream(paths.events)
    stream.emit(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent",
                context_window=128_000, context_window_source="--context-window", priced=True)
    stream.emit(ev.TodosChanged, kind="phase", phase_name="Read the notes", phase_number=2, total_phases=4,
                items=[ev.TodoItemRecord(text="Read the notes", done=True),
                       ev.TodoItemRecord(text="Write the summary", done=False)])
    seq = stream.seq
    stream.close()
    with paths.events.open("a", encoding="utf-8") as fh:
        for turn in range(1, turns + 1):
            fh.writelines(line + "\n" for line in turn_lines(seq + 1, turn, (started + timedelta(seconds=turn))
                                                              .isoformat()))
            seq += 5
    return seq


def make_runs(home: Home, n: int, turns: int = 20, live: int = 0) -> list[JobPaths]:
    """``n`` finished runs of this operator (sealed launch records, logs, store rows), then ``live`` running ones
    (their rows say running: the caller holds their locks)."""
    store = JobStore(home.data / "jobs.db")
    seal = Seal.of(home.data)
    made = []
    for i in range(n + live):
        started = T0 + timedelta(minutes=i)
        paths = JobPaths(home.runs / f"job{i % 17}-{started.strftime('%Y%m%d-%H%M%S')}-{i}")
        (paths.root / "instructions.md").parent.mkdir(parents=True)
        paths.root.joinpath("instructions.md").write_text(f"# job {i}\n", encoding="utf-8")
        paths.state.mkdir()
        write_launch(paths, Launch(provider="scripted", model="scripted-agent"), seal)
        write_run(paths, turns, started)
        job = "live-run" if i >= n else f"job{i % 17}"
        store.started(paths.root, job, "scripted", "scripted-agent", started)
        end = started + timedelta(minutes=5)
        if i < n:
            if i % 4 == 0:
                store.completed(paths.root, end, 0.9, "Produced the digest.")
            elif i % 4 == 1:
                store.ended(paths.root, "failed", end, "max_turns: 50 turns")
            elif i % 4 == 2:
                store.ended(paths.root, "stopped", end, "stopped by the operator")
            # i % 4 == 3: its row says running, no process holds it: interrupted
        made.append(paths)
    store.close()
    return made


# -- serve as a process -------------------------------------------------------------------------------------
class Serve:
    """`agent-console serve` started in ``home``; its login token, its CPU seconds and memory."""

    def __init__(self, home: Home) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.spawned = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console.cli", "serve", "--bind", f"127.0.0.1:{self.port}", "--no-console"],
            env=home.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr.append), daemon=True).start()
        self.token = ""
        deadline = time.monotonic() + 60
        while not self.token:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise SystemExit(f"serve printed no login link within 60 s: {''.join(self.stderr)}") from None
            if m := re.search(r"/login\?token=(\S+)", line):
                self.token = m.group(1)

    @staticmethod
    def _read(stream: Any, put: Any) -> None:
        for line in stream:
            put(line)

    def cpu(self) -> float:
        """The process's CPU seconds so far (user and system)."""
        with open(f"/proc/{self.proc.pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            kb = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        return kb / 1024

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # what Ctrl+C sends: serve stops cleanly
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Client:
    """A browser's session with a serve: logged in through the printed link, its cookie kept."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.http = aiohttp.ClientSession(serve.url, cookie_jar=aiohttp.CookieJar(unsafe=True))
        self.csrf = ""

    async def log_in(self) -> None:
        deadline = time.monotonic() + 60
        while True:  # serve prints its link before it listens
            try:
                async with self.http.get(f"/login?token={self.serve.token}", allow_redirects=False) as resp:
                    if resp.status != 303:
                        raise SystemExit(f"the login link was refused: {resp.status} {await resp.text()}")
                    return
            except aiohttp.ClientConnectionError:
                if time.monotonic() > deadline or self.serve.proc.poll() is not None:
                    raise SystemExit(f"serve did not listen: {''.join(self.serve.stderr)}") from None
                await asyncio.sleep(0.02)

    async def page(self, path: str = "/") -> str:
        async with self.http.get(path) as resp:
            text = await resp.text()
            if resp.status != 200:
                raise SystemExit(f"GET {path}: {resp.status} {text[:300]}")
        if m := re.search(r'name="csrf" value="([^"]+)"', text):
            self.csrf = m.group(1)
        return text

    async def act(self, rid: str, action: str) -> tuple[int, str]:
        """The page's form for ``rid``: ``action``, the session's CSRF token, the form's own id."""
        form = {"action": action, "csrf": self.csrf, "once": secrets.token_urlsafe(12)}
        async with self.http.post(f"/run/{rid}/act", data=form) as resp:
            return resp.status, await resp.text()

    async def frames(self, path: str) -> AsyncGenerator[tuple[float, str], None]:
        """The server-sent events of ``path``: (when each frame was whole, its HTML)."""
        async with self.http.get(path, timeout=aiohttp.ClientTimeout(total=None, sock_read=60)) as resp:
            lines: list[str] = []
            while raw := await resp.content.readline():
                text = raw.decode()
                if text == "\n":
                    if lines:
                        yield time.perf_counter(), "\n".join(lines)
                    lines = []
                elif text.startswith("data: "):
                    lines.append(text[6:].rstrip("\n"))

    async def close(self) -> None:
        await self.http.close()


def rows_of(html: str) -> dict[str, str]:
    """The fleet page's runs: id -> its row's HTML."""
    return {m.group(1): m.group(0) for m in re.finditer(r'<li class="run [^"]*" id="run-([^"]+)">.*?</li>', html,
                                                          re.S)}


async def until_row(client: Client, rid: str, action: str, timeout: float = 90.0) -> None:
    """Until the fleet page offers ``action`` for the run ``rid`` (its feed reads the fleet once a second)."""
    deadline = time.monotonic() + timeout
    while f'value="{action}"' not in rows_of(await client.page()).get(rid, ""):
        if time.monotonic() > deadline:
            raise SystemExit(f"the page never offered {action} for run {rid}")
        await asyncio.sleep(0.1)


async def inbox_file(paths: JobPaths, before: set[str], timeout: float = 30.0) -> float | None:
    """Until a file not in ``before`` is in the run's inbox: when (perf_counter), or None."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        with contextlib.suppress(FileNotFoundError):
            if set(os.listdir(paths.inbox)) - before:
                return time.perf_counter()
        await asyncio.sleep(0.001)
    return None


def take_inbox(paths: JobPaths) -> None:
    """Empty the inbox, as the run does when it takes its commands."""
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(paths.inbox):
            with contextlib.suppress(OSError):
                (paths.inbox / name).unlink()


# -- 1. the fleet page --------------------------------------------------------------------------------------
async def bench_page(serve: Serve, client: Client, n: int, samples: int) -> dict[str, Any]:
    await client.log_in()
    listening = time.perf_counter() - serve.spawned
    listed = 0.0
    while True:  # every run listed, each with its last event (every log folded)
        html = await client.page()
        rows = rows_of(html)
        if len(rows) >= n and not listed:
            listed = time.perf_counter() - serve.spawned
        if len(rows) >= n and sum('class="last"' in r for r in rows.values()) >= n:
            break
        await asyncio.sleep(0.02)
    cold = time.perf_counter() - serve.spawned
    await asyncio.sleep(1.5)
    walls, cpus, sizes = [], [], []
    for _ in range(samples):
        c0, t = serve.cpu(), time.perf_counter()
        html = await client.page()
        walls.append(time.perf_counter() - t)
        cpus.append(serve.cpu() - c0)  # (in clock ticks of 10 ms: read as a mean; a poll may fall in it)
        sizes.append(len(html))
        assert len(rows_of(html)) >= n
        await asyncio.sleep(0.2)
    firsts = []
    for _ in range(max(3, samples // 2)):
        t = time.perf_counter()
        frames = client.frames("/live/fleet")
        got, html = await frames.__anext__()
        firsts.append(got - t)
        await frames.aclose()
        assert len(rows_of(html)) >= n
    return {"page_rows": len(rows_of(html)), "page_cold_s": cold, "page_listening_s": listening,
            "page_listed_s": listed, "page_p50_s": pct(walls, 50),
            "page_p99_s": pct(walls, 99), "page_cpu_s": statistics.mean(cpus), "page_kb": sizes[-1] / 1024,
            "feed_first_p50_s": pct(firsts, 50), "feed_first_max_s": max(firsts)}


# -- 2. an action reaches the run -----------------------------------------------------------------------------
async def bench_action(client: Client, paths: JobPaths, samples: int) -> dict[str, Any]:
    rid = run_id(paths.root)
    await until_row(client, rid, "pause")
    sent, answered, arrived = 0, [], []
    for _ in range(samples):
        take_inbox(paths)
        t = time.perf_counter()
        status, text = await client.act(rid, "pause")
        if status == 409:  # the page's feed saw the last pause in the inbox: it is offered again a poll later
            await asyncio.sleep(1.2)
            continue
        if status != 200:
            raise SystemExit(f"pause was refused: {status} {text[:300]}")
        answered.append(time.perf_counter() - t)
        sent += 1
        if (at := await inbox_file(paths, set())) is not None:
            arrived.append(at - t)
        take_inbox(paths)
        await asyncio.sleep(0.3)
    return {"actions_sent": sent, "actions_arrived": len(arrived), "action_answer_p50_s": pct(answered, 50),
            "action_p50_s": pct(arrived, 50), "action_max_s": max(arrived, default=float("nan"))}


def answers(path: Path, offset: int) -> tuple[int, list[ev.OperatorCommand], int]:
    """What the run's log says after ``offset``: restarts pending, operator commands; the new offset."""
    got, offset = ev.read_new(path, offset)
    return (sum(isinstance(e, ev.RestartPending) for e in got), [e for e in got if isinstance(e, ev.OperatorCommand)],
            offset)


async def bench_headless(home: Home, client: Client, approvals: int) -> dict[str, Any]:
    """A real headless run waiting for restart approval, approved from the page ``approvals`` times: until its
    log has the command received, and applied."""
    job = home.runs / "headless"
    shutil.copytree(REPO / "sample_jobs" / "requirements-extraction", job)
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(job), "--in-place", "--headless",
                             "--speed", "0", "--context-window", "10000", "--no-auto-restart"],
                            env=home.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    paths = JobPaths(job)
    rid = run_id(job)
    received, applied = [], []
    offset, pending, done = 0, 0, 0
    try:
        for _ in range(approvals):
            deadline = time.monotonic() + 90
            while True:  # a restart pending that no approval answered yet, and the page offering approve
                more, _, offset = answers(paths.events, offset)
                pending += more
                if pending > done or proc.poll() is not None:  # (the run ends: no more to approve)
                    break
                if time.monotonic() > deadline:
                    raise SystemExit("the headless run never waited for approval")
                await asyncio.sleep(0.05)
            if pending <= done:
                break
            await until_row(client, rid, "approve")
            t = time.perf_counter()
            status, text = await client.act(rid, "approve")
            if status != 200:
                raise SystemExit(f"approve was refused: {status} {text[:300]}")
            seen: dict[str, float] = {}
            deadline = time.monotonic() + 30
            while "applied" not in seen and time.monotonic() < deadline:
                more, commands, offset = answers(paths.events, offset)
                now = time.perf_counter()
                pending += more
                for e in commands:
                    if e.command == "approve_restart" and e.source.startswith("web"):
                        seen.setdefault(e.status, now)
                await asyncio.sleep(0.005)
            if "received" in seen:
                received.append(seen["received"] - t)
            if "applied" in seen:
                applied.append(seen["applied"] - t)
            done = pending  # the next sample answers a restart pending after this one
            await asyncio.sleep(1.2)  # the page's feed reads the run's new state
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {"approvals": len(applied), "approve_received_p50_s": pct(received, 50),
            "approve_received_max_s": max(received, default=float("nan")),
            "approve_applied_p50_s": pct(applied, 50), "approve_applied_max_s": max(applied, default=float("nan"))}


async def bench_remote(url: str, base: Path, samples: int) -> dict[str, Any]:
    """A run of machine bench-a linked to the shared store; bench-b's serve pauses it: until the command's file is
    in that run's inbox (a row and a NOTIFY; the run's link writes it)."""
    from console.engine.clock import SystemClock
    from console.engine.control import ControlChannel
    from console.engine.operator import OperatorState
    from console.engine.store.link import StoreLink
    from console.engine.store.postgres import PgStore

    run_home = Home(base / "machine-a", store=url, host="bench-a")
    paths = JobPaths(run_home.runs / "remote-run")
    paths.state.mkdir(parents=True)
    store = PgStore(url, host="bench-a", pool_max=2)
    store.started(paths.root, "remote-run", "scripted", "scripted-agent", datetime.now(UTC))
    stream = ev.EventStream(paths.events, SystemClock())
    link = StoreLink(store, paths, stream, OperatorState(ControlChannel(paths.inbox)), owner="bench:remote-run",
                     now=lambda: datetime.now(UTC))
    link.start()
    stream.emit(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent", context_window=128_000)
    stream.emit(ev.TurnStarted, turn=1, prompt_tokens_est=1000)
    serve = Serve(Home(base / "machine-b", store=url, host="bench-b"))
    client = Client(serve)
    arrived: list[float] = []
    try:
        await client.log_in()
        rid = run_id(paths.root)
        await until_row(client, rid, "pause")
        for _ in range(samples):
            take_inbox(paths)
            t = time.perf_counter()
            status, text = await client.act(rid, "pause")
            if status == 409:
                await asyncio.sleep(1.2)
                continue
            if status != 200:
                raise SystemExit(f"pause across machines was refused: {status} {text[:300]}")
            if (at := await inbox_file(paths, set())) is not None:
                arrived.append(at - t)
            take_inbox(paths)
            await asyncio.sleep(0.3)
    finally:
        await client.close()
        serve.stop()
        link.close()
        store.close()
        stream.close()
    return {"remote_arrived": len(arrived), "remote_p50_s": pct(arrived, 50),
            "remote_max_s": max(arrived, default=float("nan"))}


# -- 3. a live run page -----------------------------------------------------------------------------------------
@dataclass(eq=False)  # a thread stays hashable
class Writer(threading.Thread):
    """Appends whole turns (five events, the assistant's message numbered) to a run's log at ``rate`` events a
    second for ``seconds``, in a write every 10 ms."""

    path: Path
    seq: int
    rate: float
    seconds: float
    marks: list[tuple[float, int]] = field(default_factory=list)  # (when written, the last message's number)

    def __post_init__(self) -> None:
        super().__init__(daemon=True)

    def run(self) -> None:
        start = time.perf_counter()
        written, turn = 0, 1000
        with self.path.open("a", encoding="utf-8") as fh:
            while (now := time.perf_counter()) - start < self.seconds:
                due = int((now - start) * self.rate)
                lines = []
                while written < due:
                    turn += 1
                    lines += turn_lines(self.seq + 1, turn, datetime.now(UTC).isoformat())
                    self.seq += 5
                    written += 5
                if lines:
                    fh.write("\n".join(lines) + "\n")
                    fh.flush()
                    self.marks.append((time.perf_counter(), self.seq - 3))  # the message is a turn's second
                time.sleep(0.01)

    @property
    def last(self) -> int:
        return self.marks[-1][1] if self.marks else 0

    def written_by(self, t: float) -> int:
        return max((mark for at, mark in self.marks if at <= t), default=0)

    def lag(self, t: float, shown: int) -> float:
        """How long the oldest message written by ``t`` and not shown has been waiting (0: all shown)."""
        return next((t - at for at, mark in self.marks if mark > shown and at <= t), 0.0)


async def bench_live(serve: Serve, client: Client, paths: JobPaths, first_seq: int, rate: float,
                     seconds: float) -> dict[str, Any]:
    rid = run_id(paths.root)
    writer = Writer(paths.events, first_seq, rate, seconds)
    frames = client.frames(f"/live/run/{rid}")
    await frames.__anext__()  # the page as it is, before the stream
    c0, t0 = serve.cpu(), time.perf_counter()
    writer.start()
    behind, lags, shown = [], [], 0
    seen: list[tuple[float, int]] = []  # (when a frame came, the newest message it shows)
    cpu, stopped, caught = 0.0, 0.0, float("nan")
    async for at, html in frames:
        shown = max((int(m) for m in MARK.findall(html)), default=0)
        behind.append((writer.written_by(at) - shown) // 5)  # turns, of five events
        lags.append(writer.lag(at, shown))
        seen.append((at, shown))
        if os.environ.get("BENCH_DEBUG"):
            print(f"frame at {at - t0:.2f}: shown {shown}, written {writer.written_by(at)}", flush=True)
        if not writer.is_alive():
            if not stopped:
                stopped = time.perf_counter()
                cpu = (serve.cpu() - c0) / (stopped - t0)
            if shown >= writer.last:
                caught = at - writer.marks[-1][0]
                break
            if time.perf_counter() - stopped > 10:
                break
    await frames.aclose()
    written = writer.seq - first_seq
    # Each message written, until the first frame that showed it (or a newer one): what a reader of the page waits.
    waits = [next((f - at for f, top in seen if top >= mark and f >= at), float("inf")) for at, mark in writer.marks]
    return {"live_wait_p50_s": pct(waits, 50), "live_wait_max_s": max(waits, default=float("nan")),
            "live_written": written, "live_shown_last": shown == writer.last, "live_frames": len(lags),
            "live_caught_up_s": caught, "live_behind_max": 5 * max(behind, default=0),
            "live_lag_p50_s": pct(lags, 50), "live_lag_max_s": max(lags, default=float("nan")),
            "live_cpu_share": cpu, "live_written_rate": written / max(1e-9, writer.marks[-1][0] - t0)}


# -- 4. idle ------------------------------------------------------------------------------------------------------
async def bench_idle(base: Path, runs: int, seconds: float, pages: bool = False) -> dict[str, Any]:
    """serve with ``runs`` finished runs and nothing happening; ``pages``: one of them live (its lock held, its log
    still), the fleet page and that run's page open (the frames each page got while nothing on it changed)."""
    home = Home(base / f"idle-{runs}{'-pages' if pages else ''}")
    made = make_runs(home, runs - pages, live=int(pages)) if runs else []
    lock = RunLock(made[-1]) if pages else None
    assert lock is None or lock.acquire(), "the live run's lock"
    serve = Serve(home)
    client = Client(serve)
    counts = [0, 0]
    readers: list[asyncio.Task[None]] = []

    async def count(i: int, path: str) -> None:
        async for _ in client.frames(path):
            counts[i] += 1

    try:
        await client.log_in()
        while len(rows_of(await client.page())) < runs:
            await asyncio.sleep(0.05)
        if pages:
            readers = [asyncio.create_task(count(0, "/live/fleet")),
                       asyncio.create_task(count(1, f"/live/run/{run_id(made[-1].root)}"))]
        await asyncio.sleep(2.0)  # its first polls folded every log
        c0, t0, before = serve.cpu(), time.perf_counter(), list(counts)
        await asyncio.sleep(seconds)
        cpu = serve.cpu() - c0
        wall = time.perf_counter() - t0
        out = {"idle_cpu_s": cpu, "idle_wall_s": wall, "idle_cpu_share": cpu / wall, "rss_mb": serve.rss_mb()}
        if pages:
            out |= {"idle_fleet_frames": counts[0] - before[0], "idle_run_frames": counts[1] - before[1]}
        return out
    finally:
        for task in readers:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await client.close()
        serve.stop()
        if lock is not None:
            lock.release()


# -- the whole ----------------------------------------------------------------------------------------------------
async def measure(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    home = Home(base / "fleet")
    made = make_runs(home, args.runs, live=1)
    live = made[-1]
    lock = RunLock(live)
    assert lock.acquire(), "the live run's lock"
    serve = Serve(home)
    client = Client(serve)
    try:
        print(f"fleet page: {args.runs} finished runs and 1 live, serve pid {serve.proc.pid}", flush=True)
        out |= bench_page_done(await bench_page(serve, client, args.runs + 1, args.samples))
        out |= bench_action_done(await bench_action(client, live, args.samples))
        if args.approvals:
            out |= bench_headless_done(await bench_headless(home, client, args.approvals))
        first = sum(1 for _ in live.events.open(encoding="utf-8"))
        out |= bench_live_done(await bench_live(serve, client, live, first, args.rate, args.seconds))
    finally:
        await client.close()
        serve.stop()
        lock.release()
    if not args.no_remote:
        server = None
        url = args.url
        try:
            if not url:
                from tests.pg_server import PgServer

                server = PgServer()
                server.start()
                url = server.new_database()
            out |= bench_remote_done(await bench_remote(url, base / "remote", args.samples))
        finally:
            if server is not None:
                server.remove()
    for n, pages in ((0, False), (args.idle_runs, False), (args.idle_runs, True)):
        fig = await bench_idle(base, n, args.idle_seconds, pages)
        what = f"{n} runs" + (", 1 of them live, its page and the fleet page open" if pages else "")
        print(f"serve idle, {what}: {fig['idle_cpu_s']:.3f} CPU s in {fig['idle_wall_s']:.1f} s "
              f"({fig['idle_cpu_share']:.2%} of a core); RSS {fig['rss_mb']:.0f} MB", flush=True)
        if pages:
            print(f"  frames sent while nothing shown changed: fleet page {fig['idle_fleet_frames']}, run page "
                  f"{fig['idle_run_frames']}", flush=True)
        out |= {f"{k}_{n}runs{'_pages' if pages else ''}": v for k, v in fig.items()}
    return out


def verdict(value: float, goal: float) -> str:
    return f"goal <= {goal:g} s: {value / goal:.2f} of it, {'PASS' if value <= goal else 'MISS'}"


def bench_page_done(f: dict[str, Any]) -> dict[str, Any]:
    print(f"  after serve's exec: logged in {f['page_listening_s']:.2f} s, every run listed "
          f"{f['page_listed_s']:.2f} s, each with its last event (every log folded) {f['page_cold_s']:.2f} s")
    print(f"  GET / with {f['page_rows']} rows ({f['page_kb']:.0f} KB): p50 {f['page_p50_s'] * 1e3:.0f} ms, "
          f"p99 {f['page_p99_s'] * 1e3:.0f} ms, serve's CPU {f['page_cpu_s'] * 1e3:.0f} ms a page; "
          f"{verdict(f['page_p99_s'], GOALS['page_s'])}")
    print(f"  the live feed's first frame: p50 {f['feed_first_p50_s'] * 1e3:.0f} ms, max "
          f"{f['feed_first_max_s'] * 1e3:.0f} ms; {verdict(f['feed_first_max_s'], GOALS['page_s'])}", flush=True)
    return f


def bench_action_done(f: dict[str, Any]) -> dict[str, Any]:
    print(f"action (pause) -> the run's inbox: {f['actions_arrived']} of {f['actions_sent']}; p50 "
          f"{f['action_p50_s'] * 1e3:.0f} ms, max {f['action_max_s'] * 1e3:.0f} ms (the page answered in p50 "
          f"{f['action_answer_p50_s'] * 1e3:.0f} ms); {verdict(f['action_max_s'], GOALS['action_s'])}", flush=True)
    return f


def bench_headless_done(f: dict[str, Any]) -> dict[str, Any]:
    print(f"approve -> a real headless run's log ({f['approvals']} approvals): received p50 "
          f"{f['approve_received_p50_s'] * 1e3:.0f} ms, max {f['approve_received_max_s'] * 1e3:.0f} ms; applied p50 "
          f"{f['approve_applied_p50_s'] * 1e3:.0f} ms, max {f['approve_applied_max_s'] * 1e3:.0f} ms; "
          f"{verdict(f['approve_applied_max_s'], GOALS['action_s'])}", flush=True)
    return f


def bench_live_done(f: dict[str, Any]) -> dict[str, Any]:
    print(f"live run page: {f['live_written']:,} events written ({f['live_written_rate']:,.0f}/s), "
          f"{f['live_frames']} frames; an event written until a frame showed it: p50 "
          f"{f['live_wait_p50_s'] * 1e3:.0f} ms, max {f['live_wait_max_s'] * 1e3:.0f} ms; at each frame, the oldest "
          f"event not yet shown had waited at most {f['live_lag_max_s'] * 1e3:.0f} ms ({f['live_behind_max']:,} "
          f"events); the "
          f"last event shown: {'yes' if f['live_shown_last'] else 'NO'}, {f['live_caught_up_s'] * 1e3:.0f} ms "
          f"after it was written; serve's CPU {f['live_cpu_share']:.0%} of a core; "
          f"{verdict(f['live_wait_max_s'], GOALS['live_lag_s'])}", flush=True)
    return f


def bench_remote_done(f: dict[str, Any]) -> dict[str, Any]:
    print(f"across machines (PostgreSQL): pause from bench-b's serve -> bench-a's run's inbox: "
          f"{f['remote_arrived']} arrived; p50 {f['remote_p50_s'] * 1e3:.0f} ms, max {f['remote_max_s'] * 1e3:.0f} "
          f"ms; {verdict(f['remote_max_s'], GOALS['remote_action_s'])}", flush=True)
    return f


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="finished runs on the fleet page (and 1 live)")
    ap.add_argument("--samples", type=int, default=10, help="page loads and actions timed")
    ap.add_argument("--approvals", type=int, default=3, help="approvals of a real headless run (0: none)")
    ap.add_argument("--rate", type=float, default=2000.0, help="events a second appended to the live run's log")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the live run page is followed")
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--idle-runs", type=int, default=50)
    ap.add_argument("--url", default=os.environ.get("AGENT_CONSOLE_STORE") or None,
                    help="a PostgreSQL store for the figure across machines (default: a server of its own)")
    ap.add_argument("--no-remote", action="store_true", help="leave out the figure across machines")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    return ap


def run(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="agent-console-bench-serve-"))
    try:
        return asyncio.run(measure(args, base))
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    args = parser().parse_args()
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}; {os.cpu_count()} cores", flush=True)
    out = run(args)
    print(json.dumps({"serve": {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()},
                      "goals": GOALS, "load": load}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
