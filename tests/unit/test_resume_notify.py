"""A resume keeps the run's [notify] timing as it began (on_end, remind_minutes), as it keeps its targets: an
operator who edits the config file meanwhile changes the runs started after, not the ones going on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.engine.job import JobPaths
from console.engine.launch import launch_path
from tests.conftest import SAMPLES
from tests.provenance_support import rewrite_record


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    import console.notify

    notifiers: list[console.notify.Notifier] = []

    class Spy(console.notify.Notifier):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            notifiers.append(self)

    monkeypatch.setattr(console.notify, "Notifier", Spy)
    return notifiers


def config(home: Path, hook: str, text: str) -> None:
    (home / "config.toml").write_text(f'[notify]\nurls = ["{hook}"]\n{text}')


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["run", *args, "--headless", "--speed", "0", "--max-turns", "2"]) == 1
    out = capsys.readouterr().out
    return out.split(": ", 1)[1].splitlines()[0]


def test_a_resume_reminds_as_the_run_began_whatever_the_config_says_now(_isolated_dirs, made, capsys) -> None:
    from tests.notify_server import loopback

    with loopback() as server:
        hook = server.url("json", "hook")
        config(_isolated_dirs, hook, "on_end = false\nremind_minutes = [0.75, 2]\n")
        folder = run(capsys, str(SAMPLES / "quickstart"))
        record = json.loads(launch_path(JobPaths(Path(folder))).read_text())
        assert record["notify_on_end"] is False and record["notify_remind"] == [0.75, 2]
        config(_isolated_dirs, hook, "on_end = true\nremind_minutes = []\n")
        run(capsys, "--in-place", folder)
        started, resumed = made
        assert resumed.remind == started.remind == (0.75, 2.0)
        assert resumed.notify_on_end is started.notify_on_end is False
        # A record from before these were recorded: the settings of now, written down at this resume.
        path = launch_path(JobPaths(Path(folder)))
        old = {k: v for k, v in json.loads(path.read_text()).items() if not k.startswith("notify_")}
        rewrite_record(JobPaths(Path(folder)), old)
        run(capsys, "--in-place", folder)
        assert made[-1].remind == () and made[-1].notify_on_end is True
        record = json.loads(path.read_text())
        assert record["notify_on_end"] is True and record["notify_remind"] == []
