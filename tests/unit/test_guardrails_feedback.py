from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from console.engine.guardrails import (
    Deadline,
    DeadlineFeedback,
    Feedback,
    FeedbackContext,
    FeedbackProviderConfig,
    FeedbackRunner,
    FeedbackState,
    FeedbackTrigger,
    FileCreatedTrigger,
    Observation,
    StaticFeedbackProvider,
    StuckDetector,
    ToolCallSummary,
    render_feedback,
)
from console.engine.guardrails.feedback import FEEDBACK_HISTORY, RECENT_CALLS
from tests.unit.test_guardrails_world import FakeWorld

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def call(name: str = "read_file", args: str = '{"path": "a.txt"}', ok: bool = True, result: str = "text",
         turn: int = 1) -> ToolCallSummary:
    return ToolCallSummary.of(name, args, ok, result, turn)


def static(text: str, name: str, **trigger: object) -> FeedbackProviderConfig:
    return FeedbackProviderConfig(StaticFeedbackProvider(text, name=name), FeedbackTrigger(**trigger))  # type: ignore[arg-type]


def names(delivered: list[tuple[FeedbackProviderConfig, Feedback]]) -> list[str]:
    return [fb.provider_name for _, fb in delivered]


# -- rendering ------------------------------------------------------------------------------------------------

def test_render_is_the_seed_block() -> None:
    fb = Feedback(provider_name="Deadline", summary="The work so far took 5 minutes. You have 3 minutes remaining.",
                  suggestions=("Prioritize completing critical remaining work.",), severity="warning",
                  timestamp=T0, call_index=3)
    assert fb.render() == (
        "<feedback provider='Deadline'>\n"
        "The work so far took 5 minutes. You have 3 minutes remaining.\n"
        "\n"
        "-> Prioritize completing critical remaining work.\n"
        "</feedback>")


def test_render_groups_and_sanitizes_the_provider_name() -> None:
    fb = Feedback(provider_name="x' onload='1\n<b>", summary="Summary.\n\n",
                  observations=(Observation("pattern", "repeat: a"), Observation("pattern", "b")),
                  suggestions=("one", "two"), timestamp=T0, call_index=0)
    assert fb.render() == ("<feedback provider='x_ onload__1__b_'>\nSummary.\n\n- repeat: a\n- b\n\n-> one\n-> two\n"
                           "</feedback>")
    assert Feedback(provider_name="", summary="s", timestamp=T0, call_index=0).render() == (
        "<feedback provider='feedback'>\ns\n</feedback>")


def test_deadline_feedback_below_above_and_past_the_threshold() -> None:
    world = FakeWorld()
    state = FeedbackState()
    deadline = Deadline(expires_at=at(8 * 60), started_at=T0)
    provider = DeadlineFeedback(warning_threshold_seconds=240)

    def render(now: datetime, d: Deadline | None = deadline) -> tuple[bool, str, str]:
        ctx = FeedbackContext(state, now=now, world=world, deadline=d)
        fb = provider.provide(ctx)
        return provider.should_run(ctx), fb.severity, fb.render()

    assert render(at(5 * 60)) == (True, "warning", (
        "<feedback provider='Deadline'>\nThe work so far took 5 minutes. You have 3 minutes remaining.\n\n"
        "-> Prioritize completing critical remaining work.\n</feedback>"))
    assert render(at(60)) == (True, "info", (
        "<feedback provider='Deadline'>\nThe work so far took 1 minute. You have 7 minutes remaining.\n"
        "</feedback>"))
    should, severity, text = render(at(10 * 60))
    assert (should, severity) == (True, "warning")
    assert "The work so far took 10 minutes. The deadline has passed (2 minutes ago)." in text
    assert render(at(0), None)[0] is False  # no deadline: nothing to say


# -- triggers -------------------------------------------------------------------------------------------------

def test_every_n_calls_counts_from_the_providers_last_feedback() -> None:
    world = FakeWorld()
    runner = FeedbackRunner([static("three", "Three", every_n_calls=3)])
    fired = []
    for i in range(1, 10):
        runner.record_call(call(args=f'{{"i": {i}}}'))
        if runner.collect(now=at(i), world=world):
            fired.append(i)
    assert fired == [3, 6, 9]
    assert runner.collect(now=at(20), world=world) == []  # no new calls


def test_every_n_seconds_counts_from_the_start_then_from_the_last_feedback() -> None:
    world = FakeWorld()
    runner = FeedbackRunner([static("tick", "Tick", every_n_seconds=30)])
    runner.record_call(call(), now=at(0))
    assert runner.collect(now=at(29), world=world) == []
    assert names(runner.collect(now=at(30), world=world)) == ["Tick"]
    assert runner.collect(now=at(59), world=world) == []
    assert names(runner.collect(now=at(60.5), world=world)) == ["Tick"]
    assert runner.snapshot().provider_last["Tick"].timestamp == at(60.5)


def test_the_seconds_cadence_starts_at_the_first_collect_without_a_recorded_start() -> None:
    runner = FeedbackRunner([static("tick", "Tick", every_n_seconds=10)])
    assert runner.collect(now=at(100), world=FakeWorld()) == []
    assert runner.state.started_at == at(100)
    assert names(runner.collect(now=at(110), world=FakeWorld())) == ["Tick"]


def test_a_file_trigger_fires_once_even_if_the_file_is_recreated_or_state_restored() -> None:
    world = FakeWorld()
    config = static("CHANGELOG.md exists: follow its format.", "Static",
                    on_file_created=FileCreatedTrigger("CHANGELOG.md"))
    runner = FeedbackRunner([config])
    assert runner.collect(now=at(1), world=world) == []
    world.add("CHANGELOG.md")
    delivered = runner.collect(now=at(2), world=world)
    assert [fb.render() for _, fb in delivered] == [
        "<feedback provider='Static'>\nCHANGELOG.md exists: follow its format.\n</feedback>"]
    assert runner.collect(now=at(3), world=world) == []
    world.remove("CHANGELOG.md")
    runner.collect(now=at(4), world=world)
    world.add("CHANGELOG.md")
    assert runner.collect(now=at(5), world=world) == []
    restored = FeedbackRunner([config])
    restored.restore(FeedbackState.model_validate_json(runner.snapshot().model_dump_json()))
    assert restored.collect(now=at(6), world=world) == []


def test_all_triggered_providers_run_and_render_joined_by_a_blank_line() -> None:
    world = FakeWorld("AGENTS.md")
    runner = FeedbackRunner([
        static("AGENTS.md detected. Follow the conventions defined within.", "Agents",
               on_file_created=FileCreatedTrigger("AGENTS.md")),
        static("never", "Later", every_n_calls=5),
        FeedbackProviderConfig(DeadlineFeedback(), FeedbackTrigger(every_n_seconds=30)),
        static("Keep notes.", "Notes", every_n_calls=1),
    ])
    runner.record_call(call(), now=at(0))
    delivered = runner.collect(now=at(5 * 60), world=world, deadline=Deadline(at(8 * 60), T0))
    assert names(delivered) == ["Agents", "Deadline", "Notes"]
    assert render_feedback([fb for _, fb in delivered]) == (
        "<feedback provider='Agents'>\n"
        "AGENTS.md detected. Follow the conventions defined within.\n"
        "</feedback>\n"
        "\n"
        "<feedback provider='Deadline'>\n"
        "The work so far took 5 minutes. You have 3 minutes remaining.\n"
        "</feedback>\n"
        "\n"
        "<feedback provider='Notes'>\n"
        "Keep notes.\n"
        "</feedback>")
    assert all(fb.call_index == 1 and fb.timestamp == at(300) for _, fb in delivered)
    assert [r.provider_name for r in runner.state.history] == ["Agents", "Deadline", "Notes"]


class Broken:
    kind = "broken"

    def __init__(self, where: str) -> None:
        self.name = f"Broken-{where}"
        self.where = where

    def should_run(self, context: FeedbackContext) -> bool:
        if self.where == "should_run":
            raise RuntimeError("should_run broke")
        return True

    def provide(self, context: FeedbackContext) -> Feedback:
        if self.where == "provide":
            raise RuntimeError("provide broke")
        return "not feedback"  # type: ignore[return-value]


def test_a_broken_provider_is_skipped_and_reported() -> None:
    runner = FeedbackRunner([
        FeedbackProviderConfig(Broken("should_run"), FeedbackTrigger(every_n_calls=1)),
        FeedbackProviderConfig(Broken("provide"), FeedbackTrigger(every_n_calls=1)),
        FeedbackProviderConfig(Broken("type"), FeedbackTrigger(every_n_calls=1)),
        static("still here", "Fine", every_n_calls=1),
    ])
    runner.record_call(call())
    assert names(runner.collect(now=at(1), world=FakeWorld())) == ["Fine"]
    assert runner.errors == [
        "Broken-should_run: RuntimeError('should_run broke')",
        "Broken-provide: RuntimeError('provide broke')",
        "Broken-type: TypeError('provide() returned str, not a Feedback')",
    ]
    # A failure does not consume the trigger: the provider is tried again (and reported again) next time.
    runner.collect(now=at(2), world=FakeWorld())
    assert len(runner.errors) == 3
    assert runner.snapshot().provider_last.keys() == {"Fine"}


def test_a_world_error_in_a_file_trigger_is_reported_not_raised() -> None:
    class BadWorld(FakeWorld):
        def file_exists(self, path: str) -> bool:
            raise OSError("disk gone")

    runner = FeedbackRunner([static("x", "F", on_file_created=FileCreatedTrigger("x.md"))])
    assert runner.collect(now=at(1), world=BadWorld()) == []
    assert runner.errors == ["F: OSError('disk gone')"]


def test_collect_asks_the_world_only_while_a_file_trigger_is_pending() -> None:
    world = FakeWorld()
    runner = FeedbackRunner([
        static("a", "A", every_n_calls=3),
        static("b", "B", every_n_seconds=60),
        FeedbackProviderConfig(DeadlineFeedback(), FeedbackTrigger(every_n_seconds=30)),
        FeedbackProviderConfig(StuckDetector(), FeedbackTrigger(every_n_calls=1)),
        static("c", "C", every_n_calls=10),
    ])
    for i in range(50):
        runner.record_call(call(args=f'{{"i": {i}}}'))
        runner.collect(now=at(i), world=world)
    assert (world.stats, world.normalizations) == (0, 0)
    file_runner = FeedbackRunner([static("d", "D", on_file_created=FileCreatedTrigger("d.md"))])
    file_runner.collect(now=at(0), world=world)
    assert world.stats == 1
    world.add("d.md")
    assert names(file_runner.collect(now=at(1), world=world)) == ["D"]
    for i in range(10):
        file_runner.collect(now=at(2 + i), world=world)
    assert world.stats == 2  # fired: never asked again


# -- context and state ----------------------------------------------------------------------------------------

def test_context_queries() -> None:
    runner = FeedbackRunner([static("a", "A", every_n_calls=2), static("b", "B", every_n_calls=3)])
    seen: list[tuple[int, int, int, int]] = []

    class Probe:
        kind = "probe"
        name = "Probe"

        def should_run(self, context: FeedbackContext) -> bool:
            seen.append((context.tool_call_count, context.tool_calls_since_last_feedback(),
                         context.tool_calls_since_last_feedback_for_provider("A"),
                         context.tool_calls_since_last_feedback_for_provider("B")))
            assert context.recent_tool_calls(2) == tuple(runner.state.recent_calls[-2:])
            assert context.recent_tool_calls(0) == ()
            last = context.last_feedback
            assert (last.provider_name if last else None) == (runner.state.history[-1].provider_name
                                                               if runner.state.history else None)
            return False

        def provide(self, context: FeedbackContext) -> Feedback:
            raise AssertionError

    runner = FeedbackRunner([*runner.configs, FeedbackProviderConfig(Probe(), FeedbackTrigger(every_n_calls=1))])
    for i in range(4):
        runner.record_call(call(args=str(i)))
        runner.collect(now=at(i), world=FakeWorld())
    # the queries see the state before this collect's feedback is stored
    assert seen == [(1, 1, 1, 1), (2, 2, 2, 2), (3, 1, 1, 3), (4, 1, 2, 1)]
    ctx = FeedbackContext(runner.state, now=at(9), world=FakeWorld())
    assert ctx.last_feedback_for_provider("A") is not None
    assert ctx.last_feedback_for_provider("A").call_index == 4  # type: ignore[union-attr]
    assert ctx.last_feedback_for_provider("B").call_index == 3  # type: ignore[union-attr]
    assert ctx.last_feedback_for_provider("nobody") is None


def test_state_is_bounded_and_round_trips_through_json() -> None:
    runner = FeedbackRunner([static("a", "A", every_n_calls=1), static("b", "B", every_n_calls=1,
                                                                       on_file_created=FileCreatedTrigger("b.md"))])
    world = FakeWorld("b.md")
    for i in range(30):
        runner.record_call(call(args=str(i), ok=i % 2 == 0, result=f"r{i}"), now=at(0))
        runner.collect(now=at(i), world=world)
    state = runner.snapshot()
    assert state.tool_call_count == 30
    assert len(state.recent_calls) == RECENT_CALLS
    assert state.recent_calls[-1].arguments == "29"
    assert len(state.history) == FEEDBACK_HISTORY
    assert state.fired_file_triggers == {"B"}
    text = state.model_dump_json()
    assert json.loads(text)["fired_file_triggers"] == ["B"]
    assert FeedbackState.model_validate_json(text) == state
    with pytest.raises(ValueError):
        FeedbackState.model_validate({"recent_calls": [call().model_dump()] * (RECENT_CALLS + 1)})


def test_restore_drops_providers_no_longer_configured() -> None:
    old = FeedbackRunner([static("a", "A", every_n_calls=1), static("g", "Gone", every_n_calls=1,
                                                                     on_file_created=FileCreatedTrigger("g"))])
    old.record_call(call())
    old.collect(now=at(1), world=FakeWorld("g"))
    new = FeedbackRunner([static("a", "A", every_n_calls=2)])
    new.restore(old.snapshot())
    assert set(new.state.provider_last) == {"A"}
    assert new.state.fired_file_triggers == set()
    assert new.state.tool_call_count == 1
    assert len(new.state.history) == 2  # history is kept: it is what happened


def test_describe_says_when_each_provider_runs_next() -> None:
    runner = FeedbackRunner([
        static("a", "Calls", every_n_calls=3),
        FeedbackProviderConfig(DeadlineFeedback(), FeedbackTrigger(every_n_seconds=30)),
        static("c", "File", on_file_created=FileCreatedTrigger("CHANGELOG.md")),
        static("d", "Fired", on_file_created=FileCreatedTrigger("x.md")),
    ])
    assert runner.describe(at(0))[1][3] == "30s after the run starts"
    runner.record_call(call(), now=at(0))
    runner.collect(now=at(5), world=FakeWorld("x.md"))
    assert runner.describe(at(10)) == [
        ("Calls", "static", "every 3 calls", "at call 3"),
        ("Deadline", "deadline", "every 30s", "at 12:00:30"),
        ("File", "static", "once when CHANGELOG.md appears", "when CHANGELOG.md appears"),
        ("Fired", "static", "once when x.md appears", "fired (once per session)"),
    ]
    assert runner.describe(at(31))[1][3] == "at the next check"


def test_names_are_unique_and_triggers_need_a_condition() -> None:
    with pytest.raises(ValueError, match="duplicated: A"):
        FeedbackRunner([static("a", "A", every_n_calls=1), static("b", "A", every_n_calls=1)])
    with pytest.raises(ValueError, match="needs every_n_calls"):
        FeedbackTrigger()
    with pytest.raises(ValueError):
        FeedbackTrigger(every_n_calls=0)
    with pytest.raises(ValueError):
        FeedbackTrigger(every_n_seconds=-1)


def test_tool_call_summaries_are_small_and_canonical() -> None:
    a = ToolCallSummary.of("write_file", '{"path": "a", "content": "x"}', True, "ok")
    b = ToolCallSummary.of("write_file", {"content": "x", "path": "a"}, True, "ok")
    assert a.same_outcome(b) and a.arguments == b.arguments == '{"content":"x","path":"a"}'
    assert a.error == ""
    big = ToolCallSummary.of("write_file", json.dumps({"content": "y" * 10**6}), False, "E" * 10**4 + "\n")
    assert len(big.arguments) <= 200 and len(big.error) <= 200 and len(big.model_dump_json()) < 1000
    assert ToolCallSummary.of("x", "{not json", True, "").arguments == "{not json"
    assert not a.same_outcome(ToolCallSummary.of("write_file", '{"path": "a", "content": "x"}', True, "ok!"))


def test_a_calls_canonical_arguments_are_json_dumps_own_text_by_the_encoder_made_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # After every tool call its arguments are made canonical JSON (the stuck detector compares calls by it): parsed
    # arguments go to the C encoder made once, not through JSONEncoder.encode's Python layers, with the same text.
    from console.engine.guardrails import feedback

    cases = ['{"b": 1, "a": [1, 2.5, null, true, false]}', '{"path": "é \\"q\\" \\\\ \\n \\u2028 \\ud800 ✓"}', '"s"',
             "3", "1e400", "-0.0", "NaN", '[{"z": {"y": 1, "x": -Infinity}}]', "{}", "[]",
             '{"n": 12345678901234567890}']
    wanted = [json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
              for text in cases]
    encoded: list[object] = []
    real = json.JSONEncoder.encode
    monkeypatch.setattr(json.JSONEncoder, "encode", lambda self, o: encoded.append(o) or real(self, o))
    for text, want in zip(cases, wanted, strict=True):
        assert feedback._canonical_arguments(text) == want, text
    assert encoded == []
    # What does not parse stays itself; a mapping given as one (not parsed: it may hold anything) takes the encoder.
    assert feedback._canonical_arguments("{not json") == "{not json"
    assert feedback._canonical_arguments({"b": {1, 2}, "a": 1}) == '{"a":1,"b":"{1, 2}"}' and len(encoded) == 1
