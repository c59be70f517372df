"""The real node: one kubelet with containerd, kube-proxy and CoreDNS, next to kwok's fakes.

Called by `control_plane.ControlPlane`: `unavailable()` before anything
starts (a one-line reason, or None), `node_net.create()` before the
certificates (the API server's certificate names the address pods reach it
on), then `RealNode.start()` once the control plane runs, and
`node_teardown.teardown()` from `down`. Everything the node writes lives in
`.testbed/node/`, except the containerd root, kept per checkout under
`$TESTBED_CACHE/node/` so that imported images survive `down` (see
`node_images`). Host changes, and how they are undone, are listed in
docs/testbed.md ("The real node").
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from testbed import node_config, node_images, node_objects, probes, processes
from testbed.layout import COMPONENT_TIMEOUT, Layout
from testbed.node_config import NODE_NAME, REAL_NODE_NAMESPACE_ANNOTATIONS
from testbed.node_net import NodeNet
from testbed.processes import Process

__all__ = ["NODE_NAME", "NodeError", "RealNode", "containerd_root", "node_dir", "unavailable"]

NODE_BINARIES = ("kubelet", "kube-proxy", "coredns")
HOST_PROGRAMS = (
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "nsenter",
    "unshare",
    "ip",
    "iptables-restore",
)
CNI_PLUGINS = Path("/usr/lib/cni")
# Host-wide sysctls the kubelet sets when it starts (protectKernelDefaults
# false); the testbed puts the host's values back once the node is Ready.
KUBELET_SYSCTLS = ("vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops")
# Written into the containerd root by `down` once it holds no containers.
CLEAN_MARK = "stopped-cleanly"
SYSCTL_LOCK = Path("/run/lock/ansible-operator-testbed-kubelet.lock")
CGROUP_ROOT = Path("/sys/fs/cgroup")


class NodeError(RuntimeError):
    """The real node did not come up; the message names the component and its log."""


def unavailable(layout: Layout) -> str | None:
    """Why this machine runs fake nodes only, in one line; None when it can run the real node."""
    if os.environ.get("TESTBED_REAL_NODE", "1").lower() in {"0", "false", "no", "off"}:
        return "turned off by TESTBED_REAL_NODE"
    if os.geteuid() != 0:
        return "needs root (network namespace, mounts, cgroups)"
    missing = [p for p in HOST_PROGRAMS if shutil.which(p) is None]
    if not (CNI_PLUGINS / "bridge").exists():
        missing.append(f"CNI plugins in {CNI_PLUGINS}")
    reason = None
    if missing:
        reason = f"missing {', '.join(missing)} (`make testbed-build` installs the pinned packages)"
    elif not (CGROUP_ROOT / "memory").is_dir():
        reason = f"no cgroup v1 memory hierarchy under {CGROUP_ROOT}"
    else:
        absent = [b for b in NODE_BINARIES if not os.access(layout.binary(b), os.X_OK)]
        absent += node_images.missing(layout.cache_dir)
        if absent:
            reason = f"not built: {', '.join(absent)} (`make testbed-build`)"
    return reason


def node_dir(layout: Layout) -> Path:
    return layout.state_dir / "node"


def containerd_root(layout: Layout) -> Path:
    """Per checkout (state directory), so two testbeds never share one."""
    key = hashlib.sha256(str(layout.state_dir.resolve()).encode()).hexdigest()[:12]
    return layout.cache_dir / "node" / key / "containerd"


def cgroup_name(slot: int) -> str:
    return f"testbed-node-{slot}"


def _hierarchies() -> Iterator[Path]:
    for entry in sorted(CGROUP_ROOT.iterdir()):
        if (entry / "cgroup.procs").exists():
            yield entry


def make_cgroups(slot: int) -> None:
    for hierarchy in _hierarchies():
        path = hierarchy / cgroup_name(slot)
        path.mkdir(exist_ok=True)
        # A new cpuset cgroup starts with no CPUs and no memory nodes.
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (path / knob).exists() and not (path / knob).read_text().strip():
                (path / knob).write_text((hierarchy / knob).read_text())


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


@contextmanager
def host_sysctls_kept() -> Iterator[None]:
    """Put back the host-wide sysctls the kubelet changes on start.

    Held across two testbeds starting at once (a lock file), so that neither
    reads the other kubelet's values as the host's."""
    SYSCTL_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with SYSCTL_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = {name: _sysctl_path(name).read_text() for name in KUBELET_SYSCTLS}
        try:
            yield
        finally:
            for name, value in saved.items():
                _sysctl_path(name).write_text(value)


class RealNode:
    """Starts the node's processes inside `net` and registers what they need."""

    def __init__(
        self,
        layout: Layout,
        net: NodeNet,
        started: Callable[[Process], None],
        *,
        images: tuple[str, ...] | None = None,
    ) -> None:
        self.layout = layout
        self.images = images
        self.net = net
        self.dir = node_dir(layout)
        self.started = started  # records each process in state.json as it starts
        self.procs: list[Process] = []

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = processes.spawn(
            name, argv, log=self.layout.logs_dir / f"{name}.log", prefix=self.net.enter()
        )
        self.procs.append(proc)
        self.started(proc)
        if not processes.wait_exec(proc):
            raise NodeError(
                f"{name} did not start; last lines of {proc.log}:\n{processes.tail(proc.log)}"
            )
        return proc

    def _wait(self, proc: Process, what: str, check: Callable[[], bool]) -> float:
        try:
            return probes.wait_until(
                what, check, timeout=COMPONENT_TIMEOUT, alive=lambda: processes.is_running(proc)
            )
        except probes.NotReady as err:
            raise NodeError(
                f"{err}; last lines of {proc.log}:\n{processes.tail(proc.log)}"
            ) from err

    def start(self, api: probes.Api, apiserver_port: int) -> dict[str, float]:
        """Start containerd, the kubelet, kube-proxy and CoreDNS; return seconds per step."""
        seconds: dict[str, float] = {}
        began = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        server = f"https://{self.net.host_ip}:{apiserver_port}"
        self._write_configs(server)
        for path, obj in [*node_objects.rbac(), *node_objects.dns()]:
            _create(api, path, obj)
        _put_endpoints(api, node_objects.kubernetes_endpoints(self.net.host_ip, apiserver_port))
        _put_endpoints(api, node_objects.dns_endpoints(self.net.node_ip))
        # What `kubectl apply` puts in `default` (the README's samples under
        # `make run`) runs on this node.
        code, body = api.request(
            "PATCH",
            "/api/v1/namespaces/default",
            {"metadata": {"annotations": REAL_NODE_NAMESPACE_ANNOTATIONS}},
            content_type="application/merge-patch+json",
        )
        if code != 200:
            raise NodeError(f"annotating namespace default: HTTP {code}: {body}")
        make_cgroups(self.net.slot)
        seconds["node config"] = time.monotonic() - began
        seconds["containerd"] = self._start_containerd()
        began = time.monotonic()
        try:
            node_images.import_all(self.layout, self._ctr(), self.images)
        except (node_images.ImportError_, subprocess.SubprocessError) as err:
            raise NodeError(f"images: {err}") from err
        seconds["images"] = time.monotonic() - began
        seconds["kubelet"] = self._start_kubelet(api)
        seconds["kube-proxy, CoreDNS"] = self._start_proxy_dns()
        return seconds

    def _ctr(self) -> list[str]:
        return [*self.net.enter(), "ctr", f"--address={self.socket}", "--namespace=k8s.io"]

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    def _write_configs(self, server: str) -> None:
        d, p = self.dir, self.layout.pki_dir
        (d / "cni").mkdir(exist_ok=True)
        (d / "cni" / "10-testbed.conflist").write_text(node_config.cni_conflist())
        root = containerd_root(self.layout)
        if root.exists() and not (root / CLEAN_MARK).exists():
            # Not stopped by `down` (a crash): it may hold containers of a
            # cluster that is gone. Start empty; the images are imported again.
            shutil.rmtree(root)
        root.mkdir(parents=True, exist_ok=True)
        (root / CLEAN_MARK).unlink(missing_ok=True)
        (d / "containerd.toml").write_text(
            node_config.containerd_toml(root, self.socket, d / "cni")
        )
        node_config.kubeconfig(d / "kubelet.kubeconfig", server, p, "node")
        node_config.kubeconfig(d / "kube-proxy.kubeconfig", server, p, "kube-proxy")
        node_config.kubeconfig(d / "coredns.kubeconfig", server, p, "coredns")
        (d / "kubelet.yaml").write_text(
            node_config.kubelet_config(
                node_ip=self.net.node_ip,
                cgroup_root="/" + cgroup_name(self.net.slot),
                pki_dir=p,
                socket=self.socket,
                logs=d / "pod-logs",
            )
        )
        (d / "kube-proxy.yaml").write_text(
            node_config.kube_proxy_config(
                node_ip=self.net.node_ip, kubeconfig_path=d / "kube-proxy.kubeconfig"
            )
        )
        (d / "Corefile").write_text(
            node_config.corefile(self.net.node_ip, d / "coredns.kubeconfig")
        )

    def _start_containerd(self) -> float:
        proc = self._spawn("containerd", ["containerd", f"--config={self.dir / 'containerd.toml'}"])
        return self._wait(proc, "containerd", lambda: node_images.ctr_ok(self._ctr()))

    def _start_kubelet(self, api: probes.Api) -> float:
        argv = node_config.kubelet_argv(self.layout.binary("kubelet"), self.dir, self.net.node_ip)
        with host_sysctls_kept():
            proc = self._spawn("kubelet", argv)
            return self._wait(
                proc, "kubelet: node Ready", lambda: probes.node_ready(api, NODE_NAME)
            )

    def _start_proxy_dns(self) -> float:
        began = time.monotonic()
        proxy = self._spawn(
            "kube-proxy",
            [str(self.layout.binary("kube-proxy")), f"--config={self.dir / 'kube-proxy.yaml'}"],
        )
        dns = self._spawn(
            "coredns",
            [str(self.layout.binary("coredns")), "-conf", str(self.dir / "Corefile")],
        )
        node_ip = self.net.node_ip
        self._wait(proxy, "kube-proxy", lambda: probes.http_ok(f"http://{node_ip}:10256/healthz"))
        self._wait(dns, "CoreDNS", lambda: probes.http_ok(f"http://{node_ip}:8181/ready"))
        return time.monotonic() - began


def _create(api: probes.Api, path: str, obj: dict[str, object]) -> None:
    code, body = api.request("POST", path, obj)
    if code not in (201, 409):
        raise NodeError(f"creating {path}: HTTP {code}: {body}")


def _put_endpoints(api: probes.Api, obj: dict[str, object]) -> None:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    path = f"/api/v1/namespaces/{meta['namespace']}/endpoints"
    code, body = api.request("POST", path, obj)
    if code == 409:
        code, body = api.request("PUT", f"{path}/{meta['name']}", obj)
    if code not in (200, 201):
        raise NodeError(
            f"writing Endpoints {meta['namespace']}/{meta['name']}: HTTP {code}: {body}"
        )
