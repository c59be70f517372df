"""The proxy's read-only mode against the real API server, without Ansible.

A client that ignores check mode entirely (the kubernetes client, sending
creates, patches, replaces, server-side applies and deletes) talks to the
cluster through a read-only run token: every write is answered as the API
server would answer it, and nothing on the cluster changes.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from kubernetes import client, config

from ansible_operator.kube.client import Kube
from ansible_operator.kube.librarylogin import LibraryLogin
from ansible_operator.proxy import ApiProxy, DryRunWrite, Owner, RunCredentials, write_kubeconfig

pytestmark = pytest.mark.cluster


@pytest.fixture
def recorded() -> list[DryRunWrite]:
    return []


@pytest.fixture
def proxy(api_client: client.ApiClient, recorded: list[DryRunWrite]) -> Iterator[ApiProxy]:
    running = ApiProxy(
        upstream=LibraryLogin(api_client.configuration),
        credentials=RunCredentials(),
        kube=Kube(LibraryLogin(api_client.configuration)),
        inject_owner_ref=True,
        on_dry_run=lambda owner, write: recorded.append(write),
    )
    running.start()
    yield running
    running.stop()


def _owner(api_client: client.ApiClient, namespace: str) -> Owner:
    core = client.CoreV1Api(api_client)
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    return Owner(
        api_version="v1",
        kind="ConfigMap",
        name="owner",
        namespace=namespace,
        uid=created.metadata.uid,
        controller="configmap-v1-controller",
        read_only=True,
    )


def _through(proxy: ApiProxy, owner: Owner, path: Path) -> client.ApiClient:
    token = proxy.credentials.issue(owner)
    write_kubeconfig(path, server=proxy.url, token=token.token, namespace=owner.namespace)
    api: client.ApiClient = config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]
    return api


def _snapshot(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    items = core.list_namespaced_config_map(namespace).items
    # kube-root-ca.crt is written by the controller manager whenever it gets to it.
    return {
        cm.metadata.name: cm.metadata.resource_version
        for cm in items
        if cm.metadata.name != "kube-root-ca.crt"
    }


def test_writes_of_a_read_only_run_change_nothing(
    api_client: client.ApiClient,
    proxy: ApiProxy,
    recorded: list[DryRunWrite],
    namespace: str,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(api_client)
    owner = _owner(api_client, namespace)
    for name in ("patched", "replaced", "deleted"):
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": name}, "data": {"a": "1"}}
        )
    before = _snapshot(core, namespace)
    run = client.CoreV1Api(_through(proxy, owner, tmp_path / "kc"))
    created = run.create_namespaced_config_map(
        namespace, {"metadata": {"name": "created"}, "data": {"a": "1"}}
    )
    patched = run.patch_namespaced_config_map("patched", namespace, {"data": {"a": "2"}})
    current = core.read_namespaced_config_map("replaced", namespace)
    current.data = {"b": "1"}
    replaced = run.replace_namespaced_config_map("replaced", namespace, current)
    run.delete_namespaced_config_map("deleted", namespace)
    applied = Kube(LibraryLogin(run.api_client.configuration)).request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/configmaps/applied",
        query=[("fieldManager", "plan-test")],
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}},
        content_type="application/apply-patch+yaml",
    )
    # The answers are what the API server would store ...
    assert created.metadata.owner_references[0].uid == owner.uid
    assert patched.data == {"a": "2"}
    assert replaced.data == {"b": "1"}
    assert applied["metadata"]["ownerReferences"][0]["uid"] == owner.uid
    # ... and nothing was stored.
    assert _snapshot(core, namespace) == before
    assert [w.method for w in recorded] == ["POST", "PATCH", "PUT", "DELETE", "PATCH"]
    assert all(w.target.endswith("dryRun=All") for w in recorded)
    assert all(200 <= w.status < 300 for w in recorded)


def test_exec_and_proxy_requests_are_refused(
    api_client: client.ApiClient,
    proxy: ApiProxy,
    recorded: list[DryRunWrite],
    namespace: str,
    tmp_path: Path,
) -> None:
    owner = _owner(api_client, namespace)
    token = proxy.credentials.issue(owner)

    def send(head: str) -> tuple[bytes, bytes]:
        sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        sock.sendall(f"{head}Host: x\r\nAuthorization: Bearer {token.token}\r\n\r\n".encode())
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
        sock.close()
        status, _, body = reply.partition(b"\r\n\r\n")
        return status, body

    exec_path = f"/api/v1/namespaces/{namespace}/pods/p/exec?command=true&stdout=1"
    status, body = send(
        f"POST {exec_path} HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
    )
    assert status.startswith(b"HTTP/1.1 403")
    assert b"exec requests cannot be dry-run" in body
    status, body = send(
        f"GET /api/v1/namespaces/{namespace}/services/s:80/proxy/ HTTP/1.1\r\nConnection: close\r\n"
    )
    assert status.startswith(b"HTTP/1.1 403")
    assert b"proxy requests cannot be dry-run" in body
    assert [w.refused != "" for w in recorded] == [True, True]


def test_a_run_that_is_not_read_only_still_writes(
    api_client: client.ApiClient,
    proxy: ApiProxy,
    recorded: list[DryRunWrite],
    namespace: str,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(api_client)
    owner = _owner(api_client, namespace)
    run = client.CoreV1Api(_through(proxy, replace(owner, read_only=False), tmp_path / "kc"))
    run.create_namespaced_config_map(namespace, {"metadata": {"name": "real"}})
    assert "real" in _snapshot(core, namespace)
    assert recorded == []
