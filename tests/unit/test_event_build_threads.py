"""The event types (and the operator's commands) are built at their first use (defer_build), and a run uses them
from several threads: the loop's, the views', the model call's. Their first use at the same moment in many threads
of a fresh process must give each thread whole, right events. pydantic locks that first build since 2.14 (pydantic
#13438; before it, two threads building one type could fail, pydantic #13419, or, in 2.11.0-2.11.4, one get the base
class's validator): pyproject asks for 2.14. (With 2.13.4 this test passed 20 times of 20 here: the race is rare.)"""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = r"""
import json, sys, threading
from datetime import UTC, datetime
from console.engine import events as ev
from console.engine.commands import parse_command

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CASES = [
    (ev.TurnStarted, {"turn": 7, "layers": ["system", "todos"], "prompt_tokens_est": 1234}),
    (ev.TokenUsage, {"turn": 7, "input_tokens": 100, "output_tokens": 20, "cached_input_tokens": 50,
                     "cost_usd": 0.25}),
    (ev.ToolCalled, {"turn": 7, "call_id": "c1", "tool": "read_file", "arguments": "{\"path\": \"a.md\"}"}),
    (ev.ToolResult, {"turn": 7, "call_id": "c1", "tool": "read_file", "ok": True, "content": "hello"}),
    (ev.ErrorEvent, {"message": "boom", "where": "state", "recoverable": False}),
]
barrier = threading.Barrier(int(sys.argv[1]))
out, errors = [], []

def work():
    try:
        barrier.wait()
        mine = []
        for cls, fields in CASES:
            e = cls(ts=T, seq=3, session=2, **fields)  # built (the type's validator), then written (its serializer)
            line = e.model_dump_json()
            back = ev.parse_event(line)  # read back through the log's union, built at its first use too
            mine.append([type(back).__name__, json.loads(line), back.model_dump(mode="json")])
        cmd = parse_command("rewind", {"issue": "x", "phase": 3})
        mine.append([type(cmd).__name__, cmd.args()])
        out.append(mine)
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")

threads = [threading.Thread(target=work) for _ in range(barrier.parties)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"out": out, "errors": errors}))
"""


def test_event_types_first_used_in_many_threads_at_once_are_whole() -> None:
    threads = 12
    for _ in range(4):  # each a fresh process: nothing built before the threads start
        done = subprocess.run([sys.executable, "-c", PROGRAM, str(threads)], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        got = json.loads(done.stdout)
        assert got["errors"] == []
        assert len(got["out"]) == threads
        first = got["out"][0]
        for name, written, read in first[:-1]:
            assert written == read, name  # what was written is what the union reads back: every field
            assert written["seq"] == 3 and written["session"] == 2 and len(written) > 4, name
        assert [row[0] for row in first] == ["TurnStarted", "TokenUsage", "ToolCalled", "ToolResult", "ErrorEvent",
                                             "Rewind"]
        assert first[-1][1] == {"issue": "x", "phase": 3}
        assert all(mine == first for mine in got["out"])  # every thread got the same, whole events
