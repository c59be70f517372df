"""Plans of a converged CR, of a spec change that scales a Deployment, and of its
deletion, with the real operator converging the CR first (testbed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.harness import OperatorProcess, wait_until
from tests.plan.conftest import GROUP, PROJECT, VERSION, PlanCli

pytestmark = pytest.mark.cluster


def _cr(namespace: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Scaler",
        "metadata": {"name": "s", "namespace": namespace},
        "spec": {"size": size},
    }


@pytest.fixture
def converged(
    api_client: Any, namespace: str, kubeconfig_path: Path, tmp_path: Path, plan_crds: list[str]
) -> Iterator[dict[str, Any]]:
    """Scaler `s` (size 1) reconciled once by the operator, which is then stopped."""
    custom = client.CustomObjectsApi(api_client)
    apps = client.AppsV1Api(api_client)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "scalers", _cr(namespace, 1))
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path,
        cwd=PROJECT,
        env={"WATCH_NAMESPACE": namespace},
    ).start()

    def successful() -> bool:
        obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "scalers", "s")
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Successful" and c["status"] == "True" for c in conditions)

    try:
        wait_until("scaler s reconciled", successful, timeout=90)
    finally:
        operator.stop()
    deployment = apps.read_namespaced_deployment("s", namespace)
    yield {"resourceVersion": deployment.metadata.resource_version}
    # The operator is gone: let the namespace go without the finalizer.
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "scalers", "s", {"metadata": {"finalizers": None}}
    )


def _deployment_version(api_client: Any, namespace: str) -> str:
    deployment = client.AppsV1Api(api_client).read_namespaced_deployment("s", namespace)
    return str(deployment.metadata.resource_version)


def test_plans_of_a_converged_a_scaled_and_a_deleted_cr(
    api_client: Any,
    namespace: str,
    plan_cli: PlanCli,
    converged: dict[str, Any],
    tmp_path: Path,
) -> None:
    unchanged = plan_cli("Scaler", "s", "-n", namespace)
    assert unchanged.returncode == 0, unchanged.stderr + unchanged.stdout
    assert f"  = unchanged Deployment {namespace}/s (apps/v1)" in unchanged.stdout.splitlines()

    cr_file = tmp_path / "scaled.yaml"
    cr_file.write_text(yaml.safe_dump(_cr(namespace, 3)))
    scaled = plan_cli("-f", str(cr_file), "-o", "json")
    assert scaled.returncode == 2, scaled.stderr + scaled.stdout
    objects = json.loads(scaled.stdout)["objects"]
    assert [(o["action"], o["kind"], o["name"]) for o in objects] == [("update", "Deployment", "s")]
    changed = [
        line
        for line in objects[0]["diff"].splitlines()
        if line[:1] in "+-" and not line.startswith(("---", "+++"))
    ]
    assert changed == ["-  replicas: 1", "+  replicas: 3"]

    deleted = plan_cli("Scaler", "s", "-n", namespace, "--delete", "-o", "json")
    assert deleted.returncode == 2, deleted.stderr + deleted.stdout
    plan = json.loads(deleted.stdout)
    assert plan["mode"] == "finalizer"
    assert [(o["action"], o["kind"], o["name"]) for o in plan["objects"]] == [
        ("delete", "Deployment", "s")
    ]
    assert _deployment_version(api_client, namespace) == converged["resourceVersion"]


def test_plan_of_a_cr_not_created_yet(
    api_client: Any, namespace: str, plan_cli: PlanCli, tmp_path: Path
) -> None:
    cr_file = tmp_path / "new.yaml"
    cr_file.write_text(yaml.safe_dump(_cr(namespace, 2)))
    done = plan_cli("-f", str(cr_file), "-o", "json")
    assert done.returncode == 2, done.stderr + done.stdout
    plan = json.loads(done.stdout)
    assert plan["resource"]["exists"] is False
    assert [(o["action"], o["kind"], o["name"]) for o in plan["objects"]] == [
        ("create", "Deployment", "s")
    ]
    assert "+  replicas: 2\n" in plan["objects"][0]["diff"]
    assert "+    kind: Scaler\n" in plan["objects"][0]["diff"]  # owned by the CR
    assert plan["status"]["after"] == {"replicas": 2}
    custom = client.CustomObjectsApi(api_client)
    assert custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "scalers")["items"] == []
    assert client.AppsV1Api(api_client).list_namespaced_deployment(namespace).items == []
