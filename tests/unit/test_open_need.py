"""console.engine.needs.open_need: the need a run's log ends waiting on, read back from the log's end (a resume of
a long run must not read it all): the last need, answer or process start decides; a line cut by a read's step is
read whole; a damaged line says nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from console.engine import events as ev
from console.engine.needs import open_need

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def log(path: Path, events: list[ev.EventBase], padding: int = 0) -> None:
    lines = [e.model_dump_json() for e in events[:1]]
    # Many lines after the first: the need is read across the 64 KB steps back from the end.
    lines += [ev.ErrorEvent(ts=T, seq=100 + i, session=1, message="x" * 500, where="pad").model_dump_json()
              for i in range(padding)]
    lines += [e.model_dump_json() for e in events[1:]]
    path.write_text("\n".join(lines) + "\n")


def need(seq: int, reason: str = "fleet_budget") -> ev.NeedsOperator:
    return ev.NeedsOperator(ts=T, seq=seq, session=1, reason=reason, message="m")  # type: ignore[arg-type]


def test_the_log_ends_waiting_on_its_last_need_unless_it_was_answered_or_a_process_started_since(
        tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    assert open_need(path) is None  # no log
    log(path, [ev.SessionStarted(ts=T, seq=1, session=1, reason="new"), need(2)])
    assert open_need(path) == "fleet_budget"
    log(path, [ev.SessionStarted(ts=T, seq=1, session=1, reason="new"), need(2),
               ev.NeedsOperatorCleared(ts=T, seq=3, session=1, reason="fleet_budget", by="raised")])
    assert open_need(path) is None
    log(path, [ev.SessionStarted(ts=T, seq=1, session=1, reason="new"), need(2),
               ev.SessionStarted(ts=T, seq=3, session=1, reason="resume")])
    assert open_need(path) is None
    # The need far back, with more than one read's step of other lines after it.
    log(path, [need(1, "stuck")], padding=400)
    assert open_need(path) == "stuck"
    # A damaged last line that looks like a need says nothing; the one before it decides.
    log(path, [need(1, "stuck")])
    with path.open("a") as fh:
        fh.write('{"type":"needs_operator", not json\n')
    assert open_need(path) == "stuck"
