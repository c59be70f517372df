"""Fixtures of the end-to-end proofs on the real node (tests/realnode/).

One namespace whose pods all go to the testbed's real node (the
`real_namespace` annotations, at package scope) and one real `ansible-operator`
process watching it, run from the repository root with the top-level
watches.yaml and roles, its `RELATED_IMAGE_*` environment naming the images the
testbed built (so no role pulls from a registry). Every proof module shares
them: the operator and the node are started once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from testbed.node_config import REAL_NODE_NAMESPACE_ANNOTATIONS
from tests.e2e.harness import OperatorProcess, apply_crds, free_port
from tests.realnode.support import RELATED_IMAGES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="package")
def rn_namespace(api_client: Any, real_node: dict[str, object]) -> Iterator[str]:
    name = f"t-realnode-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name, annotations=REAL_NODE_NAMESPACE_ANNOTATIONS)
        )
    )
    yield name
    # The operator is stopped by now: drop finalizers it can no longer run.
    custom = client.CustomObjectsApi(api_client)
    group, version = "examples.ansible-operator.dev", "v1alpha1"
    for item in custom.list_namespaced_custom_object(group, version, name, "sampledbs")["items"]:
        if item["metadata"].get("finalizers"):
            custom.patch_namespaced_custom_object(
                group, version, name, "sampledbs", item["metadata"]["name"],
                {"metadata": {"finalizers": None}},
            )  # fmt: skip
    core.delete_namespace(name, propagation_policy="Background")


def start_operator(
    api_client: Any,
    kubeconfig: Path,
    namespace: str,
    workdir: Path,
    *,
    project: Path,
    name: str,
) -> OperatorProcess:
    """A real operator run from `project` (its crds/ applied), watching `namespace`,
    its RELATED_IMAGE_* naming the testbed's images."""
    docs = [yaml.safe_load(p.read_text()) for p in sorted((project / "crds").glob("*.yaml"))]
    apply_crds(api_client, docs, what=name)
    env = {"WATCH_NAMESPACE": namespace, **RELATED_IMAGES}
    if (ROOT / "collections").is_dir():  # operator_sdk.util, for k8s_status
        env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / "collections")
    return OperatorProcess(
        kubeconfig=kubeconfig,
        workdir=workdir,
        env=env,
        args=[f"--proxy-port={free_port()}"],
        name=name,
        cwd=project,
    ).start()


@pytest.fixture(scope="package")
def rn_operator(
    api_client: Any,
    kubeconfig_path: Path,
    rn_namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    proc = start_operator(
        api_client, kubeconfig_path, rn_namespace, tmp_path_factory.mktemp("realnode"),
        project=ROOT, name="realnode",
    )  # fmt: skip
    yield proc
    proc.stop()
