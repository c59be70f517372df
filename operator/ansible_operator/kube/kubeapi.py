"""The seam between the operator and the Kubernetes API: `KubeApi` and the values it speaks.

Everything in the controller that talks to the API server takes a `KubeApi`:
the reconcile path (reconciler, finalizers, status writes), leader election
(controller.leader), shard membership and the group Lease
(controller.sharding), the claims and takeover of sharded mode, the run
directory sweep and the dependent watches (controller.dependents). Two
implementations: kube.client.Kube talks to an API server; kube.fakekube.FakeKube
keeps objects in memory for tests. Bodies are plain dicts (`JSON`): custom
resources have no generated models.

Errors (errors.py), the same from both: 404 → NotFound, 409 → Conflict, 5xx,
429 and connection failures → KubeUnavailable (a RetryLater), any other 4xx →
ApiError with its status; 410 Gone (a watch or a list continued from a version
the server no longer has) is an ApiError that `is_gone` recognises: list
again. Every option is keyword-only.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ansible_operator.errors import ApiError

__all__ = [
    "GONE",
    "JSON",
    "JSON_PATCH",
    "MERGE_PATCH",
    "KubeApi",
    "ListPage",
    "ResourceInfo",
    "WatchEvent",
    "WatchStream",
    "is_gone",
]

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
GONE = 410


def is_gone(err: BaseException) -> bool:
    """Is `err` a 410: the resourceVersion or continue token is too old, so list again?"""
    return isinstance(err, ApiError) and err.status == GONE


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


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list.

    `resource_version` is the list's: a watch from it sees every change made
    after the list. `continue_token` asks for the next page ("" on the last).
    """

    items: list[JSON]
    resource_version: str
    continue_token: str = ""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch: ADDED, MODIFIED, DELETED or BOOKMARK.

    A BOOKMARK's object carries only metadata.resourceVersion: where to resume
    without replaying anything. (An ERROR event is never handed out: the stream
    raises it as an error instead.)
    """

    type: str
    object: JSON

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


class WatchStream(Protocol):
    """The events of one watch request, in order, as the server sends them.

    Iterating blocks until the next event; it ends when the server ends the
    request (its timeout) or after `stop()`. It raises the module's errors:
    `is_gone` when the version watched from is too old.
    """

    def __iter__(self) -> Iterator[WatchEvent]: ...

    def stop(self) -> None:
        """From any thread: make a read waiting for the next event return, ending the stream."""
        ...

    def close(self) -> None:
        """By the reader, when done with the stream: free its connection."""
        ...


class KubeApi(Protocol):
    """The operator's calls to the API server; kube.client.Kube and kube.fakekube.FakeKube.

    Every method raises NotFound, Conflict, ApiError or errors.KubeUnavailable
    as the module docstring says.
    """

    def resource(self, *, group: str, version: str, kind: str) -> ResourceInfo: ...

    def get(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON: ...

    def get_or_none(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None: ...

    def replace_status(self, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON: ...

    def replace(self, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON:
        """PUT the whole object (its namespace and name from its metadata).

        With metadata.resourceVersion the write is conditional (Conflict if the
        object changed since); the status is left as stored when the kind has a
        status subresource.
        """
        ...

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

    def delete(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        """Delete an object: as it is left (deletionTimestamp set, waiting for its
        finalizers), or None when it is gone. NotFound if there is none."""
        ...

    def list_page(
        self,
        res: ResourceInfo,
        *,
        namespace: str = "",
        label_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> ListPage:
        """One page of the objects of a kind, in `namespace` or in all ("").

        `label_selector` in the API's string form (`a=b,c!=d,e in (f,g),!h`);
        `limit` 0 lists everything in one page; `continue_token` is the
        previous page's (is_gone when it expired: list from the start).
        """
        ...

    def list_names(self, res: ResourceInfo, *, namespace: str = "") -> set[tuple[str, str]]:
        """(namespace, name) of every object of a kind, in `namespace` or in all."""
        ...

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
        """The changes of a kind after `resource_version` (a list's), for up to
        `timeout_seconds`; with `bookmarks`, BOOKMARK events now and then.
        Raises (at once or from the stream) an error that `is_gone` recognises
        when that version is too old."""
        ...
