"""A run's telemetry against a real OTLP/HTTP receiver on 127.0.0.1 (tests/otlp_receiver.py): its totals are the
events', no secret and by default no text leaves, a resume after kill -9 continues the trace, and a collector that is
dead or stuck costs the run nothing but one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from tests.conftest import SAMPLES
from tests.otlp_receiver import Receiver, all_strings, attrs, closed_port

SECRET = "s3cr3t-Staging-Token-9f8e7d6c5b4a"
MARKER = "KICKOFF-NOTE-MARKER-4471"  # text of a tool result (the agent reads the note)
CONFIG_SECRET = "cfg-held-ProviderKey-51a2b3"  # a provider key given in the config file, not the environment


def job_with_note(tmp_path: Path) -> Path:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    note = job / "notes" / "2026-03-02-kickoff.md"
    note.write_text(note.read_text() + f"\n{MARKER}: the staging token is {SECRET}, the key {CONFIG_SECRET}\n")
    return job


def start(job: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(job), "--headless", "--in-place", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def run(job: Path, env: dict[str, str], *args: str) -> tuple[str, str]:
    proc = start(job, env, "--speed", "0", *args)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    return out, err


def telemetry_env(endpoint: str | None, **extra: str) -> dict[str, str]:
    env = {**os.environ, "STAGING_API_TOKEN": SECRET, **extra}
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    return env


def events_of(job: Path) -> list[Any]:
    return list(ev.read_events(job / ".console" / "events.jsonl"))


def config(text: str) -> None:
    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(text)


def test_span_and_metric_totals_are_the_events_and_no_text_or_secret_leaves(tmp_path) -> None:
    job = job_with_note(tmp_path)
    # Priced, so that the cost is a figure to compare (the demo model's is nothing).
    config('[prices."scripted-agent"]\ninput = 3.0\noutput = 15.0\ncached_input = 0.3\n')
    with Receiver() as receiver:
        run(job, telemetry_env(receiver.endpoint))
    events = events_of(job)
    usage = [e for e in events if isinstance(e, ev.TokenUsage)]
    assert sum(e.cost_usd or 0 for e in usage) > 0
    calls = [e for e in events if isinstance(e, ev.ToolCalled)]
    turns = [e for e in events if isinstance(e, ev.TurnStarted)]
    assert usage and calls and turns and not receiver.refused
    spans = receiver.spans()
    by_kind: dict[str, list[Any]] = {}
    for span in spans:
        by_kind.setdefault(attrs(span.attributes).get("gen_ai.operation.name", span.name.split(" ")[0]), []).append(
            span)
    # One span per turn, per model call and per tool call; the model calls carry the turns' usage (GenAI names).
    assert len(by_kind["turn"]) == len(turns) and len(by_kind["chat"]) == len(usage)
    assert len(by_kind["execute_tool"]) == len(calls)
    chats = [attrs(s.attributes) for s in by_kind["chat"]]
    assert sum(a["gen_ai.usage.input_tokens"] for a in chats) == sum(e.input_tokens for e in usage)
    assert sum(a["gen_ai.usage.output_tokens"] for a in chats) == sum(e.output_tokens for e in usage)
    assert sum(a["gen_ai.usage.cache_read.input_tokens"] for a in chats) == sum(e.cached_input_tokens for e in usage)
    assert all(a["gen_ai.response.finish_reasons"] and a["gen_ai.request.model"] for a in chats)
    assert sorted(attrs(s.attributes)["gen_ai.tool.name"] for s in by_kind["execute_tool"]) == sorted(
        e.tool for e in calls)
    # The spans nest as the events do: every chat and tool span's parent is a turn span, every turn's a session's.
    ids = {s.span_id: s for s in spans}
    assert all(ids[s.parent_span_id].name.startswith("turn ") for s in by_kind["chat"] + by_kind["execute_tool"])
    assert all(ids[s.parent_span_id].name.startswith("session ") for s in by_kind["turn"])
    [run_span] = by_kind["invoke_agent"]
    run_attrs = attrs(run_span.attributes)
    ended = next(e for e in events if isinstance(e, ev.RunEnded))
    assert run_attrs["agent_console.outcome"] == ended.outcome == "completed"
    assert run_attrs["agent_console.cost_usd"] == usage[-1].job_cost_usd
    assert run_attrs["agent_console.tool_calls"] == len(calls) and run_attrs["agent_console.turns"] == len(turns)
    assert len({s.trace_id for s in spans}) == 1
    # Metrics: the counters' last values are the events' totals.
    assert receiver.last_sum("agent_console.tokens", {"agent_console.token.type": "input"}) == sum(
        e.input_tokens for e in usage)
    assert receiver.last_sum("agent_console.tokens", {"agent_console.token.type": "output"}) == sum(
        e.output_tokens for e in usage)
    assert receiver.last_sum("gen_ai.client.token.usage", {"gen_ai.token.type": "input"}) == sum(
        e.input_tokens for e in usage)
    assert receiver.last_sum("agent_console.cost") == pytest.approx(sum(e.cost_usd or 0 for e in usage), rel=1e-9)
    assert receiver.last_sum("agent_console.turns") == len(turns)
    assert receiver.last_sum("agent_console.tool.calls") == len(calls)
    # The agent read the note (its text is in the log), yet neither it nor the secret is in anything exported.
    assert any(isinstance(e, ev.ToolResult) and SECRET in e.content and MARKER in e.content for e in events)
    strings = list(all_strings(receiver))
    assert not [s for s in strings if SECRET in s or MARKER in s]
    assert not [s for s in strings if "digest" in s.lower() and "instructions" in s.lower()]


def test_content_is_exported_only_when_the_operator_opts_in_and_never_a_secret(tmp_path) -> None:
    job = job_with_note(tmp_path)
    with Receiver() as receiver:
        config(f'openai_api_key = "{CONFIG_SECRET}"\n[telemetry]\nendpoint = "{receiver.endpoint}"\ncontent = true\n')
        run(job, telemetry_env(None))
    strings = list(all_strings(receiver))
    assert [s for s in strings if MARKER in s]  # the result's text is there: the operator asked for it
    # Never a secret: the environment's, nor a key the config file holds.
    assert not [s for s in strings if SECRET in s or CONFIG_SECRET in s]
    assert receiver.spans() and not receiver.refused


def test_otlp_over_grpc_carries_the_same_totals_and_the_operators_headers(tmp_path) -> None:
    """The gRPC exporter (the `telemetry` extra) against an OTLP/gRPC receiver of the official services: the same
    totals as the events, the operator's header on every export, and no secret in any attribute."""
    job = job_with_note(tmp_path)
    config('[prices."scripted-agent"]\ninput = 3.0\noutput = 15.0\n[telemetry]\nprotocol = "grpc"\n'
           f'headers = {{ "x-backend-key" = "{CONFIG_SECRET}" }}\n')
    with Receiver(protocol="grpc") as receiver:
        run(job, telemetry_env(receiver.endpoint))
    events = events_of(job)
    usage = [e for e in events if isinstance(e, ev.TokenUsage)]
    assert usage and receiver.spans() and receiver.metadata
    assert all(m.get("x-backend-key") == CONFIG_SECRET for m in receiver.metadata)
    assert receiver.last_sum("agent_console.tokens", {"agent_console.token.type": "input"}) == sum(
        e.input_tokens for e in usage)
    assert receiver.last_sum("agent_console.cost") == pytest.approx(sum(e.cost_usd or 0 for e in usage), rel=1e-9)
    assert receiver.last_sum("agent_console.turns") == len([e for e in events if isinstance(e, ev.TurnStarted)])
    strings = list(all_strings(receiver))
    assert not any(SECRET in s or CONFIG_SECRET in s or MARKER in s for s in strings)


def test_a_job_folder_cannot_turn_telemetry_on(tmp_path) -> None:
    job = job_with_note(tmp_path)
    with Receiver() as receiver:
        with (job / "job.toml").open("a") as fh:
            fh.write(f'\n[telemetry]\nendpoint = "{receiver.endpoint}"\ncontent = true\n')
        proc = start(job, telemetry_env(None), "--speed", "0")
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "'telemetry' is the operator's setting" in err
    assert receiver.requests == 0


def test_a_resume_after_kill_9_continues_the_trace(tmp_path) -> None:
    job = job_with_note(tmp_path)
    events_path = job / ".console" / "events.jsonl"
    with Receiver() as receiver:
        proc = start(job, telemetry_env(receiver.endpoint), "--speed", "3")
        deadline = time.monotonic() + 120
        while not (events_path.exists() and any(e.seq >= 60 for e in ev.read_events(events_path))):
            assert time.monotonic() < deadline, "the run did not get going"
            time.sleep(0.05)
        record = json.loads((job / ".console" / "telemetry.json").read_text())
        while not receiver.spans():  # the first process's spans leave within a second of their end
            assert time.monotonic() < deadline, "no span came from the first process"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        first = len(receiver.spans())
        run(job, telemetry_env(receiver.endpoint))
    spans = receiver.spans()
    assert len(spans) > first
    assert {s.trace_id.hex() for s in spans} == {record["trace_id"]}
    resumed = [s for s in spans if s.name.startswith("invoke_agent") and s.span_id.hex() != record["root_span_id"]]
    assert [attrs(s.attributes)["agent_console.resumed"] for s in resumed] == [True]  # the killed one never ended
    assert resumed[0].parent_span_id.hex() == record["root_span_id"]
    assert [link.span_id.hex() for link in resumed[0].links] == [record["root_span_id"]]
    # The killed process's run span never left: the resumed one sent a stand-in with its ids, so every span's parent
    # is in the trace (found by a new operator's trial: a backend showed the resumed run under a missing parent).
    [stand_in] = [s for s in spans if s.span_id.hex() == record["root_span_id"]]
    assert stand_in.name.startswith("invoke_agent") and not stand_in.parent_span_id
    assert attrs(stand_in.attributes)["agent_console.stand_in"] is True
    ids = {s.span_id for s in spans}
    # The resumed process's spans all have their parents (the killed one's turn and session in progress never left:
    # what was sent under them is as the kill left it).
    later = [s for s in spans if s.start_time_unix_nano >= resumed[0].start_time_unix_nano]
    assert len(later) > 3 and all(s.parent_span_id in ids for s in later)
    assert record["root_ended"] is False  # as the first process left it
    again = json.loads((job / ".console" / "telemetry.json").read_text())
    assert (again["trace_id"], again["root_span_id"], again["processes"], again["root_ended"]) == (
        record["trace_id"], record["root_span_id"], 2, True)


def comparable(events: list[Any]) -> list[tuple[Any, ...]]:
    """What a run did, event by event: its kind, number, tool, turn and result (not its times nor its call ids)."""
    return [(e.type, e.seq, e.session, getattr(e, "turn", None), getattr(e, "tool", None), getattr(e, "ok", None),
             getattr(e, "input_tokens", None), getattr(e, "output_tokens", None), getattr(e, "outcome", None))
            for e in events]


@pytest.mark.parametrize("collector", ["closed", "hang"])
def test_a_dead_collector_changes_nothing_for_the_run(tmp_path, collector) -> None:
    plain = job_with_note(tmp_path / "plain")
    run(plain, telemetry_env(None))
    job = job_with_note(tmp_path / "dead")
    with Receiver(mode="hang") as stuck:
        endpoint = stuck.endpoint if collector == "hang" else f"http://127.0.0.1:{closed_port()}"
        config(f'[telemetry]\nendpoint = "{endpoint}"\nexport_timeout = 1.0\n')
        out, err = run(job, telemetry_env(None))
    assert "job complete" in out
    assert comparable(events_of(job)) == comparable(events_of(plain))
    said = [line for line in err.splitlines() if "telemetry:" in line]
    # Said at most once as it happens (whether the first export has failed before this short run ends depends on the
    # machine's pace), and counted once at the end.
    assert len([line for line in said if "did not take" in line]) <= 1, err
    assert len([line for line in said if "did not reach the collector" in line]) == 1, err
    assert "Traceback" not in err
    # Nothing of the SDK's own log reaches the operator but through the one line.
    assert not [line for line in err.splitlines() if "export" in line.lower() and "telemetry:" not in line], err
    assert not any(e.type == "error" for e in events_of(job))


def test_a_resume_after_a_clean_end_sends_no_second_root_span(tmp_path) -> None:
    """The stand-in is only for a first process that was killed: one that ended its run span (here: its turn limit)
    has sent it, and a second span with the same id would confuse every backend."""
    job = job_with_note(tmp_path)
    with Receiver() as receiver:
        proc = start(job, telemetry_env(receiver.endpoint), "--speed", "0", "--max-turns", "4")
        _, err = proc.communicate(timeout=180)
        record = json.loads((job / ".console" / "telemetry.json").read_text())
        assert record["root_ended"] is True, err
        again = start(job, telemetry_env(receiver.endpoint), "--speed", "0")  # its limit again: 4 more turns
        _, err = again.communicate(timeout=180)
        assert "Traceback" not in err and json.loads((job / ".console" / "telemetry.json").read_text())[
            "processes"] == 2
    spans = receiver.spans()
    assert len([s for s in spans if s.span_id.hex() == record["root_span_id"]]) == 1
    assert not [s for s in spans if attrs(s.attributes).get("agent_console.stand_in")]
