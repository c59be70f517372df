"""The testbed's real node: pods that ask for it really run, with cluster DNS,
Services and in-cluster access to the API server; everything else stays on
kwok; a second testbed's node runs beside it without disturbing it, and its
`down` leaves the host as it was.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.control_plane import ControlPlane
from testbed.layout import Layout
from testbed.node import KUBELET_SYSCTLS, cgroup_name
from testbed.node_net import LINK_PREFIX
from testbed.pki import files_in
from testbed.probes import Api, admin_context, node_ready
from tests.realnode.support import kubectl, psql, run_pod, wait

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.realnode]

PG = "testbed.local/postgresql:15"
# Reads the pods of its namespace with its ServiceAccount's token through
# the `kubernetes` Service, as any client with in-cluster config does.
IN_CLUSTER_CLIENT = """
import json, os, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
ctx = ssl.create_default_context(cafile=sa + "ca.crt")
url = "https://%s:%s/api/v1/namespaces/%s/pods" % (
    os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"],
    open(sa + "namespace").read())
req = urllib.request.Request(url, headers={"Authorization": "Bearer " + open(sa + "token").read()})
print(json.dumps(sorted(p["metadata"]["name"] for p in json.load(urllib.request.urlopen(req, context=ctx))["items"])))
"""


def _postgres_pod(api: Any, namespace: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(
        namespace,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="pg", labels={"app": "pg"}),
            spec=client.V1PodSpec(
                containers=[
                    client.V1Container(
                        name="pg",
                        image=PG,
                        env=[client.V1EnvVar(name="POSTGRES_PASSWORD", value="pw")],
                        readiness_probe=client.V1Probe(
                            _exec=client.V1ExecAction(command=["pg_isready", "-U", "postgres"]),
                            period_seconds=1,
                        ),
                    )
                ]
            ),
        ),
    )
    core.create_namespaced_service(
        namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="pg"),
            spec=client.V1ServiceSpec(
                selector={"app": "pg"}, ports=[client.V1ServicePort(port=5432)]
            ),
        ),
    )


def _ready(api: Any, namespace: str, name: str) -> bool:
    pod = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_pods_that_ask_run_for_real_with_dns_services_exec_and_the_api(
    api_client: Any,
    kubeconfig_path: Path,
    real_node: dict[str, object],
    real_namespace: str,
    namespace: str,
) -> None:
    core = client.CoreV1Api(api_client)
    _postgres_pod(api_client, real_namespace)
    _postgres_pod(api_client, namespace)  # a namespace without the annotations
    wait("postgres ready on the real node", lambda: _ready(api_client, real_namespace, "pg"))
    assert core.read_namespaced_pod("pg", real_namespace).spec.node_name == real_node["name"]
    wait(
        "the other pod scheduled",
        lambda: bool(core.read_namespaced_pod("pg", namespace).spec.node_name),
    )
    assert core.read_namespaced_pod("pg", namespace).spec.node_name.startswith("kwok-node-")

    # The logs and exec subresources go through the kubelet's authenticated API.
    logs = kubectl(kubeconfig_path, "-n", real_namespace, "logs", "pg")
    assert "database system is ready to accept connections" in logs
    assert psql(kubeconfig_path, real_namespace, "pg", "SELECT 6 * 7") == "42"

    # Another pod reaches it through the Service's DNS name.
    out = run_pod(
        api_client,
        real_namespace,
        "client",
        PG,
        [
            "psql",
            "-h",
            f"pg.{real_namespace}.svc.cluster.local",
            "-U",
            "postgres",
            "-tAc",
            "SELECT version()",
        ],
        env={"PGPASSWORD": "pw"},
    )
    assert out.startswith("PostgreSQL 15.")

    # In-cluster config: the kubernetes Service leads to the API server.
    client.RbacAuthorizationV1Api(api_client).create_namespaced_role_binding(
        real_namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="view"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="view"
            ),
            subjects=[
                client.RbacV1Subject(
                    kind="ServiceAccount", name="default", namespace=real_namespace
                )
            ],
        ),
    )
    out = run_pod(
        api_client,
        real_namespace,
        "api",
        "testbed.local/awscli:2.9",
        ["python3", "-c", IN_CLUSTER_CLIENT],
    )
    # The one-shot pods' names are generated from their prefix (support.run_pod).
    listed = json.loads(out.strip().splitlines()[-1])
    assert [re.sub(r"^(api|client)-[a-z0-9]{5}$", r"\1", n) for n in listed] == [
        "api",
        "client",
        "pg",
    ]


def _host_state(slot: int) -> dict[str, object]:
    """What a node of `slot` could change on the host, and what no node may change."""
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    return {
        "link": Path(f"/sys/class/net/{LINK_PREFIX}{slot}").exists(),
        "cgroups": sorted(str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{cgroup_name(slot)}")),
        "sysctls": {
            n: Path("/proc/sys", n.replace(".", "/")).read_text()
            for n in (*KUBELET_SYSCTLS, "net.ipv4.ip_forward")
        },
        "iptables": [
            line
            for line in subprocess.run(
                ["iptables-save"], capture_output=True, text=True, check=True
            ).stdout.splitlines()
            if not line.startswith("#") and not line.startswith(":")
        ],
        "mounts": sorted(
            m.split()[4]
            for m in mounts
            if any(k in m for k in ("containerd", "kubelet", "netns", "testbed"))
        ),
        "dirs": [
            p
            for p in ("/run/netns", "/var/lib/cni", "/var/log/containers", "/var/log/pods")
            if Path(p).exists()
        ],
    }


def test_a_second_real_node_runs_beside_and_its_down_leaves_the_host_as_found(
    api_client: Any, kubeconfig_path: Path, real_node: dict[str, object], tmp_path: Path
) -> None:
    layout = Layout(state_dir=tmp_path / "second", cache_dir=Layout.default().cache_dir)
    plane = ControlPlane(layout, nodes=1, node_images=())
    free = next(
        s
        for s in range(64)
        if s != real_node["slot"] and not Path(f"/sys/class/net/{LINK_PREFIX}{s}").exists()
    )
    before = _host_state(free)
    plane.up()
    try:
        record = plane.status()["real_node"]
        assert record["slot"] != real_node["slot"]
        assert record["host_ip"] != real_node["host_ip"]
        second = Api(plane.status()["server"], admin_context(files_in(layout.pki_dir)))
        assert node_ready(second, "real-node")
        # A pod of the second cluster runs (the sandbox image only: nothing else is imported).
        kubeconfig = layout.kubeconfig
        kubectl(kubeconfig, "create", "namespace", "two")
        kubectl(
            kubeconfig,
            "-n",
            "two",
            "run",
            "idle",
            "--image=testbed.local/pause:catatonit",
            "--overrides",
            json.dumps(
                {
                    "spec": {
                        "tolerations": [{"operator": "Exists"}],
                        "nodeSelector": {"kubernetes.io/hostname": "real-node"},
                    }
                }
            ),
        )
        wait(
            "the second node's pod running",
            lambda: (
                "Running"
                in kubectl(
                    kubeconfig, "-n", "two", "get", "pod", "idle", "-o", "jsonpath={.status.phase}"
                )
            ),
        )
        # The session's node is untouched meanwhile.
        assert node_ready(
            Api(
                str(ControlPlane().status()["server"]),
                admin_context(files_in(Layout.default().pki_dir)),
            ),
            "real-node",
        )
    finally:
        plane.down()
    after = _host_state(int(record["slot"]))
    assert not after["link"]
    assert after["cgroups"] == []
    for key in ("sysctls", "iptables", "mounts", "dirs"):
        assert after[key] == before[key], key
    assert not Path(str(record["containerd_root"])).exists()
