from __future__ import annotations

from console.engine.checkpoint import Checkpoint, Conversation, SessionStore, load_checkpoint
from console.engine.messages import Message, ToolCall


def test_journal_replays_appends_replacements_and_resets(tmp_path) -> None:
    store = SessionStore(tmp_path)
    conv = Conversation([Message.user("hi", kind="kickoff")])
    call = ToolCall(id="c1", name="read_file", arguments='{"path": "a"}')
    conv.append(Message.assistant("", [call]))
    conv.append(Message.tool(call, "big content"))
    store.save(Checkpoint(session=1, turn=1), conv)
    conv[2] = Message.tool(call, "[masked]", masked=True)
    conv.extend([Message.user("notice")])
    store.save(Checkpoint(session=1, turn=2), conv)
    cp, restored = SessionStore(tmp_path).load()
    assert (cp.session, cp.turn) == (1, 2)
    assert restored == list(conv)
    conv[:] = [Message.user("summary", kind="summary")]
    store.save(Checkpoint(session=1, turn=3, job_done=True), conv)
    assert SessionStore(tmp_path).load()[1] == [Message.user("summary", kind="summary")]
    assert load_checkpoint(tmp_path).job_done


def test_lines_after_the_last_commit_are_ignored_and_cut(tmp_path) -> None:
    store = SessionStore(tmp_path)
    conv = Conversation([Message.user("a")])
    store.save(Checkpoint(turn=1), conv)
    # a kill -9 in the middle of a turn: ops written, commit never reached, last line torn
    with store.path.open("a") as fh:
        fh.write('{"op":"append","m":{"role":"user","content":"half a turn"}}\n{"op":"app')
    store2 = SessionStore(tmp_path)
    cp, restored = store2.load()
    assert cp.turn == 1 and [m.content for m in restored] == ["a"]
    conv2 = Conversation(restored)
    conv2.pending.clear()
    conv2.append(Message.user("b"))
    store2.save(Checkpoint(turn=2), conv2)
    cp, restored = SessionStore(tmp_path).load()
    assert cp.turn == 2 and [m.content for m in restored] == ["a", "b"]


def test_journal_is_rewritten_when_it_outgrows_the_conversation(tmp_path) -> None:
    store = SessionStore(tmp_path)
    conv = Conversation([Message.user("x")])
    for i in range(100):
        conv[:] = [Message.user(f"summary {i}")]
        store.save(Checkpoint(turn=i), conv)
    assert len(store.path.read_text().splitlines()) < 80
    assert SessionStore(tmp_path).load()[1] == [Message.user("summary 99")]


def test_no_journal_means_a_new_job(tmp_path) -> None:
    assert SessionStore(tmp_path).load() is None
