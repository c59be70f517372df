"""A role that execs into a pod and reads its log, on the real node, through the operator.

The Operator SDK's advanced sample checks this with its SubresourcesTest, and
real operators' roles do it (a restore that runs `psql` in the database pod);
kwok's nodes have no kubelet, so only the real node can prove it. The role
(tests/realnode/podwork) starts a pod, runs `k8s_exec` and `k8s_log` against it
through the operator's proxy, which relays exec's upgraded connection byte for
byte, and writes what the pod answered into the status.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.probes import wait_until
from tests.e2e.harness import OperatorProcess, condition, get_cr
from tests.realnode.conftest import start_operator

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.realnode]

PROJECT = Path(__file__).parent / "podwork"
GROUP, VERSION = "realnode.ansible-operator.dev", "v1alpha1"


@pytest.fixture(scope="module")
def podwork_operator(
    api_client: Any,
    kubeconfig_path: Path,
    rn_namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    proc = start_operator(
        api_client, kubeconfig_path, rn_namespace, tmp_path_factory.mktemp("podwork"),
        project=PROJECT, name="podwork",
    )  # fmt: skip
    yield proc
    proc.stop()


def test_a_role_execs_into_a_pod_and_reads_its_log(
    api_client: Any,
    rn_namespace: str,
    real_node: dict[str, object],
    podwork_operator: OperatorProcess,
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodWork",
        "metadata": {"name": "shell"},
        "spec": {"word": "drawer"},
    }
    custom = client.CustomObjectsApi(api_client)
    custom.create_namespaced_custom_object(GROUP, VERSION, rn_namespace, "podworks", body)
    found: dict[str, Any] = {}

    def finished() -> bool:
        obj = get_cr(api_client, rn_namespace, "podworks", "shell", group=GROUP, version=VERSION)
        ended = [condition(obj, ctype) or {} for ctype in ("Successful", "Failure")]
        found.update(obj or {})
        return any(cond.get("status") == "True" for cond in ended)

    wait_until("podworks/shell finished", finished, timeout=300)
    obj = found
    assert (condition(obj, "Successful") or {}).get("status") == "True", obj.get("status")

    pod = client.CoreV1Api(api_client).read_namespaced_pod("shell-worker", rn_namespace)
    assert pod.spec.node_name == real_node["name"]
    # The command ran in the pod (its hostname is the pod's name) and its output
    # came back through the proxy's relay; the log is the container's own.
    assert obj["status"]["execLines"] == "DRAWER,shell-worker"
    assert obj["status"]["execReturnCode"] == "0"
    assert obj["status"]["log"] == "started drawer"
