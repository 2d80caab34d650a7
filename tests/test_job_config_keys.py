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
