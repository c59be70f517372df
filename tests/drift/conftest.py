"""Fixtures of the drift tests: the plan project's CRDs and a Scaler helper.

The drift tests run the real operator on the plan test project
(tests/plan/project: the Scaler kind's role writes one Deployment and its
size to status), with drift turned on by annotations or by a watches.yaml
written for the test.
"""

from __future__ import annotations

from typing import Any, cast

from kubernetes import client

from tests.plan.conftest import GROUP, VERSION, plan_crds

__all__ = ["plan_crds"]

PLURAL = "scalers"
PERIOD = "3s"  # the drift check period of these tests


def scaler(namespace: str, name: str, size: int, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Scaler",
        "metadata": meta,
        "spec": {"size": size},
    }


def get_scaler(api: Any, namespace: str, name: str) -> dict[str, Any]:
    found = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return cast(dict[str, Any], found)


def patch_scaler(api: Any, namespace: str, name: str, body: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, body
    )


def replicas(api: Any, namespace: str, name: str) -> int:
    deployment = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    return int(deployment.spec.replicas or 0)


def scale(api: Any, namespace: str, name: str, count: int) -> None:
    client.AppsV1Api(api).patch_namespaced_deployment(
        name, namespace, {"spec": {"replicas": count}}
    )
