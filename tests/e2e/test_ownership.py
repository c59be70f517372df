"""End to end: a CR owns only what its runs create, so deleting it deletes nothing else.

One operator process runs the ownership project (tests/e2e/ownership_project),
watching every namespace: a namespaced `Sharer` whose role patches, replaces
and server-side-applies ConfigMaps that existed before it (and creates two of
its own), with a finalizer that creates one ConfigMap and replaces another;
and a cluster-scoped `Labeler` that labels a Namespace it did not create.
Evidence is what the API server stores and what kube-controller-manager's
garbage collector leaves after the CRs are deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import OperatorProcess, apply_crds, condition, wait_for

pytestmark = pytest.mark.cluster

PROJECT = Path(__file__).parent / "ownership_project"
GROUP, VERSION = "ownership.e2e.example.com", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
SHARED = ("shared-patched", "shared-replaced", "shared-applied")
# Garbage collection normally follows a deletion within a second or two.
GC_TIMEOUT = 60


@pytest.fixture(scope="module")
def ownership_operator(
    api_client: Any, kubeconfig_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    apply_crds(
        api_client, yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text()), what="own"
    )
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path_factory.mktemp("ownership"),
        args=["--ansible-log-events=Tasks"],
        name="ownership",
        cwd=PROJECT,
    ).start()
    yield operator
    operator.stop()


@pytest.fixture
def target_namespace(api_client: Any) -> Iterator[str]:
    name = make_namespace(api_client, "own-target")
    yield name
    drop_namespace(api_client, name)


def configmap(api: Any, namespace: str, name: str) -> client.V1ConfigMap | None:
    try:
        found: client.V1ConfigMap = client.CoreV1Api(api).read_namespaced_config_map(
            name, namespace
        )
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise
    return found


def owner_uids(obj: Any) -> list[str]:
    return [ref.uid for ref in obj.metadata.owner_references or []]


def custom(api: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def wait_successful(api: Any, get: Any, what: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def check() -> bool:
        obj = get()
        ok = (condition(obj, "Successful") or {}).get("status") == "True"
        if ok:
            found.update(obj)
        return ok

    wait_for(f"{what} Successful", check, timeout=120)
    return found


def test_objects_that_existed_before_the_run_outlive_the_cr(
    api_client: Any,
    namespace: str,
    target_namespace: str,
    ownership_operator: OperatorProcess,
) -> None:
    core = client.CoreV1Api(api_client)
    for name in SHARED:
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": name}, "data": {"keep": "me"}}
        )
    sharer = custom(api_client).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "sharers",
        {"apiVersion": API_VERSION, "kind": "Sharer", "metadata": {"name": "s1"}, "spec": {}},
    )
    labeler_name = f"labeler-{target_namespace}"
    labeler = custom(api_client).create_cluster_custom_object(
        GROUP,
        VERSION,
        "labelers",
        {
            "apiVersion": API_VERSION,
            "kind": "Labeler",
            "metadata": {"name": labeler_name},
            "spec": {"target": target_namespace},
        },
    )
    wait_successful(
        api_client,
        lambda: custom(api_client).get_namespaced_custom_object(
            GROUP, VERSION, namespace, "sharers", "s1"
        ),
        "Sharer",
    )
    wait_successful(
        api_client,
        lambda: custom(api_client).get_cluster_custom_object(
            GROUP, VERSION, "labelers", labeler_name
        ),
        "Labeler",
    )

    # Written, never adopted.
    for name in SHARED:
        stored = configmap(api_client, namespace, name)
        assert stored is not None
        assert stored.data == {"keep": "me", "member": "registered"}, name
        assert owner_uids(stored) == [], name
        assert "operator-sdk/primary-resource" not in (stored.metadata.annotations or {}), name
    target = core.read_namespace(target_namespace)
    assert (target.metadata.labels or {}).get("labelled-by") == labeler_name
    assert owner_uids(target) == []
    assert "operator-sdk/primary-resource" not in (target.metadata.annotations or {})
    # Created by the runs: owned, as before.
    for name in ("s1-own", "s1-own-applied"):
        own = configmap(api_client, namespace, name)
        assert own is not None
        assert owner_uids(own) == [sharer["metadata"]["uid"]], name
    labeler_own = configmap(api_client, target_namespace, f"{labeler_name}-own")
    assert labeler_own is not None
    assert owner_uids(labeler_own) == [labeler["metadata"]["uid"]]

    custom(api_client).delete_namespaced_custom_object(GROUP, VERSION, namespace, "sharers", "s1")
    custom(api_client).delete_cluster_custom_object(GROUP, VERSION, "labelers", labeler_name)
    # What the runs created goes with the CRs: the garbage collector has
    # processed both deletions once these are gone.
    wait_for(
        "owned objects collected",
        lambda: (
            configmap(api_client, namespace, "s1-own-applied") is None
            and configmap(api_client, target_namespace, f"{labeler_name}-own") is None
        ),
        timeout=GC_TIMEOUT,
    )
    for name in SHARED:
        stored = configmap(api_client, namespace, name)
        assert stored is not None, f"{name} was deleted with the CR"
        assert stored.data == {"keep": "me", "member": "registered"}, name
    assert core.read_namespace(target_namespace).status.phase == "Active"
    # The finalizer's writes stay: the one it created and the one it replaced
    # (created and owned by the main run until then).
    result = configmap(api_client, namespace, "s1-final-result")
    assert result is not None
    assert result.data == {"finalized": "yes"}
    assert owner_uids(result) == []
    replaced = configmap(api_client, namespace, "s1-own")
    assert replaced is not None
    assert replaced.data == {"finalized": "yes"}
    assert owner_uids(replaced) == []
