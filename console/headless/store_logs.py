"""``logs [-f] ID`` of a run of another machine sharing the store: its story from the store's ``events`` table,
followed through LISTEN/NOTIFY (each batch the run's link ships wakes the follower: no busy poll of the
database), until the run ends or its runner's lease expires."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from console.engine.store.base import SharedStore
from console.headless.logs import LogEnd, StoryPrinter

PAGE = 2000  # events fetched at a time
SAFETY_LOOK = 5.0  # seconds: the store is asked at least this often even without a NOTIFY (one lost to a drop)


class StoreLines:
    """The :class:`~console.headless.logs.LogReader` interface over the store's events of one run."""

    def __init__(self, store: SharedStore, key: str, run: str = "") -> None:
        self.store = store
        self.key = key
        self.run = run  # its short id, as a note names it
        self.seq = 0
        self.line_no = 0
        self.rewound = False
        self.woken = True
        self._listen: Any = None
        self._since_look = 0.0

    def changed(self) -> bool:
        woken, self.woken = self.woken, False
        return woken

    def lines(self) -> Iterator[bytes | None]:
        """Each event's body as the store holds it (its JSON text: parsed once, by the printer, with bounds); None
        for one larger than a body may be (a bad row, which the printer says)."""
        while True:
            page = self.store.event_texts_after(self.key, self.seq, PAGE)
            for seq, text in page:
                self.seq = seq
                self.line_no += 1
                yield None if text is None else text.encode("utf-8", "replace")
            if len(page) < PAGE:
                return

    def where(self) -> str:
        """The event last read, as a note about a bad one names it (the store's order of the run's events)."""
        return f"the store's event {self.seq} of run {self.run}"

    def wait(self, seconds: float) -> None:
        """Sleep until the run's link says it stored events (NOTIFY), or ``seconds``."""
        from console.engine.store import StoreError
        from console.engine.store.postgres import EVENTS_CHANNEL

        self._since_look += seconds
        try:
            if self._listen is None:
                self._listen = self.store.listener(EVENTS_CHANNEL)
                self.woken = True  # what came before the listening began
            for note in self._listen.notifies(timeout=seconds, stop_after=1):
                if note.payload == self.key:
                    self.woken = True
        except StoreError:
            import time

            time.sleep(seconds)  # the store is away: looked at again after the wait
            self.woken = True
        except Exception:  # the listening connection dropped: made again at the next wait
            self.close()
            self.woken = True
        if self._since_look >= SAFETY_LOOK:
            self._since_look, self.woken = 0.0, True

    def close(self) -> None:
        if self._listen is not None:
            with contextlib.suppress(Exception):
                self._listen.close()
            self._listen = None


def remote_logs(args: argparse.Namespace) -> int | None:
    """``logs`` of a run of another machine (None: not one; the local ``logs`` goes on)."""
    from console.engine.job_files import JobError
    from console.engine.runs import RunLookupError, run_id
    from console.engine.store import StoreError, is_shared
    from console.headless import use_color
    from console.outcome import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
    from console.settings import load_settings
    from console.view.jobs import one_line, remote_run

    def err(msg: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            print(one_line(f"agent-console: {msg}"), file=sys.stderr, flush=True)

    from console.engine.runs import looks_like_a_path

    if looks_like_a_path(args.job) or os.path.isdir(args.job):
        return None  # a folder: this machine's
    try:
        settings = load_settings()
        row = remote_run(args.job, settings)
    except (JobError, RunLookupError) as exc:
        err(str(exc))
        return EXIT_USAGE
    except StoreError as exc:
        args.store_away = str(exc)  # this machine's runs are read from their folders (console.cli.local_runs)
        return None
    if row is None:
        return None
    store = settings.open_store()
    assert is_shared(store)  # a run of another machine is found in a shared store only
    key = row.key
    lines = StoreLines(store, key, run_id(row.path))
    color = not args.json and use_color(sys.stdout)
    printer = StoryPrinter(_nowhere(), sys.stdout, sys.stderr, run_id=run_id(row.path),
                           as_json=args.json, since=args.since, lines=args.lines or 0, color=color)
    # The same interface as the log's reader, over the store's events.
    printer.reader = lines  # type: ignore[assignment]

    def holder() -> int | None:
        now = store.by_key(key)
        return 0 if now is not None and now.leased else None

    try:
        printer.pump()
        printer.end_tail()
        end = printer.follow(holder, sleep=lines.wait) if args.follow else LogEnd("done", printer.last_type)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except StoreError as exc:
        err(str(exc))
        return EXIT_FAILED
    finally:
        lines.close()
        store.close()
    if printer.closed:
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    if end.how == "gone" and end.last not in ("run_ended", "job_completed"):
        err(f"the runner of {run_id(row.path)} on {row.host} holds its lease no more and the run did not end cleanly "
            f"(killed, or its machine went down); resume it there: agent-console resume {run_id(row.path)}")
    return EXIT_OK


def _nowhere() -> Any:
    from pathlib import Path

    return Path(os.devnull)
