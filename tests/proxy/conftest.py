"""Fixtures for the proxy tests against the real API server.

A throw-away CRD (one namespaced kind, one cluster-scoped kind, in a group
unique to this session, since the cluster may be shared) plays the owner
kind; `start_proxy` starts an ApiProxy with the admin client's Configuration
as its upstream; `run_playbook` runs real kubernetes.core modules through a
run kubeconfig with .venv's ansible-playbook.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ansible_operator.kube.client import Kube
from ansible_operator.kube.librarylogin import LibraryLogin
from ansible_operator.proxy import ApiProxy, Owner, RunCredentials, Touch, write_kubeconfig

VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class OwnerKinds:
    group: str
    version: str = "v1"
    kind: str = "Owner"
    plural: str = "owners"
    cluster_kind: str = "ClusterOwner"
    cluster_plural: str = "clusterowners"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def controller(self) -> str:
        return f"{self.kind.lower()}-{self.version}-controller"

    @property
    def cluster_controller(self) -> str:
        return f"{self.cluster_kind.lower()}-{self.version}-controller"


def _crd(kinds: OwnerKinds, kind: str, plural: str, scope: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{kinds.group}"},
        "spec": {
            "group": kinds.group,
            "scope": scope,
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "listKind": f"{kind}List",
            },
            "versions": [
                {
                    "name": kinds.version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="session")
def kube(api_client: client.ApiClient) -> Kube:
    return Kube(LibraryLogin(api_client.configuration))


@pytest.fixture(scope="session")
def owner_kinds(api_client: client.ApiClient, kube: Kube) -> Iterator[OwnerKinds]:
    kinds = OwnerKinds(group=f"p{uuid.uuid4().hex[:8]}.proxytest.example.com")
    ext = client.ApiextensionsV1Api(api_client)
    names = []
    for kind, plural, scope in (
        (kinds.kind, kinds.plural, "Namespaced"),
        (kinds.cluster_kind, kinds.cluster_plural, "Cluster"),
    ):
        ext.create_custom_resource_definition(_crd(kinds, kind, plural, scope))
        names.append(f"{plural}.{kinds.group}")
    deadline = time.monotonic() + 60
    while True:
        try:
            kube.resource_for_plural(group=kinds.group, version=kinds.version, plural=kinds.plural)
            kube.resource_for_plural(
                group=kinds.group, version=kinds.version, plural=kinds.cluster_plural
            )
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    yield kinds
    for name in names:
        try:
            ext.delete_custom_resource_definition(name)
        except client.ApiException as err:
            if err.status != 404:
                raise


@pytest.fixture
def make_owner(
    api_client: client.ApiClient, owner_kinds: OwnerKinds
) -> Iterator[Callable[..., Owner]]:
    custom = client.CustomObjectsApi(api_client)
    cluster_owners: list[str] = []

    def make(namespace: str, name: str) -> Owner:
        body = {"apiVersion": owner_kinds.api_version, "metadata": {"name": name}, "spec": {}}
        if namespace:
            body["kind"] = owner_kinds.kind
            created = custom.create_namespaced_custom_object(
                owner_kinds.group, owner_kinds.version, namespace, owner_kinds.plural, body
            )
            controller = owner_kinds.controller
        else:
            body["kind"] = owner_kinds.cluster_kind
            created = custom.create_cluster_custom_object(
                owner_kinds.group, owner_kinds.version, owner_kinds.cluster_plural, body
            )
            cluster_owners.append(name)
            controller = owner_kinds.cluster_controller
        return Owner(
            api_version=owner_kinds.api_version,
            kind=body["kind"],
            name=name,
            namespace=namespace,
            uid=created["metadata"]["uid"],
            controller=controller,
        )

    yield make
    for name in cluster_owners:
        try:
            custom.delete_cluster_custom_object(
                owner_kinds.group, owner_kinds.version, owner_kinds.cluster_plural, name
            )
        except client.ApiException as err:
            if err.status != 404:
                raise


@dataclass
class Running:
    proxy: ApiProxy
    credentials: RunCredentials
    touches: list[tuple[Owner, Touch]] = field(default_factory=list)

    def kubeconfig(self, owner: Owner, path: Path) -> Path:
        token = self.credentials.issue(owner)
        return write_kubeconfig(
            path, server=self.proxy.url, token=token.token, namespace=owner.namespace
        )

    def client_for(self, owner: Owner, path: Path) -> client.ApiClient:
        from kubernetes import config  # noqa: PLC0415

        api: client.ApiClient = config.new_client_from_config(
            config_file=str(self.kubeconfig(owner, path))
        )
        return api


@pytest.fixture
def start_proxy(api_client: client.ApiClient, kube: Kube) -> Iterator[Callable[..., Running]]:
    started: list[ApiProxy] = []

    def start(
        *, inject_owner_ref: bool = True, on_touch: Callable[[Owner, Touch], None] | None = None
    ) -> Running:
        credentials = RunCredentials()
        running: Running

        def record(owner: Owner, touch: Touch) -> None:
            running.touches.append((owner, touch))
            if on_touch is not None:
                on_touch(owner, touch)

        proxy = ApiProxy(
            upstream=LibraryLogin(api_client.configuration),
            credentials=credentials,
            kube=kube,
            inject_owner_ref=inject_owner_ref,
            on_touch=record,
        )
        running = Running(proxy=proxy, credentials=credentials)
        proxy.start()
        started.append(proxy)
        return running

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture
def run_playbook(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(
        kubeconfig: Path, tasks: list[dict[str, Any]], *, check: bool = True, **extravars: Any
    ) -> subprocess.CompletedProcess[str]:
        playbook = tmp_path / f"play-{uuid.uuid4().hex[:6]}.yml"
        playbook.write_text(
            yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}])
        )
        inventory = tmp_path / "inventory"
        inventory.write_text(
            f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "K8S_AUTH_"))}
        env.pop("KUBECONFIG", None)
        env.update(
            K8S_AUTH_KUBECONFIG=str(kubeconfig),
            ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_RETRY_FILES_ENABLED="0",
        )
        result = subprocess.run(
            [
                str(VENV_BIN / "ansible-playbook"),
                "-i",
                str(inventory),
                str(playbook),
                "-e",
                yaml.safe_dump(extravars),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"ansible-playbook failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result

    return run
