"""API objects the real node needs: RBAC for its identities, cluster DNS, and
the `kubernetes` Service's endpoints.

Called by `node.RealNode.up` with the admin client (`probes.Api`). kube-apiserver
runs with `--endpoint-reconciler-type=none` (its loopback address must never
be published), so the testbed itself points `default/kubernetes` at the
address the node's pods reach the API server on; the controller manager's
EndpointSlice mirroring turns these Endpoints into the slices kube-proxy
reads. The same for `kube-system/kube-dns`, which points at CoreDNS.
"""

from __future__ import annotations

from typing import Any

from testbed.node_config import DNS_IP

Obj = dict[str, Any]


def _binding(name: str, role: str, user: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }


def rbac() -> list[tuple[str, Obj]]:
    """(collection path, object) pairs: CoreDNS's read access, kube-apiserver's
    access to the kubelet API (kubelet webhook authorisation asks for it)."""
    rbac_api = "/apis/rbac.authorization.k8s.io/v1"
    coredns_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "testbed:coredns"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["endpoints", "services", "pods", "namespaces"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
        ],
    }
    return [
        (f"{rbac_api}/clusterroles", coredns_role),
        (
            f"{rbac_api}/clusterrolebindings",
            _binding("testbed:coredns", "testbed:coredns", "testbed:coredns"),
        ),
        (
            f"{rbac_api}/clusterrolebindings",
            _binding(
                "testbed:apiserver-kubelet-client",
                "system:kubelet-api-admin",
                "testbed:apiserver-kubelet-client",
            ),
        ),
    ]


def _endpoints(namespace: str, name: str, ip: str, ports: list[Obj]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": name, "namespace": namespace},
        "subsets": [{"addresses": [{"ip": ip}], "ports": ports}],
    }


def kubernetes_endpoints(host_ip: str, port: int) -> Obj:
    return _endpoints("default", "kubernetes", host_ip, [{"name": "https", "port": port}])


def dns() -> list[tuple[str, Obj]]:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kube-dns",
            "namespace": "kube-system",
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"},
        },
        "spec": {
            "clusterIP": DNS_IP,
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            ],
        },
    }
    return [("/api/v1/namespaces/kube-system/services", service)]


def dns_endpoints(node_ip: str) -> Obj:
    return _endpoints(
        "kube-system",
        "kube-dns",
        node_ip,
        [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
        ],
    )
