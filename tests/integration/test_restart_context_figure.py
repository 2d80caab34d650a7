"""A context restart on a real run: its new session's session_started carries the estimate of its first prompt
(what the engine's ContextManager starts the session from), so every view's fold shows the new figure at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from console.view.state import ConsoleState
from tests.conftest import SAMPLES, run_settings
from tests.integration.test_kill_points import EXTRA, enumerate_kills, work  # noqa: F401 (work: a fixture)
from tests.sweeps import Sweep

WINDOW = 6_000


def test_a_restart_s_new_session_starts_with_its_own_estimate_in_every_fold(make_job, clock) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=10), ScriptedProvider(clock=clock),
                     clock=clock)
    live = ConsoleState("job", window=WINDOW)  # the console's fold, fed as the run publishes
    seen: list[tuple[int, int, float, float]] = []  # (session, gauge used, pct just before, pct at its start)

    def view(e: ev.EventBase) -> None:
        before = live.gauge.pct
        live.apply(e)
        if isinstance(e, ev.SessionStarted) and e.reason == "restart":
            seen.append((e.session, live.gauge.used, before, live.gauge.pct))

    sup.subscribe(view)
    assert sup.run().ok
    events = list(ev.read_events(paths.events))
    starts = [e for e in events if isinstance(e, ev.SessionStarted) and e.reason == "restart"]
    assert starts and len(seen) == len(starts)
    soft = sup.settings.soft_threshold
    for e, (session, used, before, after) in zip(starts, seen, strict=True):
        first_turn = next(t for t in events if isinstance(t, ev.TurnStarted) and t.session == e.session)
        # The estimate is the engine's own starting figure: the one its first turn reports too.
        assert e.prompt_tokens_est == first_turn.prompt_tokens_est == used > 0
        assert e.prompt_budget > 0 and session == e.session
        assert before >= soft > after  # the old session's full context, then the new session's start
        # A fold of the log on disk (the fleet's, `logs`') up to the session's start says the same.
        from_disk = ConsoleState("job")
        from_disk.apply_all([x for x in events if x.seq <= e.seq])
        assert (from_disk.gauge.used, from_disk.gauge.pct) == (used, after)
    # Each restart's compaction says what the ended session had and what it carried (not its carryover twice).
    for start in starts:
        compaction = next(e for e in reversed(events) if isinstance(e, ev.ContextCompacted) and e.seq < start.seq)
        ended = [e for e in events if isinstance(e, ev.SessionEnded) and e.session == start.session - 1]
        assert compaction.reason == "restart" and compaction.carried == start.carryover_messages > 0 and ended
        assert compaction.messages_before > compaction.carried
        assert compaction.messages_after == 2 + compaction.carried  # the summary, the restart's marker, the turns


def test_a_new_session_that_fails_before_its_estimate_still_says_it_started(make_job, clock, monkeypatch) -> None:
    """An internal error in the restarted session before it estimated its prompt: the log still has its start
    (with no figure), then the error and its end, in that order."""
    import console.engine.session as session_module

    real = session_module.build_system

    def build_system(base: str, registry: object, session: int = 1) -> str:
        if session > 1:
            raise RuntimeError("boom at the new session's start")
        return real(base, registry, session)  # type: ignore[arg-type]

    monkeypatch.setattr(session_module, "build_system", build_system)
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=10), ScriptedProvider(clock=clock),
                     clock=clock)
    assert not sup.run().ok
    events = [e for e in ev.read_events(paths.events) if e.session == 2]
    start = events[0]
    assert isinstance(start, ev.SessionStarted) and start.reason == "restart"
    assert (start.prompt_tokens_est, start.prompt_budget) == (0, 0) and start.carryover_messages > 0
    assert [e.type for e in events[1:3]] == ["error", "session_ended"]
    assert "boom at the new session's start" in events[1].message  # type: ignore[attr-defined]


@pytest.mark.sweep
def test_every_kill_point_of_a_run_with_a_context_restart_resumes_to_the_same_end(
        work: Path, monkeypatch: pytest.MonkeyPatch, sweep: Sweep) -> None:  # noqa: F811 (the fixture above)
    """The restarted session says its start from inside its run now (once it has its estimate): a kill anywhere
    around it resumes to the same end."""
    base = work / "quickstart"
    shutil.copytree(SAMPLES / "quickstart", base)
    monkeypatch.setitem(EXTRA, "context_window", WINDOW)
    failures = enumerate_kills(base, None, work, sweep)
    assert not failures, "\n".join(failures)
    starts = [e for e in ev.read_events(work / "baseline" / ".console" / "events.jsonl")
              if isinstance(e, ev.SessionStarted) and e.reason == "restart"]
    assert starts and all(e.prompt_tokens_est > 0 for e in starts)
