"""End to end: what roles create is owned by their CR and kept in the state the role wants.

Through the operator's proxy: ownerReferences (and the owner annotations across
namespaces), garbage collection with the CR, drift repair by dependent watches,
the blacklist, attribution under concurrency, and the operator_sdk.util
modules k8s_status and requeue_after.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import (
    OperatorProcess,
    condition,
    configmap,
    create_cr,
    custom,
    wait_condition,
    wait_for,
)

pytestmark = pytest.mark.cluster
GROUP, VERSION = "e2e.example.com", "v1alpha1"


def _owner_uids(obj: Any) -> list[str]:
    return [ref.uid for ref in obj.metadata.owner_references or []]


def _replicas(api_client: Any, ns: str, name: str) -> int | None:
    try:
        return int(client.AppsV1Api(api_client).read_namespaced_deployment(name, ns).spec.replicas)
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


def test_owned_deployment_is_repaired_recreated_and_collected(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    apps = client.AppsV1Api(api_client)
    cr = create_cr(api_client, ns, "widgets", "Widget", "owned", {"size": 2})
    wait_condition(api_client, ns, "widgets", "owned", "Successful")
    deployment = apps.read_namespaced_deployment("owned-widget", ns)
    refs = deployment.metadata.owner_references
    assert [(r.api_version, r.kind, r.name, r.uid) for r in refs] == [
        (f"{GROUP}/{VERSION}", "Widget", "owned", cr["metadata"]["uid"])
    ]

    # Scaling by hand is drift: the dependent watch re-runs the role, which undoes it.
    apps.patch_namespaced_deployment_scale("owned-widget", ns, {"spec": {"replicas": 5}})
    started = time.monotonic()
    wait_for(
        "scale reverted to 2", lambda: _replicas(api_client, ns, "owned-widget") == 2, timeout=60
    )
    reverted_after = time.monotonic() - started

    apps.delete_namespaced_deployment("owned-widget", ns)
    wait_for(
        "deleted Deployment recreated",
        lambda: _replicas(api_client, ns, "owned-widget") == 2,
        timeout=60,
    )

    custom(api_client).delete_namespaced_custom_object(GROUP, VERSION, ns, "widgets", "owned")
    wait_for(
        "garbage-collected with the CR",
        lambda: _replicas(api_client, ns, "owned-widget") is None,
        timeout=120,
    )
    assert reverted_after < 30


@pytest.fixture
def other_namespace(api_client: Any) -> Iterator[str]:
    name = make_namespace(api_client, "e2e-other")
    yield name
    drop_namespace(api_client, name)


def test_cross_namespace_object_gets_owner_annotations_and_its_change_reruns_the_owner(
    api_client: Any,
    kubeconfig_path: Path,
    e2e_crds: list[str],
    other_namespace: str,
    tmp_path: Path,
) -> None:
    # Dependents are watched in watched namespaces only (as in the Go
    # operator), so this operator watches both the CR's and the target's.
    ns, other = make_namespace(api_client, "e2e-span"), other_namespace
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path,
        env={"WATCH_NAMESPACE": f"{ns},{other}"},
        args=["--zap-log-level=2"],  # for the blacklist's debug line below
    ).start()
    try:
        core = client.CoreV1Api(api_client)
        create_cr(
            api_client,
            ns,
            "spanners",
            "Spanner",
            "span",
            {"targetNamespace": other, "value": "wanted"},
        )
        wait_condition(api_client, ns, "spanners", "span", "Successful")
        cm = core.read_namespaced_config_map("span-span", other)
        assert not cm.metadata.owner_references
        assert cm.metadata.annotations["operator-sdk/primary-resource"] == f"{ns}/span"
        assert cm.metadata.annotations["operator-sdk/primary-resource-type"] == f"Spanner.{GROUP}"

        core.patch_namespaced_config_map("span-span", other, {"data": {"value": "tampered"}})
        wait_for(
            "the owner's role restores the value",
            lambda: (configmap(api_client, other, "span-span") or {}).get("value") == "wanted",
            timeout=60,
        )

        # The rendered line, as the JSON formatter writes it, names the resource (as the
        # Go operator's does), never a placeholder such as <Touch>.
        create_cr(api_client, ns, "blinds", "Blind", "hidden", {"value": "v"})
        line = (
            f"Resource will not be watched/cached (blacklisted): v1 ConfigMap hidden-blind in {ns}"
        )
        wait_for(
            "the blacklist's debug line",
            lambda: bool(operator.logged(lambda e: e.get("msg") == line)),
            timeout=60,
        )
    finally:
        operator.stop()
        drop_namespace(api_client, ns)


def test_a_blacklisted_kind_is_not_watched(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    core = client.CoreV1Api(api_client)
    create_cr(api_client, ns, "blinds", "Blind", "blind", {"value": "wanted"})
    wait_condition(api_client, ns, "blinds", "blind", "Successful")
    cm = core.read_namespaced_config_map("blind-blind", ns)
    assert _owner_uids(cm)  # still owned: the blacklist is about watching
    core.patch_namespaced_config_map("blind-blind", ns, {"data": {"value": "tampered"}})
    time.sleep(10)  # a watched kind is repaired within a few seconds (test above)
    assert (configmap(api_client, ns, "blind-blind") or {}).get("value") == "tampered"
    runs = shared_operator.logged(
        lambda e: e.get("name") == "blind" and e.get("msg") == "Ansible-runner exited successfully"
    )
    assert len(runs) == 1


def test_twenty_crs_at_once_each_own_exactly_their_objects(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    uids = {}
    for i in range(20):
        cr = create_cr(api_client, ns, "gadgets", "Gadget", f"many-{i}", {"color": f"c{i}"})
        uids[f"many-{i}"] = cr["metadata"]["uid"]
    for name in uids:
        wait_condition(api_client, ns, "gadgets", name, "Successful", timeout=300)
    core = client.CoreV1Api(api_client)
    for name, uid in uids.items():
        cm = core.read_namespaced_config_map(f"{name}-gadget", ns)
        assert _owner_uids(cm) == [uid], name
        assert cm.data["color"] == f"c{name.split('-')[1]}"


def test_k8s_status_output_lands_in_status_next_to_the_managed_conditions(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "reporters", "Reporter", "rep", {"who": "world"})
    obj = wait_condition(api_client, ns, "reporters", "rep", "Successful")
    assert obj["status"]["greeting"] == "hello world"
    greeted = condition(obj, "Greeted")
    assert greeted is not None
    assert (greeted["status"], greeted["reason"], greeted["message"]) == (
        "True",
        "Greeted",
        "said hello",
    )
    types = [c["type"] for c in obj["status"]["conditions"]]
    assert sorted(types) == ["Failure", "Greeted", "Running", "Successful"]


def test_requeue_after_runs_the_role_again(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "requeuers", "Requeuer", "again", {})
    wait_for(
        "three runs via requeue_after",
        lambda: (configmap(api_client, ns, "again-count") or {}).get("runs") == "3",
        timeout=90,
    )
    time.sleep(4)  # and no further runs once it stops asking
    assert (configmap(api_client, ns, "again-count") or {}).get("runs") == "3"
