"""An attach's first read of a long log: the newest messages and the seed found by their bytes, as a line-by-line
reading would find them, whatever the lines' payloads hold."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.engine import events as ev
from console.tui import follow

T0 = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)


class Bridge:
    pending = 0

    def __init__(self) -> None:
        self.pushed: list[ev.EventBase] = []

    def push_many(self, events: list[ev.EventBase]) -> None:
        self.pushed += events


class Worker:
    is_cancelled = False


class State:
    last_seq = 0

    def __init__(self) -> None:
        self.events: list[ev.EventBase] = []

    def apply_all(self, events: list[ev.EventBase]) -> None:
        self.events += events

    def apply(self, event: ev.EventBase) -> None:
        self.events.append(event)


def reference(lines: list[bytes], keep: int) -> tuple[list[int], int]:
    """The line-by-line reading: the indices of the seed lines and where the newest ``keep`` messages start."""
    split, seen = 0, 0
    for i in range(len(lines) - 1, -1, -1):
        if follow._type(lines[i]) == b"assistant_message":
            seen += 1
            if seen >= keep:
                split = i
                break
    wanted, seed_at = set(follow.SEED_TYPES), []
    for i in range(split - 1, -1, -1):
        if (kind := follow._type(lines[i])) in wanted:
            wanted.discard(kind)
            seed_at.append(i)
    first = next((i for i in range(split) if follow._type(lines[i]) == b"session_started"), None)
    if first is not None and first not in seed_at:
        seed_at.append(first)
    return sorted(seed_at), split


def test_the_quick_read_finds_what_a_line_by_line_reading_finds(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(follow, "QUICK_BYTES", 0)
    monkeypatch.setattr(follow, "DRAW_FIRST", 0)
    seq = 0

    def e(cls: type[ev.EventBase], **kw: object) -> ev.EventBase:
        nonlocal seq
        seq += 1
        return cls(ts=T0 + timedelta(seconds=seq), seq=seq, session=1, **kw)

    out: list[ev.EventBase] = []
    for turn in range(1, 120):
        out.append(e(ev.TurnStarted, turn=turn, prompt_tokens_est=10))
        out.append(e(ev.ToolResult, turn=turn, call_id=f"c{turn}", tool="read_file", ok=True,
                     content='"type":"assistant_message"'))
        if turn % 7 == 0:
            out.append(e(ev.TokenUsage, turn=turn, input_tokens=turn, output_tokens=1, context_window=100,
                         prompt_budget=90, context_tokens=turn, soft_threshold=0.7, hard_threshold=0.85))
        out.append(e(ev.AssistantMessage, turn=turn, text=f"message {turn}"))
    path = tmp_path / "events.jsonl"
    lines = [x.model_dump_json().encode() for x in out]
    # Another type's bytes inside a line (a nested object of a newer version's event): never taken for that type.
    for i, line in enumerate(lines):
        if b'"type":"tool_result"' in line:
            lines[i] = line[:-1] + b',"x":{"type":"todos_changed","y":{"type":"assistant_message"}}}'
    assert follow._type(lines[1]) == b"tool_result" and b'"type":"todos_changed"' in lines[1]
    # A torn last line (a writer mid-append) is not read.
    path.write_bytes(b"\n".join(lines) + b"\n" + b'{"type":"assistant_message","te')
    for keep, most in ((1, 60), (5, 60), (60, 60), (500, 60), (500, 1000)):
        monkeypatch.setattr(follow, "QUICK_KEEP", most)
        bridge, seeds, folded = Bridge(), [], []
        offset = follow.quick_first_read(path, bridge, keep, seeds.append, State, folded.append, Worker())
        seed_at, split = reference(lines, min(keep, follow.QUICK_KEEP))
        parsed = follow._parse(lines)  # what parses of each line (a newer version's line may not)
        by_seq = {x.seq for x in parsed}
        assert [x.seq for x in seeds[0]] == [out[i].seq for i in seed_at if out[i].seq in by_seq]
        assert (split > 0 and len(seed_at) == 1) if most == 60 else (split == 0 and seed_at == [])
        assert [x.seq for x in bridge.pushed] == [x.seq for x in out[split:] if x.seq in by_seq]
        assert [x.seq for x in folded[0].state.events] == [x.seq for x in parsed]
        assert offset == path.read_bytes().rfind(b"\n") + 1
    assert json.loads(lines[-1])["type"] == "assistant_message"
