"""The journal: steps replayed to the last commit, the rest cut, damage moved aside and reported."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from console.engine import journal as jr
from console.engine.context.pressure import PressureState
from console.engine.enforcement import Ask
from console.engine.journal import Checkpoint, Conversation, Effect, Journal, load_checkpoint
from console.engine.memory import MemoryState
from console.engine.messages import Message, ToolCall
from console.engine.state import StateSnapshot
from console.engine.todos import TodoItem, TodoState

NOW = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)


def commit(j: Journal, conv: Conversation, turn: int, *, state: StateSnapshot | None = None,
           events: list[str] | None = None, effects: list[Effect] | None = None, **cp: object) -> None:
    j.commit(Checkpoint(session=1, turn=turn, **cp), conv, state=state, events=events or [], effects=effects or [],
             full_state=lambda: state or StateSnapshot(), system="SYSTEM")


def test_replays_appends_replacements_and_resets(make_job) -> None:
    paths = make_job()
    j = Journal(paths)
    conv = Conversation([Message.user("hi", kind="kickoff")])
    call = ToolCall(id="c1", name="read_file", arguments='{"path": "a"}')
    conv.append(Message.assistant("", [call]))
    conv.append(Message.tool(call, "big content"))
    commit(j, conv, 1)
    conv[2] = Message.tool(call, "[masked]", masked=True)
    conv.extend([Message.user("notice")])
    commit(j, conv, 2)
    loaded = Journal(paths).load(NOW)
    assert (loaded.cp.session, loaded.cp.turn, loaded.system) == (1, 2, "SYSTEM")
    assert loaded.conversation == list(conv) and loaded.problem is None and loaded.cut == 0
    conv[:] = [Message.user("summary", kind="summary")]
    commit(j, conv, 3, job_done=True)
    assert Journal(paths).load(NOW).conversation == [Message.user("summary", kind="summary")]
    assert load_checkpoint(paths).job_done


def test_a_step_that_never_committed_is_cut_and_its_intent_kept(make_job) -> None:
    paths = make_job()
    j = Journal(paths)
    conv = Conversation([Message.user("a")])
    commit(j, conv, 1)
    j.intent("call_1", {"at": 42})
    # a kill in the middle of a step: ops written, no commit, the last line torn
    with j.path.open("a") as fh:
        fh.write('{"op":"append","m":{"role":"user","content":"half a step"}}\n{"op":"app')
    j.close()
    loaded = Journal(paths).load(NOW)
    assert loaded.cp.turn == 1 and [m.content for m in loaded.conversation] == ["a"]
    assert loaded.intents == {"call_1": {"at": 42}} and loaded.cut == 3 and loaded.problem is None
    j2 = Journal(paths)
    j2.load(NOW)
    conv2 = Conversation(loaded.conversation, journaled=True)
    conv2.append(Message.user("b"))
    commit(j2, conv2, 2)
    again = Journal(paths).load(NOW)
    assert again.cp.turn == 2 and [m.content for m in again.conversation] == ["a", "b"] and again.intents == {}


def test_state_events_and_effects_ride_on_the_commit(make_job) -> None:
    paths = make_job()
    j = Journal(paths)
    conv = Conversation([Message.user("a")])
    todos = TodoState(kind="phase", phase_name="P", items=[TodoItem(text="t")], generation=1)
    commit(j, conv, 1, state=StateSnapshot(todos=todos, memory=MemoryState()),
           events=['{"seq":5,"type":"x"}', '{"seq":6,"type":"y"}'],
           effects=[Effect(path="workspace_summary.md", content="# Summary\n")])
    commit(j, conv, 2, state=StateSnapshot(memory=MemoryState(next_id=7)), events=['{"seq":7,"type":"z"}'])
    loaded = Journal(paths).load(NOW, logged_seq=5)
    assert loaded.state.todos == todos and loaded.state.memory.next_id == 7
    assert [e["seq"] for e in loaded.unlogged] == [6, 7]  # what the log never got (a kill between the two)
    assert loaded.effects == []  # only the last commit's effects may be unapplied
    assert Journal(paths).load(NOW, logged_seq=0).unlogged[0] == {"seq": 5, "type": "x"}


def test_large_payloads_are_stored_once_as_blobs(make_job) -> None:
    paths = make_job()
    j = Journal(paths)
    big = "x" * (jr.INLINE_LIMIT + 10)
    call = ToolCall(id="c1", name="write_file", arguments=json.dumps({"path": "a", "content": big}))
    conv = Conversation([Message.assistant("", [call]), Message.tool(call, big)])
    commit(j, conv, 1)
    assert max(len(line) for line in j.path.read_bytes().splitlines()) < 4096
    assert len(list((paths.state / "blobs").iterdir())) == 2
    assert Journal(paths).load(NOW).conversation == list(conv)
    # a blob that went missing is damage, reported, never a crash
    for b in (paths.state / "blobs").iterdir():
        b.unlink()
    loaded = Journal(paths).load(NOW)
    assert loaded.cp is None and "is missing" in loaded.problem


def test_a_garbage_first_line_is_moved_aside_not_truncated(make_job) -> None:
    paths = make_job()
    j = Journal(paths)
    commit(j, Conversation([Message.user("a")]), 1)
    j.close()
    original = j.path.read_bytes()
    j.path.write_bytes(b"this is not json\n" + original)
    loaded = Journal(paths).load(NOW)
    assert loaded.cp is None and loaded.problem.startswith("line 1 is not a journal record")
    assert loaded.moved_to.startswith(".console/corrupt/checkpoint.jsonl.")
    assert not j.path.exists()
    (kept,) = (paths.state / "corrupt").iterdir()
    assert kept.read_bytes() == b"this is not json\n" + original  # every byte kept for the operator


def test_valid_json_of_the_wrong_shape_is_damage(make_job) -> None:
    for bad in ('{"op": "commit"}', '{"op": "replace", "i": 5, "m": {"role": "user"}}', "[1, 2, 3]", "null",
                '{"op": "append", "m": {"role": "wizard"}}', "[" * 5000 + "]" * 5000, '{"op": "reset", "ms": 7}'):
        paths = make_job()
        j = Journal(paths)
        commit(j, Conversation([Message.user("a")]), 1)
        j.close()
        with j.path.open("a") as fh:
            fh.write(bad + "\n")
        loaded = Journal(paths).load(NOW)
        assert loaded.problem is not None and "line 4 " in loaded.problem, bad
        assert "tagged-union" not in loaded.problem
        import shutil

        shutil.rmtree(paths.root)


def test_rewritten_when_it_outgrows_the_conversation(make_job, monkeypatch) -> None:
    monkeypatch.setattr(jr, "REWRITE_MIN", 4096)
    paths = make_job()
    j = Journal(paths)
    conv = Conversation([Message.user("x")])
    for i in range(200):
        conv[:] = [Message.user(f"summary {i}")]
        commit(j, conv, i)
    assert j.path.stat().st_size < 4 * 4096
    assert Journal(paths).load(NOW).conversation == [Message.user("summary 199")]


def test_no_journal_means_a_new_job(make_job) -> None:
    loaded = Journal(make_job()).load(NOW)
    assert loaded.cp is None and loaded.problem is None and loaded.conversation == []


def test_a_rewrite_reuses_what_the_ops_wrote_and_reads_back_the_same(make_job, monkeypatch) -> None:
    """A rewrite joins each message's bytes as its op wrote them (appends, a replacement, a reset): the file is
    what serialising the conversation afresh gives, and reads back as the conversation."""
    monkeypatch.setattr(jr, "REWRITE_MIN", 0)
    monkeypatch.setattr(jr, "REWRITE_FACTOR", 1)  # every commit past the first rewrites
    paths = make_job()
    j = Journal(paths)
    call = ToolCall(id="c1", name="write_file", arguments=json.dumps({"path": "a", "content": "x" * 70_000}))
    conv = Conversation([Message.user("kick \ud83d half an emoji", kind="kickoff")])
    commit(j, conv, 1)
    conv.append(Message.assistant("writing", [call]))
    conv.append(Message.tool(call, "y" * 70_000))  # past INLINE_LIMIT: a blob
    commit(j, conv, 2)
    conv[2] = Message.tool(call, "[masked]", masked=True)
    commit(j, conv, 3)  # appended: the journal had not grown since the last rewrite
    commit(j, conv, 4)  # rewritten
    assert j.rewrites == 3
    fresh = Journal(paths)
    fresh._reset_image(list(conv))
    assert j._image_json == fresh._image_json
    assert Journal(paths).load(NOW).conversation == [m.model_copy(update={"content": m.content.replace(
        "\ud83d", "?")}) for m in conv]
    # The blob of the masked result is no longer referred to: the rewrite collected it; the call's stays.
    assert len(list(j.blobs.folder.iterdir())) == 1
    conv[:] = [Message.user("summary", kind="summary")]
    conv.append(Message.user("after"))
    commit(j, conv, 5)
    assert [m.content for m in Journal(paths).load(NOW).conversation] == ["summary", "after"]


def test_a_rewrite_of_a_conversation_the_ops_did_not_bring_serialises_it_afresh(make_job, monkeypatch) -> None:
    paths = make_job()
    j = Journal(paths)
    commit(j, Conversation([Message.user("a")]), 1)
    other = Conversation([Message.user("b"), Message.user("c")], journaled=True)  # e.g. read back at a resume
    j._rewrite(Checkpoint(session=1, turn=2), other, StateSnapshot(), [], [], "SYSTEM", False)
    assert [m.content for m in Journal(paths).load(NOW).conversation] == ["b", "c"]


def test_a_step_records_the_guardrail_parts_it_changed_and_a_replay_rebuilds_the_whole(make_job) -> None:
    from console.engine import events as ev
    from console.engine.clock import FakeClock
    from console.engine.runtime import Runtime

    paths = make_job()
    clock = FakeClock()
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock), journal=Journal(paths))
    rt.guards.start()
    conv = Conversation([Message.user("a")])
    recorded: list[str] = []
    real = rt.journal._write

    def write(text: str | bytes, what: str, durable: bool = False) -> None:
        recorded.append(text.decode() if isinstance(text, bytes) else text)
        real(text, what, durable)

    rt.journal._write = write  # type: ignore[method-assign]
    rt.commit(Checkpoint(session=1, turn=0), conv)  # the first commit: the journal is written whole
    for turn in range(1, 4):
        rt.guards.count_tokens(1000, None)  # the budget moves: only its part is recorded
        rt.commit(Checkpoint(session=1, turn=turn), conv)
        commit_line = json.loads(recorded[-1].splitlines()[-1])
        assert set(commit_line["state"]["guardrails_parts"]) == {"budget"}
        assert commit_line["state"]["guardrails_parts"]["budget"]["tokens_used"] == 1000 * turn
    rt.guards.record_ask(jr_ask())  # the escalation moves: only its part
    rt.commit(Checkpoint(session=1, turn=4), conv)
    assert set(json.loads(recorded[-1].splitlines()[-1])["state"]["guardrails_parts"]) == {"escalation"}
    loaded = Journal(paths).load(NOW)
    assert loaded.state.guardrails == rt.guardrails.snapshot()
    assert loaded.state.guardrails.budget.tokens_used == 3000 and loaded.state.guardrails.escalation.pending


def test_a_step_that_failed_to_commit_leaves_its_guardrail_parts_to_the_next(make_job, monkeypatch) -> None:
    from console.engine import events as ev
    from console.engine.clock import FakeClock
    from console.engine.runtime import Runtime

    paths = make_job()
    clock = FakeClock()
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock), journal=Journal(paths))
    conv = Conversation([Message.user("a")])
    rt.commit(Checkpoint(session=1, turn=0), conv)
    rt.guards.count_tokens(500, None)
    real = rt.journal._write

    def full(*a: object, **k: object) -> None:
        raise OSError(28, "No space left on device")

    rt.journal._write = full  # type: ignore[method-assign]
    try:
        rt.commit(Checkpoint(session=1, turn=1), conv)
    except OSError:
        rt.rollback()
    rt.journal._write = real  # type: ignore[method-assign]
    rt.changed("memory")  # a later step that does not itself change the guardrails
    rt.commit(Checkpoint(session=1, turn=2), conv)
    # The budget of the failed step was never recorded: a later step that records the guardrails carries it.
    rt.guards.count_tokens(1, None)
    rt.commit(Checkpoint(session=1, turn=3), conv)
    assert Journal(paths).load(NOW).state.guardrails.budget.tokens_used == 501


def jr_ask() -> Ask:
    return Ask("stuck", "the agent looks stuck", ["evidence"])


def test_a_turns_moves_of_the_checkpoint_are_what_assigning_each_field_does() -> None:
    # The moves write the fields as pydantic's assignment does when it validates nothing: a model config that made
    # assignment validate (or the checkpoint frozen) must change them too.
    assert not Checkpoint.model_config.get("validate_assignment") and not Checkpoint.model_config.get("frozen")
    usage = jr.UsageRecord(input_tokens=120, output_tokens=7, cached_input_tokens=100)
    notices = [Message.user("a notice", kind="feedback")]
    moved, assigned = Checkpoint(session=2, turn=5, evaluated=True), Checkpoint(session=2, turn=5, evaluated=True)
    context = PressureState(used=900, turns=3)
    stamped_at = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
    steps = [
        (lambda cp: cp.reply_recorded(usage),
         {"stage": "tools", "next_call": 0, "finished": False, "notices": [], "compaction": None, "usage": usage}),
        (lambda cp: cp.call_recorded(1, notices, "phase done"),
         {"next_call": 1, "notices": notices, "compaction": "phase done"}),
        (lambda cp: cp.at_boundary(),
         {"stage": "boundary", "next_call": 0, "notices": [], "compaction": None, "finished": False, "usage": None,
          "evaluated": False}),
        # Every commit's stamp (console.engine.session_state.SessionState.commit).
        (lambda cp: cp.stamp(context, stamped_at), {"context": context, "updated_at": stamped_at}),
    ]
    for move, fields in steps:
        move(moved)
        for name, value in fields.items():
            setattr(assigned, name, value)
        assert moved.model_dump_json(exclude_defaults=True) == assigned.model_dump_json(exclude_defaults=True)
        assert moved.model_fields_set == assigned.model_fields_set
        assert moved == assigned


def test_a_reset_keeps_the_bytes_of_the_messages_it_carries_and_writes_what_serialising_afresh_gives(
        make_job, monkeypatch) -> None:
    paths = make_job()
    j = Journal(paths)
    calls = [ToolCall(id=f"c{i}", name="read_file", arguments=json.dumps({"path": f"f{i}"})) for i in range(4)]
    conv = Conversation([Message.user("kickoff", kind="kickoff")])
    for c in calls:
        conv.append(Message.assistant("reading \ud83d", [c]))
        conv.append(Message.tool(c, "z" * (jr.INLINE_LIMIT + 5) if c.id == "c3" else f"text of {c.id}"))
    commit(j, conv, 1)
    dumped: list[Message] = []
    real = j._message_json
    monkeypatch.setattr(j, "_message_json", lambda m: dumped.append(m) or real(m))
    carried = list(conv[-4:])
    conv[:] = [Message.user("SUMMARY", kind="summary"), *carried]  # a compaction: the last turns carried as they are
    conv.append(Message.user("a mask notice"))
    commit(j, conv, 2)
    assert [m.content for m in dumped] == ["SUMMARY", "a mask notice"]  # the carried ones kept their bytes
    fresh = Journal(paths)
    fresh._reset_image(list(conv))
    assert j._image_json == fresh._image_json and j._image_refs == fresh._image_refs
    assert Journal(paths).load(NOW).conversation == [m.model_copy(update={"content": m.content.replace(
        "\ud83d", "?")}) for m in conv]
    conv[1] = Message.user("out of step")  # replaced while the image is still in step: kept in step
    commit(j, conv, 3)
    assert j._image[1] is conv[1] and len(j._image) == len(j._image_json) == len(j._image_refs)
