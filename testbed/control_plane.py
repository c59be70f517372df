"""Bring the testbed up, report on it, and take it down.

`ControlPlane` is the one object the CLI and the pytest fixtures use. `up`
generates certificates, picks free loopback ports, starts etcd, then the API
server, then the controller manager, scheduler and kwok, registers the fake
nodes and waits until the cluster can run pods. What it started is recorded in
`state.json` so that `down` (from any later process) stops exactly those
processes. `up` on a healthy testbed does nothing; on the leftovers of a crashed
run it stops what is left and starts afresh.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed import components, kubeconfig, node, node_net, node_teardown, pki, probes, processes
from testbed.layout import (
    COMPONENT_TIMEOUT,
    DEFAULT_NODES,
    PACKAGE_DIR,
    START_ATTEMPTS,
    STOP_GRACE,
    Layout,
)
from testbed.processes import Process

# Where kube-controller-manager's host-path provisioner makes volumes.
HOSTPATH_PV_DIR = Path("/tmp/hostpath_pv")  # noqa: S108 - fixed by kube-controller-manager


class TestbedError(RuntimeError):
    """The testbed could not be started; the message says what failed and where the logs are."""


@dataclass
class UpReport:
    already_running: bool
    server: str
    kubeconfig: Path
    seconds: dict[str, float] = field(default_factory=dict)
    rss_bytes: dict[str, int] = field(default_factory=dict)
    # "real-node at 10.250.0.2", or why there is none ("off: needs root ...").
    real_node: str = ""

    def summary(self) -> str:
        if self.already_running:
            head = f"testbed already running at {self.server}"
        else:
            total = sum(self.seconds.values())
            steps = ", ".join(f"{k} {v:.1f}s" for k, v in self.seconds.items())
            head = f"testbed up at {self.server} in {total:.1f}s ({steps})"
        rss = sum(self.rss_bytes.values())
        per = ", ".join(f"{k} {v / 2**20:.0f}" for k, v in self.rss_bytes.items())
        return (
            f"{head}\nresident memory {rss / 2**20:.0f} MiB ({per} MiB)\n"
            f"real node: {self.real_node}\n"
            f"export KUBECONFIG={self.kubeconfig}"
        )


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


class ControlPlane:
    def __init__(
        self,
        layout: Layout | None = None,
        *,
        nodes: int = DEFAULT_NODES,
        real_node: bool = True,
        node_images: tuple[str, ...] | None = None,
    ) -> None:
        """`real_node=False`: kwok's nodes only. `node_images`: the image keys
        to import into the real node (all by default; a throw-away testbed
        imports only what it runs). A testbed in another state directory than
        the checkout's own does not keep its node's containerd root after `down`."""
        self.layout = layout or Layout.default()
        self.nodes = nodes
        self.real_node = real_node
        self.node_images = node_images
        # state.json's "node": the real node's slot and paths, or {"off": reason}.
        self._node_record: dict[str, Any] = {}

    # -- state -----------------------------------------------------------------

    def _read_state(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.layout.state_file.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _processes(self, state: dict[str, Any] | None) -> list[Process]:
        if not state:
            return []
        return [Process.from_json(p) for p in state.get("processes", [])]

    def _write_state(self, ports: components.Ports, procs: list[Process]) -> None:
        state = {
            "server": f"https://127.0.0.1:{ports.apiserver}",
            "ports": asdict(ports),
            "processes": [p.to_json() for p in procs],
            "node": self._node_record,
        }
        tmp = self.layout.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.layout.state_file)

    def _api(self) -> probes.Api | None:
        state = self._read_state()
        if not state:
            return None
        files = pki.files_in(self.layout.pki_dir)
        try:
            context = probes.admin_context(files)
        except OSError:
            # A crashed `up` can leave its state file before (or without) its
            # PKI: there is then no API to ask, and `down` must still clean up.
            return None
        return probes.Api(str(state["server"]), context)

    def healthy(self) -> bool:
        state = self._read_state()
        procs = self._processes(state)
        if not procs or not all(processes.is_running(p) for p in procs):
            return False
        api = self._api()
        return api is not None and probes.http_ok(api.server + "/readyz", api.context)

    # -- up --------------------------------------------------------------------

    def up(self) -> UpReport:
        if self.healthy():
            state = self._read_state() or {}
            return UpReport(
                already_running=True,
                server=str(state["server"]),
                kubeconfig=self.layout.kubeconfig,
                rss_bytes=self.rss(),
                real_node=_describe(state.get("node") or {}),
            )
        self.down()  # leftovers of a crashed run, if any
        self._ensure_binaries()
        # One retry with fresh ports: on a shared machine another process can
        # take a port between our probe and the component's bind.
        for attempt in range(START_ATTEMPTS):
            try:
                return self._start()
            except (TestbedError, probes.NotReady):
                self.down(keep_logs=attempt == START_ATTEMPTS - 1)
                if attempt == START_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _ensure_binaries(self) -> None:
        # build.sh reuses what is cached and intact (size and sha256 as built,
        # ~2 s for all six) and rebuilds what is missing or damaged.
        subprocess.run(
            [str(PACKAGE_DIR / "build.sh"), "all"], check=True, stdout=subprocess.DEVNULL
        )
        missing = self.layout.missing_binaries()
        if missing:
            raise TestbedError(f"missing binaries in {self.layout.bin_dir}: {', '.join(missing)}")

    def _start(self) -> UpReport:
        layout = self.layout
        for sub in (layout.pki_dir, layout.logs_dir, layout.etcd_dir):
            sub.mkdir(parents=True, exist_ok=True)
        seconds: dict[str, float] = {}
        began = time.monotonic()
        procs: list[Process] = []
        ports = components.Ports(*_free_ports(6))
        net = self._node_net(procs)
        files = pki.generate(layout.pki_dir, extra_ips=(net.host_ip,) if net else ())
        if net:
            pki.issue_node(layout.pki_dir, node.NODE_NAME, net.node_ip)
        server = f"https://127.0.0.1:{ports.apiserver}"
        kubeconfig.write(layout.kubeconfig, server=server, pki=files)
        shutil.copyfile(PACKAGE_DIR / "manifests" / "kwok-stages.yaml", layout.kwok_config)
        seconds["certificates"] = time.monotonic() - began

        def record(proc: Process) -> None:
            procs.append(proc)
            self._write_state(ports, procs)

        def start(name: str, argv: list[str]) -> Process:
            proc = processes.spawn(name, argv, log=layout.logs_dir / f"{name}.log")
            record(proc)
            return proc

        etcd = start("etcd", components.etcd(layout, ports))
        seconds["etcd"] = self._wait(etcd, f"http://127.0.0.1:{ports.etcd}/readyz", None)
        api_proc = start(
            "kube-apiserver",
            components.apiserver(layout, ports, files, node_host_ip=net.host_ip if net else None),
        )
        api = probes.Api(server, probes.admin_context(files))
        seconds["kube-apiserver"] = self._wait(api_proc, server + "/readyz", api.context)
        began = time.monotonic()
        waits = [
            (
                start(
                    "kube-controller-manager", components.controller_manager(layout, ports, files)
                ),
                f"https://127.0.0.1:{ports.controller_manager}/healthz",
            ),
            (
                start("kube-scheduler", components.scheduler(layout, ports)),
                f"https://127.0.0.1:{ports.scheduler}/healthz",
            ),
            (
                start("kwok", components.kwok(layout, ports)),
                f"http://127.0.0.1:{ports.kwok}/healthz",
            ),
        ]
        for proc, url in waits:
            self._wait(proc, url, probes.insecure_context())
        seconds["controllers"] = time.monotonic() - began
        seconds["nodes"] = self._register_nodes(api, procs)
        if net:
            try:
                steps = node.RealNode(layout, net, record, images=self.node_images).start(
                    api, ports.apiserver
                )
            except (
                node.NodeError,
                node_net.NetworkError,
                OSError,
                subprocess.SubprocessError,
            ) as err:
                raise TestbedError(f"real node: {err}") from err
            seconds["real node"] = sum(steps.values())
            self._node_record["seconds"] = {k: round(v, 2) for k, v in steps.items()}
            self._write_state(ports, procs)
        return UpReport(
            already_running=False,
            server=server,
            kubeconfig=layout.kubeconfig,
            seconds=seconds,
            rss_bytes=self.rss(),
            real_node=_describe(self._node_record),
        )

    def _node_net(self, procs: list[Process]) -> node_net.NodeNet | None:
        """The real node's namespaces and address, or None (with the reason recorded)."""
        reason = node.unavailable(self.layout) if self.real_node else "not asked for"
        if reason:
            self._node_record = {"off": reason}
            return None
        try:
            net = node_net.create(self.layout.logs_dir / "node-namespaces.log")
        except (node_net.NetworkError, OSError, subprocess.SubprocessError) as err:
            raise TestbedError(f"real node: {err}") from err
        procs.append(net.holder)
        self._node_record = {
            "name": node.NODE_NAME,
            "slot": net.slot,
            "host_ip": net.host_ip,
            "node_ip": net.node_ip,
            "socket": str(node.node_dir(self.layout) / "containerd.sock"),
            "containerd_root": str(node.containerd_root(self.layout)),
            "keep_root": self.layout.state_dir == Layout.default().state_dir,
        }
        return net

    def _wait(self, proc: Process, url: str, context: Any) -> float:
        try:
            return probes.wait_until(
                proc.name,
                lambda: probes.http_ok(url, context),
                timeout=COMPONENT_TIMEOUT,
                alive=lambda: processes.is_running(proc),
            )
        except probes.NotReady as err:
            ended = processes.how_it_ended(proc)
            hint = ""
            if ended.startswith("killed by SIGSEGV") or ended.startswith("killed by SIGBUS"):
                # A damaged binary dies this way before it can log anything.
                hint = (
                    f" ({proc.argv[0]} may be damaged: `make testbed-build` checks and rebuilds it)"
                )
            raise TestbedError(
                f"{err}{f' ({ended})' if ended else ''}{hint}; "
                f"last lines of {proc.log}:\n{processes.tail(proc.log)}"
            ) from err

    def _register_nodes(self, api: probes.Api, procs: list[Process]) -> float:
        began = time.monotonic()
        names = []
        for index in range(self.nodes):
            node = components.fake_node(index)
            code, body = api.request("POST", "/api/v1/nodes", node)
            if code not in (201, 409):
                raise TestbedError(f"creating a fake node failed: HTTP {code}: {body}")
            names.append(str(node["metadata"]["name"]))  # type: ignore[index]
        code, body = api.request(
            "POST", "/apis/storage.k8s.io/v1/storageclasses", components.STORAGE_CLASS
        )
        if code not in (201, 409):
            raise TestbedError(f"creating the default StorageClass failed: HTTP {code}: {body}")

        def cluster_usable() -> bool:
            return all(probes.node_ready(api, n) for n in names) and api.exists(
                "/api/v1/namespaces/default/serviceaccounts/default"
            )

        try:
            probes.wait_until(
                "fake nodes Ready and default ServiceAccount present",
                cluster_usable,
                timeout=COMPONENT_TIMEOUT,
                alive=lambda: all(processes.is_running(p) for p in procs),
            )
        except probes.NotReady as err:
            logs = "\n".join(f"--- {p.name}\n{processes.tail(p.log, 10)}" for p in procs)
            raise TestbedError(f"{err}\n{logs}") from err
        return time.monotonic() - began

    # -- status and down ----------------------------------------------------------

    def _hostpath_volumes(self) -> list[Path]:
        """Directories of this cluster's host-path PersistentVolumes (the default StorageClass)."""
        api = self._api()
        if api is None:
            return []
        code, body = api.request("GET", "/api/v1/persistentvolumes")
        if code != 200 or not isinstance(body, dict):
            return []
        paths = [
            Path(str((item.get("spec") or {}).get("hostPath", {}).get("path", "")))
            for item in body.get("items", [])
        ]
        return [p for p in paths if p.parent == HOSTPATH_PV_DIR]

    def rss(self) -> dict[str, int]:
        return {p.name: processes.rss_bytes(p) for p in self._processes(self._read_state())}

    def status(self) -> dict[str, Any]:
        state = self._read_state()
        procs = self._processes(state)
        return {
            "state_dir": str(self.layout.state_dir),
            "server": state.get("server") if state else None,
            "healthy": self.healthy(),
            "real_node": (state or {}).get("node") or {},
            "processes": {
                p.name: {
                    "pid": p.pid,
                    "running": processes.is_running(p),
                    "rss_mib": round(processes.rss_bytes(p) / 2**20, 1),
                    "log": p.log,
                }
                for p in procs
            },
        }

    def down(self, *, keep_logs: bool = False) -> list[str]:
        """Stop the recorded processes (newest first) and remove the state dir."""
        stopped = []
        state = self._read_state()
        volumes = self._hostpath_volumes() if state else []
        if state and (state.get("node") or {}).get("slot") is not None:
            stopped += node_teardown.teardown(
                state["node"], self._processes(state), grace=STOP_GRACE
            )
        for proc in reversed(self._processes(state)):
            if processes.is_running(proc):
                stopped.append(proc.name)
            processes.stop(proc, grace=STOP_GRACE)
        for path in volumes:
            # The provisioner deletes a volume's directory with its claim; the
            # claims still there when the cluster goes would leave theirs.
            shutil.rmtree(path, ignore_errors=True)
        if not self.layout.state_dir.exists():
            return stopped
        if keep_logs:
            for child in self.layout.state_dir.iterdir():
                if child != self.layout.logs_dir:
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        else:
            shutil.rmtree(self.layout.state_dir)
        return stopped


def _describe(record: dict[str, Any]) -> str:
    if "off" in record:
        return f"off: {record['off']} (fake nodes only)"
    if "node_ip" not in record:
        return "none"
    return (
        f"{record['name']} at {record['node_ip']} (own network namespace; the API server "
        f"is {record['host_ip']} for its pods)"
    )
