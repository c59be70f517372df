"""Configuration files and command lines of the real node's processes.

Called by `node.RealNode.up`, which writes these into `.testbed/node/` and
starts the programs inside the node's namespaces (`node_net`). The settings
that matter, and why:

* containerd: `restrict_oom_score_adj` (the host's capability bounding set
  lacks CAP_SYS_RESOURCE: runc cannot lower a score, and without this every
  sandbox fails), cgroupfs (cgroup v1, no systemd), the sandbox image built by
  `images.py`, CNI plugins where Debian installs them (/usr/lib/cni).
* kubelet: `failCgroupV1: false` (1.35+ refuses cgroup v1 otherwise), a
  cgroup root of its own per slot (two nodes never share `kubepods`), x509 +
  webhook authentication and webhook authorisation (no anonymous API),
  image GC off (imported images cannot be pulled again), a NoSchedule taint
  and a label so that only pods that ask for it run here.
* kube-proxy: iptables in the node's namespace, node ports on the node's
  address only, conntrack sysctls left alone (they are host-wide).
* CoreDNS: answers for cluster.local on the node's address; the `kube-dns`
  Service (10.96.0.10) points at it. No upstream: the machine has no network.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from testbed.images import specs

NODE_NAME = "real-node"
PAUSE_IMAGE = "pause-catatonit"
POD_CIDR = "10.245.0.0/24"
DNS_IP = "10.96.0.10"
# Label and taint of the real node; `REAL_NODE_NAMESPACE_ANNOTATIONS` give a
# namespace's pods both (PodNodeSelector / PodTolerationRestriction).
LABEL = "testbed.ansible-operator.dev/real-node"
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
REAL_NODE_NAMESPACE_ANNOTATIONS = {
    "scheduler.alpha.kubernetes.io/node-selector": f"{LABEL}=true",
    "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps(
        [{"key": LABEL, "operator": "Exists", "effect": "NoSchedule"}]
    ),
}


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(path: Path, server: str, pki_dir: Path, stem: str) -> Path:
    """A kubeconfig for one node identity (`<stem>.crt/.key` in pki_dir)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "testbed",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": _b64(pki_dir / "ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": stem,
                "user": {
                    "client-certificate-data": _b64(pki_dir / f"{stem}.crt"),
                    "client-key-data": _b64(pki_dir / f"{stem}.key"),
                },
            }
        ],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": stem}}],
        "current-context": "testbed",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def containerd_toml(root: Path, socket: Path, cni_conf: Path) -> str:
    pause = specs()[PAUSE_IMAGE].ref
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{root}"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  level = "warn"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
[{cri}]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{cni_conf}"
"""


def cni_conflist() -> str:
    config = {
        "cniVersion": "1.0.0",
        "name": "testbed",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                # Pods reach the host (the API server, the S3 store) from the
                # node's address: the host needs no route to the pod network.
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": "/run/cni-ipam",
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(config, indent=2)


def kubelet_config(
    *, node_ip: str, cgroup_root: str, pki_dir: Path, socket: Path, logs: Path
) -> str:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node_ip,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": node_ip,
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki_dir / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(pki_dir / "kubelet.crt"),
        "tlsPrivateKeyFile": str(pki_dir / "kubelet.key"),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "failCgroupV1": False,
        "containerRuntimeEndpoint": f"unix://{socket}",
        "clusterDNS": [DNS_IP],
        "clusterDomain": "cluster.local",
        "registerWithTaints": [TAINT],
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # Eviction for disk only when it is really full: the host's disk is
        # shared with everything else on the machine.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "2%",
            "imagefs.available": "2%",
        },
        "podLogsDir": str(logs),
        "maxPods": 40,
        "serializeImagePulls": False,
        "protectKernelDefaults": False,
        "nodeStatusUpdateFrequency": "5s",
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(*, node_ip: str, kubeconfig_path: Path) -> str:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path)},
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "hostnameOverride": NODE_NAME,
        "bindAddress": node_ip,
        "healthzBindAddress": f"{node_ip}:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "nodePortAddresses": [f"{node_ip}/32"],
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return yaml.safe_dump(config, sort_keys=False)


def corefile(node_ip: str, kubeconfig_path: Path) -> str:
    return f""".:53 {{
    bind {node_ip}
    errors
    health {node_ip}:8080
    ready {node_ip}:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig_path} testbed
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
}}
"""


def kubelet_argv(binary: Path, directory: Path, node_ip: str) -> list[str]:
    return [
        str(binary),
        f"--config={directory / 'kubelet.yaml'}",
        f"--kubeconfig={directory / 'kubelet.kubeconfig'}",
        f"--root-dir={directory / 'kubelet'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={node_ip}",
        f"--node-labels={LABEL}=true",
        "--v=1",
    ]
