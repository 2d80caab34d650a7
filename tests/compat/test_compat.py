"""Every scenario, with every provider: its expectations hold, and the providers agree with one another."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.compat.runner import PROVIDERS, Outcome, Scenario, WireRejection, run
from tests.compat.scenarios import SCENARIOS

Runs = Callable[[Scenario, str], Outcome]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Each (scenario, provider) is run once; the expectation and agreement tests share the result."""
    cache: dict[tuple[str, str], Outcome | WireRejection] = {}

    def get(scenario: Scenario, provider: str) -> Outcome:
        key = (scenario.name, provider)
        if key not in cache:
            root = tmp_path_factory.mktemp(f"{scenario.name}-{provider}") / "job"
            try:
                cache[key] = run(scenario, provider, root)
            except WireRejection as exc:
                cache[key] = exc
        found = cache[key]
        if isinstance(found, WireRejection):
            pytest.fail(str(found), pytrace=False)
        return found

    return get


def check_expectations(scenario: Scenario, out: Outcome) -> None:
    events = out.events
    pos = 0
    for want in scenario.expect:
        hit = next((i for i in range(pos, len(events)) if want.matches(events[i])), None)
        assert hit is not None, f"{want} not found in order after event #{pos}; trace: {out.trace}"
        pos = hit + 1
    for kind, least in scenario.counts.items():
        assert len(out.of(kind)) >= least, f"{kind}: {len(out.of(kind))} < {least}"
    for kind in scenario.absent:
        assert not out.of(kind), f"unexpected {kind}: {out.of(kind)}"
    for rel, text in scenario.expect_files.items():
        if text is None:
            assert rel not in out.files, rel
        else:
            assert rel in out.files and text in out.files[rel], (rel, out.files.get(rel))
    if scenario.reason is not None:
        assert out.result.reason.value == scenario.reason, out.result.detail
    if out.result.reason.value == "error" and scenario.reason == "error":
        # The turns ran out: every provider then fails the next request, and the log says so.
        errors = out.of("error")
        assert errors and errors[-1].get("where") == "provider", errors
    # No traceback or internal error reached the log.
    assert not [e for e in out.of("error") if "internal error" in str(e.get("message"))]
    if out.provider != "scripted":
        turns = out.of("turn_started")
        assert len(out.requests) >= len(turns) > 0  # every turn went over the wire, through the validator
    if scenario.check is not None:
        scenario.check(out)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_scenario(scenario: Scenario, provider: str, outcomes: Runs) -> None:
    check_expectations(scenario, outcomes(scenario, provider))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_providers_agree(scenario: Scenario, outcomes: Runs) -> None:
    base = outcomes(scenario, "scripted")
    for provider in PROVIDERS[1:]:
        other = outcomes(scenario, provider)
        assert other.trace == base.trace, provider
        assert other.stable_files == base.stable_files, provider
        assert (other.result.reason, other.result.sessions, other.result.restarts) == (
            base.result.reason, base.result.sessions, base.result.restarts), provider


def test_scenario_names_are_unique() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("dialect", ["chat_template", "mistral_template"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_scenario_on_a_chat_template_server(scenario: Scenario, dialect: str, tmp_path) -> None:
    """The OpenAI adapter against a local server's chat template (vLLM, llama.cpp, LM Studio serving Qwen 3.x):
    one system message, first; every replayed tool call's arguments a JSON object; and serving a Mistral-family
    model: user and assistant turns alternating, no user message right after tool results, text in every reply.
    Each scenario's requests, masking, restarts and summaries included, must all be accepted, and the scenario
    must hold."""
    try:
        out = run(scenario, "openai", tmp_path / "job", dialect=dialect)
    except WireRejection as exc:
        pytest.fail(str(exc), pytrace=False)
    check_expectations(scenario, out)
