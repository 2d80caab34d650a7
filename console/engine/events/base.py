"""What every event is: its version, time, sequence number and session, and how a long text is cut for the log."""

from __future__ import annotations

import hashlib
from datetime import datetime

from pydantic import BaseModel

SCHEMA_VERSION = 1
# The most text one field of a logged event carries; beyond it the log keeps a preview, the size and
# the sha256 (the journal keeps the whole payload while a resume may need it).
EVENT_TEXT_LIMIT = 16 * 1024


class Cut(BaseModel):
    """A payload cut to a preview in the log."""

    chars: int
    sha256: str


def cap_text(text: str, limit: int = EVENT_TEXT_LIMIT) -> tuple[str, Cut | None]:
    if len(text) <= limit:
        return text, None
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    return (text[:limit] + f"\n[... {len(text) - limit} more chars not logged; sha256 {digest[:16]}]",
            Cut(chars=len(text), sha256=digest))


class EventBase(BaseModel):
    v: int = SCHEMA_VERSION
    ts: datetime
    seq: int
    session: int
