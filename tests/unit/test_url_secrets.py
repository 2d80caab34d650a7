"""Secrets in URLs never leave the process: a base URL with a password (``http://user:pw@proxy/v1``) was printed in
the headless log and kept in events.jsonl (and its journal copy), from where it went to a shared store. Replayed
with the URL on the command line, in the environment and in the config, against a loopback OpenAI server: the
provider's call still uses the whole URL (the proxy's basic auth arrives), nothing else the operator or another
machine reads holds the password."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from console.cli import main
from console.engine.launch import Launch, LaunchStart, changes
from console.engine.url_secrets import scrub_url, shown_url, url_secrets
from tests.conftest import SAMPLES
from tests.notify_server import loopback as notify_loopback
from tests.provenance_support import operator_seal
from tests.wire.loopback import Loopback, Reply

SECRET = "hunter2-pw"
TOKEN = "sk-query-token-77"


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://user:{SECRET}@proxy/v1", "http://***@proxy/v1"),
    ("https://TOKEN123@host:8443/v1", "https://***@host:8443/v1"),
    (f"http://h/v1?api-version=2024-06-01&api-key={TOKEN}", "http://h/v1?api-version=2024-06-01&api-key=***"),
    (f"http://h/v1?key={TOKEN}&Access_Token={TOKEN}&x=1", "http://h/v1?key=***&Access_Token=***&x=1"),
    (f"http://h/v1#token={TOKEN}", "http://h/v1"),  # a fragment is never sent to a server
    (f"http://user:{SECRET}@[::1", "http://***@[::1"),  # no parse needed: a URL refused as invalid too
    (f"http://user:{SECRET}/x@host/v1", "http://***@host/v1"),  # a password with an unescaped "/"
    ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
    ("http://h:80/v1/@scope/x", "http://h:80/v1/@scope/x"),  # an "@" in a path is a path
])
def test_what_a_url_shows(url: str, shown: str) -> None:
    assert shown_url(url) == shown and shown_url(shown) == shown
    for secret in url_secrets(url):
        assert secret not in shown or secret in ("user",)


def test_scrub_takes_a_urls_secrets_out_of_a_librarys_words() -> None:
    url = f"http://user:{SECRET}@proxy/v1?api-key={TOKEN}"
    text = f"cannot reach {url}: {SECRET} refused; user:{SECRET}@proxy; port {SECRET!r}; {TOKEN}"
    scrubbed = scrub_url(text, url)
    assert SECRET not in scrubbed and TOKEN not in scrubbed and shown_url(url) in scrubbed
    assert scrub_url("a pw and pw@", "http://u:pw@h") == "a *** and ***@"
    assert scrub_url("a p and p@", "http://u:p@h") == "a p and ***@"  # one character: only as user-info


def test_the_launch_settings_event_and_a_resumes_changes_show_no_password() -> None:
    old = Launch(provider="openai", model="m", base_url="http://127.0.0.1:1/v1")
    new = Launch(provider="openai", model="m", base_url=f"http://user:{SECRET}@127.0.0.1:1/v1?key={TOKEN}")
    fields = LaunchStart(new, operator_seal(), source="resume", changes=tuple(changes(old, new))).event_fields()
    said = json.dumps(fields)
    assert SECRET not in said and TOKEN not in said
    assert fields["base_url"] == "http://***@127.0.0.1:1/v1?key=***"
    assert fields["changes"] == ["base_url: http://127.0.0.1:1/v1 -> http://***@127.0.0.1:1/v1?key=***"]
    assert new.base_url is not None and SECRET in new.base_url  # the record keeps it whole: a resume calls it


@pytest.mark.parametrize("bad", [f"http://user:{SECRET}@[::1/v1", f"http://user:{SECRET}/x@host/v1",
                                 f"ftp://user:{SECRET}@host/v1", f"http://user:{SECRET}@h:99999/v1"])
def test_a_bad_base_url_s_error_line_shows_no_password(bad: str, make_job, capsys) -> None:
    assert main(["run", str(make_job().root), "--headless", "--base-url", bad]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "--base-url" in err and SECRET not in out + err, err


def _all_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (folder / ".console").rglob("*")
                     if p.is_file() and p.name != "launch.json")


@pytest.mark.parametrize("where", ["flag", "environment", "config"])
def test_a_run_shows_its_base_url_without_the_password(where: str, monkeypatch: pytest.MonkeyPatch,
                                                       capsys) -> None:
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    with Loopback(strict=False) as server, notify_loopback() as hook:
        server.push(*[Reply(text=[f"Reading the task ({i})."]) for i in range(4)])
        url = server.openai_url.replace("http://", f"http://user:{SECRET}@")
        config.write_text((f'base_url = "{url}"\n' if where == "config" else "")
                          + f'[notify]\nurls = ["{hook.url("json", "hook")}"]\non_end = true\n')
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
        if where == "environment":
            monkeypatch.setenv("OPENAI_BASE_URL", url)
        args = ["run", str(SAMPLES / "quickstart"), "--headless", "--provider", "openai", "--model", "gpt-4o",
                "--max-turns", "2"] + (["--base-url", url] if where == "flag" else [])
        code = main(args)
        out, err = capsys.readouterr()
        assert code == 1, (out, err)  # the turn limit: an incomplete end, said and notified
        # The real call went to the whole URL: the proxy got its credentials (httpx sends them as basic auth).
        assert server.requests and server.requests[0].headers.get("authorization") == (
            "Basic " + base64.b64encode(f"user:{SECRET}".encode()).decode())
        ended = hook.wait_for(1)
    folder = Path(out.splitlines()[0].split(": ", 1)[1])
    shown = shown_url(url)
    assert f"started with: openai/gpt-4o, {shown}," in out
    assert main(["jobs", "--json"]) == 0
    jobs = capsys.readouterr().out
    events = [json.loads(line) for line in (folder / ".console" / "events.jsonl").read_text().splitlines()]
    assert [e["base_url"] for e in events if e["type"] == "launch_settings"] == [shown]
    for text in (out, err, jobs, _all_text(folder), json.dumps([r.body for r in ended])):
        assert SECRET not in text and "user:" not in text
    # The run's own record keeps the URL whole (a resume calls the same server), private to the operator.
    launch = folder / ".console" / "launch.json"
    assert json.loads(launch.read_text())["base_url"] == url and stat.S_IMODE(launch.stat().st_mode) == 0o600


@pytest.mark.parametrize("url", [f"http://user:{SECRET}@proxy/v1", f"http://proxy/v1?api-key={TOKEN}",
                                 f"https://{TOKEN}@proxy/v1"])
def test_submit_never_puts_a_secret_url_in_a_manifest(url: str) -> None:
    from types import SimpleNamespace

    from console.engine.job import JobError
    from console.kube.carry import run_flags

    with pytest.raises(JobError, match="holds a password or a key") as caught:
        run_flags(SimpleNamespace(provider="openai", model="m", base_url=url), unconfined=False)
    assert SECRET not in str(caught.value) and TOKEN not in str(caught.value)
