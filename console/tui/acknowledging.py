"""``k`` in the fleet and in a run's console: acknowledge a run that gave up, crashed or failed
(console.engine.acknowledge, as ``agent-console ack ID`` does), and what the notice then says. Called on a worker
thread: it takes the run's lock for a moment and writes to the jobs store."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from console.engine.acknowledge import acknowledge
from console.engine.job import JobPaths
from console.engine.store import Store, StoreError


@dataclass(frozen=True)
class Said:
    """The notice an acknowledgement gets: its title, message and severity."""

    title: str
    message: str
    severity: Literal["information", "warning", "error"] = "information"


def acknowledge_run(paths: JobPaths, name: str, by: str, open_store: Callable[[], Store] | None) -> Said:
    """Acknowledge the run at ``paths`` (``name``: how the notice names it, ``k3f9q quickstart``); ``open_store``:
    the jobs store to tell (None, or one that cannot be opened: the run's own log holds the acknowledgement)."""
    store = None
    if open_store is not None:
        with contextlib.suppress(sqlite3.Error, OSError, StoreError):
            store = open_store()
    try:
        done = acknowledge(paths, by, store)
    except OSError as exc:
        return Said("Not acknowledged", f"{name}: {exc.strerror or exc}", "error")
    finally:
        if store is not None:
            store.close()
    if done.status == "acknowledged":
        return Said("Acknowledged", f"{name}: acknowledged; it asks for you no more. Resume still goes on with it "
                                    f"(agent-console resume {paths.run_id}).")
    if done.status == "live":
        return Said("Not acknowledged", f"{name} runs now: answer it instead.", "warning")
    if done.status == "already":
        return Said("Acknowledged", f"{name} was already acknowledged.")
    return Said("Nothing to acknowledge", f"{name}: " + ("it completed." if done.status == "completed" else
                                                         "it never ran."))
