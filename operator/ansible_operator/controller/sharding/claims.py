"""The per-CR claim: the annotation that says which member may run a custom resource.

Called by controller.sharding.shard's reconcile gate. Two annotations on each
CR of a sharded operator:

* `CLAIM` names the one member allowed to run the CR; absent or "" means free.
  It is written only with the CR's resourceVersion as a precondition (a merge
  patch carrying metadata.resourceVersion), so of two members racing for one
  CR exactly one succeeds, and a member can only release a claim that was
  still its own when it read the CR.
* `RECONCILED_BY` names the member that claimed the CR last, i.e. the shard
  that reconciled it last (a member claims a CR right before running it and
  runs it only while it holds the claim). It stays when the claim is released.

Neither annotation counts as a change of the CR for `watchAnnotationsChanges`
(controller.watching leaves the `PREFIX` out of its digest).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_operator.controller.watching import OPERATOR_ANNOTATION_PREFIX
from ansible_operator.kube.client import JSON, KubeApi, ResourceInfo

PREFIX = OPERATOR_ANNOTATION_PREFIX
CLAIM = PREFIX + "claim"
RECONCILED_BY = PREFIX + "reconciled-by"


def holder(obj: Mapping[str, Any]) -> str:
    """The member that holds the claim on `obj` ("" if free)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(CLAIM) or "")


def _patch(kube: KubeApi, res: ResourceInfo, obj: Mapping[str, Any], values: JSON) -> JSON:
    meta = obj["metadata"]
    body = {"metadata": {"resourceVersion": meta["resourceVersion"], "annotations": values}}
    return kube.patch(res, namespace=meta.get("namespace", ""), name=meta["name"], body=body)


def claim(kube: KubeApi, res: ResourceInfo, obj: Mapping[str, Any], *, member: str) -> JSON:
    """Make `member` the holder of `obj` as read; raises Conflict if `obj` changed since."""
    return _patch(kube, res, obj, {CLAIM: member, RECONCILED_BY: member})


def release(kube: KubeApi, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON:
    """Free the claim on `obj` as read; raises Conflict if `obj` changed since."""
    return _patch(kube, res, obj, {CLAIM: None})
