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
