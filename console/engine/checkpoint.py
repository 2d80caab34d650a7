"""The session checkpoint: what a resumed run needs beyond todos.json and the files.

Written atomically at the end of every turn, after the turn's tool results are
applied, so a resumed run replays nothing: the conversation it restores ends
with complete tool pairs, and every todo completion is already in todos.json.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from console.engine.atomic import atomic_write_text
from console.engine.messages import Message


class Checkpoint(BaseModel):
    v: int = 1
    session: int = 0
    turn: int = 0
    conversation: list[Message] = Field(default_factory=list)
    nudges: int = 0
    job_done: bool = False
    updated_at: datetime | None = None


def load_checkpoint(path: Path) -> Checkpoint | None:
    if not path.exists():
        return None
    try:
        return Checkpoint.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return None


def save_checkpoint(path: Path, cp: Checkpoint) -> None:
    # model_dump_json is several times faster than json.dumps over model_dump for long conversations.
    atomic_write_text(path, cp.model_dump_json())


def checkpoint_size(path: Path) -> int:
    try:
        return len(json.loads(path.read_text(encoding="utf-8")).get("conversation", []))
    except (OSError, ValueError):
        return 0
