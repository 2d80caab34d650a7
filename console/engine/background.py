"""Threads that do the run's writing off its loop: how they ask the scheduler to stay out of the loop's way."""

from __future__ import annotations

import contextlib
import os


def background_priority() -> None:
    """The calling thread becomes background work to the scheduler (Linux's SCHED_BATCH: the same share of the
    CPU, but a wake-up of it never preempts the thread that woke it). The run's loop wakes its writer threads (the
    state files, the event log) as it goes; woken as normal threads, they could take the loop's CPU at that
    instant, and on a busy machine the loop then waited a timeslice (1-5 ms) in a turn (benchmarks/overhead.py:
    72 such waits in 1,200 turns, 30 with it)."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None or not hasattr(os, "sched_setscheduler"):
        return  # not Linux: nothing to say to the scheduler
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, policy, os.sched_param(0))  # 0: this thread, not the process
