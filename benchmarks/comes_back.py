"""The operator who walks away and comes back, measured on real pseudo-terminals and real processes.

1. Attach: a live run (a process holds its lock) whose events.jsonl holds ``--events`` events; from starting
   ``agent-console attach`` (the whole process: imports included) until its screen shows the panes filled: the
   run's newest message in the conversation and its todo list (goal: 100,000 events within 1 s); its CPU time to
   then and its RSS 2 s later. The run's runner keeps the view's fold every so often (console.view.state.kept): it is
   kept here as at its worst, with a tail after it just short of the next keep (``--without-kept-fold``: none).
2. Command: ``agent-console pause RUN --wait 10`` on that live run (the process holding it answers each command in
   the inbox as the run would: an applied ``operator_command`` appended to the log): from starting the command (the
   whole process) to its exit with "applied"; wall and CPU time (goal: 0.3 s at any log size).
3. Hangup: ``agent-console run JOB`` on a pty (a runner and a console on it); the pty's master is closed as an
   SSH drop closes it; from the hangup until the console process is gone (goal: 2 s), and whether the run goes
   on (its runner still holds it and its log still grows).

Prints figures, then one JSON line. Not a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import resource
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from console.engine import events as ev  # noqa: E402
from console.engine.control import RunLock  # noqa: E402
from console.engine.job import JobPaths  # noqa: E402
from console.engine.launch import Launch, write_launch  # noqa: E402
from console.engine.seal import Seal  # noqa: E402
from console.view.state import ConsoleState  # noqa: E402
from console.view.state.kept import KEEP_EVERY, blank_of, fold_lines, keep  # noqa: E402

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
MARKER = "Zanzibar-final-message"


class Pty:
    def __init__(self, argv: list[str], env: dict[str, str], size: tuple[int, int]) -> None:
        pid, fd = os.forkpty()
        if pid == 0:
            try:
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        self.out = bytearray()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.out += chunk

    def gone_within(self, timeout: float) -> float | None:
        t = time.perf_counter()
        while time.perf_counter() - t < timeout:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return time.perf_counter() - t
            time.sleep(0.005)
        return None

    def cpu_seconds(self) -> float:
        """The process's CPU time so far (user + system, the kernel's accounting): holds on a busy machine."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


def write_log(path: Path, events: int) -> int:
    """A run's log of about ``events`` events, as a real run writes them (no streaming deltas): turns of a
    message, a tool call and its result and token usage, a todo list now and then; the last message says
    MARKER."""
    seq = 0
    lines: list[str] = []

    def add(cls: type[ev.EventBase], **kw: object) -> None:
        nonlocal seq
        seq += 1
        lines.append(cls(ts=T0 + timedelta(milliseconds=seq * 50), seq=seq, session=1, **kw).model_dump_json())

    add(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent", context_window=64000)
    turn = 0
    while seq < events - 8:
        turn += 1
        if turn % 40 == 1:
            todos = [ev.TodoItemRecord(text=f"Step {i} of phase {turn // 40 + 1}: read and summarise", done=False)
                     for i in range(1, 9)]
            display = "\n".join(f"[ ] {i}. {t.text}" for i, t in enumerate(todos, 1))
            add(ev.TodosChanged, phase_name=f"Phase {turn // 40 + 1}", phase_number=turn // 40 + 1,
                total_phases=10_000, kind="phase", items=todos, display=display)
        args = json.dumps({"path": "docs/specification.md", "start": turn * 40})
        add(ev.TurnStarted, turn=turn, prompt_tokens_est=20_000 + turn % 30_000)
        add(ev.AssistantMessage, turn=turn, text=f"Reading the specification, part {turn}.",
            tool_calls=[ev.ToolCallRecord(id=f"c{turn}", name="read_file", arguments=args)])
        add(ev.ToolCalled, turn=turn, call_id=f"c{turn}", tool="read_file", arguments=args)
        add(ev.ToolResult, turn=turn, call_id=f"c{turn}", tool="read_file", ok=True, content="x" * 400)
        add(ev.TokenUsage, turn=turn, input_tokens=20_000 + turn % 30_000, output_tokens=40, context_window=64000,
            context_tokens=20_000 + turn % 30_000)
    add(ev.AssistantMessage, turn=turn + 1, text=f"{MARKER}: all parts read.", tool_calls=[])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return seq


HOLDER = """
import sys, time
from pathlib import Path
from console.engine.control import RunLock
from console.engine.job import JobPaths
lock = RunLock(JobPaths(Path(sys.argv[1])))
assert lock.acquire()
print("held", flush=True)
time.sleep(3600)
"""


def env_for(data: Path) -> dict[str, str]:
    """The environment of an operator's shell, with byte-compiled files as an installed command has them: kept
    under the benchmark's folder (never written into the checkout), written by each measure's first, untimed try.
    A shell with PYTHONDONTWRITEBYTECODE=1 (this machine's) would otherwise have every timed process compile again
    every module edited since the checkout's own byte-compiled files were written."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(AGENT_CONSOLE_DATA_DIR=str(data), TERM="xterm-256color", PYTHONPATH=str(REPO),
               PYTHONPYCACHEPREFIX=str(data.parent / "pycache"))
    return env


def keep_as_runner(paths: JobPaths, seal: Seal) -> int:
    """The view's fold kept as the run's runner keeps it (console.view.state.kept.FoldKeeper), at its worst: just
    before the log grew by the bytes after which it keeps it again. The offset it covers."""
    data = paths.events.read_bytes()
    offset = data.rfind(b"\n", 0, len(data) - KEEP_EVERY + 4096) + 1
    state = ConsoleState()
    blank = blank_of(state)
    events, messages = fold_lines(state, data[:offset])
    assert keep(paths, seal, state, blank, offset, events, messages)
    return offset


def bench_attach(work: Path, events: int, tries: int, size: tuple[int, int], kept_fold: bool = True) -> dict:
    """``kept_fold``: the run's runner kept the view's fold (as every runner does); False: a run no runner of
    this version ran, whose attach folds its whole log (and keeps the fold for the next one)."""
    job = work / "big"
    shutil.copytree(REPO / "sample_jobs" / "quickstart", job)
    paths = JobPaths(job)
    t = time.perf_counter()
    n = write_log(paths.events, events)
    # The run is this operator's, as `run` makes it (its launch record sealed with the operator's key): a folder
    # without one is another's, and attach refuses it (console.engine.provenance).
    seal = Seal.of(work / "data")
    write_launch(paths, Launch(provider="scripted", model="scripted-agent"), seal)
    mb = paths.events.stat().st_size / 2**20
    print(f"attach: a live run's log of {n:,} events ({mb:.0f} MB), written in {time.perf_counter() - t:.1f} s")
    if kept_fold:
        at = keep_as_runner(paths, seal)
        print(f"attach: the view's fold kept as its runner keeps it, at its worst: {mb - at / 2**20:.2f} MB of log "
              "after it (console.view.state.kept)")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(job)], stdout=subprocess.PIPE, text=True,
                              env=env_for(work / "data"))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    times = []
    cpus: list[float] = []
    cpus_after: list[float] = []  # by 2 s later: what the first read still did after the panes were filled
    rss: list[float] = []
    try:
        for attempt in range(tries + 1):  # the first untimed: byte-compiled files written, caches warm
            t = time.perf_counter()
            pty = Pty([sys.executable, "-m", "console.cli", "attach", str(job)], env_for(work / "data"), size)
            try:
                while time.perf_counter() - t < 30:
                    if MARKER.encode() in pty.out and b"Step 1 of phase" in pty.out:
                        break
                    time.sleep(0.002)
                else:
                    said = bytes(pty.out[-600:]).decode("utf-8", "replace")
                    raise SystemExit(f"attach: the panes were never filled; the terminal's last output: {said!r}")
                if attempt == 0:
                    continue
                times.append(time.perf_counter() - t)
                cpus.append(pty.cpu_seconds())
                time.sleep(2)  # settled: what it holds afterwards, idle
                rss.append(pty.rss_mb())
                cpus_after.append(pty.cpu_seconds())
            finally:
                pty.kill()
    finally:
        holder.kill()
        holder.wait()
    p50 = statistics.median(times)
    print(f"attach: panes filled (newest message and todo list on screen) in p50 {p50:.2f} s, "
          f"max {max(times):.2f} s over {tries} tries (goal <= 1 s for 100,000 events; process start included)")
    print(f"attach: CPU to filled panes p50 {statistics.median(cpus):.2f} s (goal <= 0.5 s), by 2 s later "
          f"{statistics.median(cpus_after):.2f} s; RSS 2 s later p50 {statistics.median(rss):.0f} MB (goal <= 150 MB)")
    return {"attach_events": n, "attach_filled_p50_s": round(p50, 3), "attach_filled_max_s": round(max(times), 3),
            "attach_cpu_p50_s": round(statistics.median(cpus), 3),
            "attach_cpu_2s_later_p50_s": round(statistics.median(cpus_after), 3),
            "attach_rss_p50_mb": round(statistics.median(rss))}


ANSWERER = """
import json, sys, time
from datetime import UTC, datetime
from pathlib import Path
from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.job import JobPaths
paths = JobPaths(Path(sys.argv[1]))
lock = RunLock(paths)
assert lock.acquire()
print("held", flush=True)
seq = ev.last_seq(paths.events)
while True:
    for f in sorted(paths.inbox.glob("*.json")) if paths.inbox.is_dir() else []:
        cmd = json.loads(f.read_text())
        f.unlink()
        seq += 1
        with paths.events.open("a") as fh:
            said = ev.OperatorCommand(ts=datetime.now(UTC), seq=seq, session=1, command=cmd["command"], source="cli",
                                      status="applied", detail="paused", command_id=cmd["id"])
            fh.write(said.model_dump_json() + "\\n")
    time.sleep(0.01)
"""


def bench_command(work: Path, events: int, tries: int) -> dict:
    job = work / "big"
    paths = JobPaths(job)
    if not paths.events.exists():
        shutil.copytree(REPO / "sample_jobs" / "quickstart", job)
        write_log(paths.events, events)
        write_launch(paths, Launch(provider="scripted", model="scripted-agent"), Seal.of(work / "data"))
    holder = subprocess.Popen([sys.executable, "-c", ANSWERER, str(job)], stdout=subprocess.PIPE, text=True,
                              env=env_for(work / "data"))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    walls: list[float] = []
    cpus: list[float] = []
    try:
        for attempt in range(tries + 1):  # the first untimed: byte-compiled files written, caches warm
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "console.cli", "pause", str(job), "--wait", "10"],
                                  env=env_for(work / "data"), capture_output=True, text=True)
            took = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode != 0 or not done.stdout.startswith("pause: applied"):
                raise SystemExit(f"pause: exit {done.returncode}: {done.stdout!r} {done.stderr[-400:]!r}")
            if attempt:
                walls.append(took)
                cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    finally:
        holder.kill()
        holder.wait()
    n = ev.last_seq(paths.events)
    print(f"command: pause --wait on a live run of {n:,} events, confirmed (whole process) in p50 "
          f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU, max "
          f"{max(walls):.2f} s wall over {tries} tries (goal <= 0.3 s at any log size)")
    return {"command_events": n, "command_confirmed_p50_s": round(statistics.median(walls), 3),
            "command_cpu_p50_s": round(statistics.median(cpus), 3)}


def bench_hangup(work: Path, tries: int, size: tuple[int, int]) -> dict:
    gone: list[float] = []
    went_on = 0
    for i in range(tries):
        data = work / f"data-h{i}"
        pty = Pty([sys.executable, "-m", "console.cli", "run", str(REPO / "sample_jobs" / "quickstart"),
                   "--speed", "0.3"], env_for(data), size)
        runner = None
        try:
            end = time.monotonic() + 30
            while time.monotonic() < end:
                runs = list((data / "runs").glob("*")) if (data / "runs").is_dir() else []
                if runs and (runner := RunLock(JobPaths(runs[0])).holder()) and b"Todo" in pty.out:
                    break
                time.sleep(0.02)
            else:
                raise SystemExit("hangup: the console never came up")
            paths = JobPaths(runs[0])
            time.sleep(0.3)
            os.close(pty.fd)  # the SSH session is gone
            took = pty.gone_within(5.0)
            if took is None:
                raise SystemExit("hangup: the console outlived its terminal by 5 s")
            gone.append(took)
            before = paths.events.stat().st_size
            time.sleep(1.0)
            if RunLock(paths).holder() == runner and paths.events.stat().st_size > before:
                went_on += 1
        finally:
            pty.kill()
            if runner:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(runner, signal.SIGKILL)
    print(f"hangup: the console was gone {statistics.median(gone) * 1000:.0f} ms (p50) / {max(gone) * 1000:.0f} ms "
          f"(max) after its terminal went away, over {tries} tries (goal 2 s); the run went on in "
          f"{went_on}/{tries}")
    return {"hangup_gone_p50_ms": round(statistics.median(gone) * 1000), "hangup_gone_max_ms":
            round(max(gone) * 1000), "hangup_run_went_on": f"{went_on}/{tries}"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--tries", type=int, default=5)
    p.add_argument("--size", default="200x50")
    p.add_argument("--only", choices=["attach", "command", "hangup"])
    p.add_argument("--without-kept-fold", action="store_true",
                   help="attach to a run no runner kept the view's fold of (its whole log is folded)")
    args = p.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    work = Path(tempfile.mkdtemp(prefix="agent-console-operator-"))
    result: dict = {}
    try:
        if args.only in (None, "attach"):
            result.update(bench_attach(work, args.events, args.tries, (w, h), not args.without_kept_fold))
        if args.only in (None, "command"):
            result.update(bench_command(work, args.events, args.tries))
        if args.only in (None, "hangup"):
            result.update(bench_hangup(work, args.tries, (w, h)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
