"""The real SDKs, against a server that is not there: what they raise is classified "unreachable" (a short retry
bound, then the run asks its operator), with one line that names the server and why, and never the key.

A refused connection is real (a loopback port where nothing listens); a name that does not resolve is the
resolver's own error, raised where the SDK's transport asks for the address (no network is used)."""

from __future__ import annotations

import socket

import pytest

from console.engine.messages import ModelRequest
from console.engine.model_call import ProviderUnreachable
from console.providers.anthropic_provider import AnthropicProvider
from console.providers.openai_provider import OpenAIProvider

KEY = "sk-unreachable-test-0123456789"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def provider(sdk: str, origin: str) -> OpenAIProvider | AnthropicProvider:
    if sdk == "openai":
        return OpenAIProvider("m", api_key=KEY, base_url=f"{origin}/v1", timeout=5)
    return AnthropicProvider("m", api_key=KEY, base_url=origin, timeout=5)


def ask(p: OpenAIProvider | AnthropicProvider) -> ProviderUnreachable:
    request = ModelRequest(system="s", messages=[], tools=[], protected="p", max_output_tokens=16)
    with pytest.raises(ProviderUnreachable) as err:
        list(p.stream(request))
    assert err.value.kind == "transient"
    assert KEY not in str(err.value) and "\n" not in str(err.value)
    return err.value


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_refused_connection_is_unreachable(sdk: str) -> None:
    origin = f"http://127.0.0.1:{closed_port()}"
    err = ask(provider(sdk, origin))
    assert err.cause == "connection refused"
    assert str(err) == f"{sdk}: cannot reach {origin} (connection refused)"


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_name_that_does_not_resolve_is_unreachable(sdk: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def resolve(host: object, *args: object, **kw: object) -> object:
        if host == "model.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    err = ask(provider(sdk, "http://model.invalid:8000"))
    assert err.cause == "host not found"
    assert str(err) == f"{sdk}: cannot reach http://model.invalid:8000 (host not found)"
