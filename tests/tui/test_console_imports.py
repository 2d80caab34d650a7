"""What an attach's console imports before its first frame (issue 37: its CPU to filled panes is mostly imports):
none of the fleet's model and poller, the file watchers (watchfiles and anyio: imported once they start, after the
first frames), Textual's TextArea (when a restart waits), nor the other commands' grammar. Each is ~5-30 ms of
CPU; a new top-level import of one of them would put it back silently."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

NOT_BEFORE_THE_FIRST_FRAME = ("console.view.fleet", "console.tui.fleet_home", "console.tui.fleet_poll", "watchfiles",
                              "anyio", "textual.widgets._text_area", "console.providers.registry", "console.cli.wait")

# The attach's path, as console.cli does it: its grammar, its command's module, the app built with its run's
# screen (console.tui.launch.build_attach_app).
CODE = """
import sys
from console.cli.parser import build_parser, console_only
args = build_parser(console_only(['attach', 'x'], True)).parse_args(['attach', 'x'])
import console.cli.views
from pathlib import Path
from console.engine.job_files import JobPaths
from console.tui.app import ConsoleApp
app = ConsoleApp.for_attach(JobPaths(Path(sys.argv[1])), job_title='x')
assert app.runs.own is not None
print(sorted(m for m in sys.modules if m.split('.')[0] in ('console', 'watchfiles', 'anyio', 'textual')))
"""


def test_an_attach_is_built_without_what_its_first_frame_does_not_need(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    (folder / ".console").mkdir(parents=True)
    env = {**os.environ, "HOME": str(tmp_path), "AGENT_CONSOLE_DATA_DIR": str(tmp_path / "data"),
           "AGENT_CONSOLE_CONFIG": str(tmp_path / "config.toml")}
    out = subprocess.run([sys.executable, "-c", CODE, str(folder)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    imported = set(ast.literal_eval(out.stdout))  # a list of module names, printed by the code above
    assert "console.tui.screens.run" in imported and "console.view.state" in imported  # it did build the run's screen
    assert imported.isdisjoint(NOT_BEFORE_THE_FIRST_FRAME), sorted(imported & set(NOT_BEFORE_THE_FIRST_FRAME))


# The fleet's first frame lists the store's rows, no log read (console.view.fleet.first_row): the typed events, the
# fold and each event's words (~45 ms of CPU, issue 37) are imported when the first log is folded, after it; and
# pydantic (~40 ms with its first model) when a log, a command or an odd theme file needs it.
FLEET_NOT_BEFORE_THE_FIRST_FRAME = ("pydantic", "console.engine.events", "console.engine.commands",
                                    "console.view.state", "console.view.present",
                                    "console.view.ledger", "console.view.story", "console.view.answering",
                                    "console.tui.follow", "console.tui.bridge", "console.tui.screens.run",
                                    "watchfiles", "anyio")

# The fleet's path, as console.cli does it: its grammar, its command's module, the app built for the store and run
# headless; when the first frame (the store's rows) is drawn and the poller's thread waits for it, what is imported
# is printed and the app leaves before the poller reads a log.
FLEET_CODE = """
import sys, time
from pathlib import Path
from console.cli.parser import build_parser, console_only
args = build_parser(console_only([], True)).parse_args([])
import console.cli.views
from console.tui import fleet_home
from console.tui.launch import build_fleet_app

start = fleet_home.FleetHome.start

def started(self, after_refresh, worker):
    def drawn():
        waiting = time.monotonic() + 10
        while not self.poller.drawn._cond._waiters and time.monotonic() < waiting:
            time.sleep(0.01)  # the poller's thread up to its wait for this frame: what it imports before, it has
        rows = self.view.query_one('#runs').row_count
        print(rows, sorted(m for m in sys.modules if m.split('.')[0] in ('console', 'watchfiles', 'anyio', 'pydantic')))
        self.fleet.poll = lambda *a, **kw: sys.exit('no log is read in this test')
        self.view.app.exit()
    after_refresh(drawn)  # before the poller is let go (start's own after_refresh)
    start(self, after_refresh, worker)

fleet_home.FleetHome.start = started
app = build_fleet_app(Path(sys.argv[1]), watch=False, animations=False, keymap={})
app.run(headless=True)
"""


def test_the_fleets_first_frame_is_drawn_without_the_events(tmp_path: Path) -> None:
    from tests.tui.fleet_runs import make_fleet

    fx = make_fleet(tmp_path)
    env = {**os.environ, "HOME": str(tmp_path), "AGENT_CONSOLE_DATA_DIR": str(tmp_path / "data"),
           "AGENT_CONSOLE_CONFIG": str(tmp_path / "config.toml")}
    out = subprocess.run([sys.executable, "-c", FLEET_CODE, str(fx.store_path)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows, listed = out.stdout.strip().splitlines()[-1].split(" ", 1)
    imported = set(ast.literal_eval(listed))  # a list of module names, printed by the code above
    assert int(rows) == len(fx.runs)  # the first frame did list the store's runs
    assert "console.tui.screens.fleet" in imported and "console.view.fleet" in imported
    assert not {m for m in imported if m.startswith(FLEET_NOT_BEFORE_THE_FIRST_FRAME)}, \
        sorted(m for m in imported if m.startswith(FLEET_NOT_BEFORE_THE_FIRST_FRAME))
