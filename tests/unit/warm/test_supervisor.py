"""WarmServers' life cycle with real server processes: start, orphaned, failing, off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_operator.errors import WarmStartError
from ansible_operator.warm.supervisor import (
    WarmServers,
    remove_stale_directories,
    start_warm_servers,
)
from testbed.probes import wait_until

REPO = Path(__file__).resolve().parents[3]
OPERATOR = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from ansible_operator.warm.supervisor import WarmServers\n"
    "servers = WarmServers(directory=Path(sys.argv[1]))\n"
    "servers.start()\n"
    "print(*servers.pids().values(), flush=True)\n"
    "import signal\n"
    "signal.pause()  # until the test kills it\n"
)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_servers_exit_when_the_operator_was_killed(tmp_path: Path) -> None:
    directory = tmp_path / ".warm"
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    operator = subprocess.Popen(
        [sys.executable, "-c", OPERATOR, str(directory)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert operator.stdout is not None
    pids = [int(pid) for pid in operator.stdout.readline().split()]
    assert len(pids) == 2
    assert all(map(alive, pids))
    operator.kill()  # SIGKILL: stop() never runs
    operator.wait(10)
    wait_until("the servers exit", lambda: not any(map(alive, pids)), timeout=15)
    assert not (directory / "playbook.sock").exists()
    assert not (directory / "module.sock").exists()


def test_no_server_starting_is_a_warm_start_error(tmp_path: Path) -> None:
    servers = WarmServers(directory=tmp_path / ".warm", python="/bin/false", start_timeout=10)
    with pytest.raises(WarmStartError, match="no warm Ansible server started"):
        servers.start()
    servers.stop()
    assert not (tmp_path / ".warm").exists()


def test_start_warm_servers_falls_back_to_cold(tmp_path: Path) -> None:
    assert start_warm_servers(enabled=False, runner_root=tmp_path) is None
    assert not (tmp_path / ".warm").exists()


def test_a_dead_operators_directory_is_removed_a_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / f".warm-{dead.pid}" / "bin").mkdir(parents=True)
    (tmp_path / f".warm-{os.getppid()}").mkdir()  # alive: pytest's parent
    (tmp_path / ".warm-notapid").mkdir()
    assert remove_stale_directories(tmp_path) == [tmp_path / f".warm-{dead.pid}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f".warm-{os.getppid()}",
        ".warm-notapid",
    ]


def test_a_directory_too_deep_for_a_socket_path_gets_sockets_in_tmp(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / ".warm"
    servers = WarmServers(directory=deep)
    servers.start()
    try:
        path = servers.socket_path("module")
        assert path.is_socket()
        assert path.parent != deep
        assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    finally:
        servers.stop()
    assert not deep.exists()
    assert not path.parent.exists()
