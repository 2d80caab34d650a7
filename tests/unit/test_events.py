from __future__ import annotations

import json

from console.engine import events as ev
from console.engine.clock import FakeClock


def test_events_are_logged_with_stable_fields_and_published(tmp_path) -> None:
    log = tmp_path / "events.jsonl"
    stream = ev.EventStream(log, FakeClock(), session=2)
    seen = []
    unsubscribe = stream.subscribe(seen.append)
    stream.emit(ev.TurnStarted, turn=1)
    stream.emit(ev.TextDelta, turn=1, text="hel")
    stream.emit(ev.ToolCalled, turn=1, call_id="c", tool="read_file", arguments="{}")
    unsubscribe()
    stream.emit(ev.TurnStarted, turn=2)
    stream.close()
    assert [e.type for e in seen] == ["turn_started", "text_delta", "tool_called"]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    # text deltas are in-process only; the log keeps everything else
    assert [x["type"] for x in lines] == ["turn_started", "tool_called", "turn_started"]
    assert all({"type", "ts", "seq", "session", "v"} <= x.keys() for x in lines)
    assert [x["seq"] for x in lines] == [1, 3, 4] and lines[0]["session"] == 2


def test_reader_tolerates_torn_line_and_unknown_types_and_seq_continues(tmp_path) -> None:
    log = tmp_path / "events.jsonl"
    s = ev.EventStream(log, FakeClock())
    s.emit(ev.TurnStarted, turn=1)
    s.close()
    with log.open("a") as fh:
        fh.write('{"type": "from_the_future", "ts": "2026-01-01T00:00:00Z", "seq": 2, "session": 0}\n')
        fh.write('{"type": "turn_started", "ts": "2026-01-01T00:00:00Z", "se')  # torn by a crash
    assert [e.type for e in ev.read_events(log)] == ["turn_started"]
    s2 = ev.EventStream(log, FakeClock())
    e = s2.emit(ev.TurnStarted, turn=2)
    s2.close()
    assert e.seq == 3  # after the last readable seq
    assert [x.type for x in ev.read_events(log)] == ["turn_started", "turn_started"]


def test_a_failing_subscriber_does_not_stop_the_engine(tmp_path, capsys) -> None:
    s = ev.EventStream(None, FakeClock())
    got = []
    s.subscribe(lambda e: 1 / 0)
    s.subscribe(got.append)
    s.emit(ev.TurnStarted, turn=1)
    assert len(got) == 1 and "a view failed on an event" in capsys.readouterr().err


def test_every_event_round_trips_through_the_union() -> None:
    e = ev.JobCompleted(ts="2026-01-01T00:00:00Z", seq=1, session=1, summary="s", confidence=0.5)
    assert ev.parse_event(e.model_dump_json()) == e
