"""`submit --kubernetes --dry-run`: the manifests against the Kubernetes API's schema (offline), the secrets that
must never show, hostile job names, and the pod's own command run here, twice: the second pod resumes."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from console.cli import main
from console.kube.names import DNS_LABEL, LABEL_VALUE, MAX_BASE, dns_label, label_value
from tests.conftest import SAMPLES

# The oldest version the manifests need (podFailurePolicy is GA in 1.31) and the newest the validator ships.
SCHEMA_VERSIONS = ("1.31.0", "1.37.0")
KEY = "sk-live-Zq8xLr4TnW2vYp0aB7cD"
STORE_PASSWORD = "s3cr3t-Pg-pass"
STORE = f"postgresql://agents:{STORE_PASSWORD}@db.example.internal:5432/agents"
NOTIFY = "ntfy://tok_9f8e7d6c5b4a@ntfy.example.com/ops"


def job_copy(tmp_path: Path, name: str = "quickstart") -> Path:
    dest = tmp_path / name
    shutil.copytree(SAMPLES / "quickstart", dest)
    return dest


def dry_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["submit", *args, "--kubernetes", "--dry-run"])
    out, err = capsys.readouterr()
    return code, out, err


def docs(out: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(out) if d is not None]


def by_kind(objs: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objs}


@pytest.mark.parametrize("extra", [
    (),
    ("--allow-userns", "--cpu-limit", "2", "--storage-class", "fast-ssd", "--namespace", "agents"),
    ("--pvc", "shared-claim", "--provider", "openai", "--secret", "team-keys", "--secret-key", "openai"),
    ("--provider", "anthropic", "--notify", NOTIFY, "--no-auto-restart", "--unconfined"),
])
@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_manifest_is_valid_against_the_api_schema(tmp_path, capsys, monkeypatch, extra, version) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_STORE", STORE)
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), *extra)
    assert code == 0, err
    objs = docs(out)
    kinds = [o["kind"] for o in objs]
    # The store's password goes into a Secret, which the dry-run leaves out: its command is printed instead.
    assert kinds[-1] == "Job" and "ConfigMap" in kinds and "Secret" not in kinds
    assert "create secret generic" in out
    assert ("PersistentVolumeClaim" in kinds) == ("--pvc" not in extra)
    for obj in objs:
        # strict: a field the API does not have is an error (a typo would be dropped by a real server, silently).
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_validator_is_not_a_rubber_stamp() -> None:
    bad = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
           "spec": {"backoffLimit": 1, "template": {"spec": {"restartPolicy": "Never",
                                                             "containers": [{"name": "c", "imagee": "i"}]}}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, SCHEMA_VERSIONS[0], strict=True)


def test_the_job_resumes_from_its_volume_and_records_its_settings(tmp_path, capsys) -> None:
    code, out, _ = dry_run(capsys, str(job_copy(tmp_path)), "--provider", "openai", "--model", "gpt-5-mini",
                           "--max-turns", "40", "--backoff-limit", "5")
    assert code == 0
    objs = by_kind(docs(out))
    job = objs["Job"]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["backoffLimit"] == 5 and pod["restartPolicy"] == "Never" and "suspend" not in spec
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[1]["action"] == "FailJob" and rules[1]["onExitCodes"]["values"] == [1, 2, 3, 4]
    run = pod["containers"][0]
    folder = f"/work/runs/{job['metadata']['name']}"
    # The resume path: the same command for the first pod and every replacement.
    assert run["args"][:4] == ["run", "--in-place", folder, "--headless"]
    assert run["args"][run["args"].index("--model") + 1] == "gpt-5-mini"
    assert run["args"][run["args"].index("--max-turns") + 1] == "40"
    assert pod["initContainers"][0]["command"][-1] == folder
    assert {"name": "work", "persistentVolumeClaim": {"claimName": objs["PersistentVolumeClaim"]["metadata"]
                                                      ["name"]}} in pod["volumes"]
    env = {e["name"]: e for e in run["env"]}
    assert env["AGENT_CONSOLE_OPENAI_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": "agent-console-openai",
                                                                                  "key": "api-key"}}
    assert env["AGENT_CONSOLE_DATA_DIR"]["value"] == "/work/data"
    settings = json.loads(job["metadata"]["annotations"]["agent-console/settings"])
    assert settings["model"] == "gpt-5-mini" and settings["max_turns"] == 40 and settings["provider"] == "openai"
    assert job["metadata"]["labels"]["agent-console/run-id"] == job["metadata"]["annotations"]["agent-console/run-id"]
    sc, psc = run["securityContext"], pod["securityContext"]
    assert psc["runAsNonRoot"] and psc["runAsUser"] != 0 and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"] == {"drop": ["ALL"]} and psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False


def secrets_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AGENT_CONSOLE_ANTHROPIC_API_KEY", KEY + "-anthropic")
    monkeypatch.setenv("AGENT_CONSOLE_STORE", STORE)
    (home / "config.toml").write_text(f'[notify]\nurls = ["{NOTIFY}"]\n')


SECRETS = (KEY, STORE_PASSWORD, "tok_9f8e7d6c5b4a")


def test_dry_run_shows_no_secret(tmp_path, capsys, monkeypatch, _isolated_dirs) -> None:
    secrets_env(monkeypatch, _isolated_dirs)
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), "--provider", "anthropic")
    assert code == 0, err
    for s in SECRETS:
        assert s not in out and s not in err
    # Not even inside the job's archive (which the dry-run prints, base64).
    archive = base64.b64decode(by_kind(docs(out))["ConfigMap"]["binaryData"]["job.tar.gz"])
    import gzip

    assert not any(s.encode() in gzip.decompress(archive) for s in SECRETS)
    objs = by_kind(docs(out))
    assert "Secret" not in objs  # its values are secret: the command that makes it is printed instead
    name = f"{objs['Job']['metadata']['name']}-config"
    assert f"create secret generic {name} --from-env-file=/dev/stdin" in out
    env = {e["name"]: e for e in objs["Job"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AGENT_CONSOLE_STORE"] == {"name": "AGENT_CONSOLE_STORE", "valueFrom": {"secretKeyRef": {
        "name": name, "key": "store"}}}
    assert "value" not in env["AGENT_CONSOLE_NOTIFY_URLS"]
    # The other [notify] keys are plain variables, and no plain variable holds a secret.
    assert env["AGENT_CONSOLE_NOTIFY_REMIND_MINUTES"]["value"] == "[15.0, 60.0, 240.0]"
    assert not any(s in e.get("value", "") for e in env.values() for s in SECRETS)


def test_a_store_password_in_the_query_string_is_a_secret_too(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_STORE", "postgresql://db.example/agents?user=a&password=QueryPass99")
    code, out, _ = dry_run(capsys, str(job_copy(tmp_path)))
    assert code == 0 and "QueryPass99" not in out and "create secret generic" in out and "kind: Secret" not in out


def test_a_store_without_a_password_is_plain_and_a_local_one_is_warned_about(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AGENT_CONSOLE_STORE", "postgresql://localhost/agents")
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)))
    assert code == 0 and "create secret" not in out and "value: postgresql://localhost/agents" in out
    assert "names this machine" in err


def test_a_key_in_a_job_file_is_refused_without_being_shown(tmp_path, capsys, monkeypatch, _isolated_dirs) -> None:
    secrets_env(monkeypatch, _isolated_dirs)
    job = job_copy(tmp_path)
    (job / "notes" / "creds.txt").write_text(f"export OPENAI_API_KEY={KEY}\n")
    code, out, err = dry_run(capsys, str(job))
    assert code == 2 and out == ""
    assert "notes/creds.txt holds the value of $OPENAI_API_KEY" in err and KEY not in err
    (job / "notes" / "creds.txt").write_text(f"the database: {STORE}\n")
    code, out, err = dry_run(capsys, str(job))
    assert code == 2 and "the store URL" in err and STORE_PASSWORD not in err


def test_a_key_in_job_toml_is_refused_without_being_shown(tmp_path, capsys, monkeypatch) -> None:
    job = job_copy(tmp_path)
    (job / "job.toml").write_text(f'[model]\nprovider = "openai"\napi_key = "{KEY}"\n')
    code, out, err = dry_run(capsys, str(job))
    assert code == 2 and out == "" and "api_key" in err and KEY not in err


@pytest.mark.parametrize("args", [("--secret", KEY), ("--secret", "OPENAI_API_KEY=" + KEY), ("--model", KEY),
                                  ("--secret-key", KEY + "/x"), ("--name", KEY)])
def test_a_key_on_the_command_line_is_refused_and_not_repeated(tmp_path, capsys, monkeypatch, args) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), "--provider", "openai", *args)
    assert code == 2 and out == "" and KEY not in err and "Traceback" not in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (("--cpu", "lots"), "--cpu: not a Kubernetes quantity"),
    (("--memory", "1Gi; rm -rf /"), "--memory: not a Kubernetes quantity"),
    (("--backoff-limit", "-1"), "--backoff-limit"),
    (("--name", "Has Spaces"), "--name: at most 56"),
    (("--name", "x" * 300), "--name: at most 56"),
    (("--name", "Ünïcödé"), "(e.g. unicode)"),
    (("--namespace", "NS_1"), "--namespace: not a Kubernetes name"),
    (("--image", "x y"), "--image"),
    (("--memory", "4Gi"), "--memory 4Gi is more than --memory-limit 2Gi"),
    (("--cpu", "2", "--cpu-limit", "1500m"), "--cpu 2 is more than --cpu-limit 1500m"),
])
def test_bad_flags_are_one_line(tmp_path, capsys, args, message) -> None:
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), *args)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1


def test_a_task_that_is_not_text_is_refused_before_a_manifest_is_made(tmp_path, capsys) -> None:
    # A pod would go round read_file ("is a binary file") and todo_complete until stuck, as a local run did.
    job = job_copy(tmp_path)
    (job / "instructions.md").write_bytes(b"# Task\n\x00\x01\x02")
    code, out, err = dry_run(capsys, str(job))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{job}: instructions.md is a binary file (a NUL byte at byte 7)" in err


def test_submit_without_a_target_says_so(tmp_path, capsys) -> None:
    assert main(["submit", str(job_copy(tmp_path))]) == 2
    assert "--kubernetes" in capsys.readouterr().err


# A folder's name is at most 255 bytes: the longest ones (dns_label itself takes 300 characters and more below).
HOSTILE = ["my job", " ünïcødé jöb ", "日本語のジョブ", "x" * 255, "é" * 127, "---", "a.b_c", "Job\x1b[31mred", "🚀🚀"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_job_names_become_dns_labels(tmp_path, capsys, name) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    code, out, err = dry_run(capsys, str(job_copy(folder, name)))
    assert code == 0, err
    for obj in docs(out):
        meta = obj["metadata"]
        assert DNS_LABEL.match(meta["name"]) and len(meta["name"]) <= 63, meta["name"]
        assert all(LABEL_VALUE.match(v) and len(v) <= 63 for v in meta["labels"].values())
        kubernetes_validate.validate(obj, SCHEMA_VERSIONS[0], strict=True)
    assert "\x1b" not in out  # the annotation keeps the name, made safe


def test_two_long_names_stay_two_names() -> None:
    assert dns_label("x" * 300 + "a") != dns_label("x" * 300 + "b")
    assert dns_label("日本語") != dns_label("中文") and dns_label("") == dns_label("")


@given(st.text(max_size=400))
def test_any_text_becomes_a_dns_label_and_a_label_value(text: str) -> None:
    name = dns_label(text)
    assert DNS_LABEL.match(name) and 1 <= len(name) <= MAX_BASE
    value = label_value(text)
    assert LABEL_VALUE.match(value) and len(value) <= 63


def test_the_settings_reach_the_pod_as_they_were_resolved_here(tmp_path, capsys, monkeypatch, _isolated_dirs):
    """The pod's settings (its variables, no config file) are the submitter's settings (a config file with
    everything changed)."""
    from console.kube.carry import CARRIED
    from console.settings import load_settings

    (_isolated_dirs / "config.toml").write_text(
        'soft_threshold = 0.55\nhard_threshold = 0.8\nsummary = "llm"\ncarryover_turns = 5\nrequires_context = false'
        '\nfile_index = true\ncompact_at = 9000\nmax_write_mb = 2.5\nretry_total_wait = 120.0\nidle_timeout = 45.0\n'
        'max_tokens_param = "max_tokens"\n[sandbox_limits]\nmemory_mb = 777\n[prices."m-1"]\ninput = 1.5\n'
        'output = 3.0\ncontext_window = 64000\n[notify]\non_end = false\nremind_minutes = []\n')
    here = load_settings()
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)))
    assert code == 0, err
    env = {e["name"]: e["value"] for e in by_kind(docs(out))["Job"]["spec"]["template"]["spec"]["containers"][0]
           ["env"] if "value" in e}
    for name in [k for k in os.environ if k.startswith("AGENT_CONSOLE_")]:
        monkeypatch.delenv(name)
    (_isolated_dirs / "empty.toml").write_text("")
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(_isolated_dirs / "empty.toml"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    there = load_settings()
    for name in CARRIED:
        assert getattr(there, name) == getattr(here, name), name
    assert there.sandbox_limits == here.sandbox_limits and there.prices == here.prices
    assert there.notify.on_end is False and str(there.data_dir) == "/work/data"
    assert there.notify.remind_minutes == here.notify.remind_minutes == []  # reminders off there too


def pod_command(out: str, work: Path) -> tuple[list[str], list[str], dict[str, str]]:
    """The init container's and the run container's commands and the run's variables, with /work as ``work``."""
    pod = by_kind(docs(out))["Job"]["spec"]["template"]["spec"]
    init, run = pod["initContainers"][0], pod["containers"][0]

    def here(s: str) -> str:
        return s.replace("/work", str(work)).replace("/seed", str(work.parent / "seed"))

    env = {e["name"]: here(e["value"]) for e in run["env"] if "value" in e} | {"HOME": str(work.parent)}
    return [here(a) for a in init["command"]], [here(a) for a in run["args"]], env


def test_the_pods_command_runs_and_a_replacement_pod_resumes(tmp_path, capsys) -> None:
    """What a pod does, here: the init container unpacks the job onto the "volume", the run container runs it
    (cut short by --max-turns); a second pod (evicted, killed) finds the folder there and goes on with it."""
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), "--speed", "0", "--max-turns", "3")
    assert code == 0, err
    work = tmp_path / "pod" / "work"
    (work.parent / "seed").mkdir(parents=True)
    archive = base64.b64decode(by_kind(docs(out))["ConfigMap"]["binaryData"]["job.tar.gz"])
    (work.parent / "seed" / "job.tar.gz").write_bytes(archive)
    init, args, env = pod_command(out, work)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")}
    base["AGENT_CONSOLE_CONFIG"] = str(tmp_path / "none.toml")
    (tmp_path / "none.toml").write_text("")
    python = [sys.executable if a == "python" else a for a in init]
    first = subprocess.run(python, env=base, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and "unpacked the job" in first.stdout, first.stderr
    cmd = [sys.executable, "-m", "console.cli", *args]
    one = subprocess.run(cmd, env=base | env, capture_output=True, text=True, timeout=120)
    assert one.returncode == 1, one.stderr  # incomplete: a pod's exit 1 fails the Job (podFailurePolicy)
    folder = Path(args[2])
    launch = json.loads((folder / ".console" / "launch.json").read_text())
    assert launch["max_turns"] == 3 and launch["provider"] == "scripted" and launch["speed"] == 0
    # Sealed with the key of the pod's data dir, which is on the volume beside the run folder: the next pod, with
    # the same volume, resumes its own run (a pod of another volume would find it foreign).
    assert len(launch["seal"]) == 64 and (work / "data" / "keys" / "seal.key").stat().st_size == 32
    # The replacement pod: the init container leaves the folder as it is, the run goes on from it.
    (folder / "marker.txt").write_text("written by the first pod")
    again = subprocess.run(python, env=base, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "resumes" in again.stdout
    assert (folder / "marker.txt").exists()
    two = subprocess.run(cmd, env=base | env, capture_output=True, text=True, timeout=120)
    assert two.returncode in (0, 1), two.stderr
    events = [json.loads(line) for line in (folder / ".console" / "events.jsonl").read_text().splitlines()]
    sources = [e["source"] for e in events if e["type"] == "launch_settings"]
    assert sources == ["start", "resume"]
    assert sum(e["type"] == "turn_started" for e in events) > 3


def test_allow_userns_loosens_the_run_container_only(tmp_path, capsys) -> None:
    code, out, _ = dry_run(capsys, str(job_copy(tmp_path)))
    plain = by_kind(docs(out))["Job"]["spec"]["template"]["spec"]
    code, out, _ = dry_run(capsys, str(job_copy(tmp_path / "b")), "--allow-userns")
    assert code == 0
    pod = by_kind(docs(out))["Job"]["spec"]["template"]["spec"]
    run, init = pod["containers"][0]["securityContext"], pod["initContainers"][0]["securityContext"]
    assert pod["hostUsers"] is False and "hostUsers" not in plain  # Kubernetes refuses procMount Unmasked without
    assert run["seccompProfile"] == {"type": "Unconfined"} and run["procMount"] == "Unmasked"
    assert run["appArmorProfile"] == {"type": "Unconfined"} and not run["allowPrivilegeEscalation"]
    assert init == plain["initContainers"][0]["securityContext"] == plain["containers"][0]["securityContext"]
    assert "seccompProfile" not in init and pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_a_key_set_as_another_setting_is_caught_before_anything_is_shown(tmp_path, capsys, monkeypatch,
                                                                        _isolated_dirs) -> None:
    """The key pasted where the model's name goes (the config file): no flag holds it, no job file holds it, and
    still it would be in the Job's arguments."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (_isolated_dirs / "config.toml").write_text(f'provider = "openai"\nmodel = "{KEY}"\n')
    job = job_copy(tmp_path)
    (job / "job.toml").write_text("[context]\nwindow = 32000\n")
    code, out, err = dry_run(capsys, str(job))
    assert code == 2 and out == "" and KEY not in err and "the value of $OPENAI_API_KEY" in err


MODELS = {"ConfigMap": "V1ConfigMap", "Secret": "V1Secret", "PersistentVolumeClaim": "V1PersistentVolumeClaim",
          "Job": "V1Job"}


def strings(obj: object) -> list[str]:
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (k, *strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return [obj] if isinstance(obj, str) else []


def test_the_dry_run_applies_as_it_is_once_the_printed_secret_command_ran(tmp_path, capsys, monkeypatch,
                                                                          _isolated_dirs) -> None:
    """`submit --dry-run | kubectl apply -f -` made a Secret whose value was the sentence "(not shown: made by
    submit ...)", and the pod failed. Now the Secret is left out, and the command printed makes it from stdin
    with the keys the Job reads, labelled with the run so that the printed cleanup deletes it with the rest."""
    from kubernetes import client

    secrets_env(monkeypatch, _isolated_dirs)
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), "--provider", "openai", "--namespace", "agents")
    assert code == 0, err
    objs = docs(out)
    assert [o["kind"] for o in objs] == ["ConfigMap", "PersistentVolumeClaim", "Job"]
    assert not any("not shown" in s or "made by submit" in s for s in strings(objs))
    for obj in objs:
        kubernetes_validate.validate(obj, SCHEMA_VERSIONS[-1], strict=True)
        # The client's own model takes it whole (it is what the submit sends).
        model = getattr(client, MODELS[obj["kind"]]).from_dict(obj)
        assert client.ApiClient().sanitize_for_serialization(model) == obj
    job = by_kind(objs)["Job"]
    rid, name = job["metadata"]["labels"]["agent-console/run-id"], job["metadata"]["name"]
    assert all(o["metadata"]["labels"]["agent-console/run-id"] == rid for o in objs)
    refs = {e["valueFrom"]["secretKeyRef"]["key"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
            if "secretKeyRef" in e.get("valueFrom", {}) and e["valueFrom"]["secretKeyRef"]["name"] == f"{name}-config"}
    assert refs == {"store", "notify-urls"}
    make = (f"kubectl -n agents create secret generic {name}-config --from-env-file=/dev/stdin && "
            f"kubectl -n agents label secret {name}-config agent-console/run-id={rid}")
    cleanup = f"kubectl -n agents delete job,configmap,secret -l agent-console/run-id={rid}"
    comments = [line for line in out.splitlines() if line.startswith("#")]
    assert f"#   {make}" in comments and any(line.endswith(cleanup) for line in comments)
    # Piped (stdout is no terminal here), the operator reads the same notes on stderr.
    assert make in err and cleanup in err
    for s in SECRETS:
        assert s not in out and s not in err
    if shutil.which("kubectl"):
        # kubectl's own reading of what the operator types: the keys the Job reads, the values as typed.
        create = make.split(" && ")[0].replace("-n agents ", "") + " --dry-run=client -o json"
        made = subprocess.run(create.split(), input=f"store={STORE}\nnotify-urls={NOTIFY}\n", capture_output=True,
                              text=True, timeout=60, env={**os.environ, "KUBECONFIG": str(tmp_path / "none")})
        assert made.returncode == 0, made.stderr
        data = json.loads(made.stdout)["data"]
        assert set(data) == refs and base64.b64decode(data["store"]).decode() == STORE


def test_without_secret_settings_no_secret_command_is_printed(tmp_path, capsys) -> None:
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)))
    assert code == 0 and "create secret" not in out + err and "delete job,configmap,secret -l" in out


@pytest.mark.parametrize("image, warned", [
    ("agent-console", True), ("agent-console:latest", True), ("registry.example.com:5000/agent-console", True),
    ("registry.example.com:5000/team/agent-console:latest", True), ("agent-console:0.1.0", False),
    ("registry.example.com:5000/agent-console:0.1.0", False),
    ("agent-console@sha256:" + "a" * 64, False), ("agent-console:latest@sha256:" + "b" * 64, False),
])
def test_an_image_that_is_not_pinned_is_warned_about_in_one_line(tmp_path, capsys, image, warned) -> None:
    code, _, err = dry_run(capsys, str(job_copy(tmp_path)), "--image", image)
    warnings = [line for line in err.splitlines() if "not pinned" in line]
    assert code == 0 and len(warnings) == int(warned)
    if warned:
        assert image in warnings[0] and "--image" in warnings[0]


def test_the_default_image_is_this_version_pinned(tmp_path, capsys) -> None:
    from console import __version__

    code, out, err = dry_run(capsys, str(job_copy(tmp_path)))
    job = by_kind(docs(out))["Job"]
    assert code == 0 and job["spec"]["template"]["spec"]["containers"][0]["image"] == f"agent-console:{__version__}"
    assert "not pinned" not in err


def test_tmp_has_a_size_limit_and_a_finished_job_expires(tmp_path, capsys, _isolated_dirs) -> None:
    def spec(*args: str) -> dict:
        code, out, err = dry_run(capsys, str(job_copy(tmp_path / str(len(list(tmp_path.iterdir()))))), *args)
        assert code == 0, err
        return by_kind(docs(out))["Job"]["spec"]

    def tmp(s: dict) -> dict:
        return next(v for v in s["template"]["spec"]["volumes"] if v["name"] == "tmp")

    plain = spec()
    assert tmp(plain) == {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}
    assert plain["ttlSecondsAfterFinished"] == 7 * 24 * 3600
    (_isolated_dirs / "config.toml").write_text("[kubernetes]\nttl_after_finished = 3600\n")
    assert spec()["ttlSecondsAfterFinished"] == 3600
    flagged = spec("--ttl-after-finished", "0", "--tmp-size", "256Mi")  # the flag wins over the config file
    assert flagged["ttlSecondsAfterFinished"] == 0 and tmp(flagged)["emptyDir"] == {"sizeLimit": "256Mi"}


@pytest.mark.parametrize("args, message", [
    (("--ttl-after-finished", "-1"), "--ttl-after-finished: a whole number of seconds"),
    (("--ttl-after-finished", str(2**31)), "--ttl-after-finished: a whole number of seconds"),
    (("--tmp-size", "lots"), "--tmp-size: not a Kubernetes quantity"),
])
def test_bad_expiry_and_tmp_flags_are_one_line(tmp_path, capsys, args, message) -> None:
    code, out, err = dry_run(capsys, str(job_copy(tmp_path)), *args)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1
