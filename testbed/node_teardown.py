"""Stop the real node and undo what starting it changed on the host.

Called by `control_plane.ControlPlane.down` before it stops the control plane,
with the `node` record of state.json. Order matters: the kubelet first (it
would restart what is stopped), then every container through containerd
(so containerd's root, kept for the next `up`, holds no stale containers),
then the node's processes, then whatever is left in the node's cgroups and
network namespace (containerd's shims run detached from it), and last the
cgroups themselves. The namespaces, and with them the veth pair, iptables
rules, mounts and pod networks, go when their last process ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from testbed import node, node_net, processes
from testbed.processes import Process

NODE_PROCESSES = ("kubelet", "kube-proxy", "coredns", "containerd", node_net.HOLDER_NAME)


def _ctr(holder: Process, socket: str, *args: str) -> list[str]:
    out = subprocess.run(
        ["nsenter", f"--target={holder.pid}", "--net", "--mount", "--",
         "ctr", f"--address={socket}", "--namespace=k8s.io", *args],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return out.stdout.split() if out.returncode == 0 else []


def _remove_containers(holder: Process, socket: str, root: Path) -> None:
    """Kill and delete every container, so the kept root starts empty next time."""
    try:
        for task in _ctr(holder, socket, "tasks", "ls", "-q"):
            _ctr(holder, socket, "tasks", "kill", "--signal", "SIGKILL", task)
            _ctr(holder, socket, "tasks", "delete", "--force", task)
        containers = _ctr(holder, socket, "containers", "ls", "-q")
        if containers:
            _ctr(holder, socket, "containers", "delete", *containers)
        if not _ctr(holder, socket, "containers", "ls", "-q"):
            (root / node.CLEAN_MARK).touch()
    except subprocess.TimeoutExpired:
        pass  # no mark: the next `up` starts from an empty root


def _cgroup_dirs(slot: int) -> list[Path]:
    """Every cgroup of the node, deepest first."""
    found: list[Path] = []
    for hierarchy in node._hierarchies():
        top = hierarchy / node.cgroup_name(slot)
        if top.is_dir():
            found += [Path(d) for d, _, _ in os.walk(top)]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _kill(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _cgroup_pids(dirs: list[Path]) -> set[int]:
    pids: set[int] = set()
    for directory in dirs:
        with contextlib.suppress(OSError):
            pids |= {int(p) for p in (directory / "cgroup.procs").read_text().split()}
    return pids


def _remove_cgroups(slot: int) -> list[str]:
    """Kill what still runs in the node's cgroups, then remove them; return those left."""
    deadline = time.monotonic() + 10
    while True:
        dirs = _cgroup_dirs(slot)
        _kill(_cgroup_pids(dirs))
        for directory in dirs:
            with contextlib.suppress(OSError):
                directory.rmdir()
        left = [str(d) for d in _cgroup_dirs(slot)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def teardown(record: dict[str, Any], procs: list[Process], *, grace: float) -> list[str]:
    """Stop the node described by `record` (state.json's "node"); return what was stopped."""
    by_name = {p.name: p for p in procs if p.name in NODE_PROCESSES}
    stopped = [n for n, p in by_name.items() if processes.is_running(p)]
    holder = by_name.get(node_net.HOLDER_NAME)
    if "kubelet" in by_name:
        processes.stop(by_name["kubelet"], grace=grace)
    containerd = by_name.get("containerd")
    if holder and containerd and processes.is_running(containerd):
        _remove_containers(holder, str(record["socket"]), Path(record["containerd_root"]))
    for name in ("kube-proxy", "coredns", "containerd"):
        if name in by_name:
            processes.stop(by_name[name], grace=grace)
    if holder and processes.is_running(holder):
        # containerd's shims (and anything else) left in the namespace.
        _kill(set(node_net.processes_in_netns(holder.pid)))
    left = _remove_cgroups(int(record["slot"]))
    if holder:
        processes.stop(holder, grace=grace)
    if not record.get("keep_root", True):
        # A throw-away testbed's images: nobody imports them again.
        shutil.rmtree(Path(record["containerd_root"]).parent, ignore_errors=True)
    if left:
        stopped.append(f"(cgroups left: {', '.join(left)})")
    return stopped
