"""End to end: leader election between two operator processes, SIGTERM mid-run,
and what a SIGKILLed operator leaves for the next one to clean up.

Each test runs its own operators in its own namespace (WATCH_NAMESPACE), so
killing them never disturbs other tests.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import (
    OperatorProcess,
    configmap,
    create_cr,
    run_processes,
    wait_condition,
    wait_for,
)

pytestmark = pytest.mark.cluster


@pytest.fixture
def own_namespace(api_client: Any, e2e_crds: list[str]) -> Iterator[str]:
    name = make_namespace(api_client, "e2e-life")
    yield name
    drop_namespace(api_client, name)


def _ran(operator: OperatorProcess, name: str) -> bool:
    return bool(
        operator.logged(
            lambda e: e.get("name") == name and e.get("msg") == "Ansible-runner exited successfully"
        )
    )


def test_only_the_leader_reconciles_and_a_standby_takes_over(
    api_client: Any, kubeconfig_path: Path, own_namespace: str, tmp_path: Path
) -> None:
    ns = own_namespace
    lease = 4.0
    args = [
        "--leader-elect",
        "--leader-election-id=e2e-leader",
        f"--leader-election-namespace={ns}",
        f"--leader-elect-lease-duration={lease:g}s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
    ]
    env = {"WATCH_NAMESPACE": ns}
    first = OperatorProcess(
        kubeconfig=kubeconfig_path, workdir=tmp_path, args=args, env=env, name="a"
    ).start()
    second = OperatorProcess(
        kubeconfig=kubeconfig_path, workdir=tmp_path, args=args, env=env, name="b"
    )
    second.start(wait_ready=False)
    try:
        create_cr(api_client, ns, "gadgets", "Gadget", "before", {"color": "one"})
        wait_condition(api_client, ns, "gadgets", "before", "Successful")
        assert _ran(first, "before")
        assert not _ran(second, "before")
        assert second.alive()
        assert not second.ready()  # the standby is not ready until it leads

        first.signal(signal.SIGKILL)
        first.wait(10)
        killed = time.monotonic()
        wait_for("the standby takes over", second.ready, timeout=lease + 30)
        takeover = time.monotonic() - killed
        assert takeover < lease + 15, f"takeover took {takeover:.1f}s"

        create_cr(api_client, ns, "gadgets", "Gadget", "after", {"color": "two"})
        wait_condition(api_client, ns, "gadgets", "after", "Successful")
        assert _ran(second, "after")
    finally:
        first.stop()
        second.stop()


def test_sigterm_during_a_run_exits_cleanly_and_the_cr_converges_after_restart(
    api_client: Any, kubeconfig_path: Path, own_namespace: str, tmp_path: Path
) -> None:
    ns = own_namespace
    env = {"WATCH_NAMESPACE": ns}
    args = ["--graceful-shutdown-timeout=2s"]
    operator = OperatorProcess(
        kubeconfig=kubeconfig_path, workdir=tmp_path, args=args, env=env
    ).start()
    # A sleep length no other process on the machine uses, to find leftovers by.
    create_cr(api_client, ns, "sleepers", "Sleeper", "nap", {"delay": 4321})
    wait_for("the run is sleeping", lambda: bool(run_processes("sleep 4321")), timeout=60)

    operator.signal(signal.SIGTERM)
    code = operator.wait(30)
    assert code == 0
    assert any(
        line.get("msg") == "Signal SIGTERM received: stopping" for line in operator.log_lines()
    )
    assert run_processes("sleep 4321") == []
    assert run_processes(str(operator.runner_dir)) == []
    assert configmap(api_client, ns, "nap-done") is None

    restarted = OperatorProcess(
        kubeconfig=kubeconfig_path, workdir=tmp_path, args=args, env=env, name="restarted"
    ).start()
    try:
        wait_condition(api_client, ns, "sleepers", "nap", "Successful")
        assert configmap(api_client, ns, "nap-done") is not None
    finally:
        restarted.stop()


def _watchdog_of(pid: int) -> int:
    """The lifeline watchdog the operator process `pid` started (runner/lifeline.py)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == pid and b"ansible_operator.runner.lifeline" in cmd:
            return int(entry.name)
    raise AssertionError(f"operator {pid} has no lifeline watchdog")


def test_a_killed_operators_leftovers_are_removed_by_the_next_one(
    api_client: Any, kubeconfig_path: Path, own_namespace: str, tmp_path: Path
) -> None:
    """When its watchdog died with it (tests/e2e/test_killed.py has the watchdog at
    work): the run it was in, its private directory with the run kubeconfigs, and the
    run's scratch directory."""
    temp = tmp_path / "tmp"  # the operators' own TMPDIR, so nothing else is in it
    temp.mkdir()
    env = {"WATCH_NAMESPACE": own_namespace, "TMPDIR": str(temp)}

    def private_dirs() -> list[str]:
        return sorted(p.name for p in temp.glob("ansible-operator-private-*"))

    killed = OperatorProcess(kubeconfig=kubeconfig_path, workdir=tmp_path, env=env, name="killed")
    # The same runner directory, as a restarted pod's.
    successor = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path,
        env=env,
        name="successor",
        args=[f"--runner-dir={killed.runner_dir}"],
    )

    def scratch_dirs() -> list[Path]:
        return list(killed.runner_dir.rglob("tmp-*"))

    try:
        killed.start()
        assert killed.proc is not None
        left = private_dirs()
        assert [d.split("-")[3] for d in left] == [str(killed.proc.pid)]
        # A sleep length no other process on the machine uses, to find the run by.
        create_cr(api_client, own_namespace, "sleepers", "Sleeper", "nap", {"delay": 4322})
        wait_for("the run is sleeping", lambda: bool(run_processes("sleep 4322")), timeout=60)
        assert len(scratch_dirs()) == 1
        os.kill(_watchdog_of(killed.proc.pid), signal.SIGKILL)
        killed.signal(signal.SIGKILL)
        killed.wait(10)
        assert run_processes("sleep 4322")  # nobody is left to end the run
        assert private_dirs() == left  # nor to remove its directory
        assert len(scratch_dirs()) == 1

        successor.start()
        assert successor.proc is not None
        assert not run_processes("sleep 4322")  # killed before the successor's first run
        now = private_dirs()
        assert [d.split("-")[3] for d in now] == [str(successor.proc.pid)]
        messages = {str(line.get("msg")) for line in successor.log_lines()}
        assert any(m.startswith("Killed ") and "operators that are gone" in m for m in messages)
        assert "Removed 1 scratch directories of runs that never finished" in messages
        # The marker exists: the successor's run finishes at once, and leaves nothing.
        wait_condition(api_client, own_namespace, "sleepers", "nap", "Successful")
        wait_for("no scratch directory left", lambda: not scratch_dirs(), timeout=30)
    finally:
        # Also when an assertion failed before the kill: no operator outlives the test.
        killed.stop()
        successor.stop()
    wait_for("a clean stop removes its own", lambda: private_dirs() == [], timeout=30)
