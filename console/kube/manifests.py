"""The objects a run on Kubernetes is made of, as the API's JSON (plain dicts: printed by --dry-run, validated against
the API's schema in the tests, and sent through the official client's models).

- a ConfigMap ``NAME-job`` with the job folder (console.kube.pack), which the init container unpacks onto the volume
  the first time only;
- a Secret ``NAME-config`` when the settings hold something secret (a store URL with a password, notification URLs):
  the pod reads it through secretKeyRef. The submit sends it; a dry-run leaves it out (its values are secret, and a
  placeholder would be applied as the value) and prints the command that makes it (:func:`secret_command`);
- a PersistentVolumeClaim ``NAME-work`` (unless --pvc names one): the run folder and the embedded store's data;
- the batch/v1 Job ``NAME``: restartPolicy Never with a backoffLimit; a pod evicted, preempted or drained (its
  DisruptionTarget condition) is replaced without counting against it, and an end that another pod would not change
  (incomplete, bad input, stopped by the operator, the agent gave up) fails the Job at once (podFailurePolicy).
  Every pod runs the resume path, ``run --in-place RUN_FOLDER``: a fresh folder starts, one with state goes on.

The provider key comes from a Secret the operator made (secretKeyRef); no value of a secret is in any manifest.
Every object carries the label ``agent-console/run-id=ID``: the objects a dry-run's output made by hand (which have
no owner: a manifest cannot know the uid of a Job not yet made) are deleted together by it (:func:`cleanup_command`).
A finished Job expires (ttlSecondsAfterFinished); the claim, which holds the run's results, stays.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass, field
from typing import Any

from console.kube.pack import ARCHIVE_NAME
from console.outcome import EXIT_FAILED, EXIT_GAVE_UP, EXIT_STOPPED, EXIT_USAGE

MOUNT = "/work"
SEED = "/seed"
RUNS = f"{MOUNT}/runs"
DATA_DIR = f"{MOUNT}/data"
USER_ID = 10001  # the image's user (Dockerfile): not root, and the volume's group (fsGroup) is its group
CONTAINER = "run"
# Exit codes (console.outcome) after which another pod would end the same way: the Job fails at once.
FINAL_EXIT_CODES = (EXIT_FAILED, EXIT_USAGE, EXIT_STOPPED, EXIT_GAVE_UP)
PREFIX = "agent-console"  # labels' and annotations' prefix (a DNS subdomain, as keys need)
RUN_ID_LABEL = f"{PREFIX}/run-id"  # on every object: what the cleanup command selects by
TTL_AFTER_FINISHED = 7 * 24 * 3600  # a week to read a finished Job's pods and logs; the claim outlives it
TMP_SIZE = "1Gi"  # the pod's /tmp (an emptyDir on the node's disk): past it, the kubelet evicts the pod


@dataclass(frozen=True)
class KeyRef:
    """An environment variable of the run container read from a key of a Secret."""

    env: str
    secret: str
    key: str


@dataclass(frozen=True)
class KubeRun:
    name: str  # a DNS-1123 label (console.kube.names.dns_label), at most 56 characters
    image: str
    archive: bytes
    run_id: str
    namespace: str | None = None
    image_pull_policy: str = "IfNotPresent"
    run_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # nothing secret: printed as is
    secret_env: dict[str, str] = field(default_factory=dict)  # into the Secret NAME-config
    key: KeyRef | None = None
    pvc: str | None = None  # an existing claim; None: NAME-work is made
    storage: str = "1Gi"
    storage_class: str | None = None
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    backoff_limit: int = 3
    ttl_after_finished: int = TTL_AFTER_FINISHED
    tmp_size: str = TMP_SIZE
    allow_userns: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        """The run folder in the pod; its path is also what the run's id is made from (console.engine.runs)."""
        return f"{RUNS}/{self.name}"

    @property
    def claim(self) -> str:
        return self.pvc or f"{self.name}-work"

    @property
    def config_map(self) -> str:
        return f"{self.name}-job"

    @property
    def secret(self) -> str:
        return f"{self.name}-config"


def _meta(run: KubeRun, name: str, annotations: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if run.namespace:
        meta["namespace"] = run.namespace
    meta["labels"] = dict(run.labels)
    if annotations and run.annotations:
        meta["annotations"] = dict(run.annotations)
    return meta


def _container_security(run: KubeRun, commands: bool = True) -> dict[str, Any]:
    """What the Pod Security Standards' "restricted" profile asks for; with --allow-userns, loosened for the
    container that runs the job's commands only (``commands``)."""
    sc: dict[str, Any] = {"allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
                          "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    if run.allow_userns and commands:
        # bubblewrap makes a user namespace (then pid, mount, net...) for each job-declared command: the runtime's
        # default seccomp profile and AppArmor (Ubuntu nodes) refuse unshare(CLONE_NEWUSER) to a non-root process,
        # and its --proc needs a /proc the runtime has not masked. The pod gets a user namespace of its own
        # (hostUsers: false) so that what is loosened here is not loosened for the node's users.
        sc["seccompProfile"] = {"type": "Unconfined"}
        sc["appArmorProfile"] = {"type": "Unconfined"}
        sc["procMount"] = "Unmasked"
    return sc


def _env(run: KubeRun) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(run.env.items())]
    env += [{"name": k, "valueFrom": {"secretKeyRef": {"name": run.secret, "key": _secret_key(k)}}}
            for k in sorted(run.secret_env)]
    if run.key is not None:
        env.append({"name": run.key.env, "valueFrom": {"secretKeyRef": {"name": run.key.secret,
                                                                         "key": run.key.key}}})
    return env


def _secret_key(env_name: str) -> str:
    """AGENT_CONSOLE_STORE -> store (a Secret's keys are [-._a-zA-Z0-9]+)."""
    return env_name.removeprefix("AGENT_CONSOLE_").lower().replace("_", "-")


def job(run: KubeRun, suspend: bool = False) -> dict[str, Any]:
    mounts = [{"name": "work", "mountPath": MOUNT}, {"name": "tmp", "mountPath": "/tmp"}]
    resources: dict[str, Any] = {}
    if run.requests:
        resources["requests"] = dict(run.requests)
    if run.limits:
        resources["limits"] = dict(run.limits)
    pod_sc: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": USER_ID, "runAsGroup": USER_ID, "fsGroup": USER_ID,
                              "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        # The agent's pod has no business with the cluster's API.
        "automountServiceAccountToken": False,
        "securityContext": pod_sc,
        "terminationGracePeriodSeconds": 30,  # a run stops within 2 s of SIGTERM, resumable
        "initContainers": [{
            "name": "unpack", "image": run.image, "imagePullPolicy": run.image_pull_policy,
            "command": ["python", "-m", "console.kube.pack", f"{SEED}/{ARCHIVE_NAME}", run.folder],
            "volumeMounts": [*mounts, {"name": "seed", "mountPath": SEED, "readOnly": True}],
            # The run's own: a namespace's quota that asks every container for them is met.
            "resources": resources,
            "securityContext": _container_security(run, commands=False),
        }],
        "containers": [{
            "name": CONTAINER, "image": run.image, "imagePullPolicy": run.image_pull_policy,
            "args": ["run", "--in-place", run.folder, "--headless", *run.run_args],
            "env": _env(run),
            "volumeMounts": mounts,
            "resources": resources,
            "securityContext": _container_security(run),
        }],
        "volumes": [
            {"name": "work", "persistentVolumeClaim": {"claimName": run.claim}},
            {"name": "seed", "configMap": {"name": run.config_map}},
            {"name": "tmp", "emptyDir": {"sizeLimit": run.tmp_size}},
        ],
    }
    if run.allow_userns:
        pod["hostUsers"] = False
    spec: dict[str, Any] = {
        "backoffLimit": run.backoff_limit,
        "ttlSecondsAfterFinished": run.ttl_after_finished,
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                                                  "values": list(FINAL_EXIT_CODES)}},
        ]},
        "template": {"metadata": {"labels": dict(run.labels), "annotations": dict(run.annotations)}, "spec": pod},
    }
    if suspend:
        spec["suspend"] = True
    return copy.deepcopy({"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(run, run.name, annotations=True),
                          "spec": spec})


def config_map(run: KubeRun) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(run, run.config_map),
            "binaryData": {ARCHIVE_NAME: base64.b64encode(run.archive).decode("ascii")}}


def secret(run: KubeRun) -> dict[str, Any] | None:
    """The Secret ``NAME-config`` with its values (sent by the submit, never printed)."""
    if not run.secret_env:
        return None
    data = {_secret_key(k): v for k, v in sorted(run.secret_env.items())}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(run, run.secret), "type": "Opaque",
            "stringData": data}


def claim(run: KubeRun) -> dict[str, Any] | None:
    if run.pvc is not None:
        return None
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": run.storage}}}
    if run.storage_class:
        spec["storageClassName"] = run.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(run, run.claim, annotations=True),
            "spec": spec}


def manifests(run: KubeRun) -> list[dict[str, Any]]:
    """What --dry-run prints, in the order ``kubectl apply -f`` would make them (the Job last): every object but
    the Secret ``NAME-config``, whose values are secret (:func:`secret_command` makes it)."""
    objs = [config_map(run), claim(run), job(run)]
    # Copies: no object shares a part with another (a printer would write it as a YAML alias).
    return [copy.deepcopy(o) for o in objs if o is not None]


def settings_annotation(settings: dict[str, Any]) -> str:
    """The run's settings as one annotation (sorted JSON: what the Job was submitted with)."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def _ns(run: KubeRun) -> str:
    return f" -n {run.namespace}" if run.namespace else ""


def secret_keys(run: KubeRun) -> list[str]:
    """The keys of the Secret ``NAME-config`` (store, notify-urls), each read by one variable of the pod."""
    return [_secret_key(k) for k in sorted(run.secret_env)]


def secret_command(run: KubeRun) -> str | None:
    """The shell command that makes the Secret ``NAME-config`` with the run's label, its values read from stdin
    (``KEY=VALUE`` lines, then Ctrl+D), never from the command line, which every user of the machine sees (ps)."""
    if not run.secret_env:
        return None
    ns = _ns(run)
    return (f"kubectl{ns} create secret generic {run.secret} --from-env-file=/dev/stdin && "
            f"kubectl{ns} label secret {run.secret} {RUN_ID_LABEL}={run.run_id}")


def cleanup_command(run: KubeRun) -> str:
    """The shell command that deletes what a dry-run's output made, the claim (the run's results) aside."""
    return f"kubectl{_ns(run)} delete job,configmap,secret -l {RUN_ID_LABEL}={run.run_id}"
