"""Command lines of the testbed's components, in start order.

Called by `control_plane.ControlPlane.up`. Every listener is bound to
127.0.0.1; ports are chosen by the caller. The flags that matter, and why:

* etcd `--unsafe-no-fsync`: test data need not survive a power cut, and fsync
  dominates etcd latency on shared disks.
* kube-apiserver `--advertise-address=127.0.0.1` and
  `--endpoint-reconciler-type=none`: sandboxes may have no default route, and
  a loopback address must not be published as the `kubernetes` endpoint.
* controller manager and scheduler `--leader-elect=false`: one replica each;
  no lease wait on restart.
* kwok manages only nodes carrying our annotation, so a user's real nodes
  (when the testbed is pointed elsewhere) are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.layout import Layout
from testbed.pki import PkiFiles

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"


@dataclass(frozen=True)
class Ports:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int


def etcd(layout: Layout, ports: Ports) -> list[str]:
    client = f"http://127.0.0.1:{ports.etcd}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(layout.binary("etcd")),
        "--name=testbed",
        f"--data-dir={layout.etcd_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=testbed={peer}",
        "--listen-metrics-urls=",
        "--auto-compaction-retention=1",
        "--quota-backend-bytes=4294967296",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


def apiserver(
    layout: Layout, ports: Ports, pki: PkiFiles, *, node_host_ip: str | None = None
) -> list[str]:
    return [
        str(layout.binary("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
        f"--bind-address={'0.0.0.0' if node_host_ip else '127.0.0.1'}",  # noqa: S104 - see _real_node_flags
        f"--advertise-address={node_host_ip or '127.0.0.1'}",
        f"--secure-port={ports.apiserver}",
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={pki.server_cert}",
        f"--tls-private-key-file={pki.server_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        "--profiling=false",
        "--v=1",
        *(_real_node_flags(pki) if node_host_ip else []),
    ]


def _real_node_flags(pki: PkiFiles) -> list[str]:
    """Flags for a real node.

    Its pods reach the API server on the host's end of the node's veth pair
    (`apiserver` then listens on every address, which keeps 127.0.0.1 for
    everyone else, and advertises that one; the testbed publishes it as the
    `kubernetes` endpoint). The API server talks to the kubelet with a client
    certificate and checks the kubelet's; a namespace can send all its pods to
    the real node by annotation (PodNodeSelector, PodTolerationRestriction)."""
    pki_dir = pki.ca_cert.parent
    return [
        f"--kubelet-client-certificate={pki_dir / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki_dir / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={pki.ca_cert}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
    ]


def _client_flags(layout: Layout) -> list[str]:
    kubeconfig = str(layout.kubeconfig)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--leader-elect=false",
    ]


def controller_manager(layout: Layout, ports: Ports, pki: PkiFiles) -> list[str]:
    return [
        str(layout.binary("kube-controller-manager")),
        *_client_flags(layout),
        f"--secure-port={ports.controller_manager}",
        f"--root-ca-file={pki.ca_cert}",
        f"--service-account-private-key-file={pki.sa_key}",
        "--use-service-account-credentials=true",
        # Claims get volumes as on kind: a host-path directory per claim, for
        # the default StorageClass that `up` creates (STORAGE_CLASS).
        "--enable-hostpath-provisioner=true",
        "--kube-api-qps=100",
        "--kube-api-burst=200",
        "--v=1",
    ]


def scheduler(layout: Layout, ports: Ports) -> list[str]:
    return [
        str(layout.binary("kube-scheduler")),
        *_client_flags(layout),
        f"--secure-port={ports.scheduler}",
        "--v=1",
    ]


def kwok(layout: Layout, ports: Ports) -> list[str]:
    return [
        str(layout.binary("kwok")),
        f"--kubeconfig={layout.kubeconfig}",
        f"--config={layout.kwok_config}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
        f"--cidr={POD_CIDR}",
        "--node-ip=192.0.2.1",
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{ports.kwok}",
    ]


def fake_node(index: int) -> dict[str, object]:
    """A Node object for kwok to run: untainted, so ordinary pods schedule on it."""
    name = f"kwok-node-{index}"
    cidr = f"10.244.{index}.0/24"
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
            },
        },
    }


# The default StorageClass, served by kube-controller-manager's host-path
# provisioner (--enable-hostpath-provisioner): each claim gets a fresh
# directory under /tmp/hostpath_pv/, removed with its volume. kwok runs no
# containers, so nothing is ever written there.
STORAGE_CLASS: dict[str, object] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": "standard",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": "kubernetes.io/host-path",
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "Immediate",
}
