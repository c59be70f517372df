"""The operator's own Kubernetes API access: JSON requests, discovery, errors with meaning.

The controller (reconciler, finalizers, status writes) and observability's
Event recorder use this from worker threads; kopf has its own asyncio client
for watching. Requests go through the `kubernetes` package's ApiClient (auth,
TLS, proxies) but bodies stay plain dicts: custom resources have no generated
models, and a round-trip through models would drop unknown fields.

Errors: 404 → NotFound, 409 → Conflict, 5xx / 429 / connection failures →
KubeUnavailable (retry later), any other 4xx → ApiError (permanent for this
input). Each carries the HTTP status and the API server's message.

`KubeApi` is the seam the reconcile path (reconciler, finalizers, status
writes) depends on; `Kube` is the real implementation and kube.fake.FakeKube
the in-memory one for tests. The API proxy, leader election and dependent
watches need raw `request()` and take a `Kube`.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import urllib3
from kubernetes import client, config
from kubernetes.client import rest
from kubernetes.client.api_client import RequestSerialized

from ansible_operator.errors import KubeUnavailable, Permanent
from ansible_operator.kube import deepjson, login

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
_LIST_PAGE = 500
JSON_PATCH = "application/json-patch+json"


class ApiError(Permanent):
    """The API server rejected the request; retrying the same request cannot help."""

    def __init__(self, status: int, message: str, *, reason: str = "") -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    """The object (or its kind) does not exist."""


class Conflict(ApiError):
    """The object changed since it was read (resourceVersion mismatch) or already exists."""


@dataclass(frozen=True)
class ResourceInfo:
    """What discovery says about one kind: enough to build request paths."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    has_status: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, *, namespace: str = "", name: str = "", subresource: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{urllib.parse.quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{urllib.parse.quote(name)}"
        if subresource:
            base += f"/{subresource}"
        return base


class KubeApi(Protocol):
    """The object operations of the reconcile path; Kube and kube.fake.FakeKube implement it.

    Every method raises NotFound, Conflict, ApiError or errors.KubeUnavailable
    as the module docstring says.
    """

    def resource(self, *, group: str, version: str, kind: str) -> ResourceInfo: ...

    def get(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON: ...

    def get_or_none(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None: ...

    def replace_status(self, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON: ...

    def patch(
        self,
        res: ResourceInfo,
        *,
        namespace: str,
        name: str,
        body: Any,
        content_type: str = MERGE_PATCH,
        subresource: str = "",
    ) -> JSON: ...

    def create(self, res: ResourceInfo, *, namespace: str, body: Mapping[str, Any]) -> JSON: ...

    def list_names(self, res: ResourceInfo, *, namespace: str = "") -> set[tuple[str, str]]:
        """(namespace, name) of every object of a kind, in `namespace` or in all."""
        ...


def load_api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ApiClient for `kubeconfig`, else $KUBECONFIG, in-cluster, or ~/.kube/config."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if not path and os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return client.ApiClient(configuration)
    path = path or str(Path.home() / ".kube" / "config")
    # Not config.new_client_from_config: it leaves embedded keys in $TMPDIR (kube.login).
    return client.ApiClient(login.load(path))


def _error(status: int, payload: bytes) -> ApiError | KubeUnavailable:
    try:
        body = json.loads(payload)
        message = str(body.get("message", "")) or payload.decode(errors="replace")
        reason = str(body.get("reason", ""))
    except (ValueError, AttributeError):
        message, reason = payload.decode(errors="replace")[:500], ""
    if status == 404:
        return NotFound(status, message, reason=reason)
    if status == 409:
        return Conflict(status, message, reason=reason)
    if status == 429 or status >= 500:
        return KubeUnavailable(f"HTTP {status}: {message}")
    return ApiError(status, message, reason=reason)


class Kube(KubeApi):
    """Thread-safe JSON access to one API server."""

    def __init__(self, api_client: client.ApiClient, *, timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self._discovery: dict[str, list[JSON]] = {}
        self._lock = threading.Lock()

    def login_fields(self) -> dict[str, Any]:
        """This client's login as kopf's `ConnectionInfo` fields (kube/login.py)."""
        return login.connection_fields(self.api_client.configuration)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        # We encode bodies and decode answers with deepjson, not the kubernetes
        # client: its sanitizing and json recurse per level and fail from about
        # 500 levels, while the API server accepts objects nested 10,000 deep.
        encoded = None if body is None else deepjson.dumps(body).encode()
        serialized = self.api_client.param_serialize(
            method,
            path,
            query_params=list(query),
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._send(serialized, encoded)
            payload = cast(bytes, response.read())  # type: ignore[no-untyped-call]
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise KubeUnavailable(f"{method} {path}: {err}") from err
        except client.ApiException as err:  # raised by some transports for non-2xx
            raise _error(int(err.status or 0), (err.body or "").encode()) from err
        if not 200 <= response.status <= 299:
            raise _error(response.status, payload)
        return deepjson.loads(payload) if payload else None

    def _send(self, serialized: RequestSerialized, encoded: bytes | None) -> rest.RESTResponse:
        if encoded is None:
            return self.api_client.call_api(*serialized, _request_timeout=self.timeout)
        # call_api would json.dumps the body again; its pool sends our bytes as they are.
        method, url, headers = serialized[0], serialized[1], serialized[2]
        raw = self.api_client.rest_client.pool_manager.request(
            method,
            url,
            body=encoded,
            headers=headers,
            timeout=urllib3.Timeout(total=self.timeout),
            preload_content=False,
        )
        return rest.RESTResponse(raw)

    # -- discovery -------------------------------------------------------------

    def _resources(self, group: str, version: str, *, refresh: bool) -> list[JSON]:
        key = f"{group}/{version}"
        with self._lock:
            cached = self._discovery.get(key)
        if cached is not None and not refresh:
            return cached
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            found = list(self.request("GET", path).get("resources", []))
        except NotFound:
            found = []
        with self._lock:
            self._discovery[key] = found
        return found

    def resource(self, *, group: str, version: str, kind: str) -> ResourceInfo:
        """Discovery for one kind, cached; re-read once on a miss (CRDs created later)."""
        for refresh in (False, True):
            entries = self._resources(group, version, refresh=refresh)
            names = {str(e.get("name")) for e in entries}
            for entry in entries:
                if entry.get("kind") == kind and "/" not in str(entry.get("name")):
                    plural = str(entry["name"])
                    return ResourceInfo(
                        group=group,
                        version=version,
                        kind=kind,
                        plural=plural,
                        namespaced=bool(entry.get("namespaced")),
                        has_status=f"{plural}/status" in names,
                    )
        gv = f"{group}/{version}" if group else version
        raise NotFound(404, f"the server does not serve kind {kind} in {gv}")

    def resource_for_plural(self, *, group: str, version: str, plural: str) -> ResourceInfo:
        """Discovery by a request path's resource segment (the API proxy's view), cached.

        Re-reads the group's discovery once on a miss, so a CRD created earlier
        in the same play is found. Only kinds the API server stores are
        returned: a "virtual" kind whose discovery lists no `get` verb
        (SubjectAccessReview, TokenReview...) raises NotFound like an unknown
        one, because nothing can own it or watch it. Only this group/version is
        read, so a broken aggregated API elsewhere does not matter here.
        """
        gv = f"{group}/{version}" if group else version
        for refresh in (False, True):
            entries = self._resources(group, version, refresh=refresh)
            for entry in entries:
                if entry.get("name") != plural:
                    continue
                if "get" not in (entry.get("verbs") or ()):
                    raise NotFound(404, f"{plural} in {gv} is not a stored kind")
                names = {str(e.get("name")) for e in entries}
                return ResourceInfo(
                    group=group,
                    version=version,
                    kind=str(entry.get("kind")),
                    plural=plural,
                    namespaced=bool(entry.get("namespaced")),
                    has_status=f"{plural}/status" in names,
                )
        raise NotFound(404, f"the server does not serve resource {plural} in {gv}")

    # -- objects ---------------------------------------------------------------

    def get(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON:
        return cast(JSON, self.request("GET", res.path(namespace=namespace, name=name)))

    def get_or_none(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        try:
            return self.get(res, namespace=namespace, name=name)
        except NotFound:
            return None

    def list_names(self, res: ResourceInfo, *, namespace: str = "") -> set[tuple[str, str]]:
        names: set[tuple[str, str]] = set()
        query: list[tuple[str, str]] = [("limit", str(_LIST_PAGE))]
        while True:  # pages, so a fleet's objects are never all in memory at once
            page = self.request("GET", res.path(namespace=namespace), query=query)
            for item in page.get("items") or ():
                meta = item.get("metadata") or {}
                names.add((str(meta.get("namespace") or ""), str(meta.get("name"))))
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return names
            query = [("limit", str(_LIST_PAGE)), ("continue", str(token))]

    def replace_status(self, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        path = res.path(namespace=namespace, name=meta["name"], subresource="status")
        return cast(JSON, self.request("PUT", path, body=dict(obj)))

    def patch(
        self,
        res: ResourceInfo,
        *,
        namespace: str,
        name: str,
        body: Any,
        content_type: str = MERGE_PATCH,
        subresource: str = "",
    ) -> JSON:
        path = res.path(namespace=namespace, name=name, subresource=subresource)
        return cast(JSON, self.request("PATCH", path, body=body, content_type=content_type))

    def create(self, res: ResourceInfo, *, namespace: str, body: Mapping[str, Any]) -> JSON:
        return cast(JSON, self.request("POST", res.path(namespace=namespace), body=dict(body)))
