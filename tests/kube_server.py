"""A strict fake of the Kubernetes API server on 127.0.0.1, for the submit path's tests.

It answers the requests a submit makes as the real API server does: the paths of namespaced resources, POST with
an ``application/json`` body whose kind, apiVersion and namespace match the path and that the API's schema accepts
(kubernetes-validate, strict: an unknown field is refused, as with fieldValidation=Strict), a merge patch only with
the merge-patch content type (a JSON object sent as a JSON patch is refused, as the real server does), 409
AlreadyExists with a Status object, 401 without the bearer token, 403 for the resources it is told to forbid,
404 for anything else. Every request is recorded.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate

SCHEMA_VERSION = "1.31.0"
TOKEN = "fake-token-4f1d"
# path kind segment -> (apiVersion, kind, the API's group prefix)
RESOURCES = {
    "jobs": ("batch/v1", "Job", "/apis/batch/v1"),
    "configmaps": ("v1", "ConfigMap", "/api/v1"),
    "secrets": ("v1", "Secret", "/api/v1"),
    "persistentvolumeclaims": ("v1", "PersistentVolumeClaim", "/api/v1"),
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    body: Any


@dataclass
class FakeCluster:
    token: str = TOKEN
    forbid: set[str] = field(default_factory=set)  # resources answered 403
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # (resource, ns, name)
    requests: list[Request] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what the server refused, and why (for a failing test)
    lock: threading.Lock = field(default_factory=threading.Lock)


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class Handler(BaseHTTPRequestHandler):
    cluster: FakeCluster

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, code: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _refuse(self, code: int, reason: str, message: str) -> None:
        self.cluster.problems.append(f"{self.command} {self.path}: {code} {message}")
        self._reply(code, status(code, reason, message))

    def _route(self) -> tuple[str, str, str | None] | None:
        """(resource, namespace, name or None) of a namespaced path this server knows."""
        path = urlsplit(self.path).path
        for resource, (_, _, prefix) in RESOURCES.items():
            head = f"{prefix}/namespaces/"
            if path.startswith(head):
                parts = path[len(head):].split("/")
                if len(parts) in (2, 3) and parts[1] == resource and parts[0]:
                    return resource, parts[0], parts[2] if len(parts) == 3 else None
        return None

    def _handle(self) -> None:
        c = self.cluster
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = "(not JSON)"
        query = parse_qs(urlsplit(self.path).query)
        with c.lock:
            c.requests.append(Request(self.command, urlsplit(self.path).path, query, ctype, body))
        if self.headers.get("Authorization") != f"Bearer {c.token}":
            return self._refuse(401, "Unauthorized", "Unauthorized")
        route = self._route()
        if route is None:
            return self._refuse(404, "NotFound", f"the server could not find the requested resource ({self.path})")
        resource, ns, name = route
        api_version, kind, _ = RESOURCES[resource]
        if resource in c.forbid:
            return self._refuse(403, "Forbidden", f'{resource} is forbidden: User "ci" cannot {self.command.lower()} '
                                                  f'resource "{resource}" in the namespace "{ns}"')
        if self.command == "POST" and name is None:
            return self._create(resource, ns, api_version, kind, ctype, body, query)
        if self.command == "PATCH" and name is not None:
            return self._patch(resource, ns, name, ctype, body)
        if self.command == "DELETE" and name is not None:
            with c.lock:
                gone = c.objects.pop((resource, ns, name), None)
                if gone is not None and resource == "jobs":  # the garbage collector: the Job's dependents
                    uid = gone["metadata"]["uid"]
                    for key in [k for k, o in c.objects.items()
                                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences", []))]:
                        del c.objects[key]
            if gone is None:
                return self._refuse(404, "NotFound", f'{resource} "{name}" not found')
            return self._reply(200, status(200, "", "") | {"status": "Success"})
        return self._refuse(405, "MethodNotAllowed", f"{self.command} is not supported on {self.path}")

    def _create(self, resource: str, ns: str, api_version: str, kind: str, ctype: str, body: Any,
                query: dict[str, list[str]]) -> None:
        c = self.cluster
        # As the real server (negotiation.NegotiateInputSerializer): no Content-Type is its first type, JSON.
        if ctype not in ("application/json", ""):
            return self._refuse(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: "
                                                             f"{ctype}")
        if not isinstance(body, dict):
            return self._refuse(400, "BadRequest", "the body is not a JSON object")
        if body.get("apiVersion") != api_version or body.get("kind") != kind:
            return self._refuse(400, "BadRequest", f"{body.get('apiVersion')}/{body.get('kind')} sent to {resource}")
        meta = body.get("metadata") or {}
        if meta.get("namespace") not in (None, ns):
            return self._refuse(400, "BadRequest", "the namespace of the provided object does not match the "
                                                   "namespace sent on the request")
        if not meta.get("name"):
            return self._refuse(422, "Invalid", "metadata.name: Required value")
        if "uid" in meta or "resourceVersion" in meta:
            return self._refuse(400, "BadRequest", "metadata.uid/resourceVersion must not be set on create")
        try:
            kubernetes_validate.validate(body, SCHEMA_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return self._refuse(422, "Invalid", f"{kind}.{api_version} is invalid: {exc.message}")
        if query.get("fieldManager") != ["agent-console"]:
            return self._refuse(400, "BadRequest", f"expected fieldManager=agent-console, got {query}")
        key = (resource, ns, meta["name"])
        with c.lock:
            if key in c.objects:
                return self._refuse(409, "AlreadyExists", f'{resource} "{meta["name"]}" already exists')
            stored = json.loads(json.dumps(body))
            stored["metadata"] |= {"namespace": ns, "uid": str(uuid.uuid4()), "resourceVersion": "1",
                                   "creationTimestamp": "2026-11-26T09:00:00Z"}
            c.objects[key] = stored
        self._reply(201, stored)

    def _patch(self, resource: str, ns: str, name: str, ctype: str, body: Any) -> None:
        c = self.cluster
        if ctype != "application/merge-patch+json":
            # What the real server answers a JSON object sent as a JSON patch (a list of operations).
            return self._refuse(400, "BadRequest", f"{ctype}: json: cannot unmarshal object into Go value of type "
                                                   "jsonpatch.Patch")
        with c.lock:
            obj = c.objects.get((resource, ns, name))
            if obj is None:
                return self._refuse(404, "NotFound", f'{resource} "{name}" not found')
            merge(obj, body)
        self._reply(200, obj)

    do_POST = do_PATCH = do_DELETE = do_GET = do_PUT = _handle


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            merge(target[k], v)
        else:
            target[k] = v


class FakeApiServer:
    def __init__(self, cluster: FakeCluster | None = None) -> None:
        self.cluster = cluster or FakeCluster()
        handler = type("BoundHandler", (Handler,), {"cluster": self.cluster})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def kubeconfig(self, path: Any, namespace: str = "team-a", token: str | None = None) -> Any:
        path.write_text(json.dumps({  # a kubeconfig is YAML, and JSON is YAML
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "ci", "user": {"token": token or self.cluster.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "ci", "namespace": namespace}},
                         {"name": "other", "context": {"cluster": "fake", "user": "ci"}}],
        }))
        return path
