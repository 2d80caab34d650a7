"""The run's trace, kept in its record so that a resumed run (after kill -9, a stop, a crash) continues it.

``.console/telemetry.json`` holds the run's trace id and its first process's run span id: every later process of the
run puts its spans in the same trace, its run span a child of the first (and linked to it). Written atomically and
sealed with the operator's key for this folder (console.engine.seal), as the launch record is: a job folder from
elsewhere cannot choose the trace its spans join (a record that is not this operator's is ignored: a new trace).
Read back typed; one that does not read is replaced by a new trace (the run goes on: telemetry never stops it).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from console.engine.atomic import atomic_write_text
from console.engine.job_files import JobPaths
from console.engine.seal import Seal, read_record

RECORD_NAME = "telemetry.json"
SEAL_KIND = "telemetry"
MAX_BYTES = 64 << 10


class TraceRecord(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    v: int = 1
    trace_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    root_span_id: str = Field(pattern=r"^[0-9a-f]{16}$")
    started: datetime
    # How many processes have run the run with this trace (1: the first).
    processes: int = Field(default=1, ge=1)
    # Whether the span root_span_id names was ended (by the first process, or by a later one's stand-in for it after
    # a kill -9): False, a process that resumes the run sends a stand-in, so its run span's parent is in the trace.
    # None: a record from before this field (unknown: never a second span with that id).
    root_ended: bool | None = None


def record_path(paths: JobPaths) -> Path:
    return paths.state / RECORD_NAME


def read_trace(paths: JobPaths, seal: Seal) -> TraceRecord | None:
    """The run's trace if this operator's harness recorded one for this folder, else None."""
    raw = read_record(record_path(paths), MAX_BYTES)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or not seal.opens(SEAL_KIND, paths.root, doc):
            return None
        record = TraceRecord.model_validate(doc)
    except (ValueError, RecursionError, ValidationError):
        return None
    return record if int(record.trace_id, 16) and int(record.root_span_id, 16) else None  # all zeros: invalid ids


def write_trace(paths: JobPaths, seal: Seal, record: TraceRecord) -> None:
    text = seal.sealed_json(SEAL_KIND, paths.root, json.loads(record.model_dump_json()))
    atomic_write_text(record_path(paths), text, tmp_dir=paths.state / "tmp")
