"""What a pod is given (console.kube.carry): every setting of console.settings.Settings has a decision (carried, or
this machine's only), and the carried ones resolve in the pod as they resolved here, the [notify] table's reminders
included. A garbage value in the pod's environment fails its start in one line; no secret shows on the way."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from console.cli import main
from console.kube import carry
from tests.unit.test_kube_manifests import by_kind, docs, dry_run, job_copy, pod_command

STORE_PASSWORD = "s3cr3t-Pg-pass"
STORE = f"postgresql://agents:{STORE_PASSWORD}@db.example.internal:5432/agents"
NOTIFY_TOKEN = "tok_9f8e7d6c5b4a"
NOTIFY = f"ntfy://{NOTIFY_TOKEN}@ntfy.example.com/ops"
REMIND = "AGENT_CONSOLE_NOTIFY_REMIND_MINUTES"
OTLP_KEY = "hcaik_0tlpK3y5ecret"
# Every setting a pod is given, away from its default (the round trip below proves nothing for a default).
EVERYTHING = f'''provider = "openai"
model = "gpt-5-mini"
base_url = "http://llm.example.internal:8000/v1"
max_tokens_param = "max_tokens"
speed = 0.123456789
context_window = 64000
soft_threshold = 0.55
hard_threshold = 0.8
max_turns = 42
max_restarts = 4
auto_restart = false
carryover_turns = 5
requires_context = false
file_index = true
compact_at = 9000
max_write_mb = 2.5
max_job_mb = 333.0
summary = "llm"
retry_total_wait = 120.0
unreachable_wait = 12.5
retry_after_cap = 60.0
idle_timeout = 45.0
turn_timeout = 900.0
store = "{STORE}"
theme = "agent-light"
[keys]
checkpoint = "ctrl+k"
[sandbox_limits]
processes = 77
memory_mb = 777
cpu_seconds = 99
open_files = 555
file_size_mb = 66
tmp_mb = 88
shm_mb = 99
network = true
read_only = false
[mcp]
allow = false
commands = ["mcp-server-time"]
tool_search_share = 0.25
urls = ["https://mcp.example.org/"]
env = ["TZ"]
[[mcp.servers]]
name = "web"
url = "https://mcp.example.org/mcp"
bearer_token_env_var = "WEB_MCP_TOKEN"
[prices."m-1"]
input = 1.5
output = 3.0
context_window = 64000
[telemetry]
enabled = true
endpoint = "http://otel-collector.observability:4318"
headers = {{ "x-honeycomb-team" = "{OTLP_KEY}" }}
protocol = "grpc"
service_name = "agents-overnight"
content = true
export_timeout = 7.5
[budgets]
daily_usd = 25.0
timezone = "UTC"
[budgets.jobs]
nightly = 5.0
[notify]
urls = ["{NOTIFY}"]
on_end = false
'''


def leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    """The settings' fields, a table's keys as "table.key" (a table: a field whose type is a model)."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        inner = info.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            out += leaves(inner, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def value(settings: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        settings = getattr(settings, part)
    return settings


def test_every_setting_has_a_decision() -> None:
    """A setting added to Settings (or one of its tables) without saying how a pod gets it fails here."""
    from console.settings import Settings

    fields = leaves(Settings)
    assert "notify.remind_minutes" in fields and "sandbox_limits.memory_mb" in fields  # the tables are walked
    assert sorted(set(fields) - set(carry.SETTINGS)) == [], "decide in console/kube/carry.py SETTINGS"
    assert sorted(set(carry.SETTINGS) - set(fields)) == [], "a decision for a setting that is gone"
    kinds = (carry.FLAG, carry.VARIABLE, carry.SECRET, carry.CLUSTER, carry.LOCAL)
    assert all(how in kinds and why.strip() for how, why in carry.SETTINGS.values())
    # A variable's decision names the variable settings_env really sets.
    named = {why.split()[0].rstrip(",") for how, why in carry.SETTINGS.values() if how == carry.VARIABLE}
    assert named == set(pod_variables())


def clean_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """The pod's environment before its variables: no AGENT_CONSOLE_*, no config file (HOME is /tmp there)."""
    for name in [k for k in os.environ if k.startswith("AGENT_CONSOLE_") or k.endswith("_API_KEY")
                 or k in ("XDG_CONFIG_HOME", "OPENAI_BASE_URL")]:
        monkeypatch.delenv(name)
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))


def plan_for(job: Path, *flags: str) -> Any:
    from console.cli.parser import build_parser
    from console.cli.submit import plan

    run, _ = plan(build_parser().parse_args(["submit", str(job), "--kubernetes", "--dry-run", *flags]))
    return run


@pytest.mark.parametrize("remind", ["[5, 30.5]", "[]", "[0.5, 10080]", None])
def test_the_pod_resolves_every_carried_setting_as_here(tmp_path, monkeypatch, _isolated_dirs, remind) -> None:
    from console.cli.parser import build_parser
    from console.cli.run import explicit_flags
    from console.engine.job import validate_job_folder
    from console.engine.job_config import load_job_config
    from console.settings import load_settings, resolve_run_settings

    defaults = load_settings()
    config = EVERYTHING + (f"remind_minutes = {remind}\n" if remind is not None else "")
    (_isolated_dirs / "config.toml").write_text(config)
    job = job_copy(tmp_path)
    (job / "job.toml").write_text('name = "carry"\n')  # nothing of job.toml wins over the settings
    here = load_settings()
    loaded = load_job_config(validate_job_folder(job))
    here_rs = resolve_run_settings(here, loaded)
    run = plan_for(job)
    assert run.secret_env.get("AGENT_CONSOLE_NOTIFY_URLS") == NOTIFY and run.secret_env.get("AGENT_CONSOLE_STORE")

    clean_env(monkeypatch, tmp_path / "pod-home")
    for name, text in {**run.env, **run.secret_env}.items():
        monkeypatch.setenv(name, text)
    there = load_settings()
    args = build_parser().parse_args(["run", "--in-place", str(job), "--headless", *run.run_args])
    given = {k: v for k, v in explicit_flags(args).items() if v is not None and k not in ("script", "notify")}
    there_rs = resolve_run_settings(there, loaded, **given)

    for name, (how, _) in carry.SETTINGS.items():
        if how in (carry.CLUSTER, carry.LOCAL):
            continue
        if not (name == "notify.remind_minutes" and remind in (None, "[0.5, 10080]")):
            assert value(here, name) != value(defaults, name), f"{name}: set it away from its default above"
        if how == carry.FLAG:  # the run's own settings: what the pod's `run` resolves from its flags
            assert getattr(there_rs, name) == getattr(here_rs, name), name
        else:
            assert value(there, name) == value(here, name), name
    assert there.notify == here.notify  # so the pod's runner tells and reminds as one here would
    assert there.notify.remind_minutes == ([] if remind == "[]" else json.loads(remind or "[15, 60, 240]"))
    # And the whole run, but for the data dir (hidden from commands: the pod's own) and where the window figure
    # came from (the pod's is its flag).
    def same(rs: Any) -> Any:
        return dataclasses.replace(rs, commands=dataclasses.replace(rs.commands, hide=()), context_window_source="")

    assert here_rs.context_window_source == "settings" and there_rs.context_window_source == "--context-window"
    assert same(there_rs) == same(here_rs)
    assert str(there.data_dir) == "/work/data" and there.theme != here.theme  # local: not carried
    recorded = json.loads(run.annotations["agent-console/settings"])
    assert recorded["notify_remind_minutes"] == here.notify.remind_minutes and recorded["notify_on_end"] is False


@pytest.mark.parametrize("remind", ["[]", "[0.75, 2]", None])
def test_the_pods_runner_reminds_as_a_runner_here(tmp_path, monkeypatch, _isolated_dirs, capsys, remind) -> None:
    """The pod's own command, run here (its /work a temporary folder), builds the same Notifier as `run` here with
    the same config: the same channels, the same reminders (none for []), the same end message."""
    import console.notify
    from console.kube.pack import unpack_job
    from tests.notify_server import loopback

    made: list[console.notify.Notifier] = []

    class Spy(console.notify.Notifier):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            made.append(self)

    monkeypatch.setattr(console.notify, "Notifier", Spy)
    with loopback() as server:
        hook = server.url("json", "hook-tok_5ecret99")  # a webhook's path is its secret
        (_isolated_dirs / "config.toml").write_text(
            f'[notify]\nurls = ["{hook}"]\n' + (f"remind_minutes = {remind}\n" if remind else ""))
        flags = ("--speed", "0", "--max-turns", "2")
        assert main(["run", str(job_copy(tmp_path / "here")), "--headless", *flags]) == 1
        capsys.readouterr()
        code, out, err = dry_run(capsys, str(job_copy(tmp_path)), *flags)
        assert code == 0, err
        work = tmp_path / "pod" / "work"
        _, args, env = pod_command(out, work)
        (work.parent / "seed").mkdir(parents=True)
        archive = work.parent / "seed" / "job.tar.gz"
        archive.write_bytes(base64.b64decode(by_kind(docs(out))["ConfigMap"]["binaryData"]["job.tar.gz"]))
        unpack_job(archive, Path(args[2]))
        clean_env(monkeypatch, tmp_path / "pod-home")
        for name, text in {**env, "AGENT_CONSOLE_NOTIFY_URLS": hook}.items():  # the Secret's value
            monkeypatch.setenv(name, text)
        assert main(args) == 1, capsys.readouterr().err
        out, err = capsys.readouterr()
    assert "tok_5ecret99" not in out + err
    # The pod's events and logs: the launch record alone keeps the URLs (private, for the resume's sake, as here).
    state = [p for p in Path(args[2], ".console").rglob("*") if p.is_file() and p.name != "launch.json"]
    assert any(p.name == "events.jsonl" for p in state)
    for path in state:
        assert b"tok_5ecret99" not in path.read_bytes(), path.name
    local, pod = made
    assert pod.remind == local.remind == (() if remind == "[]" else (0.75, 2.0) if remind else (15.0, 60.0, 240.0))
    assert pod.notify_on_end == local.notify_on_end
    assert [c.url for c in pod.channels] == [c.url for c in local.channels] == [hook]


def test_garbage_reminders_are_refused_at_submit_in_one_line(tmp_path, capsys, monkeypatch, _isolated_dirs):
    (_isolated_dirs / "config.toml").write_text(f'[notify]\nurls = ["{NOTIFY}"]\n')
    monkeypatch.setenv(REMIND, "[0]")
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)))
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"agent-console: {REMIND}: gap 1: ") and "0.5" in err and NOTIFY_TOKEN not in err


# A pod whose variable was edited (kubectl edit, a patch) into something that is no list of minutes.
GARBAGE = ["fifteen", "[15, 60", "[0]", "[-5]", "[NaN]", "1e400", "[true]", '["15"]', "[[15]]", "{}", "",
           "[" * 50_000, "[" + ", ".join(["5"] * 21) + "]", NOTIFY, f"15,{NOTIFY}"]


@pytest.mark.parametrize("garbage", GARBAGE)
def test_garbage_reminders_fail_the_pods_start_in_one_line(tmp_path, capsys, monkeypatch, _isolated_dirs,
                                                          garbage) -> None:
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), "--speed", "0")
    assert code == 0, err
    from console.kube.pack import unpack_job

    work = tmp_path / "pod" / "work"
    _, args, env = pod_command(out, work)
    archive = tmp_path / "job.tar.gz"
    archive.write_bytes(base64.b64decode(by_kind(docs(out))["ConfigMap"]["binaryData"]["job.tar.gz"]))
    unpack_job(archive, Path(args[2]))  # what the init container did
    clean_env(monkeypatch, tmp_path / "pod-home")
    for name, text in {**env, "AGENT_CONSOLE_NOTIFY_URLS": NOTIFY, REMIND: garbage}.items():
        monkeypatch.setenv(name, text)
    code = main(args)
    out, err = capsys.readouterr()
    # Exit 2 (bad input) fails the Job at once (podFailurePolicy): another pod would fail the same way.
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"agent-console: {REMIND}: "), err
    assert NOTIFY_TOKEN not in err + out and "ntfy.example.com" not in err + out
    assert not (Path(args[2]) / ".console").exists()  # refused before anything of the run was made


def test_the_pods_real_process_says_one_line(tmp_path, capsys, _isolated_dirs) -> None:
    """The same, through the image's entry point in a process of its own, as the pod runs it."""
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)))
    assert code == 0, err
    _, args, env = pod_command(out, tmp_path / "pod" / "work")
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_") and k != "XDG_CONFIG_HOME"}
    pod = base | env | {"AGENT_CONSOLE_NOTIFY_URLS": NOTIFY, REMIND: "15, sixty"}  # the Secret's, and the edit
    done = subprocess.run([sys.executable, "-m", "console.cli", *args], env=pod, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"agent-console: {REMIND}: not a list of minutes; expected minutes such "
                                        "as [15, 60, 240] (or 15,60,240), or [] for no reminders"]


def test_the_reminders_are_a_plain_variable_and_the_urls_stay_secret(tmp_path, capsys, _isolated_dirs) -> None:
    (_isolated_dirs / "config.toml").write_text(f'[notify]\nurls = ["{NOTIFY}"]\nremind_minutes = []\n')
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)))
    assert code == 0, err
    assert NOTIFY_TOKEN not in out + err and "ntfy.example.com/ops" not in out + err
    job = by_kind(docs(out))["Job"]
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[REMIND] == {"name": REMIND, "value": "[]"}
    assert env["AGENT_CONSOLE_NOTIFY_ON_END"] == {"name": "AGENT_CONSOLE_NOTIFY_ON_END", "value": "true"}
    assert "value" not in env["AGENT_CONSOLE_NOTIFY_URLS"]
    plain = [e["value"] for e in env.values() if "value" in e]
    assert not any(NOTIFY_TOKEN in v or "ntfy" in v for v in plain)
    settings = json.loads(job["metadata"]["annotations"]["agent-console/settings"])
    assert settings["notify"] == ["ntfy://…"] and settings["notify_remind_minutes"] == []


def test_telemetry_goes_to_the_pod_and_its_keys_stay_secret(tmp_path, capsys, monkeypatch, _isolated_dirs) -> None:
    """A run on Kubernetes exports as one here: [telemetry] plain without headers (whole in the Secret with them),
    the shell's standard OTEL_* variables too (their headers in the Secret); no header value in what is printed."""
    (_isolated_dirs / "config.toml").write_text('[telemetry]\nendpoint = "http://collector.obs:4318"\n'
                                                 'content = true\n')
    monkeypatch.setenv("OTEL_SERVICE_NAME", "night-shift")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer%20{OTLP_KEY}")
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)))
    assert code == 0, err
    assert OTLP_KEY not in out + err and "localhost" not in err
    env = {e["name"]: e for e in by_kind(docs(out))["Job"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env["AGENT_CONSOLE_TELEMETRY"]["value"]) == {"endpoint": "http://collector.obs:4318",
                                                                   "content": True}
    assert env["OTEL_SERVICE_NAME"]["value"] == "night-shift"
    assert "value" not in env["OTEL_EXPORTER_OTLP_HEADERS"]  # from the Secret
    assert "otel-exporter-otlp-headers=" in err  # the dry run names the Secret's key to type
    # With headers in the config, the whole table is the Secret's.
    (_isolated_dirs / "config.toml").write_text(f'[telemetry]\nendpoint = "http://localhost:4318"\n'
                                                 f'headers = {{ "x-key" = "{OTLP_KEY}" }}\n')
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_HEADERS")
    code, out, err = dry_run(capsys, str(job_copy(tmp_path / "again")))
    assert code == 0, err
    assert OTLP_KEY not in out + err
    env = {e["name"]: e for e in by_kind(docs(out))["Job"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "value" not in env["AGENT_CONSOLE_TELEMETRY"]
    # A collector on this machine is none of the pod's: said at submit.
    assert "the telemetry endpoint names this machine" in err


def test_a_telemetry_key_is_never_given_on_the_command_line(tmp_path, capsys, _isolated_dirs) -> None:
    (_isolated_dirs / "config.toml").write_text(f'[telemetry]\nendpoint = "http://collector.obs:4318"\n'
                                                 f'headers = {{ "x-key" = "{OTLP_KEY}" }}\n')
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), "--name", f"job-{OTLP_KEY}")
    assert code == 2 and OTLP_KEY not in out + err and "a [telemetry] header" in err, err


def test_the_variable_wins_over_the_config_file_as_the_others_do(monkeypatch, _isolated_dirs) -> None:
    from console.settings import load_settings

    (_isolated_dirs / "config.toml").write_text("[notify]\nremind_minutes = [45]\non_end = false\n")
    assert load_settings().notify.remind_minutes == [45.0]
    for text, gaps in (("[5, 7.5]", [5.0, 7.5]), (" 15, 60 240 ", [15.0, 60.0, 240.0]), ("[]", [])):
        monkeypatch.setenv(REMIND, text)
        settings = load_settings()
        assert settings.notify.remind_minutes == gaps and settings.notify.on_end is False


def pod_variables() -> list[str]:
    """Every plain variable a pod may be given (with the caps and prices set, so that theirs are there too)."""
    from console.settings import Settings

    settings = Settings(sandbox_limits={"processes": 9}, prices={"m": {"input": 1.0, "output": 2.0}},
                        mcp={"allow": False}, telemetry={"content": True}, store=STORE,
                        budgets={"daily_usd": 5.0, "jobs": {"nightly": 1.0}})
    return sorted(carry.settings_env(settings))


@pytest.mark.parametrize("name", pod_variables())
@pytest.mark.parametrize("garbage", [NOTIFY, '{"x": [1, 2]}'])
def test_any_carried_variable_edited_to_garbage_is_one_line_without_secrets(monkeypatch, _isolated_dirs, name,
                                                                           garbage) -> None:
    """A Job's variable edited (kubectl edit, a patch, a bad overlay), even to a notification URL: the pod's start
    is one line naming the setting, never the value."""
    from console.engine.job import JobError
    from console.settings import load_settings

    monkeypatch.setenv(name, garbage)
    with pytest.raises(JobError) as caught:
        load_settings()
    said = str(caught.value)
    assert "\n" not in said and NOTIFY_TOKEN not in said and "ntfy.example.com" not in said
    assert name in said or name.removeprefix("AGENT_CONSOLE_").lower() in said, said


@given(st.text(max_size=80), st.text(max_size=80))
def test_any_reminder_text_is_gaps_in_bounds_or_one_line(before: str, after: str) -> None:
    from console.engine.job import JobError
    from console.settings import remind_minutes_env

    for text in (before, f"{before}{NOTIFY_TOKEN}{after}", f"[{before}]"):
        try:
            gaps = remind_minutes_env(text)
        except JobError as exc:
            said = str(exc)
            assert said.startswith(f"{REMIND}: ") and "\n" not in said and NOTIFY_TOKEN not in said
        else:
            assert len(gaps) <= 20 and all(0.5 <= g <= 7 * 24 * 60 for g in gaps)


@pytest.mark.parametrize("store", [STORE, None])
def test_the_fleet_budget_goes_to_a_pod_only_on_the_store_it_shares(monkeypatch, store) -> None:
    # On the shared store a pod's run is held with this machine's runs and `budget --raise` here reaches it; on its
    # own embedded store (its volume's) a hold could be raised by nobody: not given.
    from console.settings import Settings

    monkeypatch.delenv("AGENT_CONSOLE_STORE", raising=False)
    settings = Settings(budgets={"daily_usd": 40.0, "jobs": {"nightly": 5.0}}, store=store)
    env = carry.settings_env(settings)
    if store is None:
        assert "AGENT_CONSOLE_BUDGETS" not in env
        return
    assert json.loads(env["AGENT_CONSOLE_BUDGETS"]) == {"daily_usd": 40.0, "jobs": {"nightly": 5.0}}
    assert carry.settings_env(Settings(store=store)).get("AGENT_CONSOLE_BUDGETS") is None  # none set: none given
    monkeypatch.setenv("AGENT_CONSOLE_BUDGETS", env["AGENT_CONSOLE_BUDGETS"])  # the pod's
    there = Settings()
    assert (there.budgets.daily_usd, there.budgets.jobs) == (40.0, {"nightly": 5.0})
