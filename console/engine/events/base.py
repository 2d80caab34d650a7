"""What every event is: its version, time, sequence number and session, and how a long text is cut for the log."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
# The largest whole number an event's field may hold (a 64-bit integer, as the stores keep one). A row of a shared
# store is anyone's text: a 401-digit token count made `logs ID` end in a traceback (a float division overflowed)
# and the fleet list nothing.
MAX_INT = 2**63 - 1
# A whole number an event's field holds: bounded by pydantic's core as the line is read (a Python validator of every
# event's numbers cost a third of each line's parse: 2 of 6 us, issue 37's fleet and attach fold 100,000 of them).
BoundedInt = Annotated[int, Field(ge=-MAX_INT, le=MAX_INT)]
# The most text one field of a logged event carries; beyond it the log keeps a preview, the size and
# the sha256 (the journal keeps the whole payload while a resume may need it).
EVENT_TEXT_LIMIT = 16 * 1024


class Cut(BaseModel):
    """A payload cut to a preview in the log."""

    chars: BoundedInt
    sha256: str


def cap_text(text: str, limit: int = EVENT_TEXT_LIMIT) -> tuple[str, Cut | None]:
    if len(text) <= limit:
        return text, None
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    return (text[:limit] + f"\n[... {len(text) - limit} more chars not logged; sha256 {digest[:16]}]",
            Cut(chars=len(text), sha256=digest))


class EventBase(BaseModel):
    # Read from JSON that any machine sharing the store may have written: no NaN or infinity (a cost of "$inf"),
    # no whole number past MAX_INT. Such a line is no event: it is one bad row, said as one.
    # Each event type's validator and serializer are built when the type is first used, not at the import (~60
    # types; a process uses a few of them, and reads a log through EVENT_ADAPTER, which is built apart).
    model_config = ConfigDict(allow_inf_nan=False, defer_build=True)

    v: BoundedInt = SCHEMA_VERSION
    ts: datetime
    seq: BoundedInt
    session: BoundedInt
