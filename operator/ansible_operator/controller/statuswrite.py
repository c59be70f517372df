"""Write a CR's status through the status subresource, retrying conflicts.

Called by the reconciler around every Ansible run. `write` takes a function
from the current status map to the new one (from the status layer) and applies
it to the freshest object: the first attempt uses the object the caller has;
on a 409 Conflict (someone, e.g. the role's k8s_status, wrote in between) it
re-reads the object and applies the function again, so nothing written by
others is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_operator.errors import Conflict, NotFound, RetryLater
from ansible_operator.kube.client import KubeApi, ResourceInfo

ATTEMPTS = 5

StatusFn = Callable[[Any], dict[str, Any]]


def write(
    kube: KubeApi, res: ResourceInfo, obj: Mapping[str, Any], compute: StatusFn
) -> dict[str, Any] | None:
    """The object as stored after the write, or None if the object is gone."""
    current: dict[str, Any] = dict(obj)
    meta = current["metadata"]
    namespace, name = meta.get("namespace", ""), meta["name"]
    for _ in range(ATTEMPTS):
        current["status"] = compute(current.get("status"))
        try:
            return kube.replace_status(res, current)
        except Conflict:
            fresh = kube.get_or_none(res, namespace=namespace, name=name)
            if fresh is None:
                return None
            current = fresh
        except NotFound:
            return None
    raise RetryLater(f"status of {namespace}/{name}: still conflicting after {ATTEMPTS} attempts")
