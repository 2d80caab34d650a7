"""A runner loads Apprise only when it has something to send (issue 37, point 5: memory per run).

Loading Apprise reads every plugin it has (with cryptography, requests, oauthlib): ~20 MB of a runner's memory, and
most runs never need their operator. The runner's starter checks the notification URLs (as before: a bad one is
exit 2 before any run) and hands what it checked to the runner, whose notifier loads Apprise at its first message.

The runner is watched by a test hook in its own interpreter: a ``sitecustomize`` on PYTHONPATH, active in the
runner only (AGENT_CONSOLE_RUNNER=1, not its watcher), that writes a file when Apprise is first imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.engine.job import JobPaths
from tests.conftest import SAMPLES
from tests.notify_server import loopback

REPO = Path(__file__).resolve().parents[2]

SEEN = """
import os, sys
_mark = os.environ.get("TEST_APPRISE_MARK")
if _mark and os.environ.get("AGENT_CONSOLE_RUNNER") == "1" and "console.watcher" not in sys.orig_argv:
    class _Seen:
        def find_spec(self, name, path=None, target=None):
            if name == "apprise" and not os.path.exists(_mark):
                with open(_mark, "w") as fh:
                    fh.write(str(os.getpid()))
            return None
    sys.meta_path.insert(0, _Seen())
"""


def _env(tmp_path: Path) -> dict[str, str]:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SEEN)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(hook), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TEST_APPRISE_MARK"] = str(tmp_path / "apprise-loaded")
    env["AGENT_CONSOLE_NOTIFY_ON_END"] = "false"  # the end's message would load it: this run tells nothing
    return env


def _run(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], JobPaths]:
    started = subprocess.run([sys.executable, "-m", "console.cli", "run", *args, "--detach"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started
    paths = JobPaths(Path(started.stdout.split(": ", 1)[1].splitlines()[0]))
    done = subprocess.run([sys.executable, "-m", "console.cli", "wait", paths.run_id], env=env,
                          capture_output=True, text=True, timeout=180)
    return done, paths


def test_a_runner_with_a_channel_and_nothing_to_tell_never_loads_apprise(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with loopback() as server:
        done, paths = _run(env, str(SAMPLES / "quickstart"), "--speed", "0", "--notify", server.url("json", "hook"))
        told = list(server.requests)
    assert done.returncode == 0, (done, (paths.state / "runner.log").read_text(errors="replace"))
    assert told == []
    assert not (tmp_path / "apprise-loaded").exists(), "the runner loaded Apprise with nothing to send"
    # What the run's record shows of the channel is the starter's (scheme and host), as before.
    launch = next(json.loads(line) for line in paths.events.read_text().splitlines()
                  if '"type":"launch_settings"' in line)
    assert f"json://127.0.0.1:{server.port}" in json.dumps(launch)


def test_a_runner_that_needs_its_operator_loads_apprise_then_and_tells_them(tmp_path: Path) -> None:
    env = _env(tmp_path)
    script = tmp_path / "give-up.json"
    script.write_text(json.dumps([{"text": "", "calls": [{"name": "job_complete", "arguments": {
        "summary": "Cannot read the input", "confidence": 0.0,
        "notes": "The input is a scanned PDF with no text layer; a human must provide the text."}}]}]))
    with loopback() as server:
        done, paths = _run(env, str(SAMPLES / "quickstart"), "--script", str(script), "--notify",
                           server.url("json", "hook"))
        told = server.wait_for(1)
    assert done.returncode != 0  # gave up
    assert [r.body["title"] for r in told] == [f"agent-console: run {paths.run_id} ended (gave up) and needs you"]
    assert (tmp_path / "apprise-loaded").exists()


def test_a_bad_url_is_still_refused_before_any_run(tmp_path: Path) -> None:
    env = _env(tmp_path)
    started = subprocess.run([sys.executable, "-m", "console.cli", "run", str(SAMPLES / "quickstart"), "--detach",
                              "--notify", "bogus://user:hunter2@example.org/x"], env=env, capture_output=True,
                             text=True, timeout=120)
    assert started.returncode == 2 and "not a notification URL Apprise can send to" in started.stderr, started
    assert "hunter2" not in started.stderr + started.stdout


def test_what_a_runner_is_handed_of_its_urls_is_read_with_care() -> None:
    """Anything but the starter's map (a garbled variable) is nothing checked: every URL is checked again (exit 2 on
    a bad one), and shown as console.notify shows it, never with its secrets."""
    from console.cli.lifecycle import notify_key
    from console.cli.run import _notify_checked, _shown_notify

    assert _notify_checked("") == _notify_checked("{not json") == _notify_checked("[1, 2]") == {}
    assert _notify_checked('{"a": 1, "b": "json://x"}') == {"b": "json://x"}
    url = "json://alice:pa55@127.0.0.1:9/hook-s3cret"
    assert _shown_notify((url,), {}) == [(notify_key(url), "json://127.0.0.1:9")]
    assert _shown_notify((url, url), {notify_key(url): "json://given"}) == [(notify_key(url), "json://given")] * 2
    assert "pa55" not in notify_key(url) and "s3cret" not in notify_key(url)
