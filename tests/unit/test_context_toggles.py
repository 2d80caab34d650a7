"""Seed 003's toggles as settings: ``requires_context`` (working memory in the prompts; on by default here, off in
the seed) and ``file_index`` (the find_files tool; off by default) in job.toml's [context], the config file and the
environment, strictly typed, kept by the launch record a resume starts from; and what a guardrail or a declared
command may name."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.cli import launch_flags
from console.engine.job import JobError
from console.engine.job_config import JobConfig, load_job_config
from console.engine.launch import Launch, changes, read_launch, write_launch
from console.engine.loop import SessionDeps, build_request
from console.engine.operator import OperatorState
from console.engine.runtime import Runtime
from console.engine.tools import default_registry
from console.providers.scripted import ScriptedProvider
from console.settings import load_settings, resolve_run_settings
from tests.conftest import run_settings
from tests.provenance_support import earlier_run, operator_seal, unsealed


@pytest.fixture
def config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("")
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(path))
    return path


def resolved(job: JobConfig | None = None):
    return resolve_run_settings(load_settings(), job or JobConfig())


def test_defaults_then_the_config_file_then_the_environment_then_job_toml(config: Path, make_job,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    rs = resolved()
    assert (rs.requires_context, rs.file_index) == (True, False)
    config.write_text("requires_context = false\nfile_index = true\n")
    rs = resolved()
    assert (rs.requires_context, rs.file_index) == (False, True)
    monkeypatch.setenv("AGENT_CONSOLE_REQUIRES_CONTEXT", "true")
    assert resolved().requires_context is True
    job = load_job_config(make_job(files={"job.toml": "[context]\nrequires_context = false\nfile_index = false\n"}))
    rs = resolved(job)
    assert (rs.requires_context, rs.file_index) == (False, False)


@pytest.mark.parametrize(("toml", "needle"), [
    ('[context]\nrequires_context = "no"\n', "context.requires_context"),
    ("[context]\nrequires_context = 0\n", "context.requires_context"),
    ('[context]\nfile_index = "yes"\n', "context.file_index"),
    ("[context]\nrequire_context = false\n", "key 'context.require_context': unknown key"),
])
def test_job_toml_takes_booleans_only_and_names_a_typo(make_job, toml: str, needle: str) -> None:
    with pytest.raises(JobError) as err:
        load_job_config(make_job(files={"job.toml": toml}))
    assert needle in str(err.value)


def test_the_config_file_takes_booleans_only(config: Path) -> None:
    config.write_text('file_index = "maybe"\n')
    with pytest.raises(JobError, match="file_index"):
        load_settings()


def test_a_resume_keeps_what_the_run_was_started_with(config: Path, make_job) -> None:
    paths = make_job(files={"job.toml": "[context]\nrequires_context = false\nfile_index = true\n"})
    rs = resolved(load_job_config(paths))
    record = Launch(provider=rs.provider, model=rs.model, requires_context=rs.requires_context,
                    file_index=rs.file_index)
    paths.state.mkdir(exist_ok=True)
    write_launch(paths, record, operator_seal())
    # Between the start and the resume, job.toml and the config file say otherwise: the run keeps its prompts.
    paths.job_toml.write_text("[context]\nrequires_context = true\nfile_index = false\n")
    config.write_text("requires_context = true\n")
    recorded = read_launch(paths, operator_seal())
    assert recorded == record
    flags = {k: v for k, v in launch_flags(recorded, {}, False).items() if k not in ("script", "notify")}
    rs = resolve_run_settings(load_settings(), load_job_config(paths), **flags)
    assert (rs.requires_context, rs.file_index) == (False, True)


def test_a_record_from_before_the_toggles_resumes_with_the_settings(config: Path, make_job) -> None:
    paths = make_job(files={"job.toml": "[context]\nrequires_context = false\n"})
    earlier_run(paths.root)  # a record from before the toggles is a run's from before seals
    unsealed(paths, {"version": 2, "provider": "scripted", "model": "scripted-agent", "carryover_turns": 3})
    recorded = read_launch(paths, operator_seal())
    assert recorded is not None and recorded.requires_context is None and recorded.file_index is None
    flags = {k: v for k, v in launch_flags(recorded, {}, False).items() if k not in ("script", "notify")}
    rs = resolve_run_settings(load_settings(), load_job_config(paths), **flags)
    assert (rs.requires_context, rs.file_index) == (False, False)
    # Written down at this resume, not changed by it: the launch_settings event says no change.
    now = Launch(provider=rs.provider, model=rs.model, carryover_turns=3, requires_context=False, file_index=False)
    assert changes(recorded, now) == []
    assert changes(now, Launch(provider=rs.provider, model=rs.model, carryover_turns=3, requires_context=True,
                               file_index=False)) == ["requires_context: False -> True"]


def test_find_files_is_a_built_in_name_and_a_guardrail_may_name_it_only_with_the_index(make_job) -> None:
    paths = make_job()
    paths.job_toml.write_text('[[tools]]\nname = "find_files"\ndescription = "x"\ncommand = ["true"]\n')
    with pytest.raises(JobError, match="the name of a built-in tool"):
        load_job_config(paths)
    gate = '[[guardrails.policies]]\ntype = "sequential"\ndependencies = { write_file = ["find_files"] }\n'
    paths.job_toml.write_text("[context]\nfile_index = false\n" + gate)
    with pytest.raises(JobError, match="'find_files' is not a tool of this job"):
        load_job_config(paths)
    for on in ("[context]\nfile_index = true\n", ""):  # on, or left to the settings
        paths.job_toml.write_text(on + gate)
        assert load_job_config(paths).guardrails.policies


def test_the_protected_layer_with_and_without_working_memory(make_job, clock) -> None:
    from console.engine import events as ev

    paths = make_job()
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    rt.memory.record("Read the instructions", clock.now())
    rt.memory.block("Call the API", "no key", clock.now())
    for on in (True, False):
        deps = SessionDeps(rt, ScriptedProvider(clock=clock), default_registry(), run_settings(requires_context=on),
                           OperatorState())
        protected = build_request(deps, "system", []).protected
        assert ("WORKING MEMORY" in protected) is on
        assert ('"Read the instructions"' in protected) is on and ("no key" in protected) is on
        assert "ACTIVE TODO LIST" in protected and "MAIN PLAN" in protected  # the rest of layer 2 either way
