"""The testbed's own life cycle: up after a crash, up twice, status, down.

Uses a second, independent testbed instance in a temporary state directory,
so it does not disturb the session's cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import processes
from testbed.control_plane import ControlPlane
from testbed.layout import Layout

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("TESTBED_KUBECONFIG")),
    reason="an external cluster was given; the local testbed binaries may not exist",
)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_up_recovers_from_a_crash_then_is_idempotent_and_down_stops_everything(
    tmp_path: Path,
) -> None:
    layout = Layout(state_dir=tmp_path / "tb", cache_dir=Layout.default().cache_dir)
    layout.state_dir.mkdir()
    # What a crashed run leaves behind: a state file naming a process that is gone.
    stale = {
        "server": "https://127.0.0.1:1",
        "processes": [
            {"name": "etcd", "pid": _dead_pid(), "argv": [str(layout.binary("etcd"))], "log": "x"}
        ],
    }
    layout.state_file.write_text(json.dumps(stale))
    plane = ControlPlane(layout, nodes=1)

    first = plane.up()
    try:
        assert not first.already_running
        assert plane.healthy()
        names = set(plane.status()["processes"])
        assert names == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        }
        assert all(v > 0 for v in first.rss_bytes.values())

        second = plane.up()
        assert second.already_running
        assert second.server == first.server
    finally:
        recorded = [
            processes.Process.from_json(p)
            for p in json.loads(layout.state_file.read_text())["processes"]
        ]
        stopped = plane.down()

    assert sorted(stopped) == sorted(names)
    assert not layout.state_dir.exists()
    assert not any(processes.is_running(p) for p in recorded)


def test_stop_never_kills_a_reused_pid(tmp_path: Path) -> None:
    real = processes.spawn("sleeper", ["/bin/sleep", "30"], log=tmp_path / "sleep.log")
    try:
        impostor = processes.Process(name="etcd", pid=real.pid, argv=("/not/etcd",), log="")
        assert not processes.is_running(impostor)
        processes.stop(impostor, grace=0.5)
        assert processes.is_running(real)
    finally:
        processes.stop(real, grace=2)
    assert not processes.is_running(real)


def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    stubborn = processes.spawn("stubborn", [sys.executable, "-c", script], log=tmp_path / "s.log")
    processes.stop(stubborn, grace=0.5)
    assert not processes.is_running(stubborn)
