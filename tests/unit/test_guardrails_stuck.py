from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from console.engine.guardrails import (
    FeedbackProviderConfig,
    FeedbackRunner,
    FeedbackState,
    FeedbackTrigger,
    StuckDetector,
    ToolCallSummary,
)
from tests.unit.test_guardrails_world import FakeWorld

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)


def make_runner(**kwargs: int) -> FeedbackRunner:
    return FeedbackRunner([FeedbackProviderConfig(StuckDetector(**kwargs), FeedbackTrigger(every_n_calls=1))])


def call(name: str, args: str = "{}", result: str = "same", ok: bool = True) -> ToolCallSummary:
    return ToolCallSummary.of(name, args, ok, result)


def feed(runner: FeedbackRunner, calls: list[ToolCallSummary], turn_base: int = 0,
         idle: int = 0) -> list[tuple[int, str]]:
    """Record each call then collect (one call per turn); (call number, pattern) for each stuck feedback."""
    fired = []
    for call_ in calls:
        runner.record_call(call_)
        n = runner.state.tool_call_count
        for _, fb in runner.collect(now=T0 + timedelta(seconds=n), world=FakeWorld(), turn=turn_base + n,
                                    turns_without_progress=idle):
            fired.append((n, fb.observations[0].description.split(":")[0]))
    return fired


def test_repeat_needs_the_threshold_and_does_not_nag() -> None:
    assert feed(make_runner(), [call("read_file")] * 3) == []
    runner = make_runner()
    assert feed(runner, [call("read_file")] * 4) == [(4, "repeat")]
    # the same run goes on: reported again only when it has grown by the threshold
    assert feed(runner, [call("read_file")] * 5) == [(8, "repeat")]


def test_the_same_call_with_different_results_is_not_a_repeat() -> None:
    calls = [call("run_tests", result=f"{i} passed") for i in range(6)]
    assert feed(make_runner(), calls) == []


def test_a_new_run_after_a_break_is_reported_again() -> None:
    runner = make_runner()
    calls = [call("a")] * 4 + [call("b", result="other")] + [call("a")] * 4
    assert feed(runner, calls) == [(4, "repeat"), (9, "repeat")]


def test_the_same_error_three_times() -> None:
    err = [call("edit_file", args=f'{{"i": {i}}}', ok=False, result="old_string not found") for i in range(3)]
    assert feed(make_runner(), err[:2]) == []
    assert feed(make_runner(), err) == [(3, "error")]
    different = [call("edit_file", ok=False, result=f"error {i}", args=f'{{"i": {i}}}') for i in range(3)]
    assert feed(make_runner(), different) == []
    other_tools = [call(f"tool{i}", ok=False, result="boom") for i in range(3)]
    assert feed(make_runner(), other_tools) == []


def test_alternation_positive_and_negative() -> None:
    a, b, c = call("read_file", '{"path": "a"}', "A"), call("read_file", '{"path": "b"}', "B"), call("ls", "{}", "C")
    assert feed(make_runner(), [a, b, a, b, a]) == []
    assert feed(make_runner(), [a, b, a, b, a, b]) == [(6, "alternation")]
    assert feed(make_runner(), [a, b, a, c, a, b]) == []
    b_changed = call("read_file", '{"path": "b"}', "B2")
    assert feed(make_runner(), [a, b, a, b_changed, a, b]) == []
    runner = make_runner()
    assert feed(runner, [a, b] * 6) == [(6, "alternation"), (12, "alternation")]


def test_idle_turns_fire_once_per_multiple_of_the_same_stretch() -> None:
    runner = make_runner(idle_turns=30)
    results = []
    for turn in range(1, 95):
        runner.record_call(call("x", args=str(turn), result=str(turn)))
        delivered = runner.collect(now=T0, world=FakeWorld(), turn=turn, turns_without_progress=turn)
        results += [(turn, fb.observations[0].description) for _, fb in delivered]
    assert results == [
        (30, "idle: no todo completed in the last 30 turns (since turn 0)"),
        (60, "idle: no todo completed in the last 60 turns (since turn 0)"),
        (90, "idle: no todo completed in the last 90 turns (since turn 0)"),
    ]


def test_idle_is_reported_even_if_the_exact_multiple_was_missed_and_again_after_progress() -> None:
    runner = make_runner(idle_turns=30)

    def at_turn(turn: int, idle: int) -> list[str]:
        runner.record_call(call("x", args=str(turn), result=str(turn)))
        return [fb.observations[0].description for _, fb in
                runner.collect(now=T0, world=FakeWorld(), turn=turn, turns_without_progress=idle)]

    assert at_turn(29, 29) == []
    assert at_turn(33, 33) == ["idle: no todo completed in the last 33 turns (since turn 0)"]  # turn 30 had no calls
    assert at_turn(34, 34) == []
    # a todo was completed at turn 40: a new stretch
    assert at_turn(70, 30) == ["idle: no todo completed in the last 30 turns (since turn 40)"]
    assert at_turn(71, 31) == []
    assert make_runner(idle_turns=0).collect(now=T0, world=FakeWorld(), turn=500, turns_without_progress=500) == []


def test_the_feedback_names_the_pattern_and_what_to_do() -> None:
    runner = make_runner()
    for _ in range(4):
        runner.record_call(call("read_file", '{"path": "notes.md"}', "same text"))
    [(_, fb)] = runner.collect(now=T0, world=FakeWorld())
    assert fb.severity == "warning"
    assert fb.render() == (
        "<feedback provider='Stuck'>\n"
        "You appear to be stuck: the recent work repeats without progress.\n"
        "\n"
        '- repeat: read_file({"path":"notes.md"}) returned the same result 4 times in a row\n'
        "\n"
        "-> Stop calling read_file with these arguments: the result will not change. Use what it returned, or try "
        "a different approach.\n"
        "-> If this approach is not working, call todo_rewind(issue) describing the problem, and re-plan.\n"
        "</feedback>")


def test_no_refire_after_a_snapshot_and_restore() -> None:
    runner = make_runner()
    assert feed(runner, [call("a")] * 4) == [(4, "repeat")]
    resumed = make_runner()
    resumed.restore(FeedbackState.model_validate_json(runner.snapshot().model_dump_json()))
    assert feed(resumed, [call("a")] * 3) == []
    assert feed(resumed, [call("a")]) == [(8, "repeat")]


def test_an_idle_report_does_not_hide_a_new_repeat() -> None:
    runner = make_runner(idle_turns=2)
    runner.record_call(call("x"))
    [(_, fb)] = runner.collect(now=T0, world=FakeWorld(), turn=2, turns_without_progress=2)
    assert fb.observations[0].description.startswith("idle:")
    assert feed(runner, [call("a", result="other")] * 4) == [(5, "repeat")]


def test_thresholds_are_bounded() -> None:
    with pytest.raises(ValueError):
        StuckDetector(repeat_threshold=1)
    with pytest.raises(ValueError):
        StuckDetector(alternation_window=21)
    with pytest.raises(ValueError):
        StuckDetector(idle_turns=-1)


def test_what_should_run_found_is_what_provide_reports_for_that_collect_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from console.engine.guardrails import FeedbackContext

    detector = StuckDetector()
    looks: list[object] = []
    detect = detector.detect
    monkeypatch.setattr(detector, "detect", lambda c: looks.append(c) or detect(c))
    st = FeedbackState()
    for _ in range(4):
        st.recent_calls.append(call("read_file", '{"path": "a"}'))
        st.tool_call_count += 1
    context = FeedbackContext(st, now=T0, world=FakeWorld(), turn=4)
    assert detector.should_run(context)
    fb = detector.provide(context)
    assert looks == [context]  # provide reported what should_run found, without looking again
    assert "repeat" in fb.observations[0].description
    other = FeedbackContext(st, now=T0, world=FakeWorld(), turn=4)
    assert detector.provide(other).observations == fb.observations  # another collect's context: looked at anew
    assert looks == [context, other]
    assert detector.should_run(context) and detector.provide(other) and looks == [context, other, context, other]


def test_an_idle_stretch_already_reported_is_looked_up_in_the_records_as_they_are(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # After every call of a long idle stretch the detector looks for its own report of it: in the records' text, not
    # each record made a Feedback (two frozen dataclasses a record: a tenth of such a turn, benchmarks/turn_cost.py).
    from console.engine.guardrails.feedback import FeedbackContext, FeedbackRecord

    runner = make_runner(idle_turns=3)
    made: list[object] = []
    real = FeedbackRecord.to_feedback
    monkeypatch.setattr(FeedbackRecord, "to_feedback", lambda self: made.append(self) or real(self))
    fired = []
    for turn in range(1, 9):
        runner.record_call(call("x", args=str(turn), result=str(turn)))
        fired += [(turn, fb.observations[0].description) for _, fb in
                  runner.collect(now=T0, world=FakeWorld(), turn=turn, turns_without_progress=turn)]
    assert fired == [(3, "idle: no todo completed in the last 3 turns (since turn 0)"),
                     (6, "idle: no todo completed in the last 6 turns (since turn 0)")]
    assert made == []  # turns 4 to 8 looked for the report of turn 3 (and 6)
    # What it reads is what the providers' queries give, in their order: the short history's, then the last one's.
    ctx = FeedbackContext(runner.state, now=T0, world=FakeWorld())
    assert ctx.observed_by("Stuck") == [o.description for fb in [*ctx.recent_feedback(provider="Stuck"),
                                                                  ctx.last_feedback_for_provider("Stuck")]
                                        if fb is not None for o in fb.observations]
    assert len(ctx.observed_by("Stuck")) == 3 and ctx.observed_by("Other") == []
