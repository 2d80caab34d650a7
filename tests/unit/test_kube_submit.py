"""`submit --kubernetes` through the official client against a strict fake API server on 127.0.0.1
(tests/kube_server.py): the requests a real server would get, its refusals as one line, nothing left half-made."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from tests.conftest import SAMPLES
from tests.kube_server import FakeApiServer, FakeCluster

KEY = "sk-live-Zq8xLr4TnW2vYp0aB7cD"
STORE_PASSWORD = "s3cr3t-Pg-pass"
STORE = f"postgresql://agents:{STORE_PASSWORD}@db.example.internal:5432/agents"
NOTIFY_TOKEN = "tok_9f8e7d6c5b4a"
NOTIFY = f"ntfy://{NOTIFY_TOKEN}@ntfy.example.com/ops"


@pytest.fixture
def server():
    with FakeApiServer() as s:
        yield s


@pytest.fixture
def job(tmp_path: Path) -> Path:
    dest = tmp_path / "quickstart"
    shutil.copytree(SAMPLES / "quickstart", dest)
    return dest


def submit(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["submit", *args, "--kubernetes"])
    out, err = capsys.readouterr()
    return code, out, err


def objects(server: FakeApiServer, resource: str) -> dict[str, dict]:
    return {name: o for (r, _, name), o in server.cluster.objects.items() if r == resource}


def test_submit_makes_the_job_suspended_then_its_dependents_then_starts_it(server, job, tmp_path, capsys) -> None:
    kc = server.kubeconfig(tmp_path / "kubeconfig")
    code, out, err = submit(capsys, str(job), "--kubeconfig", str(kc), "--name", "nightly")
    assert code == 0, err + "\n".join(server.cluster.problems)
    assert server.cluster.problems == []
    calls = [(r.method, r.path) for r in server.cluster.requests]
    ns = "/namespaces/team-a"  # the kubeconfig context's namespace
    assert calls == [("POST", f"/apis/batch/v1{ns}/jobs"), ("POST", f"/api/v1{ns}/configmaps"),
                     ("POST", f"/api/v1{ns}/persistentvolumeclaims"), ("PATCH", f"/apis/batch/v1{ns}/jobs/nightly")]
    assert server.cluster.requests[0].body["spec"]["suspend"] is True
    assert server.cluster.requests[-1].content_type == "application/merge-patch+json"
    jobs = objects(server, "jobs")
    assert jobs["nightly"]["spec"]["suspend"] is False
    owner = objects(server, "configmaps")["nightly-job"]["metadata"]["ownerReferences"]
    assert owner[0]["uid"] == jobs["nightly"]["metadata"]["uid"] and owner[0]["kind"] == "Job"
    assert "ownerReferences" not in objects(server, "persistentvolumeclaims")["nightly-work"]["metadata"]
    run_id = jobs["nightly"]["metadata"]["labels"]["agent-console/run-id"]
    assert out.startswith(f"run {run_id}: Job nightly in namespace team-a")
    assert "kubectl logs -f job/nightly -n team-a" in out and err == ""


def test_secrets_go_to_the_secret_only(server, job, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_STORE", STORE)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AGENT_CONSOLE_NOTIFY_URLS", NOTIFY)
    monkeypatch.setenv("AGENT_CONSOLE_NOTIFY_REMIND_MINUTES", "[]")
    kc = server.kubeconfig(tmp_path / "kubeconfig")
    code, out, err = submit(capsys, str(job), "--kubeconfig", str(kc), "--provider", "openai", "--namespace", "ops")
    assert code == 0, err
    secret = next(iter(objects(server, "secrets").values()))
    # The one place the store URL and the notification URLs go.
    assert secret["stringData"] == {"store": STORE, "notify-urls": NOTIFY}
    for request in server.cluster.requests:
        text = json.dumps(request.body)
        assert KEY not in text  # the key never leaves this machine: the cluster's own Secret holds it
        if not request.path.endswith("/secrets"):
            assert STORE_PASSWORD not in text and NOTIFY_TOKEN not in text
    assert STORE_PASSWORD not in out + err and KEY not in out + err and NOTIFY_TOKEN not in out + err
    pod = next(iter(objects(server, "jobs").values()))["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["AGENT_CONSOLE_OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "agent-console-openai"
    assert env["AGENT_CONSOLE_STORE"]["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"],
                                                                       "key": "store"}
    assert env["AGENT_CONSOLE_NOTIFY_URLS"]["valueFrom"]["secretKeyRef"]["key"] == "notify-urls"
    assert env["AGENT_CONSOLE_NOTIFY_REMIND_MINUTES"] == {"name": "AGENT_CONSOLE_NOTIFY_REMIND_MINUTES", "value": "[]"}


def test_a_name_taken_is_one_line_and_nothing_is_made(server, job, tmp_path, capsys) -> None:
    kc = server.kubeconfig(tmp_path / "kubeconfig")
    assert submit(capsys, str(job), "--kubeconfig", str(kc), "--name", "nightly")[0] == 0
    before = json.dumps(sorted(server.cluster.objects.items()))
    code, out, err = submit(capsys, str(job), "--kubeconfig", str(kc), "--name", "nightly")
    assert code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "Job nightly already exists in namespace team-a (409 AlreadyExists)" in err
    assert json.dumps(sorted(server.cluster.objects.items())) == before


def test_a_failure_half_way_deletes_what_the_submit_made(server, job, tmp_path, capsys) -> None:
    kc = server.kubeconfig(tmp_path / "kubeconfig")
    # Someone's claim of the same name: the submit fails there, after the Job and the ConfigMap were made.
    server.cluster.objects[("persistentvolumeclaims", "team-a", "nightly-work")] = {"metadata": {"name": "x"}}
    code, _, err = submit(capsys, str(job), "--kubeconfig", str(kc), "--name", "nightly")
    assert code == 1 and "PersistentVolumeClaim nightly-work already exists" in err
    assert set(server.cluster.objects) == {("persistentvolumeclaims", "team-a", "nightly-work")}  # theirs only
    assert [r.method for r in server.cluster.requests][-1] == "DELETE"


def test_an_existing_claim_is_used_and_never_deleted(server, job, tmp_path, capsys) -> None:
    kc = server.kubeconfig(tmp_path / "kubeconfig")
    server.cluster.forbid.add("secrets")
    code, _, err = submit(capsys, str(job), "--kubeconfig", str(kc), "--name", "n2", "--pvc", "results")
    assert code == 0, err  # no Secret needed: none was asked for
    pod = objects(server, "jobs")["n2"]["spec"]["template"]["spec"]
    assert {"name": "work", "persistentVolumeClaim": {"claimName": "results"}} in pod["volumes"]
    assert not objects(server, "persistentvolumeclaims")


def test_wrong_credentials_are_one_line(server, job, tmp_path, capsys) -> None:
    kc = server.kubeconfig(tmp_path / "kubeconfig", token="expired-token")
    code, out, err = submit(capsys, str(job), "--kubeconfig", str(kc))
    assert code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "401 Unauthorized" in err and "expired-token" not in err
    assert not server.cluster.objects


def test_forbidden_is_one_line_naming_what_and_where(server, job, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_STORE", STORE)
    kc = server.kubeconfig(tmp_path / "kubeconfig")
    server.cluster.forbid.add("secrets")
    code, out, err = submit(capsys, str(job), "--kubeconfig", str(kc), "--name", "n3")
    assert code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err and STORE_PASSWORD not in err
    assert "not allowed to create the Secret n3-config in namespace team-a (403 Forbidden" in err
    assert not server.cluster.objects  # the Job and the ConfigMap made before it are gone


def test_another_context_and_its_namespace(server, job, tmp_path, capsys) -> None:
    kc = server.kubeconfig(tmp_path / "kubeconfig")
    code, out, _ = submit(capsys, str(job), "--kubeconfig", str(kc), "--context", "other", "--name", "n4")
    assert code == 0 and "namespace default" in out
    code, _, err = submit(capsys, str(job), "--kubeconfig", str(kc), "--context", "nope")
    assert code == 1 and "--context nope: no such context" in err


def test_the_kubeconfig_from_the_environment(server, job, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kc")))
    code, _, err = submit(capsys, str(job), "--name", "n5")
    assert code == 0, err
    assert ("jobs", "team-a", "n5") in server.cluster.objects


def test_no_kubeconfig_and_no_cluster_are_one_line(job, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, _, err = submit(capsys, str(job))
    assert code == 1 and "the kubeconfig" in err and err.count("\n") == 1
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with FakeApiServer(FakeCluster()) as fake:
        kc = fake.kubeconfig(tmp_path / "kc")
    kc.write_text(kc.read_text().replace(fake.url, f"http://127.0.0.1:{port}"))
    code, _, err = submit(capsys, str(job), "--kubeconfig", str(kc))
    assert code == 1 and "cannot be reached" in err and err.count("\n") == 1 and "Traceback" not in err


def test_dry_run_sends_nothing(server, job, tmp_path, capsys) -> None:
    kc = server.kubeconfig(tmp_path / "kubeconfig")
    code, out, _ = submit(capsys, str(job), "--kubeconfig", str(kc), "--dry-run")
    assert code == 0 and "kind: Job" in out and server.cluster.requests == []


def test_commands_that_do_not_submit_never_import_the_client() -> None:
    """`jobs`, `--help` and the operator's commands start as fast as before: no kubernetes, no yaml."""
    probe = ("import sys; from console.cli import main\n"
             "for argv in (['jobs'], ['--help'], ['submit', '--help']):\n"
             "    try: main(argv)\n"
             "    except SystemExit: pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'yaml', 'urllib3')"
             " or m.startswith('console.kube')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
