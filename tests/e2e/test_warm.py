"""End to end: the operator's warm Ansible servers, as a real process tree.

With default flags the operator starts the playbook helper and the module server
(python -m ansible_operator.warm.pbserver / modserver) as its children, reconciles
through them, and leaves nothing behind on SIGTERM: no server, keeper or run
process, no socket, no `.warm` directory. `--warm-ansible=false` starts none.
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.probes import wait_until
from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import OperatorProcess, configmap, create_cr, wait_condition

pytestmark = pytest.mark.cluster

SERVERS = {"ansible_operator.warm.pbserver", "ansible_operator.warm.modserver"}


@pytest.fixture
def own_namespace(api_client: Any, e2e_crds: list[str]) -> Iterator[str]:
    name = make_namespace(api_client, "e2e-warm")
    yield name
    drop_namespace(api_client, name)


def processes() -> dict[int, tuple[int, list[str]]]:
    """pid -> (parent pid, argv) of every live process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, IndexError):
            continue
        if stat[0] != "Z":
            found[int(entry.name)] = (int(stat[1]), argv)
    return found


def warm_servers_of(pid: int) -> dict[str, int]:
    return {
        argv[2]: child
        for child, (ppid, argv) in processes().items()
        if ppid == pid and len(argv) > 2 and argv[1] == "-m" and argv[2] in SERVERS
    }


def mentioning(needle: str) -> list[int]:
    return [
        pid
        for pid, (_ppid, argv) in processes().items()
        if needle in " ".join(argv) and pid != os.getpid()
    ]


def test_the_operator_reconciles_through_its_warm_servers_and_stops_them(
    api_client: Any, kubeconfig_path: Path, own_namespace: str, tmp_path: Path
) -> None:
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path, workdir=tmp_path, env={"WATCH_NAMESPACE": own_namespace}
    ).start()
    try:
        assert operator.proc is not None
        warm_dir = operator.runner_dir / f".warm-{operator.proc.pid}"
        servers = warm_servers_of(operator.proc.pid)
        assert set(servers) == SERVERS
        assert (warm_dir / "bin" / "ansible-playbook").is_file()
        sockets = [Path(processes()[pid][1][4]) for pid in servers.values()]  # --socket PATH
        for path in sockets:
            assert path.is_socket()
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

        create_cr(api_client, own_namespace, "gadgets", "Gadget", "g1", {"color": "green"})
        wait_condition(api_client, own_namespace, "gadgets", "g1", "Successful")
        assert (configmap(api_client, own_namespace, "g1-gadget") or {}).get("color") == "green"
        assert warm_servers_of(operator.proc.pid) == servers  # still the same two
        assert not any(
            "Warm Ansible is not available" in str(line.get("msg")) for line in operator.log_lines()
        )

        operator.signal(signal.SIGTERM)
        assert operator.wait(30) == 0
    finally:
        operator.stop()
    assert [pid for pid in servers.values() if pid in processes()] == []
    # No keeper or run child either; the lifeline's watchdog (runner/lifeline.py), which
    # names the runner dir, sweeps once the operator is gone and exits by itself.
    wait_until(
        "nothing mentions the runner dir",
        lambda: mentioning(str(operator.runner_dir)) == [],
        timeout=30,
    )
    assert not warm_dir.exists()
    assert [path for path in sockets if path.parent.exists()] == []
    assert list(operator.runner_dir.glob(".warm*")) == []


def test_warm_ansible_false_starts_no_server(
    api_client: Any, kubeconfig_path: Path, own_namespace: str, tmp_path: Path
) -> None:
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path,
        env={"WATCH_NAMESPACE": own_namespace},
        args=["--warm-ansible=false"],
    ).start()
    try:
        assert operator.proc is not None
        create_cr(api_client, own_namespace, "gadgets", "Gadget", "g2", {"color": "red"})
        wait_condition(api_client, own_namespace, "gadgets", "g2", "Successful")
        assert warm_servers_of(operator.proc.pid) == {}
        assert list(operator.runner_dir.glob(".warm*")) == []
        hosts = next(operator.runner_dir.rglob("inventory/hosts")).read_text()
        assert "ansible_python_interpreter=" in hosts
        assert ".warm" not in hosts
    finally:
        operator.stop()
