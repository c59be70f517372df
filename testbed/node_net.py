"""The real node's own network and mount namespaces, and its one link to the host.

Called by `node.RealNode`. A holder process (`unshare --net --mount`, then a
shell that mounts private tmpfs file systems and execs into a long sleep)
owns both namespaces; every node process (containerd, kubelet, kube-proxy,
CoreDNS) is started inside them with `nsenter`. So:

* the node's iptables rules, bridge, pod network namespaces and sysctls such
  as `net.ipv4.ip_forward` live in its network namespace, not the host's;
* its mounts (volumes, overlay snapshots, the kubelet's bind mounts, and
  private /run, /var/lib and /var/log, where containerd, the CNI plugins and
  the kubelet keep fixed paths) live in its mount namespace;
* when the last of these processes ends, the kernel drops both namespaces
  and with them everything above, the veth pair included: nothing to undo.

The host sees one veth `atb<slot>` with 10.250.<slot>.1/24; the node's end is
`eth0` with 10.250.<slot>.2. The slot is the first whose link name is free:
link names are unique per host, so two testbeds never share a slot, and a
slot of a testbed that died frees itself with its namespace.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from testbed import processes
from testbed.processes import Process

SLOTS = 64
LINK_PREFIX = "atb"
HOLDER_NAME = "testbed-node-namespaces"
# Private in the node's mount namespace: containerd (/run/containerd), the
# pods' network namespace files (/run/netns), the CNI plugins' state
# (/var/lib/cni) and the kubelet's container log links (/var/log/containers)
# have fixed paths; two nodes on one host must not share them.
PRIVATE_DIRS = ("/run", "/var/lib", "/var/log")
_HOLDER_SCRIPT = (
    "set -e; "
    + "; ".join(f"mount -t tmpfs -o mode=0755 testbed-node {d}" for d in PRIVATE_DIRS)
    + f"; ip link set lo up; exec -a {HOLDER_NAME} sleep infinity"
)


class NetworkError(RuntimeError):
    """The node's namespaces or link could not be set up; the message says which step."""


@dataclass(frozen=True)
class NodeNet:
    slot: int
    holder: Process

    @property
    def host_ip(self) -> str:
        return f"10.250.{self.slot}.1"

    @property
    def node_ip(self) -> str:
        return f"10.250.{self.slot}.2"

    @property
    def link(self) -> str:
        return f"{LINK_PREFIX}{self.slot}"

    def enter(self) -> list[str]:
        """The command prefix that runs a program inside the node's namespaces."""
        return ["nsenter", f"--target={self.holder.pid}", "--net", "--mount", "--"]


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        raise NetworkError(f"{what}: {' '.join(argv)}: {done.stderr.strip() or done.returncode}")


def _wait_holder(holder: Process) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if processes.is_running(holder):
            return
        ended = processes.how_it_ended(holder, settle=0)
        if ended:
            raise NetworkError(
                f"the namespace holder ended ({ended}): {processes.tail(holder.log, 5)}"
            )
        time.sleep(0.02)
    raise NetworkError("the namespace holder did not start in 10 s")


def create(log: Path) -> NodeNet:
    """Start the holder, claim a slot and wire the veth pair; raise NetworkError."""
    popen = processes.spawn(
        HOLDER_NAME,
        [
            "unshare",
            "--net",
            "--mount",
            "--propagation",
            "slave",
            "--",
            "bash",
            "-c",
            _HOLDER_SCRIPT,
        ],
        log=log,
    )
    # After the exec, /proc/PID/cmdline starts with HOLDER_NAME: record that,
    # so status and stop recognise it (and never a reused pid).
    holder = Process(HOLDER_NAME, popen.pid, (HOLDER_NAME, "infinity"), popen.log)
    try:
        _wait_holder(holder)
        net = _claim_slot(holder)
        _configure(net)
    except (NetworkError, subprocess.TimeoutExpired):
        processes.stop(holder, grace=1.0)
        raise
    return net


def _claim_slot(holder: Process) -> NodeNet:
    for slot in range(SLOTS):
        net = NodeNet(slot, holder)
        done = subprocess.run(
            ["ip", "link", "add", net.link, "type", "veth", "peer", "name", "eth0",
             "netns", str(holder.pid)],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        if done.returncode == 0:
            return net
        if "exists" not in done.stderr:
            raise NetworkError(f"creating the veth pair {net.link}: {done.stderr.strip()}")
    raise NetworkError(f"no free slot: links {LINK_PREFIX}0..{LINK_PREFIX}{SLOTS - 1} all exist")


def _configure(net: NodeNet) -> None:
    inside = ["nsenter", f"--target={net.holder.pid}", "--net", "--"]
    _run(["ip", "addr", "add", f"{net.host_ip}/24", "dev", net.link], "host address")
    _run(["ip", "link", "set", net.link, "up"], "host link up")
    _run([*inside, "ip", "addr", "add", f"{net.node_ip}/24", "dev", "eth0"], "node address")
    _run([*inside, "ip", "link", "set", "eth0", "up"], "node link up")
    _run([*inside, "ip", "route", "add", "default", "via", net.host_ip], "node default route")


def link_exists(slot: int) -> bool:
    return Path(f"/sys/class/net/{LINK_PREFIX}{slot}").exists()


def processes_in_netns(holder_pid: int) -> list[int]:
    """Pids (other than the holder) whose network namespace is the holder's."""
    try:
        target = Path(f"/proc/{holder_pid}/ns/net").stat().st_ino
    except OSError:
        return []
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == holder_pid:
            continue
        try:
            if (proc / "ns" / "net").stat().st_ino == target:
                found.append(int(proc.name))
        except OSError:
            continue
    return found
