"""What the command line imports to start (issue 20: `jobs` and the operator's commands start in under 0.3 s;
benchmarks/cli_start.py times them). Checked as sets of modules in a fresh interpreter, never as times: the console,
the providers' SDKs and the run's machinery stay out of the commands that do not need them."""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NEVER = ("textual", "openai", "anthropic", "apprise", "watchfiles", "console.tui", "console.headless",
         "console.notify", "console.providers.openai_provider", "console.providers.anthropic_provider")
# The run's machinery: a run needs it, a list of runs or a queued command does not.
RUN_MACHINERY = ("console.engine.events", "console.engine.job_config", "console.engine.guardrails",
                 "console.engine.tools.files", "console.engine.sandbox", "console.engine.supervisor",
                 "console.engine.loop", "console.runner", "console.engine.messages", "console.engine.model",
                 "console.engine.context")


def modules_after(code: str, tmp_path: Path, *argv: str) -> set[str]:
    """The modules imported by running ``code`` (then the command line with ``argv``) in a fresh interpreter."""
    script = (f"import sys, json\n{code}\n"
              "if len(sys.argv) > 1:\n"
              "    from console.cli import main\n"
              "    try:\n        main(sys.argv[1:])\n    except SystemExit:\n        pass\n"
              "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")}
    env.update(AGENT_CONSOLE_DATA_DIR=str(tmp_path / "data"), AGENT_CONSOLE_CONFIG=str(tmp_path / "config.toml"),
               PYTHONPATH=str(REPO))
    (tmp_path / "config.toml").write_text("")
    proc = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, env=env,
                          timeout=60, stdin=subprocess.DEVNULL)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def loaded(mods: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods for n in names if m == n or m.startswith(n + "."))


def test_importing_the_command_line_imports_neither_the_console_nor_an_sdk(tmp_path) -> None:
    mods = modules_after("import console.cli, console.entry", tmp_path)
    assert loaded(mods, NEVER) == []
    assert loaded(mods, ("pydantic", "pydantic_settings", "rich", *RUN_MACHINERY)) == []


@pytest.mark.parametrize("argv,allowed", [
    (("--help",), ()),  # the grammar alone: plain data, not even pydantic
    (("jobs",), ("rich",)),  # where the runs are, read without the settings' models (console.locations)
])
def test_help_and_jobs_import_only_what_they_use(tmp_path, argv, allowed) -> None:
    mods = modules_after("", tmp_path, *argv)
    assert loaded(mods, NEVER) == [] and loaded(mods, RUN_MACHINERY) == []
    assert loaded(mods, tuple({"pydantic", "pydantic_settings", "rich"} - set(allowed))) == []
    assert "console.cli.parser" in mods  # (the command did run)


def test_jobs_lists_real_runs_without_pydantic_and_still_marks_an_unconfined_one(tmp_path) -> None:
    # Rows of every kind `jobs` looks into: a run whose sealed launch record says --unconfined (read from its
    # folder), one the store says is running that no process holds (its lock asked), one whose folder is gone.
    from datetime import UTC, datetime

    from console.engine.job_files import JobPaths
    from console.engine.launch import Launch, write_launch
    from console.engine.seal import Seal
    from console.engine.store import JobStore

    data = tmp_path / "data"
    store = JobStore(data / "jobs.db")
    now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    folders = {name: data / "runs" / name for name in ("loose", "crashed", "gone")}
    for name, folder in folders.items():
        (folder / ".console").mkdir(parents=True)
        store.started(folder, name, "scripted", "scripted-demo", now)
    store.completed(folders["loose"], now, 0.9, "done")
    write_launch(JobPaths(folders["loose"]), Launch(provider="scripted", model="scripted-demo", unconfined=True),
                 Seal.of(data))
    for f in folders["gone"].rglob("*"):
        f.rmdir()
    folders["gone"].rmdir()
    store.close()
    mods = modules_after("", tmp_path, "jobs", "--json")
    assert loaded(mods, ("pydantic", "pydantic_settings", *RUN_MACHINERY)) == []
    proc = subprocess.run([sys.executable, "-m", "console.cli", "jobs", "--json"], capture_output=True, text=True,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")},
                               "AGENT_CONSOLE_DATA_DIR": str(data),
                               "AGENT_CONSOLE_CONFIG": str(tmp_path / "config.toml"), "PYTHONPATH": str(REPO)},
                          timeout=60, stdin=subprocess.DEVNULL)
    rows = {r["name"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert {n: (r["status"], r["unconfined"]) for n, r in rows.items()} == {
        "loose": ("completed", True), "crashed": ("interrupted", False), "gone": ("gone", False)}


@pytest.mark.parametrize("by", ["folder", "id"])
def test_an_operator_command_imports_the_typed_commands_and_nothing_of_a_run(tmp_path, by) -> None:
    from datetime import UTC, datetime

    from console.engine.runs import run_id
    from console.engine.store import JobStore

    run = tmp_path / "data" / "runs" / "run"
    (run / ".console").mkdir(parents=True)
    (run / "instructions.md").write_text("a job\n")
    store = JobStore(tmp_path / "data" / "jobs.db")  # an id is looked up in the store (where the settings say)
    store.started(run, "run", "scripted", "scripted-demo", datetime(2026, 11, 30, tzinfo=UTC))
    store.close()
    mods = modules_after("", tmp_path, "pause", str(run) if by == "folder" else run_id(run), "--wait", "0")
    assert list((run / ".console" / "inbox").glob("*.json"))  # (the pause was queued)
    assert "console.engine.commands" in mods
    assert loaded(mods, NEVER) == [] and loaded(mods, (*RUN_MACHINERY, "pydantic_settings", "rich")) == []


def test_jobs_runs_with_the_collector_off_and_leaves_it_on(monkeypatch, capsys) -> None:
    # A short command's objects live until it exits a moment later: the collector's passes over them free nothing
    # (console.cli._COLLECTOR_OFF). Called in-process (as here), it must hand the collector back on, also
    # after a usage error.
    import gc

    import console.locations
    from console.cli import main

    seen: list[bool] = []
    real = console.locations.read_locations

    def read_locations():
        seen.append(gc.isenabled())
        return real()

    monkeypatch.setattr(console.locations, "read_locations", read_locations)
    assert gc.isenabled()
    assert main(["jobs"]) == 0
    assert "no runs yet" in capsys.readouterr().out
    assert seen == [False] and gc.isenabled()
    assert main(["jobs", "--limit", "0"]) == 2  # refused by the command itself (its flags' bounds)
    assert gc.isenabled()
    assert main(["jobs", "--no-such-flag"]) == 2  # refused by the grammar
    assert gc.isenabled()


def test_the_openai_provider_loads_the_sdk_without_its_unused_aiohttp_client(tmp_path) -> None:
    # ~9 MB and ~80 ms a runner (console.providers.lean_import); aiohttp itself still imports afterwards.
    mods = modules_after("import console.providers.openai_provider", tmp_path)
    assert "openai" in mods and loaded(mods, ("aiohttp",)) == []
    mods = modules_after("import console.providers.openai_provider, aiohttp", tmp_path)
    assert "aiohttp" in mods


def test_a_module_hidden_for_one_import_imports_after_it_and_one_already_loaded_is_never_hidden(
        tmp_path, monkeypatch) -> None:
    import importlib
    import json  # loaded before the block

    from console.providers.lean_import import without

    (tmp_path / "lean_probe.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lean_probe", raising=False)
    with without("json", "lean_probe"):
        assert sys.modules["json"] is json
        with pytest.raises(ImportError):
            importlib.import_module("lean_probe")
    assert importlib.import_module("lean_probe").LOADED
    monkeypatch.delitem(sys.modules, "lean_probe")


def test_the_openai_provider_imports_the_sdks_types_as_they_are_asked_for(tmp_path) -> None:
    # ~10 MB and ~0.25 s a runner: the SDK's ~470 type modules, of which a run of chat completions uses some 55.
    mods = modules_after("import console.providers.openai_provider", tmp_path)
    assert "openai.types" in mods and "openai.types.eval_create_params" not in mods
    assert len(loaded(mods, ("openai.types",))) < 100
    # A name the SDK's types offer, asked for later, is the one its submodule defines.
    mods = modules_after("import console.providers.openai_provider, openai\n"
                         "from openai.types.eval_create_params import EvalCreateParams as E\n"
                         "assert openai.types.EvalCreateParams is E", tmp_path)
    assert "openai.types.eval_create_params" in mods


def test_the_anthropic_provider_imports_the_sdk_without_its_other_clouds_clients(tmp_path) -> None:
    # A runner's import of the SDK: 84 -> 52 MB of peak memory, ~3,000 -> ~1,400 modules, 0.75 -> 0.3 s of CPU
    # (console.providers.lean_import): its other clouds' clients and tool runner import every one of its resources.
    lean = modules_after("import console.providers.anthropic_provider", tmp_path)
    whole = modules_after("import anthropic", tmp_path)
    assert "anthropic.resources.beta" in whole and "anthropic.lib.vertex" in whole
    assert loaded(lean, ("anthropic.resources", "anthropic.lib.vertex", "anthropic.lib.bedrock", "aiohttp")) == []
    assert len(loaded(lean, ("anthropic",))) < len(loaded(whole, ("anthropic",))) / 2
    # Every name is still there, the very object its part defines, imported when asked for; no stand-in of one is
    # ever handed out, to the package or to any of its modules.
    mods = modules_after(
        "import console.providers.anthropic_provider, anthropic, sys\n"
        "from console.providers.lean_import import _Pending\n"
        "assert not [(n, a) for n, m in list(sys.modules.items()) if m is not None and n.startswith('anthropic')\n"
        "            for a, v in list(vars(m).items()) if type(v) is _Pending]\n"
        "from anthropic.lib.vertex import AnthropicVertex\n"
        "assert anthropic.AnthropicVertex is AnthropicVertex and anthropic.beta_tool is not None\n"
        "from anthropic import AnthropicBedrockMantle, AnthropicFoundry, AsyncAnthropicGoogleCloud\n"
        "assert AnthropicFoundry is sys.modules['anthropic.lib.foundry'].AnthropicFoundry", tmp_path)
    assert "anthropic.lib.bedrock" in mods


def test_a_deferred_part_is_imported_when_one_of_its_names_is_asked_for(tmp_path, monkeypatch) -> None:
    import importlib

    from console.providers.lean_import import deferred

    pkg = tmp_path / "defer_probe"
    (pkg / "heavy").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .core import Core\nfrom .heavy import *\nfrom .side import S as Side\n"
                                     "from .odd import O\nfrom .star import *\n"
                                     "__all__ = ['Core', 'H', 'Side', 'O', 'T']\n"
                                     "for _n in __all__:\n    try:\n        globals()[_n].__module__ = 'defer_probe'\n"
                                     "    except (TypeError, AttributeError):\n        pass\n")
    (pkg / "core.py").write_text("class Core:\n    pass\n")
    (pkg / "heavy" / "__init__.py").write_text("from ._impl import H as H, _Hidden as _Hidden\n")
    (pkg / "heavy" / "_impl.py").write_text("class H:\n    pass\nclass _Hidden:\n    pass\n")
    (pkg / "side.py").write_text("S = object()\n")
    (pkg / "odd" / "__init__.py").parent.mkdir()
    (pkg / "odd" / "__init__.py").write_text("O = 1\n")  # named: deferred whatever it holds
    (pkg / "star").mkdir()
    (pkg / "star" / "__init__.py").write_text("T = 1\n")  # a star import of a part not only of import lines:
    # its names cannot be known without running it, so it is not deferred
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with deferred("defer_probe", ["heavy", "side", "odd", "star", "missing"]):
            probe = importlib.import_module("defer_probe")
        assert "defer_probe.heavy._impl" not in sys.modules and "defer_probe.side" not in sys.modules
        assert "defer_probe.heavy" not in sys.modules  # its stand-in is gone: an import of it imports it
        assert "defer_probe.star" in sys.modules and probe.T == 1  # imported as ever
        assert "defer_probe.odd" not in sys.modules and probe.O == 1 and "defer_probe.odd" in sys.modules
        assert probe.Core.__module__ == "defer_probe"
        h = probe.H
        assert h is importlib.import_module("defer_probe.heavy._impl").H and probe.H is h
        assert probe.Side is importlib.import_module("defer_probe.side").S
        with pytest.raises(AttributeError):
            _ = probe._Hidden  # a star import never gave it
        with pytest.raises(AttributeError):
            _ = probe.Nope
    finally:
        for m in [m for m in sys.modules if m.split(".")[0] == "defer_probe"]:
            del sys.modules[m]


def test_a_package_imported_lazily_gives_each_name_from_its_submodule_when_asked(tmp_path, monkeypatch) -> None:
    import importlib

    from console.providers.lean_import import lazy_inits

    for name, init in (("lazy_probe", '"""Doc."""\nfrom __future__ import annotations\n\nfrom .a import A as A\n'
                                      "from .b import B as Bee, C\n"),
                       ("eager_probe", "from .a import A as A\nX = 1\n"),  # a statement of another kind
                       ("after_probe", "from .a import A as A\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(init)
        (tmp_path / name / "a.py").write_text("A = object()\n")
        (tmp_path / name / "b.py").write_text("B = object()\nC = object()\n")
        (tmp_path / name / "c.py").write_text("D = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in [m for m in sys.modules if m.split(".")[0] in ("lazy_probe", "eager_probe", "after_probe")]:
        monkeypatch.delitem(sys.modules, m)
    try:
        with lazy_inits("lazy_probe", "eager_probe"):
            lazy = importlib.import_module("lazy_probe")
            eager = importlib.import_module("eager_probe")
            assert "lazy_probe.a" not in sys.modules and "lazy_probe.b" not in sys.modules
            assert "eager_probe.a" in sys.modules and eager.X == 1  # imported as ever
        from lazy_probe import A  # type: ignore[import-not-found]

        assert A is sys.modules["lazy_probe.a"].A and "lazy_probe.b" not in sys.modules
        assert lazy.Bee is importlib.import_module("lazy_probe.b").B and lazy.C is sys.modules["lazy_probe.b"].C
        assert importlib.import_module("lazy_probe.c").D == 1  # a submodule __init__ does not name
        with pytest.raises(AttributeError):
            _ = lazy.Nope
        with pytest.raises(ImportError):
            from lazy_probe import Nope  # type: ignore[import-not-found]  # noqa: F401
        assert {"A", "Bee", "C"} <= set(dir(lazy))
        importlib.import_module("after_probe")  # after the block: as ever
        assert "after_probe.a" in sys.modules
    finally:
        for m in [m for m in sys.modules if m.split(".")[0] in ("lazy_probe", "eager_probe", "after_probe")]:
            del sys.modules[m]


ANSI = re.compile(rb"\x1b\[[0-9;?<>=$]*[a-zA-Z~]|\x1b[()][AB0]|\x1b[=>]|\x1b\][^\x07]*\x07")


def modules_in_a_terminal(tmp_path: Path, marker: bytes, *argv: str) -> set[str]:
    """The modules a console command (attach, the fleet) imported by the time it drew ``marker`` on a terminal of
    its own (a pseudo-terminal, 120x30), then quit with q as an operator does."""
    out = tmp_path / "modules.json"
    script = ("import atexit, json, sys\n"
              f"atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
              "from console.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")}
    env.update(AGENT_CONSOLE_DATA_DIR=str(tmp_path / "data"), AGENT_CONSOLE_CONFIG=str(tmp_path / "config.toml"),
               PYTHONPATH=str(REPO), TERM="xterm-256color")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", script, *argv], stdin=slave, stdout=slave, stderr=slave, env=env,
                            cwd=tmp_path, start_new_session=True, close_fds=True)
    os.close(slave)
    seen, quit_sent = b"", False
    try:
        while proc.poll() is None:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    seen += os.read(master, 1 << 16)
                except OSError:
                    break
            if not quit_sent and marker in ANSI.sub(b"", seen):
                os.write(master, b"q")
                quit_sent = True
        assert proc.wait(60) == 0, ANSI.sub(b"", seen)[-2000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(master)
    assert quit_sent, ANSI.sub(b"", seen)[-2000:]
    return set(json.loads(out.read_text()))


def test_attach_and_the_fleet_open_without_the_settings_models(tmp_path) -> None:
    # Where the runs are, the theme and the [keys] are all a console reads of the settings (console.locations):
    # building pydantic-settings' models cost ~0.08 s of CPU of issue 37's 0.5 s for an attach, 0.3 s for the fleet.
    from console.engine.runs import run_id

    (tmp_path / "config.toml").write_text('speed = 0.0\ntheme = "agent-dark"\n[keys]\ncheckpoint = "ctrl+k"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")}
    env.update(AGENT_CONSOLE_DATA_DIR=str(tmp_path / "data"), AGENT_CONSOLE_CONFIG=str(tmp_path / "config.toml"),
               PYTHONPATH=str(REPO))
    # --speed 0: the job's own `speed = 1.0` wins over the config's (a paced run of ~5 s for nothing).
    ran = subprocess.run([sys.executable, "-m", "console.cli", "run", str(REPO / "sample_jobs" / "quickstart"),
                          "--headless", "--speed", "0"], capture_output=True, text=True, env=env, timeout=300,
                         stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr
    [folder] = (tmp_path / "data" / "runs").iterdir()
    rid = run_id(folder)
    for argv in (("attach", rid), ()):
        mods = modules_in_a_terminal(tmp_path, rid.encode() if not argv else b"quickstart", *argv)
        assert "textual.app" in mods  # (the console did open)
        assert loaded(mods, ("console.settings", "pydantic_settings")) == [], argv
