"""Seed 004's model-server readiness check (``check_ollama_ready``, "called once per session"), over the wire: an
OpenAI-compatible server is asked GET /models once at each session start, before the session's first chat
request; one that is not there, or not ready yet, makes the run ask its operator (provider down) before any chat
request is sent, and their resume goes on once it is back."""

from __future__ import annotations

import json
import socket

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig
from console.engine.loop import ShutdownReason
from console.engine.messages import ModelRequest
from console.engine.supervisor import Supervisor
from console.providers.openai_provider import OpenAIProvider
from tests.conftest import answer_needs, run_settings, time_limit

from .loopback import CannedToolCall, CannedUsage, HttpError, Loopback, Reply

KEY = "sk-ready-test-0123456789"
FREE_STOP = GuardrailsConfig.model_validate({"completion": {"type": "none"}})
# llama.cpp's server while its model loads (GET /v1/models included): 503, {"error": {"message": "Loading model"}}.
LOADING = HttpError(503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})


def call(i: int, name: str, args: dict, used: int = 3000) -> Reply:
    return Reply(text=["On it."], tool_calls=[CannedToolCall(f"call_{i}", name, [json.dumps(args)])],
                 usage=CannedUsage(input_tokens=used + i, output_tokens=40))


def events(paths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events))


class Counting(OpenAIProvider):
    """The real adapter, counting the chat requests the engine makes (the server may never see one)."""

    chats = 0

    def stream(self, request: ModelRequest):  # type: ignore[override]
        Counting.chats += 1
        return super().stream(request)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_local_server_is_found_at_the_session_start_before_any_chat_request(make_job) -> None:
    """Seed 004: "Keep `check_ollama_ready` as-is (called once per session)": a local server that is not running
    (nothing listens on its port) is found by the session's start, not by its first turn: the run asks its operator
    (provider down) before a chat request is sent, and their stop ends it, resumable."""
    paths = make_job()
    clock = FakeClock(step=0.001)
    Counting.chats = 0
    origin = f"http://127.0.0.1:{closed_port()}"
    provider = Counting("qwen3:8b", base_url=f"{origin}/v1", timeout=5)
    sup = Supervisor(paths, run_settings(provider="openai", model="qwen3:8b"), provider, clock=clock, seed=3)
    asked = answer_needs(sup, [])  # "stop"
    with time_limit(60):
        result = sup.run()
    assert Counting.chats == 0
    evs = events(paths)
    (need,) = [e for e in evs if isinstance(e, ev.NeedsOperator)]
    assert [a.reason for a in asked] == ["provider_down"]
    assert need.message.startswith("the model could not be reached (connection refused)")
    assert need.evidence[0] == f"openai: cannot reach {origin} (connection refused)"
    assert not [e for e in evs if isinstance(e, ev.TurnStarted)]
    retries = [e for e in evs if isinstance(e, ev.ModelRetry)]
    assert retries and {r.cause for r in retries} == {"connection refused"} and {r.turn for r in retries} == {1}
    assert result.reason is ShutdownReason.MODEL_UNAVAILABLE and "connection refused" in result.detail


def test_a_server_still_loading_holds_the_run_until_its_operator_resumes(make_job) -> None:
    """A server that answers GET /models with 503 (its model still loading) past the retry bound: the run asks
    before sending a chat request (the strict server records none); resumed once the server is ready, it goes on
    to its first turn as usual."""
    paths = make_job()
    clock = FakeClock(step=0.001)
    with Loopback() as server:
        server.models_answer(*[LOADING] * 200)
        server.push(call(1, "job_complete", {"summary": "done", "deliverables": [], "confidence": 0.9}))
        provider = OpenAIProvider("qwen3:8b", base_url=server.openai_url, timeout=5)
        sup = Supervisor(paths, run_settings(provider="openai", model="qwen3:8b", guardrails=FREE_STOP,
                                             retry_total_wait=60), provider, clock=clock, seed=3)
        chats_when_asked: list[int] = []

        def answer(e: ev.EventBase) -> None:
            if isinstance(e, ev.NeedsOperator):
                chats_when_asked.append(len(server.requests))
                server.models_loaded()
                sup.resume()

        sup.subscribe(answer)
        with time_limit(60):
            result = sup.run()
        listed, chats = list(server.listed), list(server.requests)
    assert chats_when_asked == [0]  # asked before any chat request
    assert result.outcome is not None and result.outcome.summary == "done", result.detail
    assert len(chats) == 1
    assert len(listed) > 1 and {r.path for r in listed} == {"/v1/models"}
    evs = events(paths)
    (need,) = [e for e in evs if isinstance(e, ev.NeedsOperator)]
    assert need.reason == "provider_down" and "server error (503)" in need.evidence[0]
    assert "Loading model" in need.evidence[0]
    assert {r.cause for r in evs if isinstance(r, ev.ModelRetry)} == {"server error 503"}


def test_a_live_server_is_asked_once_per_session_start(make_job, clock) -> None:
    """A live server: exactly one GET /models at each session start (the first, a context restart's new
    session, a resume in a new process), each before that session's first chat request; none between turns."""
    paths = make_job()
    with Loopback() as server:
        # Turn 2 fills the window past the hard threshold: a wind-down, then a restart into session 2.
        server.push(call(1, "generate_workspace_summary", {}), call(2, "todo_complete", {}, used=112_000),
                    call(3, "read_file", {"path": "workspace_summary.md"}, used=113_000),
                    call(4, "read_file", {"path": "instructions.md"}), HttpError(401, {"error": {
                        "message": "Incorrect API key provided", "type": "invalid_request_error", "param": None,
                        "code": "invalid_api_key"}}))
        provider = OpenAIProvider("gpt-4.1", api_key=KEY, base_url=server.openai_url)
        first = Supervisor(paths, run_settings(provider="openai", model="gpt-4.1", guardrails=FREE_STOP), provider,
                           clock=clock).run()
        assert first.sessions == 2, first.detail
        server.push(call(5, "job_complete", {"summary": "done", "deliverables": [], "confidence": 0.9}))
        again = Supervisor(paths, run_settings(provider="openai", model="gpt-4.1", guardrails=FREE_STOP),
                           OpenAIProvider("gpt-4.1", api_key=KEY, base_url=server.openai_url), clock=clock).run()
        assert again.outcome is not None, again.detail
        listed, requests = list(server.listed), list(server.requests)
    starts = [e for e in events(paths) if isinstance(e, ev.SessionStarted)]
    assert [(s.session, s.reason) for s in starts] == [(1, "new"), (2, "restart"), (2, "resume")]
    assert len(listed) == len(starts) == 3
    assert all(r.path == "/v1/models" and r.headers["authorization"] == f"Bearer {KEY}" for r in listed)
    # Each list came just before its session's first chat request: the first, the restart's, the resume's.
    order = sorted([(r.at, "list") for r in listed] + [(r.at, "chat") for r in requests])
    kinds = [k for _, k in order]
    assert kinds[0] == "list" and kinds.count("list") == 3
    assert all(kinds[i + 1] == "chat" for i, k in enumerate(kinds) if k == "list")
    assert len(requests) == 6
