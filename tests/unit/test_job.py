from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.engine.job import JobError, JobPaths, load_job_config, prepare_run, validate_job_folder
from console.settings import Settings, load_settings, resolve_run_settings


def test_job_toml_errors_name_the_key(make_job) -> None:
    paths = make_job(files={"job.toml": "[context]\nwindow = 'big'\nsoft_treshold = 0.5\n"})
    with pytest.raises(JobError) as err:
        load_job_config(paths)
    msg = str(err.value)
    assert "key 'context.window': Input should be a valid integer" in msg
    assert "key 'context.soft_treshold': unknown key" in msg


def test_job_toml_syntax_error_and_threshold_order(make_job) -> None:
    with pytest.raises(JobError, match="not valid TOML"):
        load_job_config(make_job(files={"job.toml": "[model\n"}))


def test_thresholds_must_be_ordered(make_job) -> None:
    paths = make_job(files={"job.toml": "[context]\nsoft_threshold = 0.9\nhard_threshold = 0.8\n"})
    with pytest.raises(JobError, match="soft_threshold must be below hard_threshold"):
        load_job_config(paths)


def test_missing_folder_and_instructions(tmp_path) -> None:
    with pytest.raises(JobError, match="no such job folder"):
        validate_job_folder(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(JobError, match=r"missing instructions\.md"):
        validate_job_folder(tmp_path / "empty")


def test_prepare_run_copies_into_a_fresh_folder_without_state(make_job, tmp_path) -> None:
    src = make_job(files={"data/x.md": "x", ".console/todos.json": "{}"})
    now = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
    a = prepare_run(src.root, tmp_path / "runs", now)
    b = prepare_run(src.root, tmp_path / "runs", now)
    assert a.root != b.root and a.root.name == "job-20260115-140000"
    assert (a.root / "data/x.md").read_text() == "x"
    assert not (a.root / ".console").exists()


def test_settings_precedence(monkeypatch, tmp_path, make_job) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('context_window = 50000\nspeed = 2.0\n')
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(cfg))
    monkeypatch.setenv("AGENT_CONSOLE_SPEED", "3.0")
    s = load_settings()
    assert s.context_window == 50000 and s.speed == 3.0  # env beats the config file
    job = load_job_config(make_job(files={"job.toml": "[context]\nwindow = 9000\n"}))
    rs = resolve_run_settings(s, job, context_window=None)
    assert rs.context_window == 9000  # job.toml beats settings
    assert resolve_run_settings(s, job, context_window=7000).context_window == 7000  # flags beat all


def test_bad_settings_name_the_key(monkeypatch) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_CONTEXT_WINDOW", "lots")
    with pytest.raises(JobError, match="context_window"):
        load_settings()


def test_api_keys_are_secret() -> None:
    s = Settings(openai_api_key="sk-test-abcdef123456")
    assert "sk-test-abcdef123456" not in repr(s) and "sk-test-abcdef123456" not in str(s.model_dump())


def test_job_paths_layout(tmp_path) -> None:
    p = JobPaths(tmp_path)
    assert p.todos == tmp_path / ".console" / "todos.json"
    assert p.events == tmp_path / ".console" / "events.jsonl"
    assert p.archive == tmp_path / ".console" / "archive"
