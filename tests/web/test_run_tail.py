"""A run page's story tail (console.view.run_snapshot.story_tail), drawn each time a live run moves: the last 40
lines of the run's story, its log's events parsed from the newest back only until they hold them (a busy run's page
parsed its log's last 256 KB, ~1,000 events, for each drawing), and as far back as 256 KB when its events are large."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.events import log as event_log
from console.engine.job import JobPaths
from console.view import present, run_snapshot
from console.view.fleet import Fleet, RunFold
from console.view.story import Told
from tests.tui.conftest import FROZEN_NOW
from tests.tui.fleet_runs import make_fleet


def a_run_with_turns(tmp_path: Path, turns: int, result: int) -> tuple[RunFold, int]:
    """The fixture's running run with ``turns`` more turns (a numbered reply, a read of ``result`` characters);
    its fold, and the log's size."""
    fx = make_fleet(tmp_path)
    folder = fx.runs["running"]
    events = JobPaths(folder).events
    seq = len(events.read_text().splitlines())
    with events.open("a", encoding="utf-8") as fh:
        for turn in range(1, turns + 1):
            base = {"v": 1, "ts": FROZEN_NOW.isoformat(), "session": 1, "turn": 100 + turn}
            for kind in ({"type": "assistant_message", "text": f"reply {turn}"},
                         {"type": "tool_called", "call_id": f"c{turn}", "tool": "read_file", "arguments": "{}"},
                         {"type": "tool_result", "call_id": f"c{turn}", "tool": "read_file", "ok": True,
                          "content": "x" * result}):
                seq += 1
                fh.write(json.dumps({**base, **kind, "seq": seq}) + "\n")
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder)
    fleet.poll()
    fold = next(f for f in fleet.folds.values() if f.paths.root == folder)
    fleet.close()
    return fold, events.stat().st_size


def replies(tail: tuple[tuple[str, str], ...]) -> list[str]:
    return [line.rpartition("reply ")[2] for _, line in tail]


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    parsed: list[str] = []
    parse = ev.parse_event

    def counting(text: str) -> ev.EventBase:
        parsed.append(text)
        return parse(text)

    monkeypatch.setattr(ev, "parse_event", counting)
    monkeypatch.setattr(event_log, "parse_event", counting)  # what reads a log's lines calls
    return parsed


def test_a_busy_runs_tail_parses_only_the_newest_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fold, _ = a_run_with_turns(tmp_path, 2000, result=100)
    parsed = count_parses(monkeypatch)
    tail = run_snapshot.story_tail(fold)
    assert replies(tail) == [str(n) for n in range(1961, 2001)]  # the last 40 lines, the newest last
    # Each turn is one line of the story in three events: 50 turns' worth parsed, not the 256 KB's ~1,400 events.
    assert len(parsed) <= 3 * (run_snapshot.TAIL_LINES + 10), len(parsed)


def test_a_tail_of_large_events_is_read_from_further_back(tmp_path: Path) -> None:
    fold, _ = a_run_with_turns(tmp_path, 60, result=5000)
    tail = run_snapshot.story_tail(fold)
    assert replies(tail) == [str(n) for n in range(21, 61)]  # 40 lines still: 200 KB of the log


def whole_story(fold: RunFold) -> tuple[tuple[str, str], ...]:
    """The story's last 40 lines as every view tells it, from the whole log (console.view.story)."""
    told = Told()
    return tuple((p.severity, run_snapshot._s(present.brief(p))) for e in ev.read_events(fold.paths.events)
                 if not told.said_elsewhere(e) and present.in_story(e) and (p := present.describe(e)) is not None
                 )[-run_snapshot.TAIL_LINES:]


@pytest.mark.parametrize(("turns", "result"), [(3, 10), (45, 10), (2000, 100)])
def test_the_tail_is_the_last_lines_of_the_whole_story(tmp_path: Path, turns: int, result: int) -> None:
    fold, _ = a_run_with_turns(tmp_path, turns, result)
    tail = run_snapshot.story_tail(fold)
    assert tail == whole_story(fold) and len(tail) == min(run_snapshot.TAIL_LINES, len(whole_story(fold)))


def test_a_named_pipe_for_a_log_is_no_story_and_blocks_nothing(tmp_path: Path) -> None:
    fold, _ = a_run_with_turns(tmp_path, 3, result=10)
    fold.paths.events.unlink()
    os.mkfifo(fold.paths.events)
    told: list[tuple[tuple[str, str], ...]] = []
    reader = threading.Thread(target=lambda: told.append(run_snapshot.story_tail(fold)), daemon=True)
    reader.start()
    reader.join(30)  # (a guard against a hang, not a figure: an open of a pipe without a writer waits for ever)
    assert told == [()]
