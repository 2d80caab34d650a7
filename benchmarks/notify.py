"""How soon the operator's channel hears of a run that needs them (issue 18's goal: within 5 s).

A loopback HTTP server plays the channel (Apprise's JSON webhook, and an ntfy server). Each sample emits a
``needs_operator`` event through an EventStream with a :class:`console.notify.Notifier` subscribed, as a run does,
and times it until the server has the whole request. Also timed: how long the engine's emit is held by the
subscriber (it only queues). ntfy samples each use a new notifier (one need per run); the JSON samples go through
one notifier, back to back, with each need 1 s after the last (the channel spacing a real run keeps).

    python benchmarks/notify.py [--samples 30]

The last line printed is a JSON summary (seconds; emit in microseconds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.notify import SPACING, Notifier

GOAL_S = 5.0


class Channel:
    """The loopback server: the monotonic time each request was whole."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.cond = threading.Condition()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                now = time.monotonic()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")
                with owner.cond:
                    owner.arrivals.append(now)
                    owner.cond.notify_all()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def wait(self, n: int, timeout: float = 30.0) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.arrivals) >= n, timeout):
                raise SystemExit(f"the channel got {len(self.arrivals)} of {n} notifications within {timeout}s")
            return self.arrivals[n - 1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def sample(stream: ev.EventStream, channel: Channel, n: int) -> tuple[float, float]:
    """(seconds from the emit to the channel having it, seconds the emit took)."""
    start = time.monotonic()
    stream.emit(ev.NeedsOperator, reason="stuck", message=f"no todo completed in 40 turns (sample {n})",
                evidence=["read_file(notes.md) x 12", "idle 40 turns"], paused=True)
    emitted = time.monotonic()
    return channel.wait(n) - start, emitted - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    channel = Channel()
    errors: list[str] = []
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stream = ev.EventStream(Path(tmp) / "events.jsonl")
        # JSON webhook: one notifier for the whole run, needs one spacing apart.
        notifier = Notifier([f"json://127.0.0.1:{channel.port}/hook"], "bench", "bench", on_error=errors.append)
        stream.subscribe(notifier)
        latency, emit = [], []
        for n in range(1, args.samples + 1):
            if n > 1:
                time.sleep(SPACING)
            lat, em = sample(stream, channel, n)
            latency.append(lat)
            emit.append(em)
        notifier.close()
        results["json"] = summary(latency, emit)
        # ntfy: a notifier per sample (a run's first need), its plugin and thread made anew each time.
        latency, emit = [], []
        base = len(channel.arrivals)
        for n in range(1, args.samples + 1):
            stream = ev.EventStream(Path(tmp) / f"ntfy-{n}.jsonl")
            notifier = Notifier([f"ntfy://127.0.0.1:{channel.port}/bench?priority=high"], "bench", "bench",
                                on_error=errors.append)
            stream.subscribe(notifier)
            lat, em = sample(stream, channel, base + n)
            latency.append(lat)
            emit.append(em)
            notifier.close()
        results["ntfy"] = summary(latency, emit)
    channel.close()
    for name, r in results.items():
        print(f"{name:5} event -> channel: p50 {r['p50_s'] * 1000:7.1f} ms  p99 {r['p99_s'] * 1000:7.1f} ms  "
              f"max {r['max_s'] * 1000:7.1f} ms   emit held: p50 {r['emit_p50_us']:6.0f} us  "
              f"p99 {r['emit_p99_us']:6.0f} us   goal < {GOAL_S:g} s: {r['p99_s'] / GOAL_S:.4f} of it")
    if errors:
        print("errors:", *errors, sep="\n  ")
    print(json.dumps({"samples": args.samples, "goal_s": GOAL_S, **results, "errors": len(errors)}))


def summary(latency: list[float], emit: list[float]) -> dict[str, float]:
    return {"p50_s": round(statistics.median(latency), 4), "p99_s": round(pct(latency, 0.99), 4),
            "max_s": round(max(latency), 4), "emit_p50_us": round(statistics.median(emit) * 1e6, 1),
            "emit_p99_us": round(pct(emit, 0.99) * 1e6, 1)}


if __name__ == "__main__":
    main()
