"""`submit JOB --kubernetes`: run a job as a Kubernetes Job (console.kube), or print its manifests (--dry-run).

Everything `run` checks is checked here first (the job folder, job.toml, the settings, the flags), so a job that
would not start is refused on this machine, not in a pod. The kubernetes client is imported only to send.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from console import __version__
from console.cli.common import UsageError, err, say
from console.outcome import EXIT_FAILED, EXIT_OK

# Patterns, compiled when a submit checks its flags (not when the parser is built for every other command).
QUANTITY = r"[0-9]+(\.[0-9]+)?([eE][0-9]+|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?"
SECRET_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
SECRET_KEY = r"[-._a-zA-Z0-9]{1,253}"
IMAGE = r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}"
# The image of this very version (the Dockerfile builds it; tag it so): the pod's `run` reads the flags and variables
# this machine's version writes. A tag like :latest names whatever was pushed last.
DEFAULT_IMAGE = f"agent-console:{__version__}"
MAX_BACKOFF = 100
MAX_TTL = 2**31 - 1  # the Job's ttlSecondsAfterFinished is an int32
LIMIT_DEFAULTS = {"memory_limit": "2Gi"}


def add_parser(sub: Any, settings_flags: Any) -> None:
    s = sub.add_parser("submit", help="run a job on Kubernetes (a batch/v1 Job); --dry-run prints the manifests",
                       description="Run JOB as a Kubernetes Job: the job folder on a PersistentVolumeClaim, the "
                                   "provider key from a Secret, the store URL from the settings, the run's settings "
                                   "recorded. A pod evicted or killed is replaced and resumes the run from the "
                                   "volume. See docs/kubernetes.md.")
    s.add_argument("job", metavar="JOB", help="job folder (with instructions.md)")
    s.add_argument("--kubernetes", action="store_true", help="submit to the Kubernetes cluster of the kubeconfig")
    s.add_argument("--dry-run", action="store_true", help="print the manifests as YAML; send nothing")
    s.add_argument("--namespace", "-n", metavar="NS", help="namespace (default: the kubeconfig context's)")
    s.add_argument("--image", default=DEFAULT_IMAGE, help=f"the image to run (default {DEFAULT_IMAGE}; the "
                                                          "repository's Dockerfile builds it)")
    s.add_argument("--name", help="the run's name on the cluster (default: the job's name and the time)")
    s.add_argument("--secret", metavar="NAME", help="the Secret holding the provider's key (default: "
                                                    "agent-console-PROVIDER; kubectl create secret generic ...)")
    s.add_argument("--secret-key", metavar="KEY", default="api-key", help="its key (default api-key)")
    s.add_argument("--pvc", metavar="CLAIM", help="an existing PersistentVolumeClaim (default: one is made)")
    s.add_argument("--storage", default="1Gi", metavar="SIZE", help="size of the claim made (default 1Gi)")
    s.add_argument("--storage-class", metavar="CLASS", help="its storage class (default: the cluster's)")
    s.add_argument("--cpu", default="500m", help="CPU request (default 500m)")
    s.add_argument("--memory", default="512Mi", help="memory request (default 512Mi)")
    s.add_argument("--cpu-limit", help="CPU limit (default: none)")
    s.add_argument("--memory-limit", default=LIMIT_DEFAULTS["memory_limit"], help="memory limit (default 2Gi)")
    s.add_argument("--backoff-limit", type=int, default=3, metavar="N",
                   help="pods that may fail before the Job does (default 3; evictions do not count)")
    s.add_argument("--ttl-after-finished", type=int, metavar="SECONDS",
                   help="seconds a finished Job and its pods are kept before the cluster deletes them (default: "
                        "[kubernetes] ttl_after_finished in the config file, else 604800, a week; the claim stays)")
    s.add_argument("--tmp-size", default="1Gi", metavar="SIZE",
                   help="the most the pod's /tmp may hold (default 1Gi; past it the pod is evicted)")
    s.add_argument("--allow-userns", action="store_true",
                   help="let bubblewrap make user namespaces in the pod (job-declared commands confined): the run "
                        "container gets seccomp and AppArmor Unconfined, in a pod with its own user namespace "
                        "(see docs/kubernetes.md)")
    s.add_argument("--image-pull-policy", choices=("IfNotPresent", "Always", "Never"), default="IfNotPresent")
    s.add_argument("--context", help="kubeconfig context (default: its current one)")
    s.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    settings_flags(s)
    s.add_argument("--unconfined", action="store_true",
                   help="run the job's [[tools]] commands WITHOUT a sandbox (as run --unconfined)")


def _check(args: argparse.Namespace) -> None:
    from console.engine.job_files import JobError

    for flag in ("cpu", "memory", "cpu_limit", "memory_limit", "storage", "tmp_size"):
        value = getattr(args, flag)
        if value is not None and not re.fullmatch(QUANTITY, value):
            raise JobError(f"--{flag.replace('_', '-')}: not a Kubernetes quantity (e.g. 500m, 2, 512Mi, 10Gi)")
    if not 0 <= args.backoff_limit <= MAX_BACKOFF:
        raise JobError(f"--backoff-limit: a whole number from 0 to {MAX_BACKOFF}")
    if args.ttl_after_finished is not None and not 0 <= args.ttl_after_finished <= MAX_TTL:
        raise JobError(f"--ttl-after-finished: a whole number of seconds from 0 to {MAX_TTL}")
    if args.secret is not None and not re.fullmatch(SECRET_NAME, args.secret):
        # Never repeated: what does not look like a Secret's name may well be the key itself.
        raise JobError("--secret names a Secret (lower-case letters, digits, '-' and '.'), not a key: the value "
                       "given is not one (and is not shown); create the Secret with kubectl and give its name")
    if not re.fullmatch(SECRET_KEY, args.secret_key):
        raise JobError("--secret-key names a key of the Secret (letters, digits, '-', '_' and '.'); the value "
                       "given is not one (and is not shown)")
    if not re.fullmatch(IMAGE, args.image):
        raise JobError("--image: not an image reference (e.g. registry.example.com/agent-console:0.1.0)")
    for request, limit in (("cpu", "cpu_limit"), ("memory", "memory_limit")):
        if _more(getattr(args, request), getattr(args, limit)):
            raise JobError(f"--{request} {getattr(args, request)} is more than --{limit.replace('_', '-')} "
                           f"{getattr(args, limit)} (the limit's default is {LIMIT_DEFAULTS.get(limit, 'none')}): "
                           "the cluster refuses such a pod")
    for flag in ("namespace", "pvc", "storage_class"):
        value = getattr(args, flag)
        if value is not None and not re.fullmatch(SECRET_NAME, value):
            raise JobError(f"--{flag.replace('_', '-')}: not a Kubernetes name (lower-case letters, digits, '-')")


def _more(request: str | None, limit: str | None) -> bool:
    """The request is over the limit (checked with the client's own parser; without the client, the cluster
    says so)."""
    if request is None or limit is None:
        return False
    try:
        from kubernetes.utils.quantity import parse_quantity
    except ImportError:
        return False
    return bool(parse_quantity(request) > parse_quantity(limit))


def unpinned(image: str) -> bool:
    """The image names no fixed build: no digest (``@sha256:...``), and no tag or the tag ``latest``."""
    if "@" in image:
        return False
    last = image.rsplit("/", 1)[-1]  # a registry's port (host:5000/x) is not a tag
    return ":" not in last or last.rsplit(":", 1)[1] == "latest"


def _name(args: argparse.Namespace, source: Any, now: Any) -> str:
    from console.engine.job_files import JobError
    from console.kube.names import DNS_LABEL, MAX_BASE, dns_label

    if args.name is not None:
        if len(args.name) > MAX_BASE or not DNS_LABEL.match(args.name):
            raise JobError(f"--name: at most {MAX_BASE} lower-case letters, digits and '-' (e.g. "
                           f"{dns_label(args.name)})")
        return str(args.name)
    stamp = now.strftime("%Y%m%d-%H%M%S")
    return f"{dns_label(source.root.name, MAX_BASE - len(stamp) - 1)}-{stamp}"


def plan(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The run as this machine resolves it (a KubeRun) and the store URL it records in (None: the embedded one);
    JobError or ValueError (one line) if it cannot be, or if a secret this machine knows would be in a manifest
    that is printed or sent as it is (any object but the Secret)."""
    run, store, secrets = _plan(args)
    from console.engine.job_files import JobError
    from console.kube.manifests import cleanup_command, manifests, secret_command

    shown = json.dumps([manifests(run), secret_command(run), cleanup_command(run)], ensure_ascii=False)
    for what, value in secrets:
        if len(value) >= 8 and value in shown:
            # A setting that is no secret holds one (a model name, a URL set to a key by mistake): never shown.
            raise JobError(f"the manifests would hold the value of {what} (in a setting that is not secret: the "
                           "model, a URL...); it is not shown: check the settings and flags")
    return run, store


def _plan(args: argparse.Namespace) -> tuple[Any, str | None, list[tuple[str, str]]]:
    from console.cli.common import check_flags
    from console.cli.run import _budgets, explicit_flags
    from console.engine.clock import SystemClock
    from console.engine.job_config import load_job_config
    from console.engine.job_files import JobError, check_instructions, one_line, validate_job_folder
    from console.engine.runs import run_id
    from console.kube import carry
    from console.kube.manifests import DATA_DIR, PREFIX, RUN_ID_LABEL, RUNS, KeyRef, KubeRun, settings_annotation
    from console.kube.names import label_value
    from console.kube.pack import PackError, pack_job
    from console.notify import check_urls
    from console.providers import registry
    from console.settings import load_settings, resolve_run_settings

    check_flags(args)
    settings = load_settings()
    given = explicit_flags(args)
    notify = tuple(given.pop("notify", None) or settings.notify.urls)
    store = carry.store_url(settings)
    secrets = carry.secret_values(settings, store, notify)
    carry.check_not_given({k: v for k, v in vars(args).items() if isinstance(v, (str, list, tuple))}, secrets)
    _check(args)
    if problems := check_urls(notify):
        raise ValueError(f"--notify / [notify] urls: {problems[0]}")
    source = validate_job_folder(Path(args.job))
    check_instructions(source)  # a pod that reads its task in vain until stuck costs more than a local run
    job = load_job_config(source)
    given.pop("script", None)
    unconfined = bool(given.pop("unconfined", None))
    rs = resolve_run_settings(settings, job, job_toml=one_line(str(source.job_toml), 0),
                              **{k: v for k, v in given.items() if v is not None}, unconfined=unconfined)
    try:
        archive = pack_job(source.root, secrets)
    except PackError as exc:
        raise JobError(f"{one_line(str(source.root), 0)}: {exc}") from None
    name = _name(args, source, SystemClock().now())
    rid = run_id(f"{RUNS}/{name}")  # the pod's run folder: the id `jobs` and `logs` know the run by
    env = carry.settings_env(settings)
    env.update({"AGENT_CONSOLE_DATA_DIR": DATA_DIR, "HOME": "/tmp", "NO_COLOR": "1"})
    secret_env: dict[str, str] = {}
    if store:
        (secret_env if carry.has_password(store) else env)[carry.STORE_ENV] = store
    if notify:
        secret_env[carry.NOTIFY_ENV] = " ".join(notify)
    telemetry_plain, telemetry_secret = carry.telemetry_env(settings, os.environ)
    env.update(telemetry_plain)
    secret_env.update(telemetry_secret)
    key = None
    if registry.PROVIDERS[rs.provider].needs_key:
        key = KeyRef(env=f"AGENT_CONSOLE_{rs.provider.upper()}_API_KEY",
                     secret=args.secret or f"agent-console-{rs.provider}", key=args.secret_key)
    recorded = carry.recorded_settings(rs, settings, _budgets(job), store, notify, unconfined)
    labels = {"app.kubernetes.io/name": "agent-console", "app.kubernetes.io/instance": name,
              "app.kubernetes.io/managed-by": "agent-console", RUN_ID_LABEL: rid,
              f"{PREFIX}/provider": label_value(rs.provider)}
    annotations = {f"{PREFIX}/job": one_line(source.root.name, 253), f"{PREFIX}/run-id": rid,
                   f"{PREFIX}/settings": settings_annotation(recorded)}
    requests = {"cpu": args.cpu, "memory": args.memory}
    limits = {k: v for k, v in (("cpu", args.cpu_limit), ("memory", args.memory_limit)) if v}
    return KubeRun(name=name, image=args.image, archive=archive, run_id=rid, namespace=args.namespace,
                   image_pull_policy=args.image_pull_policy, run_args=tuple(carry.run_flags(rs, unconfined)),
                   env=env, secret_env=secret_env, key=key, pvc=args.pvc, storage=args.storage,
                   storage_class=args.storage_class, requests=requests, limits=limits,
                   backoff_limit=args.backoff_limit, allow_userns=args.allow_userns, labels=labels,
                   annotations=annotations, tmp_size=args.tmp_size,
                   ttl_after_finished=(settings.kubernetes.ttl_after_finished if args.ttl_after_finished is None
                                       else args.ttl_after_finished)), store, secrets


def _telemetry_endpoint(settings: Any) -> str | None:
    """Where the pod's telemetry goes (as carried: the variable's, else the config's), None when it exports none."""
    from console.telemetry.plan import DEFAULT_ENDPOINT, ENDPOINT_VARS, plan

    if plan(settings.telemetry, os.environ) is None:
        return None
    return next((os.environ[v].strip() for v in ENDPOINT_VARS if os.environ.get(v, "").strip()),
                settings.telemetry.endpoint or DEFAULT_ENDPOINT)


def dump_yaml(objs: list[dict[str, Any]]) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # no &id001 anchors: each object reads on its own, as kubectl prints them

    # No folding of long values (the settings annotation): a line per value, as written.
    return yaml.dump_all(objs, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=1 << 20)


def cmd_submit(args: argparse.Namespace) -> int:
    from console.engine.job_files import JobError

    if not args.kubernetes:
        raise UsageError("submit: say where: --kubernetes (the only target so far)")
    try:
        run, store = plan(args)
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except RecursionError:
        raise UsageError(f"{args.job}: a job or settings file is nested too deeply to be read") from None
    from console.kube import carry
    from console.settings import load_settings

    if store and carry.store_is_local(store):
        err("warning: the store URL names this machine (localhost): in a pod it names the pod itself; give the "
            "database's address as the cluster reaches it")
    if (endpoint := _telemetry_endpoint(load_settings())) and carry.store_is_local(endpoint):
        err("warning: the telemetry endpoint names this machine (localhost): in a pod it names the pod itself, and "
            "the run's spans and metrics go nowhere; give the collector's address as the cluster reaches it "
            "([telemetry] endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)")
    if unpinned(run.image):
        err(f"warning: the image {run.image} is not pinned (no tag, or :latest, and no @sha256 digest): a pod "
            "replaced later may run another build; give --image with a version tag or a digest")
    if args.dry_run:
        return _dry_run(run)
    return _send(args, run)


def dry_run_notes(run: Any) -> list[str]:
    """What the printed manifests need and how they are deleted: the Secret they leave out, made first, with its
    values from stdin; and the cleanup by the run's label (no owner references: a manifest cannot know the uid
    of a Job that does not exist yet)."""
    from console.kube.manifests import cleanup_command, secret_command, secret_keys

    notes = [f"agent-console submit --dry-run: run {run.run_id} (Job {run.name}); apply with: kubectl apply -f -"]
    if (make := secret_command(run)) is not None:
        lines = ", ".join(f"{k}={_WHAT.get(k, '...')}" for k in secret_keys(run))
        notes += [f"first make the Secret {run.secret} (not printed: it holds secrets of your settings): run this, "
                  f"type one line per key ({lines}), then Ctrl+D:", f"  {make}"]
    notes.append(f"delete it all when done (the claim {run.claim}, with the run's results, aside; the Job expires "
                 f"{_after(run.ttl_after_finished)} after it finishes, the objects applied with it do not): "
                 f"{cleanup_command(run)}")
    return notes


_WHAT = {"store": "<the store URL>", "notify-urls": "<the notification URLs, separated by spaces>",
         "telemetry": "<the [telemetry] table as JSON>", "otel-exporter-otlp-headers": "<the OTLP headers>"}


def _after(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n > 1 else ''}"
    return f"{seconds} s"


def _dry_run(run: Any) -> int:
    from console.kube.manifests import manifests

    try:
        text = dump_yaml(manifests(run))
    except ImportError:
        err("--dry-run prints YAML with PyYAML, which is not installed: pip install 'agent-console[kubernetes]'")
        return EXIT_FAILED
    notes = dry_run_notes(run)
    sys.stdout.write("".join(f"# {line}\n" for line in notes))
    sys.stdout.write(text)
    sys.stdout.flush()
    if not sys.stdout.isatty():
        # Piped into kubectl, the comments are not read by anyone: the operator reads them here.
        for line in notes:
            say(line, sys.stderr)
    return EXIT_OK


def _send(args: argparse.Namespace, run: Any) -> int:
    from console.kube.api import KubeError, connect, submit

    try:
        client, context_namespace = connect(args.kubeconfig, args.context)
        namespace = args.namespace or context_namespace
        made = submit(client, run, namespace)
    except KubeError as exc:
        err(str(exc))
        return EXIT_FAILED
    say(f"run {run.run_id}: Job {run.name} in namespace {namespace} ({', '.join(made)})")
    say(f"follow it: kubectl logs -f job/{run.name} -n {namespace}; its pods: kubectl get pods -n {namespace} "
        f"-l app.kubernetes.io/instance={run.name}; with a shared store: agent-console logs -f {run.run_id}")
    return EXIT_OK
