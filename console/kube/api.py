"""Sending a run's objects to the cluster through the official ``kubernetes`` client (imported here only: every
other command starts without it).

The Job is made first, suspended: a name already taken (409) stops the submit before anything else exists. The
ConfigMap and the Secret are then made as the Job's dependents (ownerReferences: deleting the Job deletes them),
the volume claim on its own (the run's results outlive the Job), and the Job is resumed. Anything failing half-way
deletes what this submit made. Every refusal of the API server is one line (its Status message, which never holds
a Secret's data), never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.engine.job_files import one_line
from console.kube.manifests import KubeRun, claim, config_map, job, secret

FIELD_MANAGER = "agent-console"
TIMEOUT = 30.0  # seconds for one request: a cluster that does not answer is a line, not a hang
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeError(Exception):
    """The cluster cannot be reached or refused: one line for the operator."""


def missing_client() -> str:
    return ("the kubernetes Python client is not installed: pip install 'agent-console[kubernetes]' "
            "(--dry-run works without it)")


def connect(kubeconfig: str | None, context: str | None) -> tuple[Any, str]:
    """An API client from the kubeconfig (--kubeconfig, else $KUBECONFIG, else ~/.kube/config; --context, else its
    current context) or, in a pod with none of them, the pod's service account; and the namespace it names."""
    try:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:
        raise KubeError(missing_client()) from None
    # $KUBECONFIG read now (the client reads it once, when imported), with its list of files (a:b) as kubectl does.
    kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
    default = Path((kubeconfig or "~/.kube/config").split(os.pathsep)[0]).expanduser()
    try:
        if kubeconfig is None and context is None and not default.exists() and os.environ.get(
                "KUBERNETES_SERVICE_HOST"):
            cfg = client.Configuration()
            config.load_incluster_config(client_configuration=cfg)
            namespace = IN_CLUSTER_NAMESPACE.read_text().strip() if IN_CLUSTER_NAMESPACE.exists() else "default"
            return client.ApiClient(cfg), namespace
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        if chosen is None:
            names = ", ".join(str(c.get("name")) for c in contexts) or "none"
            raise KubeError(f"--context {one_line(str(context), 80)}: no such context in the kubeconfig "
                            f"(contexts: {one_line(names, 300)})")
        namespace = (chosen.get("context") or {}).get("namespace") or "default"
        return config.new_client_from_config(config_file=kubeconfig, context=context), namespace
    except KubeError:
        raise
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeError(f"the kubeconfig ({one_line(where, 200)}) cannot be used: {_first(exc)}") from None


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return one_line(text.splitlines()[0] if text else type(exc).__name__, 300)


def _status_message(exc: Any) -> str:
    """The API server's own words (a Status object's message), else its HTTP reason."""
    body = getattr(exc, "body", None)
    try:
        message = json.loads(body).get("message") if body else None
    except (ValueError, AttributeError):
        message = None
    return one_line(str(message or getattr(exc, "reason", "") or "no reason given"), 400)


def explain(exc: BaseException, what: str, namespace: str) -> KubeError:
    """A failed request as the line the operator reads."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        status, said = exc.status, _status_message(exc)
        if status == 401:
            return KubeError(f"the cluster did not accept the kubeconfig's credentials (401 Unauthorized: {said}); "
                             "log in again (e.g. refresh the token) and retry")
        if status == 403:
            return KubeError(f"not allowed to create the {what} in namespace {namespace} (403 Forbidden: {said})")
        if status == 409:
            return KubeError(f"the {what} already exists in namespace {namespace} (409 AlreadyExists): choose "
                             "another --name, or delete the old one first")
        if status == 404:
            return KubeError(f"namespace {namespace} not found, or the API server has no such resource "
                             f"(404: {said})")
        return KubeError(f"the cluster refused the {what} ({status} {one_line(str(exc.reason or ''), 80)}: {said})")
    return KubeError(f"the cluster's API server cannot be reached ({type(exc).__name__}: {_first(exc)})")


def _model(cls: Any, obj: dict[str, Any]) -> Any:
    """The client's model of a manifest (its from_dict is typed as maybe None, which it is only for None)."""
    model = cls.from_dict(obj)
    if model is None:
        raise KubeError(f"a {cls.__name__} could not be made of its manifest")
    return model


def _owned(obj: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "ownerReferences": [owner]}}


def submit(api_client: Any, run: KubeRun, namespace: str) -> list[str]:
    """Make the run's objects in ``namespace``; the ``Kind/name`` of each, in the order made."""
    from kubernetes import client

    run = _in(run, namespace)
    batch, core = client.BatchV1Api(api_client), client.CoreV1Api(api_client)
    made: list[str] = []

    def call(what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # ApiException, urllib3's errors: each becomes a line
            raise explain(exc, what, namespace) from None

    # The client sends no Content-Type on a create unless told (the server then assumes JSON): said, as kubectl does.
    opts: dict[str, Any] = {"field_manager": FIELD_MANAGER, "_request_timeout": TIMEOUT}
    create = {**opts, "_content_type": "application/json"}
    created = call(f"Job {run.name}", lambda: batch.create_namespaced_job(
        namespace, _model(client.V1Job, job(run, suspend=True)), **create))
    made.append(f"Job/{run.name}")
    uid = getattr(getattr(created, "metadata", None), "uid", None)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": run.name, "uid": uid, "blockOwnerDeletion": True}
    claim_made = False
    try:
        if uid is None:
            raise KubeError(f"the cluster made Job {run.name} but did not say its uid; delete it with: kubectl "
                            f"delete job {run.name} -n {namespace}")
        cm = _owned(config_map(run), owner)
        call(f"ConfigMap {run.config_map}", lambda: core.create_namespaced_config_map(
            namespace, _model(client.V1ConfigMap, cm), **create))
        made.append(f"ConfigMap/{run.config_map}")
        sec = secret(run)
        if sec is not None:
            owned = _owned(sec, owner)
            call(f"Secret {run.secret}", lambda: core.create_namespaced_secret(
                namespace, _model(client.V1Secret, owned), **create))
            made.append(f"Secret/{run.secret}")
        pvc = claim(run)
        if pvc is not None:
            call(f"PersistentVolumeClaim {run.claim}", lambda: core.create_namespaced_persistent_volume_claim(
                namespace, _model(client.V1PersistentVolumeClaim, pvc), **create))
            claim_made = True
            made.append(f"PersistentVolumeClaim/{run.claim}")
        # A merge patch (the client's default for a patch is a JSON patch, a list of operations).
        call(f"Job {run.name}", lambda: batch.patch_namespaced_job(
            run.name, namespace, {"spec": {"suspend": False}}, _content_type="application/merge-patch+json",
            **opts))
    except BaseException:
        _undo(batch, core, run, namespace, claim_made)
        raise
    return made


def _undo(batch: Any, core: Any, run: KubeRun, namespace: str, claim_made: bool) -> None:
    """Delete what a failed submit made (best effort: the error being reported is the one that matters)."""
    from kubernetes import client

    options = client.V1DeleteOptions(propagation_policy="Background")
    with contextlib.suppress(Exception):
        batch.delete_namespaced_job(run.name, namespace, body=options, _request_timeout=TIMEOUT)
    if claim_made:
        with contextlib.suppress(Exception):
            core.delete_namespaced_persistent_volume_claim(run.claim, namespace, _request_timeout=TIMEOUT)


def _in(run: KubeRun, namespace: str) -> KubeRun:
    from dataclasses import replace

    return replace(run, namespace=namespace)
