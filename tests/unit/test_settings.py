"""Settings: the config file is read safely and typed strictly; env vars keep their string parsing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from console.engine.job import JobError, LimitsSection, ModelSection
from console.engine.job_config import JobConfig
from console.engine.run_settings import RunSettings
from console.settings import Settings, load_settings, resolve_run_settings


@pytest.fixture
def config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("")
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(path))
    return path


def _one_line_error(path: Path, *needles: str) -> str:
    with pytest.raises(JobError) as err:
        load_settings()
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg, msg
    for needle in needles:
        assert needle in msg, msg
    return msg


@pytest.mark.parametrize(
    "toml, key, needle",
    [
        ('auto_restart = "yes"\n', "auto_restart", "valid boolean"),
        ('max_turns = "10"\n', "max_turns", "valid integer"),
        ("speed = true\n", "speed", "valid number"),
        ("context_window = 1.5\n", "context_window", "valid integer"),
        ("context_window = 1000000000\n", "context_window", "less than or equal to 100000000"),
        ("speed = nan\n", "speed", "finite number"),
        ("max_write_mb = 0\n", "max_write_mb", "greater than 0"),
        ("max_job_mb = -2\n", "max_job_mb", "greater than 0"),
        ("data_dir = 5\n", "data_dir", "path"),
        ("openai_api_key = 5\n", "openai_api_key", "string"),
        ("keys = {checkpoint = 1}\n", "keys.checkpoint", "valid string"),
        ("provider = 'gpt'\n", "provider", "unknown provider 'gpt' (choose scripted, openai, anthropic)"),
        ("nonsense = 1\n", "nonsense", "unknown key"),
        ('base_url = "http://[::1"\n', "base_url", "Invalid IPv6 URL"),
        ('base_url = "ftp://example.com"\n', "base_url", "http:// or https://"),
    ],
)
def test_config_file_values_are_strictly_typed(config: Path, toml: str, key: str, needle: str) -> None:
    config.write_text(toml)
    _one_line_error(config, f"key '{key}'", needle)


def test_config_file_values_that_are_fine(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_CONSOLE_DATA_DIR")  # the env var would beat the file
    config.write_text('speed = 2\nmax_write_mb = 16\nmax_job_mb = 2048.5\ndata_dir = "/tmp/x"\n'
                      'openai_api_key = "sk-test-123456"\nbase_url = "http://127.0.0.1:11434/v1"\n'
                      'auto_restart = false\n[keys]\ncheckpoint = "ctrl+k"\n')
    s = load_settings()
    assert s.speed == 2.0 and s.max_write_mb == 16.0 and s.max_job_mb == 2048.5
    assert s.data_dir == Path("/tmp/x") and s.openai_api_key.get_secret_value() == "sk-test-123456"
    assert s.base_url == "http://127.0.0.1:11434/v1" and s.auto_restart is False
    assert s.keys == {"checkpoint": "ctrl+k"}


def test_defaults_of_the_new_limits(config: Path) -> None:
    s = load_settings()
    assert (s.max_write_mb, s.max_job_mb) == (4.0, 1024.0)


def test_env_vars_keep_string_parsing(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config.write_text("speed = 1\nauto_restart = true\n")
    monkeypatch.setenv("AGENT_CONSOLE_SPEED", "0")
    monkeypatch.setenv("AGENT_CONSOLE_AUTO_RESTART", "false")
    monkeypatch.setenv("AGENT_CONSOLE_MAX_TURNS", "10")
    monkeypatch.setenv("AGENT_CONSOLE_MAX_WRITE_MB", "0.5")
    monkeypatch.setenv("AGENT_CONSOLE_MAX_JOB_MB", "10")
    s = load_settings()
    assert (s.speed, s.auto_restart, s.max_turns, s.max_write_mb, s.max_job_mb) == (0.0, False, 10, 0.5, 10.0)


@pytest.mark.parametrize(
    "var, value, key",
    [
        ("AGENT_CONSOLE_BASE_URL", "http://[::1", "base_url"),
        ("AGENT_CONSOLE_BASE_URL", "ftp://x", "base_url"),
        ("AGENT_CONSOLE_SPEED", "nan", "speed"),
        ("AGENT_CONSOLE_MAX_WRITE_MB", "0", "max_write_mb"),
        ("AGENT_CONSOLE_CONTEXT_WINDOW", "1" + "0" * 30, "context_window"),
    ],
)
def test_bad_env_vars_name_the_key(config: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str,
                                   key: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(JobError) as err:
        load_settings()
    assert f"key '{key}'" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"speed = \n", "not valid TOML"),
        (b"speed = 1\xff\n", "not UTF-8"),
        (b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n", "nested too deeply"),
        (b"keys = " + b"{a = " * 3000 + b"1" + b"}" * 3000 + b"\n", "nested too deeply"),
        (b"speed = " + b"1" * 5000 + b"\n", "not usable TOML"),
        (b"#" * ((1 << 20) + 1), "too large"),
    ],
    ids=["syntax", "not-utf8", "nested-arrays", "nested-tables", "5000-digit-int", "over-1MiB"],
)
def test_unreadable_config_file_is_one_line(config: Path, content: bytes, needle: str) -> None:
    config.write_bytes(content)
    _one_line_error(config, needle, "the settings file")


def test_config_file_that_is_a_directory_or_a_fifo(config: Path) -> None:
    config.unlink()
    config.mkdir()
    _one_line_error(config, "is a directory")
    config.rmdir()
    os.mkfifo(config)
    start = time.monotonic()
    _one_line_error(config, "not a regular file")
    assert time.monotonic() - start < 5


def test_a_missing_config_file_is_fine_unless_named(config: Path, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    # The default place (no AGENT_CONSOLE_CONFIG): no file is no settings, which is fine.
    monkeypatch.delenv("AGENT_CONSOLE_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert load_settings().provider == "scripted"
    # Named on purpose and missing: a typo that must not run silently with no settings.
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(tmp_path / "typo.toml"))
    missing = (r"AGENT_CONSOLE_CONFIG names .*typo\.toml, which does not exist: create it \(an empty file is the "
               r"defaults\) or unset the variable$")
    with pytest.raises(JobError, match=missing):
        load_settings()


def _run_settings(**kw: object) -> RunSettings:
    return resolve_run_settings(Settings(), JobConfig(**kw))  # type: ignore[arg-type]


def test_new_limits_resolve_from_job_toml_then_settings(config: Path) -> None:
    rs = _run_settings()
    assert (rs.max_write_mb, rs.max_job_mb) == (4.0, 1024.0)
    rs = _run_settings(limits=LimitsSection(max_write_mb=1.5, max_job_mb=64))
    assert (rs.max_write_mb, rs.max_job_mb) == (1.5, 64.0)
    config.write_text("max_write_mb = 2\n")
    assert resolve_run_settings(load_settings(), JobConfig()).max_write_mb == 2.0


def test_base_url_flag_is_validated(config: Path) -> None:
    s = Settings()
    job = JobConfig(model=ModelSection(base_url="http://127.0.0.1:11434/v1"))
    assert resolve_run_settings(s, job).base_url == "http://127.0.0.1:11434/v1"
    assert resolve_run_settings(s, job, base_url="https://x.example/v1").base_url == "https://x.example/v1"
    for bad, needle in [("http://[::1", "Invalid IPv6 URL"), ("ftp://x", "http:// or https://"),
                        ("http://", "no host")]:
        with pytest.raises(JobError) as err:
            resolve_run_settings(s, job, base_url=bad)
        assert str(err.value).startswith(f"--base-url {bad!r}: ") and needle in str(err.value)
