"""The API proxy against the real API server, with real kubernetes.core modules.

Evidence comes from the API server itself (read back with the admin client),
never from the proxy: ownerReferences and annotations as stored, objects
garbage-collected by kube-controller-manager, statuses as the server answers.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ansible_operator.errors import NotFound
from ansible_operator.kube.client import Kube
from ansible_operator.proxy import Owner
from ansible_operator.proxy.ownership import OWNER_ANNOTATION, OWNER_TYPE_ANNOTATION
from tests.proxy.conftest import OwnerKinds, Running

pytestmark = pytest.mark.cluster

Start = Callable[..., Running]
Playbook = Callable[..., Any]


def ref_of(owner: Owner) -> dict[str, str]:
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
    }


def refs(obj: Any) -> list[dict[str, Any]]:
    meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    found = meta.get("ownerReferences") if isinstance(meta, dict) else meta.owner_references
    return [
        r
        if isinstance(r, dict)
        else {"apiVersion": r.api_version, "kind": r.kind, "name": r.name, "uid": r.uid}
        for r in found or []
    ]


def annotations(obj: Any) -> dict[str, str]:
    return dict(obj.metadata.annotations or {})


def k8s(definition: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {"kubernetes.core.k8s": {"state": "present", "definition": definition, **options}}


def configmap(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


@pytest.fixture
def other_namespace(api_client: client.ApiClient) -> Iterator[str]:
    core = client.CoreV1Api(api_client)
    name = f"t-proxy-other-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def test_requests_need_a_live_token(
    start_proxy: Start, make_owner: Callable[..., Owner], namespace: str
) -> None:
    running = start_proxy()
    owner = make_owner(namespace, "o")
    token = running.credentials.issue(owner)

    def status(auth: str | None) -> int:
        conn = socket.create_connection(("127.0.0.1", running.proxy.port), timeout=10)
        head = f"GET /api/v1/namespaces/{namespace}/configmaps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        if auth is not None:
            head += f"Authorization: {auth}\r\n"
        conn.sendall((head + "\r\n").encode())
        reply = conn.recv(64)
        conn.close()
        return int(reply.split()[1])

    assert status(None) == 401
    assert status("Bearer not-a-token") == 401
    assert status(f"Basic {token.token}") == 401
    assert status(f"Bearer {token.token}") == 200
    token.revoke()
    assert status(f"Bearer {token.token}") == 401


def test_run_kubeconfig_holds_no_operator_credentials(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    namespace: str,
    kubeconfig_path: Path,
    tmp_path: Path,
) -> None:
    running = start_proxy()
    text = running.kubeconfig(make_owner(namespace, "o"), tmp_path / "kc").read_text()
    admin = kubeconfig_path.read_text()
    for secret_key in ("client-key-data", "client-certificate-data", "token"):
        for line in admin.splitlines():
            if secret_key in line:
                assert line.split(":", 1)[1].strip() not in text
    assert "https://" not in text


def test_role_objects_are_owned_by_their_cr(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    run_playbook: Playbook,
    api_client: client.ApiClient,
    namespace: str,
    other_namespace: str,
    tmp_path: Path,
) -> None:
    running = start_proxy()
    owner = make_owner(namespace, "owner")
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    # Objects that exist before the run, not owned by anyone.
    preexisting = ("preexisting-patched", "preexisting-forced", "preexisting-applied")
    for name in preexisting:
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": name}, "data": {"old": "1"}}
        )
    extra_ns = f"{namespace}-x"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
            },
        },
    }
    tasks = [
        {"name": "create", **k8s(configmap("created", namespace, a="1"))},
        {
            "name": "read right after the write",
            "kubernetes.core.k8s_info": {
                "kind": "ConfigMap",
                "namespace": namespace,
                "name": "created",
            },
            "register": "info",
        },
        {"assert": {"that": ["info.resources | length == 1", "info.resources[0].data.a == '1'"]}},
        {"name": "update", **k8s(configmap("created", namespace, a="2"))},
        {
            "kubernetes.core.k8s_info": {
                "kind": "ConfigMap",
                "namespace": namespace,
                "name": "created",
            },
            "register": "info2",
        },
        {"assert": {"that": ["info2.resources[0].data.a == '2'"]}},
        {"name": "deployment", **k8s(deployment)},
        {"name": "other namespace", **k8s(configmap("elsewhere", other_namespace, a="1"))},
        {
            "name": "cluster-scoped",
            **k8s({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": extra_ns}}),
        },
        {"name": "patch pre-existing", **k8s(configmap("preexisting-patched", namespace, new="1"))},
        {
            "name": "force (PUT)",
            **k8s(configmap("preexisting-forced", namespace, new="1"), force=True),
        },
        {
            "name": "server-side apply pre-existing",
            **k8s(
                configmap("preexisting-applied", namespace, new="1"),
                apply=True,
                server_side_apply={"field_manager": "role"},
            ),
        },
        *(
            {
                "name": f"server-side apply {i}",
                **k8s(
                    configmap("applied", namespace, a=str(i)),
                    apply=True,
                    server_side_apply={"field_manager": "role"},
                ),
            }
            # The second apply omits the ownerReference the first one got.
            for i in (1, 2)
        ),
        # A replace of an object the run created keeps its owner.
        {"name": "force (PUT) own", **k8s(configmap("created", namespace, a="3"), force=True)},
    ]
    try:
        run_playbook(running.kubeconfig(owner, tmp_path / "kc"), tasks)
        expected = [ref_of(owner)]
        for name in ("created", "applied"):
            stored = core.read_namespaced_config_map(name, namespace)
            assert refs(stored) == expected, name
            assert OWNER_ANNOTATION not in annotations(stored), name
        # Objects that existed before the run are updated, never adopted.
        for name in preexisting:
            stored = core.read_namespaced_config_map(name, namespace)
            assert refs(stored) == [], name
            assert OWNER_ANNOTATION not in annotations(stored), name
            assert (stored.data or {}).get("new") == "1", name
        assert core.read_namespaced_config_map("created", namespace).data == {"a": "3"}
        assert refs(apps.read_namespaced_deployment("web", namespace)) == expected
        owner_annotations = {
            OWNER_ANNOTATION: f"{namespace}/owner",
            OWNER_TYPE_ANNOTATION: f"Owner.{owner.group}",
        }
        for stored in (
            core.read_namespaced_config_map("elsewhere", other_namespace),
            core.read_namespace(extra_ns),
        ):
            assert refs(stored) == []
            assert {k: annotations(stored).get(k) for k in owner_annotations} == owner_annotations
        touched = {(t.kind, t.name, t.by_owner_reference) for _, t in running.touches}
        assert ("Namespace", extra_ns, False) in touched
        assert ("Deployment", "web", True) in touched
    finally:
        core.delete_namespace(extra_ns)


def test_nothing_is_added_with_injection_off(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    run_playbook: Playbook,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    running = start_proxy(inject_owner_ref=False)
    owner = make_owner(namespace, "owner")
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "pre"}, "data": {"a": "1"}})
    tasks = [k8s(configmap("plain", namespace, a="1")), k8s(configmap("pre", namespace, a="2"))]
    run_playbook(running.kubeconfig(owner, tmp_path / "kc"), tasks)
    for name in ("plain", "pre"):
        stored = core.read_namespaced_config_map(name, namespace)
        assert refs(stored) == []
        assert OWNER_ANNOTATION not in annotations(stored)
    assert core.read_namespaced_config_map("pre", namespace).data == {"a": "2"}
    assert running.touches == []


def test_a_run_updating_its_own_cr_does_not_own_it(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    api_client: client.ApiClient,
    owner_kinds: OwnerKinds,
    namespace: str,
    tmp_path: Path,
) -> None:
    running = start_proxy()
    owner = make_owner(namespace, "self")
    args = (owner_kinds.group, owner_kinds.version, namespace, owner_kinds.plural, "self")
    run_custom = client.CustomObjectsApi(running.client_for(owner, tmp_path / "kc"))
    run_custom.patch_namespaced_custom_object(*args, {"spec": {"size": 2}})
    stored = client.CustomObjectsApi(api_client).get_namespaced_custom_object(*args)
    assert stored["spec"] == {"size": 2}
    assert refs(stored) == []
    assert running.touches == []


def test_cluster_scoped_owner_gets_owner_references(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    running = start_proxy()
    owner = make_owner("", f"cluster-owner-{uuid.uuid4().hex[:6]}")
    run_core = client.CoreV1Api(running.client_for(owner, tmp_path / "kc"))
    run_core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"}})
    stored = client.CoreV1Api(api_client).read_namespaced_config_map("cm", namespace)
    assert refs(stored) == [ref_of(owner)]


def test_cluster_scoped_owner_never_adopts_an_existing_namespace(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    run_playbook: Playbook,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    running = start_proxy()
    owner = make_owner("", f"cluster-owner-{uuid.uuid4().hex[:6]}")
    labelled = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    labelled["metadata"]["labels"] = {"member": "registered"}
    tasks = [
        {"name": "merge patch", **k8s(labelled, state="patched")},
        {"name": "strategic patch", **k8s(labelled)},
        {"name": "replace", **k8s(labelled, force=True)},
        {
            "name": "apply",
            **k8s(labelled, apply=True, server_side_apply={"field_manager": "role"}),
        },
    ]
    run_playbook(running.kubeconfig(owner, tmp_path / "kc"), tasks)
    stored = client.CoreV1Api(api_client).read_namespace(namespace)
    assert (stored.metadata.labels or {}).get("member") == "registered"
    assert refs(stored) == []
    assert OWNER_ANNOTATION not in annotations(stored)


def test_a_finalizer_run_owns_nothing(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    run_playbook: Playbook,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    running = start_proxy()
    owner = dataclasses.replace(make_owner(namespace, "going"), finalizing=True)
    tasks = [
        {"name": "create", **k8s(configmap("result", namespace, a="1"))},
        {"name": "replace", **k8s(configmap("result", namespace, a="2"), force=True)},
        {
            "name": "apply",
            **k8s(
                configmap("applied", namespace, a="1"),
                apply=True,
                server_side_apply={"field_manager": "role"},
            ),
        },
    ]
    run_playbook(running.kubeconfig(owner, tmp_path / "kc"), tasks)
    core = client.CoreV1Api(api_client)
    for name in ("result", "applied"):
        stored = core.read_namespaced_config_map(name, namespace)
        assert refs(stored) == [], name
        assert OWNER_ANNOTATION not in annotations(stored), name
    assert core.read_namespaced_config_map("result", namespace).data == {"a": "2"}
    # The kinds are still watched, as for any run.
    assert {t.name for _, t in running.touches} >= {"result", "applied"}


def test_concurrent_runs_own_exactly_their_objects(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    running = start_proxy()
    owners = [make_owner(namespace, f"owner-{i:02d}") for i in range(20)]
    clients = [client.CoreV1Api(running.client_for(o, tmp_path / f"kc-{o.name}")) for o in owners]
    barrier = threading.Barrier(len(owners))
    errors: list[BaseException] = []

    def run(owner: Owner, core: client.CoreV1Api) -> None:
        try:
            barrier.wait(timeout=30)
            for i in range(3):
                name = f"{owner.name}-{i}"
                core.create_namespaced_config_map(
                    namespace, {"metadata": {"name": name}, "data": {"i": str(i)}}
                )
                core.patch_namespaced_config_map(name, namespace, {"data": {"patched": "yes"}})
        except BaseException as err:
            errors.append(err)

    threads = [
        threading.Thread(target=run, args=pair) for pair in zip(owners, clients, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    stored = client.CoreV1Api(api_client).list_namespaced_config_map(namespace).items
    by_name = {cm.metadata.name: cm for cm in stored}
    for owner in owners:
        for i in range(3):
            assert refs(by_name[f"{owner.name}-{i}"]) == [ref_of(owner)]
    assert {(o.name, t.name.rsplit("-", 1)[0]) for o, t in running.touches} == {
        (o.name, o.name) for o in owners
    }


def test_watch_through_the_proxy_streams_events(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    # The streaming path (kwok's fake nodes serve no logs, so k8s_log cannot
    # be used): each event must arrive while the watch is still open.
    running = start_proxy()
    run_api = running.client_for(make_owner(namespace, "o"), tmp_path / "kc")
    request = run_api.param_serialize(
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps",
        query_params=[
            ("watch", "true"),
            ("timeoutSeconds", "60"),
            ("fieldSelector", "metadata.name=w"),
        ],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = run_api.call_api(*request, _request_timeout=(10, 30)).response
    core = client.CoreV1Api(api_client)
    lines = response.stream(1024)  # chunks as they arrive
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "w"}})
    started = time.monotonic()
    event = json.loads(next(lines).splitlines()[0])
    assert event["type"] == "ADDED"
    assert event["object"]["metadata"]["name"] == "w"
    core.patch_namespaced_config_map("w", namespace, {"data": {"x": "1"}})
    assert json.loads(next(lines).splitlines()[0])["type"] == "MODIFIED"
    assert time.monotonic() - started < 20  # long before the 60 s watch ends
    response.close()


def test_refused_exec_upgrade_is_relayed(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    # A pod that can never be scheduled: the API server refuses the exec
    # upgrade itself (no node to contact), and the proxy relays its answer.
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "nowhere"},
            "spec": {
                "nodeSelector": {"proxy-test/no-such-node": "true"},
                "containers": [{"name": "c", "image": "registry.invalid/c:1"}],
            },
        },
    )
    running = start_proxy()
    token = running.credentials.issue(make_owner(namespace, "o"))
    sock = socket.create_connection(("127.0.0.1", running.proxy.port), timeout=10)
    sock.sendall(
        (
            f"POST /api/v1/namespaces/{namespace}/pods/nowhere/exec?command=true&stdout=1 HTTP/1.1\r\n"
            f"Host: x\r\nAuthorization: Bearer {token.token}\r\n"
            "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
        ).encode()
    )
    reply = b""
    while chunk := sock.recv(4096):
        reply += chunk
    sock.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert b"does not have a host assigned" in body


@pytest.mark.slow
def test_garbage_collector_deletes_owned_objects(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    api_client: client.ApiClient,
    owner_kinds: OwnerKinds,
    namespace: str,
    tmp_path: Path,
) -> None:
    running = start_proxy()
    owner = make_owner(namespace, "doomed")
    run_core = client.CoreV1Api(running.client_for(owner, tmp_path / "kc"))
    run_core.create_namespaced_config_map(namespace, {"metadata": {"name": "collected"}})
    client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
        owner_kinds.group, owner_kinds.version, namespace, owner_kinds.plural, "doomed"
    )
    core = client.CoreV1Api(api_client)
    # The garbage collector learns a new kind ~30 s after its CRD appears.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        remaining = core.list_namespaced_config_map(
            namespace, field_selector="metadata.name=collected"
        )
        if not remaining.items:
            return
        time.sleep(1)
    pytest.fail("the owned ConfigMap was not garbage-collected within 90 s")


def test_discovery_by_plural(kube: Kube, owner_kinds: OwnerKinds) -> None:
    configmaps = kube.resource_for_plural(group="", version="v1", plural="configmaps")
    assert (configmaps.kind, configmaps.namespaced) == ("ConfigMap", True)
    namespaces = kube.resource_for_plural(group="", version="v1", plural="namespaces")
    assert (namespaces.kind, namespaces.namespaced, namespaces.has_status) == (
        "Namespace",
        False,
        True,
    )
    owners = kube.resource_for_plural(
        group=owner_kinds.group, version="v1", plural=owner_kinds.plural
    )
    assert owners.kind == owner_kinds.kind
    for group, plural in (
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("", "nosuchthings"),
    ):
        with pytest.raises(NotFound):
            kube.resource_for_plural(group=group, version="v1", plural=plural)


def test_virtual_kinds_are_left_alone(
    start_proxy: Start, make_owner: Callable[..., Owner], namespace: str, tmp_path: Path
) -> None:
    # Their metadata must stay empty: an injected ownerReference would make
    # the API server refuse the review.
    running = start_proxy()
    run_api = running.client_for(make_owner(namespace, "o"), tmp_path / "kc")
    review = client.AuthorizationV1Api(run_api).create_self_subject_access_review(
        {
            "spec": {
                "resourceAttributes": {
                    "verb": "get",
                    "resource": "configmaps",
                    "namespace": namespace,
                }
            }
        }
    )
    assert review.status.allowed is True
    assert running.touches == []
