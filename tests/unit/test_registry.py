"""The provider registry: default models follow the provider wherever it was chosen, windows and prices come
from the table (or the operator's [prices]), and failures are classified so the engine knows what to retry."""

from __future__ import annotations

import json

import pytest

from console.engine.cost import Prices, format_cost
from console.engine.job import JobError
from console.engine.job_config import JobConfig
from console.engine.model import Usage
from console.engine.tools.registry import REFUSED, refused_arguments
from console.providers import registry
from console.providers.errors import classify, retry_after
from console.settings import load_settings, resolve_run_settings


def job(**data: object) -> JobConfig:
    return JobConfig.model_validate(data)


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_flag_brings_its_providers_default_model(name: str) -> None:
    rs = resolve_run_settings(load_settings(), job(), provider=name)
    assert rs.provider == name and rs.model == registry.PROVIDERS[name].default_model
    assert rs.model != "scripted-agent"


def test_env_and_config_bring_the_default_model(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_PROVIDER", "anthropic")
    assert resolve_run_settings(load_settings(), job()).model == registry.PROVIDERS["anthropic"].default_model
    monkeypatch.delenv("AGENT_CONSOLE_PROVIDER")
    config = tmp_path / "config.toml"
    config.write_text('provider = "openai"\n')
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(config))
    assert resolve_run_settings(load_settings(), job()).model == registry.PROVIDERS["openai"].default_model


def test_job_toml_provider_brings_its_default_and_a_higher_layer_switch_drops_the_jobs_model() -> None:
    settings = load_settings()
    assert resolve_run_settings(settings, job(model={"provider": "openai"})).model == \
        registry.PROVIDERS["openai"].default_model
    # job.toml names an OpenAI model; --provider anthropic must not send it to Anthropic.
    pinned = job(model={"provider": "openai", "name": "gpt-4.1"})
    assert resolve_run_settings(settings, pinned).model == "gpt-4.1"
    switched = resolve_run_settings(settings, pinned, provider="anthropic")
    assert switched.provider == "anthropic" and switched.model == registry.PROVIDERS["anthropic"].default_model
    assert resolve_run_settings(settings, pinned, provider="anthropic", model="claude-x").model == "claude-x"


def test_an_unknown_provider_in_job_toml_names_the_file_and_the_key() -> None:
    with pytest.raises(JobError, match=r"^job.toml: key 'model.provider': unknown provider 'mistral' \(choose"):
        resolve_run_settings(load_settings(), job(model={"provider": "mistral"}))
    # As every other error of the file says it: its path, then the key.
    with pytest.raises(JobError, match=r"^/jobs/a/job.toml: key 'model.provider': unknown provider 'mistral'"):
        resolve_run_settings(load_settings(), job(model={"provider": "mistral"}), job_toml="/jobs/a/job.toml")


def test_window_comes_from_the_registry_and_says_where_from() -> None:
    settings = load_settings()
    rs = resolve_run_settings(settings, job(), provider="anthropic", model="claude-sonnet-4-5-20250929")
    assert rs.context_window == 200_000 and rs.context_window_source == "registry: claude-sonnet-4-5"
    assert rs.prices == Prices(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    flag = resolve_run_settings(settings, job(), provider="anthropic", context_window=64_000)
    assert (flag.context_window, flag.context_window_source) == (64_000, "--context-window")
    toml = resolve_run_settings(settings, job(context={"window": 50_000}), provider="openai")
    assert (toml.context_window, toml.context_window_source) == (50_000, "job.toml")
    unknown = resolve_run_settings(settings, job(), provider="openai", model="my-local-llama")
    assert unknown.context_window == registry.FALLBACK_WINDOW and "does not know" in unknown.context_window_source
    assert unknown.prices is None


def test_a_new_model_is_not_priced_as_an_older_family() -> None:
    # Only a dated or -latest release falls back to its model's entry: a new model is unknown, not mispriced.
    assert registry.model_info("anthropic", "claude-opus-4-9") is None
    info = registry.model_info("openai", "gpt-4.1-mini-2025-04-14")
    assert info is not None and info.name == "gpt-4.1-mini"


def test_prices_in_job_toml_override_the_registry() -> None:
    rs = resolve_run_settings(load_settings(), job(prices={"my-local-llama": {
        "input": 0.1, "output": 0.2, "context_window": 32_768}}), provider="openai", model="my-local-llama")
    assert rs.prices == Prices(input=0.1, output=0.2)
    assert (rs.context_window, rs.context_window_source) == (32_768, "[prices]: my-local-llama")
    with pytest.raises(ValueError, match="both input and output"):
        job(prices={"m": {"input": 1.0}})


def test_cost_by_hand() -> None:
    # 10,000 prompt tokens: 6,000 read from the cache, 1,000 written to it, 3,000 plain; 500 out.
    p = Prices(input=3.0, output=15.0, cached_input=0.30, cache_write=3.75)
    usage = Usage(10_000, 500, cached_input_tokens=6_000, cache_write_tokens=1_000)
    by_hand = (3_000 * 3.0 + 6_000 * 0.30 + 1_000 * 3.75 + 500 * 15.0) / 1_000_000
    assert p.cost(usage) == pytest.approx(by_hand) == pytest.approx(0.02205)
    assert Prices(input=2.0, output=8.0).cost(usage) == pytest.approx((10_000 * 2.0 + 500 * 8.0) / 1e6)
    assert [format_cost(x) for x in (0.0042, 1.271, 312.4, None)] == ["$0.0042", "$1.27", "$312", "cost unknown"]


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after": "3"}, 3.0),
    ({"Retry-After": "1.5"}, 1.5),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # in the past: unreadable as a wait
    ({"retry-after": "soon"}, None),
    ({"retry-after": "-4"}, None),
    ({}, None),
    ({"retry-after": "999999999"}, 24 * 3600.0),
])
def test_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after(headers) == expected


@pytest.mark.parametrize(("status", "message", "kind"), [
    (429, "rate limited", "transient"),
    (529, "overloaded", "transient"),
    (503, "", "transient"),
    (None, "connection reset", "transient"),
    (401, "bad key", "fatal"),
    (404, "no such model", "fatal"),
    (400, "This model's maximum context length is 8192 tokens. However, you requested 9000", "context"),
    (400, "prompt is too long: 210000 tokens > 200000 maximum", "context"),
    (400, "System message must be at the beginning.", "fatal"),
])
def test_classify(status: int | None, message: str, kind: str) -> None:
    assert classify(status, message) == kind


@pytest.mark.parametrize(("arguments", "why"), [
    ('{"path": "a.md", "content": "cut he', "cut off?"),
    ("[1, 2]", "a JSON list, not an object"),
    ("prose, not JSON", "not valid JSON"),
])
def test_malformed_arguments_are_replaced_by_a_valid_note(arguments: str, why: str) -> None:
    stub = refused_arguments(arguments)
    assert stub is not None
    note = json.loads(stub)
    assert list(note) == [REFUSED] and why in note[REFUSED] and "nothing was run" in note[REFUSED]


def test_fine_and_empty_arguments() -> None:
    assert refused_arguments('{"path": "a.md"}') is None
    assert refused_arguments("  ") == "{}"


def test_a_job_tomls_prices_are_the_runs_and_the_operators_stay_the_fleets() -> None:
    # A job.toml pricing a known model at 0 made its runs cost nothing to the fleet's daily budget.
    model = "claude-sonnet-4-5-20250929"
    free = resolve_run_settings(load_settings(), job(prices={model: {"input": 0.0, "output": 0.0}}),
                                provider="anthropic", model=model)
    assert free.prices == Prices(input=0.0, output=0.0)
    assert free.fleet_prices == Prices(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    same = resolve_run_settings(load_settings(), job(), provider="anthropic", model=model)
    assert same.fleet_prices is None  # the run's prices are the operator's
    added = resolve_run_settings(load_settings(), job(prices={"my-local-llama": {"input": 0.1, "output": 0.2}}),
                                 provider="openai", model="my-local-llama")
    assert added.prices == Prices(input=0.1, output=0.2) and added.fleet_prices is None  # none the operator knows
