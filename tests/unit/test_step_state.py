"""The state a step records: Runtime._step_state's JSON (the changed guardrails parts spliced from the dumps it
compared) is the snapshot's own, with the parts' null fields kept; guardrails.json is made of the same dumps and is
the whole state, nulls and all."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig, GuardrailState, ToolCallSummary, build_guardrails
from console.engine.job import JobPaths
from console.engine.journal import Checkpoint, Conversation, Journal
from console.engine.messages import Message
from console.engine.runtime import PROJECTION_INTERVAL, Runtime
from console.engine.state import GUARDRAIL_PARTS, GuardrailParts, StateSnapshot, constructed, load_projections

HEAVY = GuardrailsConfig.model_validate({
    "deadline": "30d", "budget_tokens": 10**9, "max_completion_blocks": 5,
    "policies": [{"type": "read_before_write"},
                 {"type": "sequential", "dependencies": {"publish": ["test", "build"]}}],
    "feedback": [{"type": "static", "name": "Every2", "feedback": "Keep going.", "every_n_calls": 2},
                 {"type": "static", "name": "Changelog", "feedback": "Its format.", "on_file_created": "CHANGELOG.md"},
                 {"type": "stuck"}],
})


def runtime(tmp_path: Path, table: GuardrailsConfig | None) -> Runtime:
    paths = JobPaths(tmp_path / "job")
    paths.root.mkdir(parents=True)
    clock = FakeClock(datetime(2026, 11, 26, 9, 0, tzinfo=UTC))
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock), journal=Journal(paths),
                 guardrails=build_guardrails(table or GuardrailsConfig()))
    rt.guards.start()
    return rt


def journal_form(snap: StateSnapshot) -> str:
    """The JSON a step's state is recorded as: the snapshot without its unchanged (None) components, the guardrails'
    changed parts whole (their null fields kept, as guardrails.json has them)."""
    data = snap.model_dump(mode="json", exclude_none=True)
    if snap.guardrails_parts is not None:
        data["guardrails_parts"] = {name: value.model_dump(mode="json") if hasattr(value, "model_dump") else value
                                    for name, value in snap.guardrails_parts.changed().items()}
        if "policies" in data["guardrails_parts"]:
            data["guardrails_parts"]["policies"] = {k: v.model_dump(mode="json")
                                                    for k, v in snap.guardrails_parts.changed()["policies"].items()}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def check(rt: Runtime, dirty: set[str]) -> dict[str, object]:
    snap, text = rt._step_state(dirty)
    assert json.loads(text) == json.loads(journal_form(snap))
    # Read back, the nulls kept are what an older record's missing fields are: the same state.
    assert StateSnapshot.model_validate_json(text) == StateSnapshot.model_validate_json(
        snap.model_dump_json(exclude_none=True))
    rt._guards_recorded.update(rt._guards_recording)  # as a commit does
    parsed: dict[str, object] = json.loads(text)
    return parsed


def test_the_spliced_state_is_the_snapshots_json_step_after_step(tmp_path: Path) -> None:
    for table, where in ((None, "default"), (HEAVY, "heavy")):
        rt = runtime(tmp_path / where, table)
        g = rt.guardrails
        assert "guardrails_parts" in check(rt, {"guardrails"})  # the first step records every part
        assert check(rt, {"guardrails"}) == {}  # nothing changed: nothing recorded
        for turn in range(1, 25):
            g.feedback.record_call(ToolCallSummary.of("noop", json.dumps({"n": turn}), turn % 5 != 0,
                                                      "ok ✓ \"quoted\" \\ back" if turn % 3 else "", turn))
            g.add_tokens(1000 * turn)
            if turn % 4 == 0:
                g.completion_blocks += 1
            if turn % 6 == 0:
                g.escalation.nudged(f"idle: no todo completed in the last {turn} turns")
            if turn % 7 == 0:
                g.gate.on_result("read_file", {"path": f"notes/{turn}.md"}, True, rt.guards.world)
            dirty = {"guardrails"}
            if turn % 5 == 0:
                rt.todos.install([f"Task {i}" for i in range(4)], kind="phase", phase_name=f"Part {turn}",
                                 phase_number=turn, total_phases=30)
                rt.memory.record(f"Completed step {turn}", rt.clock.now() + timedelta(minutes=turn))
                dirty |= {"todos", "memory"}
            parts = check(rt, dirty).get("guardrails_parts")
            assert isinstance(parts, dict) and {"feedback", "budget"} <= set(parts)
        assert check(rt, {"todos"}).keys() == {"todos"}  # no guardrails among the changes: the snapshot's own dump


def test_the_guardrails_parts_are_the_states_fields_in_order(tmp_path: Path) -> None:
    rt = runtime(tmp_path, HEAVY)
    rt.guardrails.add_tokens(5)
    assert tuple(GuardrailState.model_fields) == GUARDRAIL_PARTS == tuple(GuardrailParts.model_fields)
    whole = rt.guardrails.snapshot()
    assert rt.guardrails.parts() == tuple(getattr(whole, name) for name in GUARDRAIL_PARTS)


def test_guardrails_json_is_the_whole_state_made_of_the_parts_the_journal_recorded(tmp_path: Path) -> None:
    rt = runtime(tmp_path, HEAVY)
    g, conv = rt.guardrails, Conversation([Message.user("go")])
    path = rt.paths.state / "guardrails.json"
    for turn in range(1, 8):
        g.feedback.record_call(ToolCallSummary.of("noop", json.dumps({"n": turn}), turn % 3 != 0, "ok", turn))
        g.add_tokens(100 * turn)
        if turn % 3 == 0:
            g.escalation.nudged(f"idle: no todo completed in the last {turn} turns")
        rt.changed("guardrails")
        assert rt._recorded_guardrails() is None  # a change waits for its commit: the file is made from the state
        rt.clock.advance(PROJECTION_INTERVAL)  # type: ignore[attr-defined]
        rt.commit(Checkpoint(session=1, turn=turn), conv)  # a turn's end: written while the model is asked
        made = rt._recorded_guardrails()
        assert made is not None  # from the parts the step recorded, not a second dump of the state
        rt.projections.release()
        rt.projections.flush()
        assert path.read_bytes() == made
        # The whole state, its null fields kept (a script reads escalation.pending, pending or not).
        data = json.loads(made)
        assert data == g.snapshot().model_dump(mode="json")
        assert "pending" in data["escalation"] and data["escalation"]["pending"] is None
        assert GuardrailState.model_validate_json(made) == g.snapshot()
    # Written at a durable commit or a run's end from the state itself: the same bytes.
    rt.refresh_projections()
    assert path.read_bytes() == made
    rt.project("guardrails")
    assert path.read_bytes() == made
    loaded, problems = load_projections(rt.paths, rt.clock.now())
    assert problems == [] and loaded.guardrails == g.snapshot()


def test_a_step_builds_its_snapshot_and_parts_as_model_construct_would(tmp_path: Path) -> None:
    rt = runtime(tmp_path, HEAVY)
    rt.guardrails.add_tokens(7)
    for cls, fields_set, values in (
            (StateSnapshot, {"todos", "memory"}, {**dict.fromkeys(StateSnapshot.model_fields), "todos": rt.todos.state,
                                                  "memory": rt.memory.state}),
            (GuardrailParts, {"budget"}, {**dict.fromkeys(GUARDRAIL_PARTS), "budget": rt.guardrails.budget_state})):
        # What constructed() leaves out of model_construct: aliases, private attributes, a post-init.
        assert not any(f.alias or f.validation_alias for f in cls.model_fields.values())
        assert not cls.__private_attributes__ and not cls.__pydantic_post_init__
        fast, slow = constructed(cls, set(fields_set), dict(values)), cls.model_construct(set(fields_set), **values)
        assert fast.__dict__ == slow.__dict__ and list(fast.__dict__) == list(slow.__dict__)
        assert fast.model_fields_set == slow.model_fields_set == fields_set
        assert fast.__pydantic_extra__ is slow.__pydantic_extra__ is None
        assert fast.__pydantic_private__ is slow.__pydantic_private__ is None
        assert fast == slow and fast.model_dump_json(exclude_none=True) == slow.model_dump_json(exclude_none=True)
    snap = rt.snapshot({"todos"})
    assert snap.model_fields_set == {"todos"} and snap.todos is rt.todos.state and snap.memory is None


def test_the_feedback_parts_dump_with_its_calls_kept_is_the_parts_own_byte_for_byte() -> None:
    """A step dumps the feedback's part at every turn; its recent calls' dumps are kept from one step to the next
    (state.FeedbackJson), and the bytes are PART_JSON's, call after call, through every field of the part."""
    from console.engine.guardrails.feedback import FeedbackRecord, FeedbackState
    from console.engine.state import PART_JSON, FeedbackJson

    part = PART_JSON["feedback"].serializer
    kept = FeedbackJson()
    dumped: list[str] = []
    real = kept._call
    kept._call = type("Counting", (), {"to_json": lambda self, c: dumped.append(c.arguments) or real.to_json(c)})()
    st = FeedbackState()
    assert kept(st) == part.to_json(st)  # no call yet, no start
    assert kept(None) == part.to_json(None) == b"null"
    start = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    for n in range(1, 30):
        st.started_at = st.started_at or start
        st.tool_call_count += 1
        st.recent_calls.append(ToolCallSummary.of("noop", json.dumps({"n": n, "é": "\"q\" \\ ✓"}), n % 4 != 0,
                                                  "ok" if n % 4 else "failed: \u2028 \x1b[31m", n))
        del st.recent_calls[:-12]
        if n % 5 == 0:
            st.provider_last["Every2"] = FeedbackRecord(provider_name="Every2", summary=f"Keep going ({n}).",
                                                        timestamp=start + timedelta(seconds=n), call_index=n,
                                                        observations=(("a", "b"),), suggestions=("s",))
            st.history.append(st.provider_last["Every2"])
        if n == 9:
            st.fired_file_triggers |= {"Changelog", "Agents"}
            st.fired_session = 2
        assert kept(st) == part.to_json(st), n
    assert len(dumped) == 29  # each call dumped once, in the step after it was made
