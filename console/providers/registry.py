"""The provider registry: every model provider agent-console can run, in one place.

An entry says how to build the adapter, which model runs when none is chosen, which environment
variables hold its key and its base URL. The models' context windows and prices are data, in
``models.toml`` beside this file (checked against the providers' published pages; the date is in the
file); the operator extends or overrides them with ``[prices."MODEL"]`` in the config file or job.toml.
Settings, job.toml validation, the command line's choices and the console all read this registry, so
adding a provider is one entry here.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.providers.token_limit import MaxTokensParam

if TYPE_CHECKING:  # the command line reads the names at every start: the engine's types are loaded when used
    from console.engine.clock import Clock
    from console.engine.cost import Prices
    from console.engine.model import Provider

MODELS_FILE = Path(__file__).with_name("models.toml")
FALLBACK_WINDOW = 128_000  # a model nobody told us about: a common window, said to be a default


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    description: str
    build: Callable[..., Provider]
    default_model: str
    key_variables: tuple[str, ...] = ()
    base_url_variable: str | None = None
    # Whether the provider needs a key at all (a local OpenAI-compatible server does not).
    needs_key: bool = True


@dataclass(frozen=True)
class ModelInfo:
    """What the registry knows of one model: its window and prices (either may be unknown)."""

    name: str  # the entry that matched (the model's own name, or the family a dated name belongs to)
    provider: str
    context_window: int | None
    prices: Prices | None
    source: str = ""  # "registry" or "config" / "job.toml" (an operator's override)


def _scripted(model: str, *, speed: float = 0.0, clock: Clock | None = None, script: Path | None = None,
              **_: Any) -> Provider:
    from console.engine.model import ProviderError
    from console.providers.scripted import ScriptedProvider, load_script

    turns = None
    if script is not None:
        try:
            turns = load_script(script)
        except (OSError, ValueError) as exc:
            raise ProviderError(f"scripted: cannot load replay script {script}: {exc}") from None
    return ScriptedProvider(model, speed=speed, clock=clock, script=turns)


def _openai(model: str, *, api_key: str | None = None, base_url: str | None = None,
            max_tokens_param: MaxTokensParam = "auto", key_variable: str = "OPENAI_API_KEY", **_: Any) -> Provider:
    # The SDKs are imported only when used: the offline demo starts faster without them.
    from console.providers.openai_provider import OpenAIProvider

    return OpenAIProvider(model, api_key=api_key, base_url=base_url, max_tokens_param=max_tokens_param,
                          key_variable=key_variable)


def _anthropic(model: str, *, api_key: str | None = None, base_url: str | None = None,
               key_variable: str = "ANTHROPIC_API_KEY", **_: Any) -> Provider:
    from console.providers.anthropic_provider import AnthropicProvider

    return AnthropicProvider(model, api_key=api_key, base_url=base_url, key_variable=key_variable)


@functools.cache
def _table() -> dict[str, Any]:
    try:
        with MODELS_FILE.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):  # a broken install: the registry still has its providers
        return {}


def _default(provider: str, fallback: str) -> str:
    value = _table().get("defaults", {}).get(provider)
    return value if isinstance(value, str) and value else fallback


PROVIDERS: dict[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec("scripted", "the offline demo model: deterministic, no AI, no network", _scripted,
                     "scripted-agent", needs_key=False),
        ProviderSpec("openai", "OpenAI, or any server that speaks its Chat Completions protocol (--base-url)",
                     _openai, _default("openai", "gpt-6.2-sol"), ("OPENAI_API_KEY",), "OPENAI_BASE_URL"),
        ProviderSpec("anthropic", "Anthropic's Messages API", _anthropic,
                     _default("anthropic", "claude-sonnet-5-5"), ("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL"),
    )
}
NAMES: tuple[str, ...] = tuple(PROVIDERS)


def spec(provider: str) -> ProviderSpec:
    from console.engine.model import ProviderError

    try:
        return PROVIDERS[provider]
    except KeyError:
        raise ProviderError(f"unknown provider '{provider}' (choose {', '.join(NAMES)})") from None


def choices() -> str:
    return ", ".join(NAMES)


def env_base_url(provider: str) -> str | None:
    """The base URL the provider's own variable names (OPENAI_BASE_URL, ...), if set."""
    var = PROVIDERS[provider].base_url_variable if provider in PROVIDERS else None
    return (os.environ.get(var) or None) if var else None


# A dated or aliased release of a model in the table: "claude-sonnet-4-5-20250929", "gpt-4.1-2025-04-14",
# "claude-3-7-sonnet-latest". Nothing else: "claude-opus-4-9" is not "claude-opus-4" (a new model is unknown).
_RELEASE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest|preview)$")


def _entry(name: str, overrides: Mapping[str, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any], str] | None:
    models = _table().get("models", {})
    candidates = [name]
    base = name
    while (m := _RELEASE_SUFFIX.search(base)) is not None:
        base = base[: m.start()]
        candidates.append(base)
    for candidate in candidates:
        if candidate in overrides:
            return candidate, overrides[candidate], "override"
        if candidate in models and isinstance(models[candidate], dict):
            return candidate, models[candidate], "registry"
    return None


def model_info(provider: str, model: str, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> ModelInfo | None:
    """The model's window and prices: the operator's ``[prices]`` entry first, then the registry's table."""
    found = _entry(model, overrides or {})
    if found is None:
        return None
    from console.engine.cost import Prices

    name, entry, source = found
    window = entry.get("context_window")
    prices = None
    if isinstance(entry.get("input"), int | float) and isinstance(entry.get("output"), int | float):
        try:
            prices = Prices(input=float(entry["input"]), output=float(entry["output"]),
                            cached_input=_number(entry.get("cached_input")),
                            cache_write=_number(entry.get("cache_write")))
        except ValueError:
            prices = None
    return ModelInfo(name, str(entry.get("provider") or provider),
                     window if isinstance(window, int) and window > 0 else None, prices, source)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def make_provider(provider: str, model: str, **options: Any) -> Provider:
    return spec(provider).build(model, **options)
