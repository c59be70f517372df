"""Fixtures for the end-to-end tests: the e2e project's CRDs, and operator processes.

`shared_operator` is one operator for the whole module, watching only the
namespace `shared_namespace`, so tests that start their own operators (leader
election, shutdown) in their own namespaces never race with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.harness import PROJECT, OperatorProcess, apply_crds


@pytest.fixture(scope="session")
def e2e_crds(api_client: Any) -> list[str]:
    docs = yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text())
    return apply_crds(api_client, docs, what="e2e")


def make_namespace(api_client: Any, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api_client).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
    )
    return name


def drop_namespace(api_client: Any, name: str) -> None:
    try:
        client.CoreV1Api(api_client).delete_namespace(name, propagation_policy="Background")
    except client.ApiException as err:
        if err.status != 404:
            raise


@pytest.fixture(scope="module")
def shared_namespace(api_client: Any, e2e_crds: list[str]) -> Iterator[str]:
    name = make_namespace(api_client, "e2e")
    yield name
    drop_namespace(api_client, name)


@pytest.fixture(scope="module")
def shared_operator(
    kubeconfig_path: Path, shared_namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    workdir = tmp_path_factory.mktemp("operator")
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=workdir,
        env={"WATCH_NAMESPACE": shared_namespace},
        args=["--ansible-log-events=Tasks"],
    ).start()
    yield operator
    operator.stop()
