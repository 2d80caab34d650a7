from __future__ import annotations

import contextlib
import os
import time
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.engine.job import (
    JobError,
    JobPaths,
    prepare_run,
    validate_base_url,
    validate_job_folder,
)
from console.engine.job_config import JobConfig, load_job_config
from console.settings import Settings, load_settings, resolve_run_settings
from tests.sweeps import examples


def test_job_toml_errors_name_the_key(make_job) -> None:
    paths = make_job(files={"job.toml": "[context]\nwindow = 'big'\nsoft_treshold = 0.5\n"})
    with pytest.raises(JobError) as err:
        load_job_config(paths)
    msg = str(err.value)
    assert "key 'context.window': Input should be a valid integer" in msg
    assert "key 'context.soft_treshold': unknown key" in msg


@pytest.mark.parametrize(("toml", "key"), [
    # A union member's tag (static, composite, sequential) is pydantic's, not the file's: the key is as written.
    ('[[guardrails.feedback]]\ntype = "static"\nfeedback = "x"\non_file_created = "/tmp/r.md"\n',
     "guardrails.feedback.0.on_file_created"),
    ('[guardrails.completion]\ntype = "composite"\nall_must_pass = "yes"\nchecker = []\n',
     "guardrails.completion.all_must_pass"),
    ('[[guardrails.policies]]\ntype = "sequential"\ndependencies = { job_complete = ["run check"] }\n',
     "guardrails.policies.0.dependencies.job_complete.0"),
    ('[[guardrails.feedback]]\ntype = "deadline"\nevery_n_seconds = "often"\n',
     "guardrails.feedback.0.every_n_seconds"),
    ("[guardrails]\nbudget_token = 5\n", "guardrails.budget_token"),  # an unknown key: as written
])
def test_job_toml_errors_name_the_key_as_the_file_writes_it(make_job, toml: str, key: str) -> None:
    with pytest.raises(JobError) as info:
        load_job_config(make_job(files={"job.toml": toml}))
    assert f"key '{key}'" in str(info.value), str(info.value)


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


def test_runs_of_one_job_started_at_once_in_the_same_second_each_take_a_folder_of_their_own(
        make_job, tmp_path, monkeypatch) -> None:
    # Processes of their own (a script's `run --detach`, six at a time): each looked for a free name before any
    # made its folder, and all but one failed with "File exists" (benchmarks/fleet_scale.py hit it). Held here at
    # the worst moment: every caller has chosen its name before any makes its folder.
    import threading

    import console.engine.job as job_module

    src = make_job(files={"data/x.md": "x"})
    now = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
    callers = 6
    gate = threading.Barrier(callers)
    real_mkdir = os.mkdir

    first: set[int] = set()

    def mkdir(path, *args, **kwargs):
        if os.path.basename(path).startswith("job-") and threading.get_ident() not in first:
            first.add(threading.get_ident())  # each caller's first try waits for every other's
            with contextlib.suppress(threading.BrokenBarrierError):
                gate.wait(timeout=10)
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(job_module.os, "mkdir", mkdir)
    made: list[object] = []
    threads = [threading.Thread(target=lambda: made.append(prepare_run(src.root, tmp_path / "runs", now)))
               for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    monkeypatch.undo()
    roots = sorted(p.root.name for p in made)  # type: ignore[attr-defined]
    assert roots == sorted(["job-20260115-140000", *(f"job-20260115-140000-{n}" for n in range(2, callers + 1))])
    assert all((tmp_path / "runs" / name / "data/x.md").read_text() == "x" for name in roots)


def test_a_job_over_its_bound_leaves_no_folder_it_claimed(make_job, tmp_path) -> None:
    from console.engine.job import JobError

    src = make_job(files={"data/big.bin": "x" * 3_000_000})
    with pytest.raises(JobError, match="max_job_mb"):
        prepare_run(src.root, tmp_path / "runs", datetime(2026, 1, 15, 14, 0, tzinfo=UTC), max_job_mb=1.0)
    assert list((tmp_path / "runs").iterdir()) == []


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


# -- job.toml and the job folder: every bad input is one JobError line naming the file --------------------


def _one_line_error(paths: JobPaths, *needles: str) -> str:
    with pytest.raises(JobError) as err:
        load_job_config(paths)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(paths.job_toml)), msg
    for needle in needles:
        assert needle in msg, msg
    return msg


@pytest.mark.parametrize(
    "toml, key, needle",
    [
        ('[limits]\nauto_restart = "yes"\n', "limits.auto_restart", "valid boolean"),
        ("[model]\nspeed = true\n", "model.speed", "valid number"),
        ('[limits]\nmax_restarts = "10"\n', "limits.max_restarts", "valid integer"),
        ("[context]\nwindow = 1.5\n", "context.window", "valid integer"),
        ("[context]\nwindow = 1000000000\n", "context.window", "less than or equal to 100000000"),
        ("[model]\nspeed = nan\n", "model.speed", "finite number"),
        ("[model]\nspeed = inf\n", "model.speed", "finite number"),
        ("[model]\nspeed = 1000\n", "model.speed", "less than or equal to 100"),
        ("name = 5\n", "name", "valid string"),
        ("model = 5\n", "model", "valid dictionary"),
        ("[limits]\nmax_write_mb = 0\n", "limits.max_write_mb", "greater than 0"),
        ("[limits]\nmax_job_mb = -1.5\n", "limits.max_job_mb", "greater than 0"),
        ('[limits]\nmax_job_mb = "1G"\n', "limits.max_job_mb", "valid number"),
        ('[model]\nbase_url = "http://[::1"\n', "model.base_url", "Invalid IPv6 URL"),
        ('[model]\nbase_url = "ftp://example.com"\n', "model.base_url", "http:// or https://"),
        ('[model]\nbase_url = "http://"\n', "model.base_url", "no host"),
        ('[model]\nbase_url = "http://x:99999/v1"\n', "model.base_url", "Port out of range"),
        ('[model]\nbase_url = "127.0.0.1:11434"\n', "model.base_url", "http:// or https://"),
        ('[model]\nbase_url = "http://exa mple.com"\n', "model.base_url", "spaces"),
        ('[limits]\n"max\\nturns" = 1\n', "limits.max\\nturns", "unknown key"),  # the key's newline is escaped
    ],
)
def test_job_toml_is_strictly_typed(make_job, toml: str, key: str, needle: str) -> None:
    _one_line_error(make_job(files={"job.toml": toml}), f"key '{key}'", needle)


def test_job_toml_accepts_an_int_for_a_float_and_the_new_limits(make_job) -> None:
    cfg = load_job_config(make_job(files={"job.toml": (
        '[model]\nspeed = 2\nbase_url = "http://127.0.0.1:11434/v1"\n'
        "[limits]\nmax_write_mb = 8\nmax_job_mb = 0.5\nauto_restart = false\n")}))
    assert cfg.model.speed == 2.0 and isinstance(cfg.model.speed, float)
    assert (cfg.limits.max_write_mb, cfg.limits.max_job_mb, cfg.limits.auto_restart) == (8.0, 0.5, False)
    assert cfg.model.base_url == "http://127.0.0.1:11434/v1"
    assert JobConfig().limits.max_write_mb is None and JobConfig().limits.max_job_mb is None


def test_every_error_of_a_job_toml_is_on_one_line(make_job) -> None:
    msg = _one_line_error(make_job(files={"job.toml": "[context]\nwindow = 'big'\nsoft_treshold = 0.5\n"}),
                          "key 'context.window'", "key 'context.soft_treshold'")
    assert "; " in msg


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"[model\n", "not valid TOML"),
        (b"name = \xff\xfe\n", "not UTF-8 text"),
        (b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n", "nested too deeply"),
        (b"a = " + b"{b = " * 3000 + b"1" + b"}" * 3000 + b"\n", "nested too deeply"),
        (b"name = " + b"9" * 5000 + b"\n", "not usable TOML"),
        (b"# " + b"x" * (1 << 20) + b"\n", "too large"),
    ],
    ids=["syntax", "not-utf8", "nested-arrays", "nested-tables", "5000-digit-int", "over-1MiB"],
)
def test_unreadable_job_toml_is_one_line(make_job, content: bytes, needle: str) -> None:
    paths = make_job()
    paths.job_toml.write_bytes(content)
    _one_line_error(paths, needle)


def test_job_toml_that_is_a_directory_or_a_fifo(make_job) -> None:
    paths = make_job()
    paths.job_toml.mkdir()
    _one_line_error(paths, "is a directory")
    paths.job_toml.rmdir()
    os.mkfifo(paths.job_toml)
    start = time.monotonic()
    _one_line_error(paths, "not a regular file")  # and it does not block on the FIFO
    assert time.monotonic() - start < 5


def test_job_toml_that_is_a_dangling_or_looping_symlink(make_job) -> None:
    paths = make_job()
    paths.job_toml.symlink_to(paths.root / "job.toml")  # a loop
    _one_line_error(paths, "cannot be read")


def test_instructions_must_be_a_regular_file(tmp_path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "instructions.md").mkdir()
    with pytest.raises(JobError, match=r"instructions\.md is a directory"):
        validate_job_folder(tmp_path / "job")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "instructions.md")
    with pytest.raises(JobError, match=r"instructions\.md is not a regular file"):
        validate_job_folder(tmp_path / "fifo")
    (tmp_path / "file").write_text("x")
    with pytest.raises(JobError, match="not a file"):
        validate_job_folder(tmp_path / "file")


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "ftp://x", "http://", "//host/v1", "http://x:port", "http://[::1]]", "http://[v1.x]/",
     "http://1.2.3.456/", "http://☃.com/", "http://a b/", "http://x/\n", "", "x" * 3000],
)
def test_validate_base_url_refuses(url: str) -> None:
    with pytest.raises(ValueError) as err:
        validate_base_url(url)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:11434/v1", "https://api.openai.com/v1", "http://localhost:8000", "http://[::1]:8080/v1",
     "HTTPS://Example.COM/v1/", "http://xn--n3h.com/", "http://[fe80::1%25eth0]:80/"],
)
def test_validate_base_url_accepts(url: str) -> None:
    assert validate_base_url(url) == url


def test_base_urls_accepted_are_accepted_by_the_sdks() -> None:
    import anthropic
    import openai

    for url in ["http://127.0.0.1:11434/v1", "http://[::1]:8080/v1", "http://u:p@[::1]:8/", "http://a_b/",
                "https://x.example/v1?x=1#y", "http://[fe80::1%25eth0]/"]:
        validate_base_url(url)
        openai.OpenAI(api_key="k", base_url=url)
        anthropic.Anthropic(api_key="k", base_url=url)


_TOML_PIECES = ["[model]", "[limits]", "[context]", "[[x]]", "[a.b]", "name", "speed", "window", "max_turns",
                "auto_restart", "base_url", "max_write_mb", " = ", "=", '"', "'", '"""', "true", "yes", "1", "-1",
                "1.5", "1e400", "nan", "inf", "0x1F", "1979-05-27", "[", "]", "{", "}", ",", "\n", "\\", "\\u00e9",
                "#", " ", "\t", "\x00", "é", "http://[::1"]


@pytest.mark.sweep
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(
    st.lists(st.sampled_from(_TOML_PIECES), max_size=30).map(lambda xs: "".join(xs).encode("utf-8")),
    st.binary(max_size=200),
    st.text(max_size=100).map(lambda s: s.encode("utf-8", "surrogatepass")),
))
def test_load_job_config_returns_a_config_or_raises_job_error(tmp_path_factory, content: bytes) -> None:
    root = tmp_path_factory.mktemp("job")
    (root / "instructions.md").write_text("x")
    (root / "job.toml").write_bytes(content)
    try:
        cfg = load_job_config(JobPaths(root))
    except JobError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(root / "job.toml"))
    else:
        assert isinstance(cfg, JobConfig)


@pytest.mark.parametrize(("tools", "says"), [
    ('[[tools]]\nname = "read_file"\ndescription = "x"\ncommand = ["true"]\n', "the name of a built-in tool"),
    ('[[tools]]\nname = "lint"\ndescription = "x"\ncommand = ["true"]\n' * 2, "two tools are named 'lint'"),
])
def test_job_declared_tools_may_not_shadow_or_repeat(make_job, tools: str, says: str) -> None:
    with pytest.raises(JobError, match="key 'tools'") as info:
        load_job_config(make_job(files={"job.toml": tools}))
    assert says in str(info.value)


@pytest.mark.parametrize("toml, suggested", [
    ("[contex]\nwindow = 32000\n", "key 'contex': unknown key (did you mean 'context'?"),
    ("[context]\nwindw = 32000\n", "key 'context.windw': unknown key (did you mean 'context.window'?"),
    ("[limits]\nmax_turn = 3\n", "key 'limits.max_turn': unknown key (did you mean 'limits.max_turns'?"),
    ('[[tools]]\nname = "t"\ndescription = "d"\ncommand = ["true"]\ntimout = 5\n',
     "key 'tools.0.timout': unknown key (did you mean 'tools.0.timeout'?"),
])
def test_an_unknown_job_toml_key_names_the_closest_known_one(make_job, toml, suggested) -> None:
    """`[contex]` got "unknown key (check the spelling; ...)" and no word of `[context]`."""
    paths = make_job(files={"job.toml": toml})
    with pytest.raises(JobError) as err:
        load_job_config(paths)
    msg = str(err.value)
    assert msg.startswith(str(paths.job_toml)) and suggested in msg and "\n" not in msg


def test_a_key_like_no_known_one_suggests_nothing(make_job) -> None:
    paths = make_job(files={"job.toml": "[zzzzzz]\nq = 1\n"})
    with pytest.raises(JobError) as err:
        load_job_config(paths)
    assert "key 'zzzzzz': unknown key (check the spelling;" in str(err.value) and "did you mean" not in str(err.value)
