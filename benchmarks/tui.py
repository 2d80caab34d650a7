"""Console benchmark: how fast the console absorbs events, how fast keys act under load, memory.

    python benchmarks/tui.py [--messages 5000] [--long 50000] [--size 200x50] [--only console|fleet|processes]

1. Prefill: a producer thread (standing in for the engine) pushes a synthetic run of
   ``--messages`` messages (assistant messages streamed as text deltas, each with a tool call
   and its result, plus turn and token events) as fast as it can; the console absorbs them.
   ``events_per_s`` = events absorbed / time until the last one is folded into the view.
2. Keys: ``p`` is pressed ``--presses`` times the way the terminal driver delivers keys (a Key event posted to the
   app), first on the idle console (this run's baseline), then while the producer keeps streaming (``--load-rate``
   events/s, default 2,000: ten times what a fast real model streams; then ``--high-rate``, 12,000; then half the
   measured capacity). Latency = key press to the frame, written to a terminal, that completes its effect: every
   frame is built as for a terminal (escape sequences, true colour; Textual's test driver skips that) and written
   to a pseudo-terminal whose master a thread reads (see FrameDriver); the clock stops when the write of the frame
   whose bytes show the status line saying the command is on its way and the footer offering the opposite command
   has returned (found in the frames' text, not in the app's state), and the command reached the controller. The
   status line alone is given too.
3. Long run: ``--long`` more messages, then the process's resident memory. The view keeps the
   newest messages only (the log never trims); the numbers say how many.
4. First paint: from starting the console (one run, and the fleet view with ``--fleet-runs`` runs) until its
   first screen is drawn.
5. Attach: a run whose ``events.jsonl`` holds ``--attach-events`` events (goal: 100,000 in <= 1.5 s): from
   opening the attached console until every event is folded into the view and drawn.
6. Fleet refresh: ``--fleet-runs`` runs in the jobs store (each with a log of a few hundred events): the first
   poll (every log folded), a poll with nothing new (what the fleet does twice a second), a poll after one run
   appended a turn, and redrawing the list with them.
7. Processes, as the operator starts them (``--only processes``): ``agent-console attach ID`` on a run of
   ``--attach-events`` events and ``agent-console`` (the fleet) with ``--fleet-runs`` runs, each a process on a
   pseudo-terminal of ``--size``, timed from the exec to its first output and to the first frame that shows the
   last message of the log (the panes filled) / the count of runs, with the process's CPU time (user + system,
   the whole process: interpreter, imports, the app's start, its frames) then and after it settled (the fleet: 3 s
   later, every run's log folded meanwhile; the long run is one of the fleet's); then where an attach's time goes:
   the imports (a fresh interpreter), the log's read, every event parsed, folded. The long run's view fold is kept
   as its runner keeps it, at its worst (``--without-kept-fold``: none, its whole log folded by both).

Before the JSON, a table gives each of issue 20's figures with its goal, their ratio and ok or MISS. The last line
is one JSON object; the lines before it explain. Not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import random
import re
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The frames are built for a terminal of the operator's kind (see FrameDriver): its colours, not none.
os.environ.update(TERM="xterm-256color", COLORTERM="truecolor")

from textual import events  # noqa: E402
from textual.drivers.headless_driver import HeadlessDriver  # noqa: E402

from console.engine import events as ev  # noqa: E402
from console.engine.job import JobPaths  # noqa: E402
from console.engine.seal import Seal  # noqa: E402
from console.engine.store import JobStore  # noqa: E402
from console.tui.app import ConsoleApp  # noqa: E402
from console.tui.commands import RecordingController  # noqa: E402

T0 = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
TEXT = ("Reading the **specification** chunk by chunk and extracting every *shall*, *must* and *should* "
        "statement into `requirements.md`, then checking the numbering.")


class Producer:
    """Synthetic engine events: per turn 1 turn_started, ~8 text deltas, the message, a tool call, its
    result and token usage (two conversation messages per turn)."""

    def __init__(self, push) -> None:
        self.push = push
        self.seq = 0
        self.turn = 0
        self.events = 0

    def _ev(self, cls, **kw):
        self.seq += 1
        self.events += 1
        return cls(ts=T0 + timedelta(milliseconds=self.seq), seq=self.seq, session=1, **kw)

    def turn_events(self) -> list[ev.EventBase]:
        self.turn += 1
        n = self.turn
        out = [self._ev(ev.TurnStarted, turn=n, prompt_tokens_est=20_000 + n % 30_000)]
        words = TEXT.split(" ")
        for i in range(0, len(words), 3):
            out.append(self._ev(ev.TextDelta, turn=n, text=" ".join(words[i:i + 3]) + " "))
        args = json.dumps({"path": "docs/specification.md", "start": n * 40, "end": n * 40 + 40})
        out.append(self._ev(ev.AssistantMessage, turn=n, text=TEXT,
                            tool_calls=[ev.ToolCallRecord(id=f"c{n}", name="read_file", arguments=args)]))
        out.append(self._ev(ev.ToolCalled, turn=n, call_id=f"c{n}", tool="read_file", arguments=args))
        out.append(self._ev(ev.ToolResult, turn=n, call_id=f"c{n}", tool="read_file", ok=True,
                            content=("3.2.1 The system shall log every operator command.\n" * 30)))
        out.append(self._ev(ev.TokenUsage, turn=n, input_tokens=20_000 + n % 30_000, output_tokens=120,
                            cached_input_tokens=18_000, context_window=64_000, prompt_budget=56_000,
                            context_tokens=20_000 + n % 30_000, soft_threshold=0.7, hard_threshold=0.85))
        return out

    def run_turns(self, turns: int, rate: float | None = None, stop: threading.Event | None = None) -> None:
        """Push ``turns`` turns; ``rate`` in events per second (None: as fast as possible)."""
        started = time.perf_counter()
        first = self.events
        for _ in range(turns):
            if stop is not None and stop.is_set():
                return
            for e in self.turn_events():
                self.push(e)
            if rate:
                ahead = (self.events - first) / rate - (time.perf_counter() - started)
                if ahead > 0:
                    time.sleep(ahead)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def wait_absorbed(app: ConsoleApp, producer: Producer, thread: threading.Thread | None = None,
                        patience: float = 60.0) -> None:
    """Until the console has folded every event the producer pushed. A console that stops absorbing is a bug to
    see, not a benchmark that hangs: past ``patience`` seconds, what it was waiting on is printed and it fails."""
    run = app.main
    deadline = time.monotonic() + patience
    while (thread is not None and thread.is_alive()) or run.events_seen < producer.events or run.bridge.pending:
        await asyncio.sleep(0.005)
        if time.monotonic() > deadline:
            stuck(app, producer, thread)


def stuck(app: ConsoleApp, producer: Producer, thread: threading.Thread | None) -> None:
    run = app.main
    now = time.monotonic()
    say(f"STUCK: producer alive {thread is not None and thread.is_alive()}, events produced {producer.events:,}, "
        f"seen {run.events_seen:,}, pending in the bridge {run.bridge.pending:,} (wake posted "
        f"{run.bridge._wake_posted}), drain timer {run.intake.timer!r}, "
        f"key hold {run.intake.key_first_until - now:+.3f} s, "
        f"ui alive {run.ui_alive}, screen {app.screen!r}")
    for task in asyncio.all_tasks():
        say(f"task {task.get_name()}: {task.get_coro()!r}")
        task.print_stack(limit=8, file=sys.__stdout__)
    raise RuntimeError("the console stopped absorbing events (see above)")


class FrameDriver(HeadlessDriver):
    """The test driver, except that every frame is built as a terminal's driver builds it (Textual skips turning
    a frame into escape sequences when headless) and written to a terminal: the slave of a pseudo-terminal whose
    master a thread reads and throws away, as a terminal emulator reads it. A frame's bytes are written when Textual
    flushes it (its whole update, as the Linux driver's writer thread writes it); the time each write returned and
    the frame's text (escape sequences removed) are noted, so a key's effect is timed to the frame that shows it
    having reached the terminal, not to its widget being rendered."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.frames: list[tuple[float, bytes]] = []  # (when its write returned, its text)
        self.written = 0
        self._pending: list[str] = []
        self._master, self._slave = os.openpty()
        cols, rows = kw.get("size") or (200, 50)
        fcntl.ioctl(self._slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                if not os.read(self._master, 1 << 16):
                    return
            except OSError:
                return

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        self._pending.append(data)

    def flush(self) -> None:
        if not self._pending:
            return
        frame = "".join(self._pending).encode("utf-8")
        self._pending.clear()
        view = memoryview(frame)
        while view:  # a pty takes what its buffer holds: the rest when the reader has read
            view = view[os.write(self._slave, view):]
        self.frames.append((time.perf_counter(), ANSI.sub(b"", frame)))
        self.written += len(frame)

    def stop_application_mode(self) -> None:
        super().stop_application_mode()
        with contextlib.suppress(OSError):
            os.close(self._slave)
        with contextlib.suppress(OSError):
            os.close(self._master)


def say(*args: object) -> None:
    """print, also inside a console run with FrameDriver (a console not headless captures what is printed)."""
    print(*args, file=sys.__stdout__, flush=True)


def first_frame_showing(frames: list[tuple[float, bytes]], since: float, text: bytes) -> float | None:
    """When the first frame written at or after ``since`` whose text holds ``text`` was written (None: none yet)."""
    return next((t for t, shown in frames if t >= since and text in shown), None)


async def measure_keys(app: ConsoleApp, controller: RecordingController, producer: Producer, rate: float,
                       presses: int) -> dict[str, float]:
    """``presses`` presses of p while the producer streams ``rate`` events/s (0: none, the console idle).

    A press is timed from the Key event posted (what the terminal driver does with a key press) to the frame written
    to the terminal (FrameDriver) that shows its effect, found in the frames' own bytes: ``status``, the first frame
    whose text says the command is on its way (the status line's "pausing after this turn" / "resuming"); ``whole``,
    the frame by which that and the footer offering the opposite command ("Resume" / "Pause") have both been written
    (the frame that completes the key's effect on the screen). The command must also have reached the controller."""
    stop = threading.Event()
    before = producer.events
    thread = None
    if rate:
        thread = threading.Thread(target=producer.run_turns, args=(10**9, rate, stop), daemon=True)
        thread.start()
    driver = app._driver
    assert isinstance(driver, FrameDriver)
    status_ms: list[float] = []
    whole_ms: list[float] = []
    rng = random.Random(1)
    started = time.perf_counter()
    for _ in range(presses):
        await asyncio.sleep(rng.uniform(0.05, 0.1))
        pausing = "pause" not in app.state.requested
        want, footer = (b"pausing after this turn", b"Resume") if pausing else (b"resuming", b"Pause")
        sent = len(controller.commands)
        del driver.frames[:]
        t0 = time.perf_counter()
        app.post_message(events.Key("p", "p"))  # what the terminal driver does with a key press
        deadline = t0 + 5
        status_at = footer_at = None
        while time.perf_counter() < deadline:
            await asyncio.sleep(0.0005)
            status_at = status_at or first_frame_showing(driver.frames, t0, want)
            footer_at = footer_at or first_frame_showing(driver.frames, t0, footer)
            if len(controller.commands) > sent and status_at is not None and footer_at is not None:
                break
        if status_at is None or footer_at is None or len(controller.commands) <= sent:
            raise RuntimeError(f"the effect of p ({want!r}, footer {footer!r}) was not written within 5 s")
        status_ms.append((status_at - t0) * 1000)
        whole_ms.append((max(status_at, footer_at) - t0) * 1000)
    stop.set()
    if thread is not None:
        thread.join()
    achieved = (producer.events - before) / (time.perf_counter() - started)
    await wait_absorbed(app, producer)
    return {"p50": statistics.median(whole_ms), "p95": p95(whole_ms), "max": max(whole_ms),
            "status_p50": statistics.median(status_ms), "status_p95": p95(status_ms), "achieved": achieved}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def bench(args: argparse.Namespace) -> dict:
    width, height = (int(v) for v in args.size.split("x"))
    work = Path(tempfile.mkdtemp(prefix="agent-console-bench-"))
    shutil.copytree(REPO / "sample_jobs" / "quickstart", work / "quickstart")
    paths = JobPaths(work / "quickstart")
    controller = RecordingController()
    app = ConsoleApp(controller=controller, paths=paths, job_title="bench", watch=False, animations=False,
                     keymap={})
    app.driver_class = FrameDriver  # every frame built as for a terminal (see FrameDriver)
    producer = Producer(app.bridge.push)
    result: dict = {}
    async with app.run_test(size=(width, height), headless=False) as pilot:
        await pilot.pause()
        rss_start = rss_mb()
        # 1. prefill
        turns = args.messages // 2
        t = time.perf_counter()
        thread = threading.Thread(target=producer.run_turns, args=(turns,))
        thread.start()
        await wait_absorbed(app, producer, thread)
        await pilot.pause()
        elapsed = time.perf_counter() - t
        events_per_s = producer.events / elapsed
        conv = app.run_screen.conversation
        say(f"prefill: {producer.events:,} events ({conv.messages_seen:,} messages) absorbed in {elapsed:.2f} s "
              f"= {events_per_s:,.0f} events/s; view holds {conv.item_count:,} items ({conv.trimmed:,} trimmed), "
              f"{app.run_screen.drains:,} batches")
        result.update(events_per_s=round(events_per_s), prefill_events=producer.events,
                      messages=conv.messages_seen)

        # 2. keys: on the idle console (the baseline of this run), then under load at issue 20's two rates, then
        #    at half the measured capacity
        for label, rate in (("_idle", 0.0), (f"_{args.load_rate:.0f}", args.load_rate),
                            (f"_{args.high_rate:.0f}", args.high_rate), ("_half_capacity", events_per_s / 2)):
            m = await measure_keys(app, controller, producer, rate, args.presses)
            load = (f"while streaming {m['achieved']:,.0f} events/s (asked {rate:,.0f})" if rate
                    else "on the idle console")
            say(f"keys: {args.presses} presses of p {load}: whole effect written to the terminal p50 "
                  f"{m['p50']:.1f} ms, p95 {m['p95']:.1f} ms, max {m['max']:.1f} ms (the status line alone: p50 "
                  f"{m['status_p50']:.1f} ms, p95 {m['status_p95']:.1f} ms)")
            result.update({f"key_latency_p50_ms{label}": round(m["p50"], 1), f"key_latency_p95_ms{label}":
                           round(m["p95"], 1), f"key_status_p95_ms{label}": round(m["status_p95"], 1)})
            if rate:
                result[f"load_events_per_s{label}"] = round(m["achieved"])
        conv = app.run_screen.conversation

        # 3. long run, then memory: pushed in chunks the console absorbs as they come (as a run would),
        #    so what is measured is what the console keeps, not a backlog the producer piled up
        rss_before_long = rss_mb()
        t = time.perf_counter()
        left = args.long // 2
        while left > 0:
            chunk = min(500, left)
            left -= chunk
            thread = threading.Thread(target=producer.run_turns, args=(chunk,))
            thread.start()
            await wait_absorbed(app, producer, thread)
        await pilot.pause()
        elapsed = time.perf_counter() - t
        mem = rss_mb()
        say(f"long run: {conv.messages_seen:,} messages / {producer.events:,} events in total "
              f"({args.long // 2 * 13:,} more in {elapsed:.1f} s); view keeps {conv.item_count:,} items "
              f"({conv.trimmed:,} trimmed), feedback {len(app.state.feedback)}; RSS {mem:.0f} MB "
              f"(at start {rss_start:.0f} MB, before the long run {rss_before_long:.0f} MB)")
        result.update(rss_mb=round(mem, 1), total_messages=conv.messages_seen, view_items=conv.item_count)
    shutil.rmtree(work, ignore_errors=True)
    return result


# The last message of a benchmark log: once it is on the screen, the panes show the run as it is now.
FINAL_MARKER = "zebraquartzomega"


def write_log(path: Path, turns: int = 0, events: int = 0, final: bool = False) -> int:
    """A synthetic run's events.jsonl of ``turns`` turns (or at least ``events`` events); returns how many.
    ``final``: the last turn's message ends with FINAL_MARKER."""
    out: list[ev.EventBase] = []
    producer = Producer(out.append)
    producer.run_turns(turns)
    while len(out) < events:
        producer.run_turns(1)
    if final:
        producer.turn += 1
        out.append(producer._ev(ev.TurnStarted, turn=producer.turn, prompt_tokens_est=20_000))
        out.append(producer._ev(ev.AssistantMessage, turn=producer.turn, text=f"All parts read: {FINAL_MARKER}"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        fh.writelines(e.model_dump_json() + "\n" for e in out)
    return len(out)


async def bench_attach_and_fleet(args: argparse.Namespace) -> dict:
    from console.tui.screens.fleet import FleetScreen
    from console.view.fleet import Fleet

    width, height = (int(v) for v in args.size.split("x"))
    work = Path(tempfile.mkdtemp(prefix="agent-console-bench-"))
    result: dict = {}
    quick = work / "quickstart"
    shutil.copytree(REPO / "sample_jobs" / "quickstart", quick)

    # 4. first paint of the console (an attached run with no events yet)
    t = time.perf_counter()
    app = ConsoleApp.for_attach(JobPaths(quick), watch=False, animations=False, keymap={})
    async with app.run_test(size=(width, height)) as pilot:
        await pilot.pause()
        console_paint = (time.perf_counter() - t) * 1000
    print(f"first paint: console {console_paint:.0f} ms")
    result["first_paint_console_ms"] = round(console_paint)

    # 5. attach to a run with a long log
    big = work / "big"
    shutil.copytree(REPO / "sample_jobs" / "quickstart", big)
    t = time.perf_counter()
    n = write_log(JobPaths(big).events, events=args.attach_events)
    print(f"attach: wrote {n:,} events ({JobPaths(big).events.stat().st_size / 2**20:.0f} MB) in "
          f"{time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    app = ConsoleApp.for_attach(JobPaths(big), watch=False, animations=False, keymap={})
    async with app.run_test(size=(width, height)) as pilot:
        while app.run_screen.events_seen < n or app.bridge.pending:
            await asyncio.sleep(0.005)
        await pilot.pause()
        attach_s = time.perf_counter() - t
    print(f"attach: {n:,} events folded and drawn in {attach_s:.2f} s (goal <= 1.5 s for 100,000)")
    result.update(attach_events=n, attach_s=round(attach_s, 2))

    # 6. the fleet: N runs in the store
    store_path = work / "data" / "jobs.db"
    store = JobStore(store_path)
    t0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
    folders = []
    for i in range(args.fleet_runs):
        folder = work / "runs" / f"job{i % 17}-{(t0 + timedelta(seconds=i)).strftime('%Y%m%d-%H%M%S')}"
        (folder / ".console").mkdir(parents=True)
        write_log(JobPaths(folder).events, 30)
        store.started(folder, f"job{i % 17}", "scripted", "scripted-agent", t0 + timedelta(seconds=i))
        folders.append(folder)
    now = datetime.now(UTC)
    fleet = Fleet(store_path, now=lambda: now)
    t = time.perf_counter()
    rows = fleet.poll()
    first_poll = (time.perf_counter() - t) * 1000
    idle = []
    for _ in range(20):
        t = time.perf_counter()
        fleet.poll()
        idle.append((time.perf_counter() - t) * 1000)
    with JobPaths(folders[7]).events.open("a", encoding="utf-8") as fh:
        extra = Producer(lambda e: None)
        extra.seq = 10**6
        fh.writelines(e.model_dump_json() + "\n" for e in extra.turn_events())
    t = time.perf_counter()
    fleet.poll()
    one_changed = (time.perf_counter() - t) * 1000
    print(f"fleet: {len(rows)} runs; first poll (every log folded) {first_poll:.0f} ms; poll with nothing new "
          f"p50 {statistics.median(idle):.1f} ms; poll after one run appended a turn {one_changed:.1f} ms")
    result.update(fleet_runs=len(rows), fleet_first_poll_ms=round(first_poll), fleet_idle_poll_ms=round(
        statistics.median(idle), 1), fleet_changed_poll_ms=round(one_changed, 1))

    t = time.perf_counter()
    app = ConsoleApp(fleet=Fleet(store_path, now=lambda: now), watch=False, animations=False, keymap={})
    async with app.run_test(size=(width, height)) as pilot:
        await pilot.pause()
        fleet_paint = (time.perf_counter() - t) * 1000
        while app.fleet_view is None or len(app.fleet_view.rows) < len(rows):
            await asyncio.sleep(0.005)
        await pilot.pause()
        listed = (time.perf_counter() - t) * 1000
        view: FleetScreen = app.fleet_view
        app.workers.cancel_group(app, "fleet")  # from here the rows shown are the benchmark's
        redraws, patches = [], []
        rows_now = list(fleet.rows)
        view.update_rows(rows_now)
        await pilot.pause()
        for i in range(10):
            # What a poll brings every second when every run is live: every row's elapsed time changed.
            rows_now = [replace(r, elapsed=f"{i}:{i:02d}") for r in rows_now]
            t = time.perf_counter()
            view.update_rows(rows_now)
            await pilot.pause()
            redraws.append((time.perf_counter() - t) * 1000)
            # The usual poll: a few live runs changed (their cells are updated in place).
            rows_now = [replace(r, elapsed=f"{i}:{i:02d}.") if n < 3 else r for n, r in enumerate(rows_now)]
            t = time.perf_counter()
            view.update_rows(rows_now)
            await pilot.pause()
            patches.append((time.perf_counter() - t) * 1000)
    print(f"first paint: fleet view {fleet_paint:.0f} ms ({len(rows)} runs listed after {listed:.0f} ms); "
          f"a poll that changed every row redrawn in p50 {statistics.median(redraws):.1f} ms; one that changed "
          f"3 rows p50 {statistics.median(patches):.1f} ms (an idle event loop's turn is ~20 ms of these)")
    result.update(first_paint_fleet_ms=round(fleet_paint), fleet_listed_ms=round(listed),
                  fleet_refresh_all_ms=round(statistics.median(redraws), 1),
                  fleet_refresh_3_ms=round(statistics.median(patches), 1))
    shutil.rmtree(work, ignore_errors=True)
    return result


# Escape sequences (CSI, OSC, DCS, charset and keypad modes): what is left is the text a terminal shows.
ANSI = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|P[^\x1b]*\x1b\\"
                  rb"|[()][0-9A-Za-z]|[=>78NOM])")


def keep_as_runner(paths: JobPaths, seal: Seal) -> int:
    """The view's fold kept as the run's runner keeps it (console.view.state.kept.FoldKeeper), at its worst: just
    before the log grew by the bytes after which it keeps it again. How many bytes of log are after it."""
    from console.view.state import ConsoleState
    from console.view.state.kept import KEEP_EVERY, blank_of, fold_lines, keep

    data = paths.events.read_bytes()
    offset = data.rfind(b"\n", 0, max(0, len(data) - KEEP_EVERY + 4096)) + 1
    state = ConsoleState()
    blank = blank_of(state)  # the state it was folded from (the fold sets the window)
    events, messages = fold_lines(state, data[:offset])
    assert keep(paths, seal, state, blank, offset, events, messages)
    return len(data) - offset


def process_cpu(pid: int) -> float | None:
    """A live process's CPU time so far, user + system (the kernel's accounting: holds on a busy machine)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_in_pty(argv: list[str], env: dict[str, str], marker: bytes, size: tuple[int, int],
               timeout: float = 30.0, settle: float = 0.0) -> tuple[float | None, float | None, float | None,
                                                                     float | None]:
    """Start ``argv`` on a terminal of its own (a pty of ``size`` columns x rows) and read what it draws:
    seconds from the exec to its first output, and to the first frame showing ``marker`` (None: not within
    ``timeout``); the process's CPU seconds then (the whole process: interpreter, imports, its start and the frames
    up to that one), and ``settle`` seconds later (what it went on doing meanwhile, e.g. the fleet folding every
    run's log after its first frame; None when ``settle`` is 0). The process is then ended (SIGTERM, then
    SIGKILL)."""
    master, slave = os.openpty()
    cols, rows = size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                            close_fds=True)
    os.close(slave)
    first: float | None = None
    found: float | None = None
    cpu_found: float | None = None
    cpu_settled: float | None = None
    raw = b""
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([master], [], [], 0.02)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            now = time.perf_counter() - t0
            first = now if first is None else first
            raw += chunk
            if marker in ANSI.sub(b"", raw[-(1 << 20):]):
                found = now
                cpu_found = process_cpu(proc.pid)
                if settle:
                    end = time.perf_counter() + settle
                    while time.perf_counter() < end:  # its output read meanwhile, as a terminal reads it
                        if select.select([master], [], [], 0.05)[0]:
                            with contextlib.suppress(OSError):
                                os.read(master, 1 << 16)
                    cpu_settled = process_cpu(proc.pid)
                break
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    if found is None:
        tail = ANSI.sub(b"", raw)[-400:].decode("utf-8", "replace")
        print(f"  ({' '.join(argv[-2:])}: {marker.decode()} not seen within {timeout:.0f} s; last text: {tail!r})")
    return first, found, cpu_found, cpu_settled


def cli_env(data: Path, pycache: Path) -> dict[str, str]:
    """The environment of an operator's shell, with the benchmark's data folder and no config file of theirs, and
    byte-compiled files as an installed command has them (written by a first start: see :func:`warm_up`), kept in
    ``pycache``, never in a checkout. A shell with PYTHONDONTWRITEBYTECODE=1 (this machine's) would otherwise have
    every process compile the project's modules again: ~0.1 s of CPU an operator's second start never spends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")
           and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(AGENT_CONSOLE_DATA_DIR=str(data), XDG_CONFIG_HOME=str(data / "config"), TERM="xterm-256color",
               COLORTERM="truecolor", PYTHONPYCACHEPREFIX=str(pycache))
    return env


def warm_up(work: Path, pycache: Path, size: tuple[int, int]) -> None:
    """An attach and a fleet started once each on a small data dir of their own (what they import written
    byte-compiled, the disk's caches warm), so the timed starts are an operator's second, not their first."""
    data = work / "warm-data"
    folder = data / "runs" / "warm-20260115-100000"
    shutil.copytree(REPO / "sample_jobs" / "quickstart", folder)
    write_log(JobPaths(folder).events, events=200, final=True)
    JobStore(data / "jobs.db").started(folder, "warm", "scripted", "scripted-agent",
                                       datetime(2026, 1, 15, 10, 0, tzinfo=UTC))
    env = cli_env(data, pycache)
    exe = str(Path(sys.executable).with_name("agent-console"))
    run_in_pty([exe, "attach", JobPaths(folder).run_id], env, FINAL_MARKER.encode(), size)
    run_in_pty([exe], env, b"warm-20260115", size)


def timed_import(module: str, env: dict[str, str], repeats: int = 3) -> float:
    """Seconds a fresh interpreter takes to import ``module``, over one that imports nothing (best of a few)."""
    def run(code: str) -> float:
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
            best = min(best, time.perf_counter() - t)
        return best
    return run(f"import {module}") - run("pass")


def bench_processes(args: argparse.Namespace) -> dict:
    """``agent-console attach ID`` on a long run, and ``agent-console`` (the fleet), each as the operator starts
    it: a process on a terminal, timed from the exec to the first frame that shows what they asked for."""
    from console.tui.follow import _parse
    from console.view.state import ConsoleState

    exe = str(Path(sys.executable).with_name("agent-console"))
    width, height = (int(v) for v in args.size.split("x"))
    work = Path(tempfile.mkdtemp(prefix="agent-console-bench-"))
    data = work / "data"
    store = JobStore(data / "jobs.db")
    t0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
    result: dict = {}

    big = data / "runs" / "big-20260115-110000"
    shutil.copytree(REPO / "sample_jobs" / "quickstart", big)
    n = write_log(JobPaths(big).events, events=args.attach_events, final=True)
    store.started(big, "big", "scripted", "scripted-agent", t0 - timedelta(hours=1))
    kept_note = "no kept fold: the whole log is folded after the panes are drawn"
    if not args.without_kept_fold:
        behind = keep_as_runner(JobPaths(big), Seal.of(data))
        kept_note = f"its runner's kept fold {behind / 2**20:.2f} MB behind, at its worst"
    pycache = work / "pycache"
    warm_up(work, pycache, (width, height))
    env = cli_env(data, pycache)
    attach_first, attach, attach_cpu, attach_cpu_later = run_in_pty(
        [exe, "attach", JobPaths(big).run_id], env, FINAL_MARKER.encode(), (width, height), settle=2.0)
    result.update(attach_process_events=n, attach_process_first_output_s=attach_first, attach_process_s=attach,
                  attach_process_cpu_s=attach_cpu, attach_process_cpu_2s_later_s=attach_cpu_later)

    # Where an attach's time goes, each part timed alone in this process (a fresh interpreter for the import).
    imports = timed_import("console.tui.app", env)
    cli_import = timed_import("console.cli", env)
    t = time.perf_counter()
    lines = JobPaths(big).events.read_bytes().split(b"\n")
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    parsed = _parse(lines)
    parse_s = time.perf_counter() - t
    t = time.perf_counter()
    ConsoleState().apply_all(parsed)
    fold_s = time.perf_counter() - t
    result.update(import_console_cli_s=round(cli_import, 3), import_tui_app_s=round(imports, 3),
                  read_log_s=round(read_s, 3), parse_all_s=round(parse_s, 3), fold_all_s=round(fold_s, 3))
    print(f"attach (a process on a terminal): {n:,} events; first output after {attach_first or 0:.2f} s, the panes "
          f"filled (the last message drawn) after {attach if attach is not None else float('nan'):.2f} s; CPU "
          f"{_s(attach_cpu)} then, {_s(attach_cpu_later)} 2 s later (whole process; {kept_note})")
    print(f"  where it goes: import console.cli {cli_import:.2f} s, console.tui.app {imports:.2f} s (a fresh "
          f"interpreter, over one importing nothing); the log read {read_s:.2f} s, every event parsed "
          f"{parse_s:.2f} s, folded {fold_s:.2f} s (the attach parses and folds the newest first: see "
          "console/tui/follow.py)")

    for i in range(args.fleet_runs):
        folder = data / "runs" / f"job{i % 17}-{(t0 + timedelta(seconds=i)).strftime('%Y%m%d-%H%M%S')}"
        (folder / ".console").mkdir(parents=True)
        write_log(JobPaths(folder).events, 30)
        store.started(folder, f"job{i % 17}", "scripted", "scripted-agent", t0 + timedelta(seconds=i))
    runs = args.fleet_runs + 1
    fleet_first, fleet, fleet_cpu, fleet_cpu_later = run_in_pty([exe], env, f"{runs} runs".encode(), (width, height),
                                                                settle=3.0)
    result.update(fleet_process_runs=runs, fleet_process_first_output_s=fleet_first, fleet_process_s=fleet,
                  fleet_process_cpu_s=fleet_cpu, fleet_process_cpu_3s_later_s=fleet_cpu_later)
    print(f"fleet (a process on a terminal): {runs} runs; first output after {fleet_first or 0:.2f} s, the runs "
          f"listed after {fleet if fleet is not None else float('nan'):.2f} s; CPU {_s(fleet_cpu)} then (the whole "
          f"process: interpreter, imports, the app's start, the first frame of the store's rows), "
          f"{_s(fleet_cpu_later)} 3 s later (every run's log folded meanwhile)")
    shutil.rmtree(work, ignore_errors=True)
    return result


def print_goals(result: dict) -> None:
    """Each figure with its goal (issue 20; the processes' CPU: issue 37), their ratio and ok/MISS; a key's figures
    also against the same key on the idle console in this run (what the load adds, whatever the machine's speed
    today)."""
    idle = result.get("key_latency_p95_ms_idle")
    rows = [
        ("key-to-effect p95 at 2,000 events/s", result.get("key_latency_p95_ms_2000"), 25.0, "ms", idle),
        ("key-to-effect p95 at 12,000 events/s", result.get("key_latency_p95_ms_12000"), 40.0, "ms", idle),
        ("attach ID, 100,000 events: panes filled", _ms(result.get("attach_process_s")), 1000.0, "ms", None),
        ("agent-console: 200 runs shown", _ms(result.get("fleet_process_s")), 500.0, "ms", None),
        ("attach ID: CPU to panes filled (whole process)", _ms(result.get("attach_process_cpu_s")), 500.0, "ms", None),
        ("agent-console: CPU to 200 runs shown", _ms(result.get("fleet_process_cpu_s")), 300.0, "ms", None),
    ]
    print()
    print(f"{'figure':<48} {'measured':>11} {'goal':>9} {'ratio':>6}  ok/MISS  {'baseline in this run':>20}")
    for name, value, goal, unit, base in rows:
        if value is None:
            print(f"{name:<48} {'-':>11} {goal:>6.0f} {unit} {'-':>6}  not measured")
            continue
        ratio = value / goal
        against = f"  {value / base:.2f}x idle ({base:.1f} {unit})" if base else ""
        print(f"{name:<48} {value:>8.1f} {unit} {goal:>6.0f} {unit} {ratio:>6.2f}  {'ok' if ratio <= 1 else 'MISS':<7}"
              f"{against}")


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=5000, help="messages in the conversation before keys are timed")
    p.add_argument("--long", type=int, default=50_000, help="messages of the long run before memory is measured")
    p.add_argument("--size", default="200x50", help="terminal size, e.g. 80x24")
    p.add_argument("--presses", type=int, default=40)
    p.add_argument("--load-rate", type=float, default=2000, help="events/s streamed while keys are timed")
    p.add_argument("--high-rate", type=float, default=12000, help="the second rate keys are timed at")
    p.add_argument("--attach-events", type=int, default=100_000, help="events in the log of the run attached to")
    p.add_argument("--fleet-runs", type=int, default=200, help="runs in the jobs store of the fleet view")
    p.add_argument("--only", choices=["console", "fleet", "processes"], help="run one part only")
    p.add_argument("--without-kept-fold", action="store_true",
                   help="processes: the long run has no view fold kept by a runner (attach and fleet fold its whole "
                        "log)")
    args = p.parse_args()
    result: dict = {}
    if args.only in (None, "console"):
        result.update(asyncio.run(bench(args)))
    if args.only in (None, "fleet"):
        result.update(asyncio.run(bench_attach_and_fleet(args)))
    if args.only in (None, "processes"):
        result.update(bench_processes(args))
    print_goals(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
