"""The testbed is a real control plane: scheduling, garbage collection,
validation, watches and RBAC behave as in any Kubernetes cluster.

Each test runs in its own namespace on the session's cluster (the local
testbed, or TESTBED_KUBECONFIG).
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
from kubernetes import client, watch

from testbed.probes import wait_until

pytestmark = pytest.mark.cluster


def _running_ready_pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [
        p
        for p in pods
        if p.metadata.deletion_timestamp is None
        and p.status.phase == "Running"
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def test_deployment_pods_run_on_kwok_nodes_and_scale_down(api_client: Any, namespace: str) -> None:
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    labels = {"app": "web"}
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=3,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx")]),
            ),
        ),
    )
    apps.create_namespaced_deployment(namespace, deployment)

    wait_until(
        "3 pods Running and Ready",
        lambda: len(_running_ready_pods(core, namespace, "app=web")) == 3,
        timeout=60,
    )
    pods = _running_ready_pods(core, namespace, "app=web")
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert all(p.spec.node_name in nodes for p in pods)
    assert all(nodes[p.spec.node_name].metadata.labels.get("type") == "kwok" for p in pods)
    wait_until(
        "deployment reports 3 available",
        lambda: apps.read_namespaced_deployment("web", namespace).status.available_replicas == 3,
        timeout=30,
    )

    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 1}})
    wait_until(
        "only 1 pod left",
        lambda: len(core.list_namespaced_pod(namespace, label_selector="app=web").items) == 1,
        timeout=60,
    )
    assert len(_running_ready_pods(core, namespace, "app=web")) == 1


def _owner_ref(obj: Any, api_version: str, kind: str) -> dict[str, Any]:
    meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    name = meta["name"] if isinstance(meta, dict) else meta.name
    uid = meta["uid"] if isinstance(meta, dict) else meta.uid
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}


def _configmap_gone(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_config_map(name, namespace)
    except client.ApiException as err:
        return err.status == 404
    return False


def test_garbage_collector_deletes_owned_objects(api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(
                name="owned", owner_references=[_owner_ref(owner, "v1", "ConfigMap")]
            ),
            string_data={"k": "v"},
        ),
    )
    core.delete_namespaced_config_map("owner", namespace)

    def secret_gone() -> bool:
        try:
            core.read_namespaced_secret("owned", namespace)
        except client.ApiException as err:
            return err.status == 404
        return False

    wait_until("owned Secret garbage-collected", secret_gone, timeout=60)


def _crd(group: str, plural: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "minimum": 1}},
                                    "required": ["size"],
                                },
                                "status": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def crd(api_client: Any) -> Any:
    """A throw-away CRD with a schema and a status subresource, removed afterwards."""
    ext = client.ApiextensionsV1Api(api_client)
    group = f"t{uuid.uuid4().hex[:8]}.testbed.example.com"
    body = _crd(group, "widgets", "Widget")
    ext.create_custom_resource_definition(body)

    def established() -> bool:
        got = ext.read_custom_resource_definition(body["metadata"]["name"])
        return any(
            c.type == "Established" and c.status == "True" for c in got.status.conditions or []
        )

    wait_until("CRD established", established, timeout=30)
    yield group
    ext.delete_custom_resource_definition(body["metadata"]["name"])


def test_crd_schema_rejects_invalid_and_status_subresource_accepts_writes(
    api_client: Any, namespace: str, crd: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    bad = {"apiVersion": f"{crd}/v1", "kind": "Widget", "metadata": {"name": "bad"}}
    bad["spec"] = {"size": "three"}
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(crd, "v1", namespace, "widgets", bad)
    assert caught.value.status == 422
    message = json.loads(caught.value.body)["message"]
    assert (
        'spec.size: Invalid value: "string": spec.size in body must be of type integer' in message
    )

    good = {"apiVersion": f"{crd}/v1", "kind": "Widget", "metadata": {"name": "good"}}
    good["spec"] = {"size": 2}
    created = custom.create_namespaced_custom_object(crd, "v1", namespace, "widgets", good)
    created["status"] = {"phase": "Ready"}
    created["spec"]["size"] = 5  # ignored: the status endpoint only writes status
    custom.replace_namespaced_custom_object_status(crd, "v1", namespace, "widgets", "good", created)
    stored = custom.get_namespaced_custom_object(crd, "v1", namespace, "widgets", "good")
    assert stored["status"] == {"phase": "Ready"}
    assert stored["spec"]["size"] == 2


def test_garbage_collector_deletes_objects_owned_by_a_custom_resource(
    api_client: Any, namespace: str, crd: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    body = {"apiVersion": f"{crd}/v1", "kind": "Widget", "metadata": {"name": "w"}}
    body["spec"] = {"size": 1}
    owner = custom.create_namespaced_custom_object(crd, "v1", namespace, "widgets", body)
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name="child", owner_references=[_owner_ref(owner, f"{crd}/v1", "Widget")]
            )
        ),
    )
    custom.delete_namespaced_custom_object(crd, "v1", namespace, "widgets", "w")
    # The garbage collector learns about new resource types on a 30 s discovery resync.
    wait_until(
        "CR-owned ConfigMap garbage-collected",
        lambda: _configmap_gone(core, namespace, "child"),
        timeout=90,
    )


def test_watch_sees_added_modified_deleted(api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    # Watching from the list's resourceVersion delivers every later event,
    # however late the watch request reaches the server.
    since = core.list_namespaced_config_map(namespace).metadata.resource_version
    seen: list[str] = []

    def consume() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=since,
            timeout_seconds=30,
        ):
            if event["object"].metadata.name == "watched":
                seen.append(event["type"])
                if event["type"] == "DELETED":
                    stream.stop()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="watched"), data={"a": "1"})
    )
    core.patch_namespaced_config_map("watched", namespace, {"data": {"a": "2"}})
    core.delete_namespaced_config_map("watched", namespace)
    thread.join(30)
    assert seen == ["ADDED", "MODIFIED", "DELETED"]


def test_rbac_denies_a_service_account_without_rights(api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody"))
    )
    token = core.create_namespaced_service_account_token(
        "nobody",
        namespace,
        client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
        ),
    ).status.token
    config = client.Configuration()
    config.host = api_client.configuration.host
    config.ssl_ca_cert = api_client.configuration.ssl_ca_cert
    config.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(config) as restricted, pytest.raises(client.ApiException) as caught:
        client.CoreV1Api(restricted).list_namespaced_pod(namespace)
    assert caught.value.status == 403
    assert f"system:serviceaccount:{namespace}:nobody" in caught.value.body
