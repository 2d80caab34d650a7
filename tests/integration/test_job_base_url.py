"""A job folder someone hands the operator names the model's server in its job.toml ([model] base_url): the run
would send the operator's API key there. It is refused unless the operator's word allows that server: their own
base URL, their config's ``job_base_urls``, or ``--base-url`` given now. Tested end to end against a loopback
OpenAI server: a refused start never reaches it (no key sent), an allowed one does."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import main
from tests.wire.loopback import Loopback, Reply

KEY = "sk-operators-own-key-do-not-send"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Loopback]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with Loopback() as s:
        yield s


def handed_job(make_job, url: str) -> Path:
    """A job whose job.toml picks the openai provider at ``url`` (a folder from anyone)."""
    paths = make_job("quickstart")
    text = paths.job_toml.read_text().replace('provider = "scripted"\n', "")
    paths.job_toml.write_text(text.replace("[model]\n", f'[model]\nprovider = "openai"\nbase_url = "{url}"\n', 1))
    return paths.root


def config(text: str) -> None:
    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(text)


def start(job: Path, *flags: str) -> int:
    return main(["run", str(job), "--headless", "--max-turns", "1", *flags])


def test_a_handed_jobs_server_is_refused_and_never_reached(make_job, server, capsys) -> None:
    job = handed_job(make_job, server.openai_url)
    assert start(job) == 2
    err = capsys.readouterr().err
    [line] = err.splitlines()
    assert "[model] base_url" in line and "your openai API key with every request" in line and KEY not in line
    # The two ways on it names, each of which works (below).
    assert f"--base-url {server.openai_url}" in line and "job_base_urls" in line
    assert os.environ["AGENT_CONSOLE_CONFIG"] in line
    assert server.requests == [] and server.listed == []  # nothing reached it: the key never left
    runs = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # and no run folder is left


@pytest.mark.parametrize("how", ["config", "flag", "own base_url", "variable"])
def test_the_operators_word_lets_it_run(make_job, server, capsys, monkeypatch, how: str) -> None:
    job = handed_job(make_job, server.openai_url)
    flags: tuple[str, ...] = ()
    if how == "config":  # a prefix of it: its origin and the path under it
        config(f'job_base_urls = ["{server.base_url}"]\n')
    elif how == "flag":
        flags = ("--base-url", server.openai_url)
    elif how == "own base_url":
        config(f'base_url = "{server.openai_url}"\n')
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    server.push(Reply(text=["working on it"]))
    start(job, *flags)
    assert server.accepted, capsys.readouterr().err  # the model was asked
    assert server.accepted[0].headers.get("authorization") == f"Bearer {KEY}"


@pytest.mark.parametrize("job_url", [
    "{origin}/v1x",  # beside the allowed path, not under it
    "http://127.0.0.2:{port}/v1",  # another host
    "https://127.0.0.1:{port}/v1",  # another scheme
])
def test_a_server_beside_the_allowed_one_is_refused(make_job, server, capsys, job_url: str) -> None:
    origin = server.base_url.rstrip("/")
    port = origin.rsplit(":", 1)[1]
    config(f'job_base_urls = ["{origin}/v1"]\n')
    job = handed_job(make_job, job_url.format(origin=origin, port=port))
    assert start(job) == 2
    assert "is not a server the operator's config allows" in capsys.readouterr().err
    assert server.requests == []


def test_without_a_key_it_is_refused_all_the_same(make_job, server, capsys, monkeypatch) -> None:
    # Nothing of the operator's to leak, but the requests still leave from this machine to where a job chose.
    monkeypatch.delenv("OPENAI_API_KEY")
    assert start(handed_job(make_job, server.openai_url)) == 2
    assert "would send it every request, from this machine" in capsys.readouterr().err
    assert server.requests == []


def test_a_provider_that_sends_no_key_is_not_asked(make_job, capsys) -> None:
    # The scripted demo model ignores a base URL: nothing is sent anywhere.
    paths = make_job("quickstart")
    paths.job_toml.write_text(paths.job_toml.read_text().replace(
        "[model]\n", '[model]\nbase_url = "http://127.0.0.1:9/v1"\n', 1))
    assert main(["run", str(paths.root), "--headless", "--speed", "0"]) == 0, capsys.readouterr().err


def test_an_allowed_url_that_is_no_url_is_refused_by_name(make_job, capsys) -> None:
    config('job_base_urls = ["ftp://x"]\n')
    assert main(["run", str(make_job("quickstart").root), "--headless", "--speed", "0"]) == 2
    assert "key 'job_base_urls'" in capsys.readouterr().err
