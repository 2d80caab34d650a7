"""The operator's zone (``[budgets] timezone``): the fleet's days, one clock for every machine of a shared store.

Applied as the process's ``TZ`` (:func:`use_timezone`), so every local time made anywhere (``astimezone()``: the
budget's day, ``costs``' days, the times a view shows) and every process started after (a runner) is that zone's.
Read by the settings (console.settings) and by the commands that skip them (console.locations: ``jobs``)."""

from __future__ import annotations

import os


def zone_problem(name: str) -> str | None:
    """Why ``name`` is no timezone this machine knows (None: it is one)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return f"unknown timezone {name!r}: give an IANA name such as UTC or Europe/Paris (unset: this machine's)"
    return None


def use_timezone(name: str | None) -> None:
    """``[budgets] timezone`` becomes this process's local zone (``TZ``), and so its children's: the fleet budget's
    day, ``costs``' days and today, and every time a view shows are that zone's, one clock for every machine of a
    shared store. Through ``TZ`` rather than passed to each place a local time is made (``astimezone()``): a place
    missed would count another day. Unset: the process keeps the zone it was started with."""
    if name is None or os.environ.get("TZ") == name:
        return
    import time

    os.environ["TZ"] = name
    time.tzset()
