"""Add and remove the watch's finalizer on a custom resource.

Called by the reconciler: before the first run of a CR whose watch names a
finalizer, and after a successful finalizer run on deletion. JSON patches with
a `test` of the resourceVersion: another controller's finalizer edits are never
clobbered. A concurrent change fails the `test`, which the API server answers
with 422 (an ApiError, not a Conflict); it is raised out of the reconcile, and
the worker retries the whole reconcile with backoff on a fresh read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_operator.kube.client import JSON_PATCH, KubeApi, ResourceInfo


def has(obj: Mapping[str, Any], name: str) -> bool:
    return name in ((obj.get("metadata") or {}).get("finalizers") or [])


def add(kube: KubeApi, res: ResourceInfo, obj: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Add finalizer `name`; Conflict when `obj` is no longer the stored version."""
    meta = obj["metadata"]
    ops: list[dict[str, Any]]
    if meta.get("finalizers"):
        ops = [{"op": "add", "path": "/metadata/finalizers/-", "value": name}]
    else:
        ops = [{"op": "add", "path": "/metadata/finalizers", "value": [name]}]
    return _patch(kube, res, meta, ops)


def remove(kube: KubeApi, res: ResourceInfo, obj: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Remove every occurrence of finalizer `name`; Conflict as for `add`."""
    meta = obj["metadata"]
    present = list(meta.get("finalizers") or [])
    # From the end, so earlier indexes stay valid.
    ops = [
        {"op": "remove", "path": f"/metadata/finalizers/{index}"}
        for index in reversed([i for i, f in enumerate(present) if f == name])
    ]
    return _patch(kube, res, meta, ops)


def _patch(
    kube: KubeApi, res: ResourceInfo, meta: Mapping[str, Any], ops: list[dict[str, Any]]
) -> dict[str, Any]:
    """A JSON patch of the finalizers that applies only to the version we read."""
    guard = {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}
    return kube.patch(
        res,
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        body=[guard, *ops],
        content_type=JSON_PATCH,
    )
