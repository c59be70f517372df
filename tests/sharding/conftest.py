"""Fixtures for the sharding tests: the project's CRD, a namespace, and a fleet of replicas.

`fleet` is a fresh fleet per test; `shared_fleet` one fleet for a module's
tests that build on each other's state (test_sharding's CRs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import apply_crds
from tests.sharding.fleet import PROJECT, Fleet


@pytest.fixture(scope="session")
def shardee_crd(api_client: Any) -> list[str]:
    docs = yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text())
    return apply_crds(api_client, docs, what="sharding")


@pytest.fixture
def fleet(
    api_client: Any, kubeconfig_path: Path, shardee_crd: list[str], tmp_path: Path
) -> Iterator[Fleet]:
    namespace = make_namespace(api_client, "shards")
    fleet = Fleet(kubeconfig=kubeconfig_path, workdir=tmp_path, namespace=namespace)
    yield fleet
    fleet.stop_all()
    drop_namespace(api_client, namespace)


@pytest.fixture(scope="module")
def shared_fleet(
    api_client: Any,
    kubeconfig_path: Path,
    shardee_crd: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Fleet]:
    namespace = make_namespace(api_client, "shards")
    workdir = tmp_path_factory.mktemp("shared-fleet")
    fleet = Fleet(kubeconfig=kubeconfig_path, workdir=workdir, namespace=namespace)
    yield fleet
    fleet.stop_all()
    drop_namespace(api_client, namespace)
