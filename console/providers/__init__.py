"""Model adapters. ``make_provider`` builds the one a run asks for."""

from __future__ import annotations

from pathlib import Path

from console.engine.clock import Clock
from console.engine.model import Provider, ProviderError

__all__ = ["Provider", "ProviderError", "make_provider"]


def make_provider(
    provider: str,
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    speed: float = 0.0,
    clock: Clock | None = None,
    script: Path | None = None,
) -> Provider:
    if provider == "scripted":
        from console.providers.scripted import ScriptedProvider, load_script

        turns = None
        if script is not None:
            try:
                turns = load_script(script)
            except (OSError, ValueError) as exc:
                raise ProviderError(f"scripted: cannot load replay script {script}: {exc}") from None
        return ScriptedProvider(model, speed=speed, clock=clock, script=turns)
    # The SDKs are imported only when used: the offline demo starts faster without them.
    if provider == "openai":
        from console.providers.openai_provider import OpenAIProvider

        return OpenAIProvider(model, api_key=api_key, base_url=base_url)
    if provider == "anthropic":
        from console.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider(model, api_key=api_key, base_url=base_url)
    raise ProviderError(f"unknown provider '{provider}' (choose scripted, openai or anthropic)")
