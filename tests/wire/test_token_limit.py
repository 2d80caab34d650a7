"""The output limit's name: max_completion_tokens for OpenAI and Azure OpenAI, max_tokens elsewhere, and the
other one, once, when a server says it does not take the one it was sent.

Azure OpenAI's reasoning deployments (o1, o3, o4-mini, gpt-5: named whatever their owner likes) refuse max_tokens;
Azure deployments behind an older API version refuse max_completion_tokens. The loopback plays both
(``Loopback(takes_limit=...)``) with the real bodies; an Azure host name reaches it through the SDK as an HTTP
proxy, so the request never leaves 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

import httpx2
import openai
import pytest

from console.engine import events as ev
from console.engine.guardrails import GuardrailsConfig
from console.engine.job import JobError
from console.engine.messages import Message, ModelRequest
from console.engine.model import Notice, Progress, ProviderError, StreamEvent, TextDelta
from console.engine.supervisor import Supervisor
from console.providers.openai_provider import OpenAIProvider, limit_param_for
from console.providers.registry import make_provider
from console.providers.token_limit import TOKEN_LIMITS, TokenLimit, token_limit
from console.settings import load_settings
from tests.conftest import answer_needs, run_settings

from .loopback import CannedToolCall, HttpError, Loopback, Reply, local_context_length

AZURE = "http://res-swedencentral.openai.azure.com/openai/v1"
AZURE_REFUSAL = {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                            "'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens",
                 "code": "unsupported_parameter"}
OLD_AZURE_REFUSAL = {"message": "Unrecognized request argument supplied: max_completion_tokens",
                     "type": "invalid_request_error", "param": None, "code": None}


def request() -> ModelRequest:
    return ModelRequest(system="S", messages=[Message.user("hi")], tools=[], max_output_tokens=321)


def run(provider: OpenAIProvider) -> list[StreamEvent]:
    return [e for e in provider.stream(request()) if not isinstance(e, Progress)]


def local(server: Loopback, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider("prod-reasoner", api_key="sk-test", base_url=server.openai_url, max_retries=0, **kw)


@pytest.fixture
def proxied() -> Iterator[tuple[Loopback, Any]]:
    """A loopback that takes max_completion_tokens only, and a way to reach it as if at ``base_url`` (an HTTP
    proxy: the client sends it the absolute URL and resolves no name)."""
    with Loopback(takes_limit="max_completion_tokens") as server:
        def provider(base_url: str, **kw: Any) -> OpenAIProvider:
            http = httpx2.Client(proxy=server.base_url, trust_env=False)
            client = openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0, http_client=http)
            return OpenAIProvider("o3-deployment", client=client, **kw)

        yield server, provider


@pytest.mark.parametrize(("base_url", "expected"), [
    (None, "max_completion_tokens"),
    ("https://api.openai.com/v1", "max_completion_tokens"),
    ("https://eu.api.OpenAI.com./v1", "max_completion_tokens"),
    ("https://res.openai.azure.com/openai/v1", "max_completion_tokens"),
    ("https://res.cognitiveservices.azure.com/openai/v1", "max_completion_tokens"),
    ("https://proj.services.ai.azure.com/openai/v1", "max_completion_tokens"),
    ("http://127.0.0.1:8000/v1", "max_tokens"),
    ("http://localhost:11434/v1", "max_tokens"),
    ("https://openrouter.ai/api/v1", "max_tokens"),
    ("https://notopenai.com/v1", "max_tokens"),
    ("https://openai.azure.com.attacker.example/v1", "max_tokens"),
    ("https://res.openai.azure.com@127.0.0.1/v1", "max_tokens"),
])
def test_the_name_to_start_with_is_the_hosts(base_url: str | None, expected: str) -> None:
    assert limit_param_for(base_url) == expected


def test_an_azure_host_gets_max_completion_tokens_at_once(proxied: Any) -> None:
    server, provider = proxied
    server.push(Reply.of("ok"))
    events = run(provider(AZURE))
    assert not [e for e in events if isinstance(e, Notice)]
    assert server.last.path.startswith("http://res-swedencentral.openai.azure.com/")
    assert server.last.body["max_completion_tokens"] == 321 and "max_tokens" not in server.last.body
    assert not server.rejected


def test_a_server_that_refuses_max_tokens_is_asked_again_once_and_remembered() -> None:
    with Loopback(takes_limit="max_completion_tokens") as server:
        server.push(Reply.of("first"), Reply.of("second"))
        provider = local(server)
        assert provider.limit_param == "max_tokens"
        first = run(provider)
        second = run(provider)
        requests = list(server.requests)
    # One refusal, as Azure's reasoning deployment words it, then the same request with the other name.
    assert [r.rejected for r in requests] == [
        "max_tokens: Unsupported parameter: 'max_tokens' is not supported with this model. Use "
        "'max_completion_tokens' instead.", None, None]
    assert requests[0].body["messages"] == requests[1].body["messages"]
    assert [("max_tokens" in r.body, r.body.get("max_completion_tokens")) for r in requests] == [
        (True, None), (False, 321), (False, 321)]
    notices = [e for e in first if isinstance(e, Notice)]
    assert len(notices) == 1 and first[0] == notices[0]
    assert notices[0].text.startswith(f"openai: {server.base_url} refused max_tokens for prod-reasoner (Unsupported "
                                      "parameter: 'max_tokens' is not supported")
    assert notices[0].text.endswith("asked again with max_completion_tokens, which this run uses from now on")
    assert "".join(e.text for e in first if isinstance(e, TextDelta)) == "first"
    assert not [e for e in second if isinstance(e, Notice)]
    assert provider.limit_param == "max_completion_tokens"


def test_an_older_azure_api_version_gets_max_tokens_back() -> None:
    with Loopback(takes_limit="max_tokens") as server:
        http = httpx2.Client(proxy=server.base_url, trust_env=False)
        client = openai.OpenAI(api_key="sk-test", base_url=AZURE, max_retries=0, http_client=http)
        provider = OpenAIProvider("gpt-4o", client=client)
        server.push(Reply.of("ok"))
        events = run(provider)
        requests = list(server.requests)
    assert [r.rejected for r in requests] == ["Unrecognized request argument supplied: max_completion_tokens", None]
    assert requests[1].body["max_tokens"] == 321 and "max_completion_tokens" not in requests[1].body
    assert "refused max_completion_tokens" in next(e.text for e in events if isinstance(e, Notice))
    assert provider.limit_param == "max_tokens"


def test_a_pydantic_server_refusing_the_name_as_an_extra_field() -> None:
    # An OpenAI-compatible server whose request model forbids extra fields (voideditor/void#128).
    body = {"object": "error", "message": "[{'type': 'extra_forbidden', 'loc': ('body', 'max_completion_tokens'), "
                                          "'msg': 'Extra inputs are not permitted', 'input': 8192}]",
            "type": "BadRequestError", "param": None, "code": 400}
    with Loopback() as server:
        server.push(HttpError(400, body), Reply.of("ok"))
        provider = local(server, max_tokens_param="auto")
        provider.limit_param = "max_completion_tokens"  # as if the host had said so
        events = run(provider)
    assert [("max_tokens" in r.body) for r in server.requests] == [False, True]
    assert len([e for e in events if isinstance(e, Notice)]) == 1


def test_the_switch_happens_once_never_back() -> None:
    with Loopback(takes_limit="max_completion_tokens") as server:
        server.push(Reply.of("ok"), HttpError(400, {"error": OLD_AZURE_REFUSAL}))
        provider = local(server)
        run(provider)
        with pytest.raises(ProviderError) as info:
            run(provider)
        # The server now refuses both names: that is its answer, fatal, and the provider does not flip back.
        assert info.value.kind == "fatal" and "Unrecognized request argument supplied" in str(info.value)
        assert provider.limit_param == "max_completion_tokens"
        assert len(server.requests) == 3


@pytest.mark.parametrize("forced", ["max_tokens", "max_completion_tokens"])
def test_a_forced_name_is_never_changed(forced: str) -> None:
    takes = "max_completion_tokens" if forced == "max_tokens" else "max_tokens"
    with Loopback(takes_limit=takes) as server:  # type: ignore[arg-type]
        provider = local(server, max_tokens_param=forced)
        with pytest.raises(ProviderError) as info:
            run(provider)
        assert info.value.kind == "fatal"
        assert len(server.requests) == 1 and forced in server.requests[0].body
        assert provider.limit_param == forced


@pytest.mark.parametrize("refusal", [
    # Mentions the limit, but about its value: not a name the server refuses.
    HttpError(400, {"error": {"message": "max_tokens is too large: 100000. This model supports at most 32768 "
                                         "completion tokens, whereas you provided 100000.",
                              "type": "invalid_request_error", "param": "max_tokens", "code": None}}),
    HttpError(400, {"error": {"message": "Invalid 'max_tokens': integer below minimum value. Expected a value >= "
                                         "1, but got 0 instead.", "type": "invalid_request_error",
                              "param": "max_tokens", "code": "integer_below_min_value"}}),
    local_context_length(),
    # Refuses something else.
    HttpError(400, {"error": {"message": "Unsupported parameter: 'temperature' is not supported with this model.",
                              "type": "invalid_request_error", "param": "temperature",
                              "code": "unsupported_parameter"}}),
])
def test_other_refusals_are_not_taken_for_the_name(refusal: HttpError) -> None:
    with Loopback() as server:
        server.push(refusal)
        provider = local(server)
        with pytest.raises(ProviderError):
            run(provider)
        assert len(server.requests) == 1 and provider.limit_param == "max_tokens"


def test_the_setting_reaches_the_provider(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text('max_tokens_param = "max_tokens"\n')
    assert load_settings().max_tokens_param == "max_tokens"
    monkeypatch.setenv("AGENT_CONSOLE_MAX_TOKENS_PARAM", "max_completion_tokens")
    assert load_settings().max_tokens_param == "max_completion_tokens"
    monkeypatch.setenv("AGENT_CONSOLE_MAX_TOKENS_PARAM", "max_output_tokens")
    with pytest.raises(JobError, match="max_tokens_param"):
        load_settings()
    here = "http://127.0.0.1:9/v1"
    forced = make_provider("openai", "gpt-x", base_url=here, max_tokens_param="max_completion_tokens")
    auto = make_provider("openai", "gpt-x", base_url=here)
    assert isinstance(forced, OpenAIProvider) and forced.limit_param == "max_completion_tokens"
    assert isinstance(auto, OpenAIProvider) and auto.limit_param == "max_tokens"
    with pytest.raises(ProviderError, match="max_tokens_param must be one of auto, max_tokens, max_completion_tokens"):
        OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", max_tokens_param="maxtokens")


def test_the_engine_records_the_switch_once_and_counts_no_fault(make_job: Any, clock: Any) -> None:
    paths = make_job()
    replies = [Reply(tool_calls=[CannedToolCall.of(f"call_{n}", "read_file", {"path": "instructions.md"})])
               for n in range(3)]
    guard = GuardrailsConfig.model_validate({"stuck_escalate_after": 0})
    with Loopback(takes_limit="max_completion_tokens") as server:
        server.push(*replies)
        provider = OpenAIProvider("prod-reasoner", base_url=server.openai_url, max_retries=0)
        sup = Supervisor(paths, run_settings(provider="openai", guardrails=guard, max_turns=3), provider, clock=clock)
        answer_needs(sup)
        result = sup.run()
        requests = list(server.requests)
    assert result.reason.value == "max_turns"
    assert len(requests) == 4 and [r.rejected is None for r in requests] == [False, True, True, True]
    evs = list(ev.read_events(paths.events))
    assert not [e for e in evs if isinstance(e, ev.ModelRetry | ev.NeedsOperator)]
    errors = [e for e in evs if isinstance(e, ev.ErrorEvent)]
    assert len(errors) == 1 and errors[0].where == "provider" and errors[0].recoverable
    assert "refused max_tokens for prod-reasoner" in errors[0].message
    assert [e.turn for e in evs if isinstance(e, ev.AssistantMessage)] == [1, 2, 3]


def test_a_named_limit_is_read_as_one_of_the_two_names_and_nothing_else() -> None:
    """A server's "param" (any JSON) or the name matched in its message, as the TokenLimit it names: the typed
    tuple token_limit picks from is the Literal's own names, so neither can drift from the other."""
    assert sorted(TOKEN_LIMITS) == sorted(get_args(TokenLimit))
    assert [token_limit(name) for name in TOKEN_LIMITS] == list(TOKEN_LIMITS)
    assert [token_limit(v) for v in ("auto", "temperature", "", None, 1, ["max_tokens"], {"max_tokens": 1})] == \
        [None] * 7
