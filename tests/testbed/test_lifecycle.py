"""The testbed's own life cycle: up after a crash, up twice, status, down.

Uses a second, independent testbed instance in a temporary state directory,
so it does not disturb the session's cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import control_plane, processes
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
    plane = ControlPlane(layout, nodes=1, real_node=False)

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


@pytest.mark.parametrize(
    ("script", "ended"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "killed by SIGSEGV"),
        ("raise SystemExit(3)", "exit code 3"),
    ],
)
def test_a_component_that_dies_silently_is_reported_with_how_it_ended(
    tmp_path: Path, script: str, ended: str
) -> None:
    # A truncated kube-apiserver dies of SIGSEGV before writing a log line; the
    # error must say so instead of showing an empty log.
    proc = processes.spawn("crasher", [sys.executable, "-c", script], log=tmp_path / "c.log")
    plane = ControlPlane(Layout.default())
    with pytest.raises(control_plane.TestbedError) as caught:
        plane._wait(proc, "http://127.0.0.1:9/never", None)
    message = str(caught.value)
    assert f"crasher: the process exited before it became ready ({ended})" in message
    assert ("may be damaged" in message) == ended.startswith("killed by SIGSEGV")


BUILD = Path(__file__).resolve().parents[2] / "testbed" / "build.sh"


def _build(command: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"TESTBED_CACHE": str(cache)} if cache else {})}
    return subprocess.run(
        [str(BUILD), command], env=env, capture_output=True, text=True, check=False
    )


def _to_rebuild(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 1, result.stderr
    return result.stderr.split("to rebuild:", 1)[1].split()


def test_the_cached_binaries_are_intact() -> None:
    # make test runs testbed-build first, so every binary must verify.
    result = _build("verify")
    assert result.returncode == 0, result.stderr


def test_build_verify_finds_missing_damaged_and_outdated_binaries(tmp_path: Path) -> None:
    # A copy of the real cache's etcd, the smallest binary; the rest are missing.
    real_bin = Path(_build("path").stdout.strip())
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    (cache / "stamps").mkdir()
    etcd = cache / "bin" / "etcd"
    shutil.copy2(real_bin / "etcd", etcd)
    for stamp in ("etcd", "etcd.sum"):
        shutil.copy2(real_bin.parent / "stamps" / stamp, cache / "stamps" / stamp)

    to_rebuild = _to_rebuild(_build("verify", cache))
    assert "etcd" not in to_rebuild
    assert {"kwok", "kube-apiserver", "kube-controller-manager", "kubectl"} <= set(to_rebuild)

    with etcd.open("r+b") as binary:
        binary.truncate(1 << 20)  # cut short, as in a damaged copy of the cache
    damaged = _build("verify", cache)
    assert f"cached {etcd} is missing or damaged" in damaged.stderr
    assert "etcd" in _to_rebuild(damaged)

    shutil.copy2(real_bin / "etcd", etcd)
    (cache / "stamps" / "etcd").write_text("v0.0.1")  # as after a pin bump
    outdated = _build("verify", cache)
    assert "etcd" in _to_rebuild(outdated)
    assert f"cached {etcd} is missing or damaged" not in outdated.stderr


def test_how_a_child_ended_waits_for_one_that_is_still_exiting(tmp_path: Path) -> None:
    # is_running() says no as soon as an exiting process dropped its command line,
    # a moment before it can be reaped; the exit status must still be reported.
    proc = processes.spawn(
        "exiting",
        [sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(4)"],
        log=tmp_path / "e.log",
    )
    assert processes.how_it_ended(proc, settle=30) == "exit code 4"
    assert processes.how_it_ended(proc, settle=30) == "exit code 4"  # remembered once reaped
