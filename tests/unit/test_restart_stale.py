"""A restart the recorded context called for, judged again under the settings a run is resumed with."""

from __future__ import annotations

from console.engine.context.pressure import ContextAction, ContextManager, PressureState


def due(window: int, used: int) -> PressureState:
    """The state of a session whose wind-down turn is over (the next evaluation restarts), in ``window``."""
    cm = ContextManager(window, reserve=1000)
    cm.used = used
    cm.mark_wind_down()
    cm.record_usage(used - 100, 100)
    assert cm.restart_due and cm.evaluate([]).action is ContextAction.RESTART
    return cm.snapshot()


def test_a_larger_window_drops_it_the_same_settings_keep_it() -> None:
    state = due(9000, 7400)
    assert (state.budget, state.hard) == (9000 - 1000 - 180, 0.85)
    same = ContextManager(9000, reserve=1000)
    same.restore(state)
    assert not same.restart_stale(state)  # a resume decides as the run would have
    larger = ContextManager(12_000, reserve=1000)
    larger.restore(state)
    assert larger.restart_stale(state)
    larger.go_on()
    assert not larger.restart_due and larger.evaluate([]).action is ContextAction.CONTINUE
    # Once dropped, the state records the new settings: a kill and another resume do not judge it again.
    assert larger.snapshot().budget == larger.budget


def test_a_window_still_too_small_or_an_older_checkpoint_keeps_it() -> None:
    state = due(9000, 7400)
    slightly = ContextManager(9300, reserve=1000)
    slightly.restore(state)
    assert slightly.pct >= slightly.hard and not slightly.restart_stale(state)
    lower_hard = ContextManager(12_000, hard=0.5, reserve=1000)
    lower_hard.restore(state)
    assert not lower_hard.restart_stale(state)  # 7,400 of ~10,760 is past a 50% hard threshold
    old = state.model_copy(update={"budget": 0, "hard": 0.0})  # a checkpoint that did not say its settings
    larger = ContextManager(12_000, reserve=1000)
    larger.restore(old)
    assert not larger.restart_stale(old)
    # A checkpoint of an older version (no such fields) reads back as one that did not say them.
    legacy = PressureState.model_validate({"used": 7400, "wind_down_sent": True, "turns_since_wind_down": 1})
    assert (legacy.budget, legacy.hard) == (0, 0.0)


def test_no_restart_due_is_nothing_to_drop() -> None:
    cm = ContextManager(9000, reserve=1000)
    cm.used = 8000
    state = cm.snapshot()
    larger = ContextManager(12_000, reserve=1000)
    larger.restore(state)
    assert not larger.restart_stale(state)
