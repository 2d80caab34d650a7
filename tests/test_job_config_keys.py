"""A job.toml that sets one of the operator's own settings is told so, not "check the spelling" (found by a new
operator's trial: `[telemetry]` and `[budgets]` in a job.toml read as typos)."""

from __future__ import annotations

import pytest

from console.engine.job_config import OPERATOR_ONLY, JobConfig, load_job_config
from console.engine.job_files import JobError, JobPaths
from console.settings import Settings


def test_each_operator_only_key_is_the_config_files_and_none_a_job_tomls() -> None:
    assert OPERATOR_ONLY.issubset(Settings.model_fields)
    assert not OPERATOR_ONLY & set(JobConfig.model_fields)


@pytest.mark.parametrize("text", ['[telemetry]\nendpoint = "http://collector:4318"\n', "[budgets]\ndaily_usd = 1.0\n",
                                  'data_dir = "/tmp/elsewhere"\n', 'store = "postgresql://u@db/x"\n'])
def test_a_job_toml_setting_the_operators_own_setting_is_told_whose_it_is(tmp_path, text) -> None:
    paths = JobPaths(tmp_path)
    paths.job_toml.write_text(text)
    with pytest.raises(JobError) as raised:
        load_job_config(paths)
    said = str(raised.value)
    key = text.strip("[").split("]")[0].split(" ")[0]
    assert f"'{key}' is the operator's setting, in their config file" in said
    assert "check the spelling" not in said and "remove it from job.toml" in said
    assert "collector" not in said and "postgresql" not in said  # the values are not repeated


def test_several_are_named_together_and_a_real_typo_is_still_a_typo(tmp_path) -> None:
    paths = JobPaths(tmp_path)
    paths.job_toml.write_text("[notify]\nurls = []\n[budgets]\ndaily_usd = 1.0\n")
    with pytest.raises(JobError, match="'budgets', 'notify' are the operator's setting"):
        load_job_config(paths)
    paths.job_toml.write_text("[limit]\nmax_turns = 5\n")
    with pytest.raises(JobError, match="did you mean 'limits'"):
        load_job_config(paths)


@pytest.mark.parametrize("key", ["sandbox_limits", "retry_total_wait", "idle_timeout", "turn_timeout"])
def test_the_operators_bounds_on_every_run_are_theirs_too(tmp_path, key) -> None:
    """A trial's job.toml: `retry_total_wait = 1` was "unknown key (check the spelling)", `[sandbox_limits]` "did
    you mean 'sandbox'?": the operator's bounds, said as such."""
    paths = JobPaths(tmp_path)
    paths.job_toml.write_text(f"[{key}]\ncpu_seconds = 1\n" if key == "sandbox_limits" else f"{key} = 1\n")
    with pytest.raises(JobError, match=f"'{key}' is the operator's setting"):
        load_job_config(paths)


@pytest.mark.parametrize(("text", "said"), [
    ("max_turns = 5\n", "key 'max_turns': goes under [limits] in a job.toml ([limits] max_turns = ...)"),
    ('provider = "openai"\n', "key 'provider': goes under [model] in a job.toml ([model] provider = ...)"),
    ("context_window = 1000\n", "key 'context_window': goes under [context] in a job.toml ([context] window = ...)"),
    ('[mcp]\nallow = ["x"]\n', "key 'mcp': a job.toml's is its list of servers, one [[mcp]] each"),
])
def test_a_config_files_key_at_a_job_tomls_top_is_told_where_it_goes(tmp_path, text, said) -> None:
    paths = JobPaths(tmp_path)
    paths.job_toml.write_text(text)
    with pytest.raises(JobError) as raised:
        load_job_config(paths)
    assert said in str(raised.value) and "check the spelling" not in str(raised.value)
    if "goes under" in said:  # what it names is what a job.toml takes
        table, key = said.split(" ([", 1)[1].split(" = ")[0].split("] ")
        paths.job_toml.write_text(f"[{table}]\n{key} = {text.split(' = ', 1)[1]}")
        assert load_job_config(paths) is not None


def test_a_misplaced_key_is_said_with_the_files_other_faults(tmp_path) -> None:
    paths = JobPaths(tmp_path)
    paths.job_toml.write_text("speed = 1\n[limits]\nmax_turns = 0\n")
    with pytest.raises(JobError) as raised:
        load_job_config(paths)
    said = str(raised.value)
    assert "key 'limits.max_turns'" in said and "key 'speed': goes under [model] in a job.toml" in said
    assert said.count("\n") == 0
