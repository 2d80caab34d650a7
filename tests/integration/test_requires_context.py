"""Seed 003's toggles on whole runs: requires_context (working memory in the prompts; on by default here) and
file_index (the find_files tool; off by default), through the supervisor and through the command line, a resumed
run included, and what the headless log says about them."""

from __future__ import annotations

import json
import re

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.launch import read_launch
from console.engine.supervisor import Supervisor
from tests.conftest import Recording, run_settings
from tests.provenance_support import operator_seal


def run(paths, clock, **settings) -> tuple[Recording, list[ev.EventBase]]:
    provider = Recording(clock=clock)
    result = Supervisor(paths, run_settings(**settings), provider, clock=clock).run()
    assert result.ok, result.detail
    return provider, list(ev.read_events(paths.events))


def test_on_by_default_every_prompt_after_a_task_carries_working_memory(make_job, clock) -> None:
    paths = make_job("quickstart")
    provider, evs = run(paths, clock)
    with_memory = [r for r in provider.requests if "WORKING MEMORY" in r.protected]
    assert with_memory and "Recent Task History" in with_memory[-1].protected
    # From the first recorded task on, no prompt goes without it.
    first = next(i for i, r in enumerate(provider.requests) if "WORKING MEMORY" in r.protected)
    assert all("WORKING MEMORY" in r.protected for r in provider.requests[first:])
    assert any("working_memory" in e.layers for e in evs if isinstance(e, ev.TurnStarted))
    start = next(e for e in evs if isinstance(e, ev.SessionStarted))
    assert start.working_memory is True and start.file_index is False
    assert all(t.name != "find_files" for t in provider.requests[0].tools)


def test_off_the_prompts_carry_none_of_it_and_tasks_are_still_recorded(make_job, clock) -> None:
    paths = make_job("quickstart")
    provider, evs = run(paths, clock, requires_context=False)
    assert provider.requests
    assert not any("WORKING MEMORY" in r.protected or "Recent Task History" in r.protected
                   for r in provider.requests)
    # Nor in the summaries the conversation is compacted into (layer 4).
    assert not any("working memory" in m.content for r in provider.requests for m in r.messages
                   if m.meta.get("kind") == "summary")
    assert not any("working_memory" in e.layers for e in evs if isinstance(e, ev.TurnStarted))
    # Captured all the same (the idle-restart check and workspace_summary.md rely on the records).
    memory = json.loads((paths.state / "memory.json").read_text())
    assert len(memory["completed_tasks"]) >= 10
    assert sum(1 for e in evs if isinstance(e, ev.MemoryUpdated) and e.what == "task_recorded") == \
        len(memory["completed_tasks"])
    starts = [e for e in evs if isinstance(e, ev.SessionStarted)]
    assert starts and all(s.working_memory is False for s in starts)


def test_off_across_context_restarts_too(make_job, clock) -> None:
    paths = make_job("requirements-extraction")
    provider, evs = run(paths, clock, requires_context=False, context_window=10_000, max_restarts=10)
    starts = [e for e in evs if isinstance(e, ev.SessionStarted)]
    assert len(starts) >= 3 and all(s.working_memory is False for s in starts)
    summaries = [m.content for r in provider.requests for m in r.messages if m.meta.get("kind") == "summary"]
    assert summaries and not any("Tasks recorded in working memory" in s for s in summaries)
    assert not any("WORKING MEMORY" in r.protected for r in provider.requests)


def test_file_index_on_puts_find_files_in_the_prompt_and_the_agent_can_call_it(make_job, clock) -> None:
    paths = make_job("quickstart")
    provider, evs = run(paths, clock, file_index=True)
    tools = [t.name for t in provider.requests[0].tools]
    assert "find_files" in tools
    assert "- find_files: find files by words in their path or first lines" in provider.requests[0].system
    start = next(e for e in evs if isinstance(e, ev.SessionStarted))
    assert start.file_index is True


# -- the command line: the setting from job.toml, kept by the launch record, shown in the log -------------------
def _events(paths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events))


@pytest.mark.parametrize("edit", [False, True])
def test_a_resumed_run_keeps_requires_context_off(make_job, capsys, edit: bool) -> None:
    paths = make_job("quickstart")
    toml = paths.job_toml.read_text()
    # In [context] (the last table); compact_at = 0: no in-place compaction, kept by the launch record too.
    paths.job_toml.write_text(toml + "requires_context = false\nfile_index = true\ncompact_at = 0\n")
    code = main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0", "--max-turns", "6"])
    assert code == 1  # the session ended at its turn limit: the run did not complete
    out = capsys.readouterr().out
    assert "working memory off (requires_context = false): the prompts carry no task history or blockers" in out
    assert "file index on: the agent has find_files" in out
    record = read_launch(paths, operator_seal())
    assert record is not None and (record.requires_context, record.file_index, record.compact_at) == (False, True, 0)
    if edit:  # job.toml edited between the two processes: the run goes on as it began
        paths.job_toml.write_text(toml + "requires_context = true\nfile_index = false\ncompact_at = 5000\n")
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0", "--max-turns", "400"]) == 0
    out = capsys.readouterr().out
    assert out.count("working memory off") == 1 and out.count("file index on") == 1
    assert re.search(r"session 1 resumed .*working memory off", out)
    evs = _events(paths)
    starts = [e for e in evs if isinstance(e, ev.SessionStarted)]
    assert [s.reason for s in starts] == ["new", "resume"]
    assert all(s.working_memory is False and s.file_index is True for s in starts)
    assert not any("working_memory" in e.layers for e in evs if isinstance(e, ev.TurnStarted))
    assert json.loads((paths.state / "memory.json").read_text())["completed_tasks"]
    record = read_launch(paths, operator_seal())
    assert record is not None and record.compact_at == 0
    changed = [c for e in evs if isinstance(e, ev.LaunchSettings) for c in e.changes]
    assert changed == ["max_turns: 6 -> 400"]  # the flag given; nothing from the edited job.toml


def test_the_default_says_nothing_in_the_log(make_job, capsys) -> None:
    paths = make_job("quickstart")
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0"]) == 0
    out = capsys.readouterr().out
    assert "working memory" not in out and "file index" not in out
    record = read_launch(paths, operator_seal())
    assert record is not None and (record.requires_context, record.file_index, record.compact_at) == (True, False, 3000)
