"""A run of the scripted demo model that gives up names the resume that goes on with a real model: a plain
`resume ID` (what it said) gives the same model the same job, and gives up again."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.processes import cli


def give_up(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A headless run of the demo model on a job it cannot do (a translation): it gives up."""
    job = tmp_path / "weekly"
    job.mkdir()
    (job / "instructions.md").write_text("# Weekly\n\n1. Translate notes.txt into French and write notes_fr.txt.\n")
    (job / "notes.txt").write_text("Meeting moved to Friday.\n")
    return subprocess.run(cli("run", "--headless", str(job), "--speed", "0"), capture_output=True, text=True,
                          timeout=120)


def test_the_demo_models_give_up_names_the_resume_with_a_real_model(tmp_path: Path) -> None:
    done = give_up(tmp_path)
    assert done.returncode != 0 and "the agent gave up" in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    rid = last.split("agent-console resume ")[1].split()[0]
    assert last == (f"agent-console: a real model can go on from where it stopped: agent-console resume {rid} "
                    "--provider anthropic --switch-model (or --provider openai), with the provider's API key set")
    # The command named is one the command line takes: without a key it says which one to set, nothing else.
    again = subprocess.run(cli("resume", rid, "--provider", "anthropic", "--switch-model"), capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 2
    assert again.stderr.strip() == "agent-console: anthropic: no API key - set ANTHROPIC_API_KEY"


def test_the_console_says_the_same_once_it_is_gone(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The same give-up under the console (`run JOB` in a terminal) said "once the cause is fixed, resume" when the
    console closed: the demo model is read from the run's launch record, sealed with the operator's key."""
    import os

    from console.cli.lifecycle import after_console
    from console.engine.job import JobPaths

    done = give_up(tmp_path)
    assert done.returncode != 0
    rid, folder = done.stdout.splitlines()[0].removeprefix("run ").split(": ", 1)
    paths = JobPaths(Path(folder))
    assert after_console(paths, Path(os.environ["AGENT_CONSOLE_DATA_DIR"])) == done.returncode
    said = capsys.readouterr().err.strip().splitlines()
    assert said[-1] == (f"agent-console: a real model can go on from where it stopped: agent-console resume {rid} "
                        "--provider anthropic --switch-model (or --provider openai), with the provider's API key set")
    # Without the operator's key the record says nothing: the plain hint, never a claim about the model.
    after_console(paths, None)
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("agent-console: once the cause is fixed, ")
