"""The operator's own Kubernetes API client: `Kube`, the real implementation of `KubeApi`.

Where it sits: the `run` command (controller.manager) builds one `Kube` on
the login `load_login` finds and hands it to everything that talks to the
API server; all of them but the API proxy (which also needs
`resource_for_plural`) depend only on the `KubeApi` seam (kube.kubeapi, whose
names stay importable from here). The Event recorder posts through it too
(kube.eventposter); kopf has its own asyncio client for the primary watches.

Requests are plain HTTP through urllib3, with the login's TLS settings and
Authorization header (kube/login.py, the pool of kube.upstream.make_pool), and
bodies stay plain dicts: custom resources have no generated models, and a
round-trip through models would drop unknown fields. Not the `kubernetes`
package's ApiClient: importing it costs some 280 modules and 20 MiB (pydantic,
requests, oauthlib, its API classes) for what is a URL and a header here.
Answers become the errors kube.kubeapi lists (`_error`); watches are streamed
by kube.watchstream.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import urllib3

from ansible_operator import __version__
from ansible_operator.errors import ApiError, Conflict, KubeUnavailable, NotFound
from ansible_operator.kube import deepjson, kubeconfig, login
from ansible_operator.kube.kubeapi import (
    JSON,
    JSON_PATCH,
    MERGE_PATCH,
    KubeApi,
    ListPage,
    ResourceInfo,
    WatchEvent,
    WatchStream,
    is_gone,
)
from ansible_operator.kube.upstream import make_pool
from ansible_operator.kube.watchstream import HttpWatchStream

__all__ = [
    "JSON",
    "JSON_PATCH",
    "MERGE_PATCH",
    "Kube",
    "KubeApi",
    "ListPage",
    "ResourceInfo",
    "WatchEvent",
    "WatchStream",
    "is_gone",
    "load_login",
]

_LIST_PAGE = 500
_WATCH_CONNECT_TIMEOUT = 10.0
# A watch's read timeout: the server ends the request after timeoutSeconds; a
# read idle for that long plus this margin means the connection is dead.
_WATCH_READ_MARGIN = 30.0


_USER_AGENT = f"ansible-operator/{__version__}"


def load_login(path: str | None = None) -> login.Login:
    """The login of kubeconfig `path`, else $KUBECONFIG (its first file), else the
    pod's service account, else ~/.kube/config. A bad one raises ConfigError."""
    path = path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if not path and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return kubeconfig.in_cluster()
    return kubeconfig.from_kubeconfig(path or str(Path.home() / ".kube" / "config"))


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

    def __init__(self, login: login.Login, *, timeout: float = 30.0) -> None:
        self.login = login
        self.timeout = timeout
        self._base = login.host.rstrip("/")
        self._pool = make_pool(login)
        self._discovery: dict[str, list[JSON]] = {}
        self._lock = threading.Lock()

    def login_fields(self) -> dict[str, Any]:
        """This client's login as kopf's `ConnectionInfo` fields (kube/login.py)."""
        return login.connection_fields(self.login)

    def _open(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        *,
        body: bytes | None,
        timeout: urllib3.Timeout,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request; the response is left unread (a watch streams it)."""
        url = self._base + path
        if query:  # encoded as the kubernetes client encodes them
            url += "?" + "&".join(f"{key}={quote(str(value))}" for key, value in query)
        sent = {"User-Agent": _USER_AGENT, **headers}
        authorization = self.login.authorization()
        if authorization:
            sent["Authorization"] = authorization
        try:
            return self._pool.request(
                method, url, body=body, headers=sent, timeout=timeout, preload_content=False
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise KubeUnavailable(f"{method} {path}: {err}") from err

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        """One request; the decoded answer (None if empty). `timeout` overrides the
        client's for this request (the Event recorder gives up sooner)."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        # We encode bodies and decode answers with deepjson, not the kubernetes
        # client: its sanitizing and json recurse per level and fail from about
        # 500 levels, while the API server accepts objects nested 10,000 deep.
        encoded = None if body is None else deepjson.dumps(body).encode()
        limit = urllib3.Timeout(total=self.timeout if timeout is None else timeout)
        response = self._open(method, path, query, headers, body=encoded, timeout=limit)
        try:
            payload = response.data
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise KubeUnavailable(f"{method} {path}: {err}") from err
        if not 200 <= response.status <= 299:
            raise _error(response.status, payload)
        return deepjson.loads(payload) if payload else None

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

    def list_page(
        self,
        res: ResourceInfo,
        *,
        namespace: str = "",
        label_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> ListPage:
        query: list[tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        page = self.request("GET", res.path(namespace=namespace), query=query)
        meta = page.get("metadata") or {}
        return ListPage(
            items=list(page.get("items") or ()),
            resource_version=str(meta.get("resourceVersion") or ""),
            continue_token=str(meta.get("continue") or ""),
        )

    def list_names(self, res: ResourceInfo, *, namespace: str = "") -> set[tuple[str, str]]:
        names: set[tuple[str, str]] = set()
        token = ""
        while True:  # pages, so a fleet's objects are never all in memory at once
            page = self.list_page(res, namespace=namespace, limit=_LIST_PAGE, continue_token=token)
            for item in page.items:
                meta = item.get("metadata") or {}
                names.add((str(meta.get("namespace") or ""), str(meta.get("name"))))
            token = page.continue_token
            if not token:
                return names

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

    def replace(self, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON:
        meta = obj["metadata"]
        path = res.path(namespace=meta.get("namespace", ""), name=meta["name"])
        return cast(JSON, self.request("PUT", path, body=dict(obj)))

    def delete(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        left = self.request("DELETE", res.path(namespace=namespace, name=name))
        # The answer is the object, or a Status once it is gone (depending on the kind).
        if not isinstance(left, dict) or left.get("kind") == "Status":
            return None
        meta = left.get("metadata") or {}
        return left if meta.get("deletionTimestamp") and meta.get("finalizers") else None

    def watch(
        self,
        res: ResourceInfo,
        *,
        resource_version: str,
        namespace: str = "",
        label_selector: str = "",
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> WatchStream:
        query = [("watch", "true")]
        if bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        query += [("resourceVersion", resource_version), ("timeoutSeconds", str(timeout_seconds))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        path = res.path(namespace=namespace)
        timeouts = urllib3.Timeout(
            connect=_WATCH_CONNECT_TIMEOUT, read=timeout_seconds + _WATCH_READ_MARGIN
        )
        headers = {"Accept": "application/json"}
        response = self._open("GET", path, query, headers, body=None, timeout=timeouts)
        if response.status != 200:
            try:
                payload = response.read()
            except (urllib3.exceptions.HTTPError, OSError):
                payload = b""
            finally:
                response.close()  # never back into the pool half-read
            raise _error(response.status, payload)
        return HttpWatchStream(response, what=f"watch {res.plural}")


class KindResource:
    """The ResourceInfo of one kind, looked up on first use and then kept.

    Not at construction: a watched kind's CRD may be created after the operator
    starts. Used by the reconciler and the drift checker of each watch.
    """

    def __init__(self, kube: KubeApi, *, group: str, version: str, kind: str) -> None:
        self._kube = kube
        self._gvk = (group, version, kind)
        self._found: ResourceInfo | None = None

    def __call__(self) -> ResourceInfo:
        if self._found is None:
            group, version, kind = self._gvk
            self._found = self._kube.resource(group=group, version=version, kind=kind)
        return self._found
