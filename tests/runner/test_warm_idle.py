"""The warm servers start with the first run and stop when idle (warm/supervisor.py).

An idle operator is the operator process alone; the next run starts the servers
again and is warm, also when it arrives while they are stopping.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.warm.supervisor import WarmServers
from testbed.probes import wait_until
from tests.runner.test_warm_runs import probe


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "runner"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[WarmServers]:
    warm = WarmServers(directory=tmp_path / ".warm", idle_timeout=0.5)
    warm.prepare()
    yield warm
    warm.stop()


def warm_run(runner: AnsibleRunner, out: Path) -> dict[str, Any]:
    _result, seen = probe(runner, out)
    assert seen["controller_comm"].startswith("ao-"), seen  # forked: a warm run
    return seen


def test_servers_start_with_the_first_run_and_stop_when_idle(
    servers: WarmServers, root: Path, tmp_path: Path
) -> None:
    assert servers.pids() == {}  # nothing before the first run
    runner = AnsibleRunner(root=root, warm=servers)
    warm_run(runner, tmp_path / "first")
    assert set(servers.pids()) == {"playbook", "module"}
    wait_until("idle servers stopped", lambda: servers.pids() == {}, timeout=30)
    assert not servers.socket_path("playbook").exists()
    warm_run(runner, tmp_path / "after-idle")  # started again, and warm
    assert set(servers.pids()) == {"playbook", "module"}


def test_a_run_that_arrives_while_they_stop_is_warm(
    servers: WarmServers, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = AnsibleRunner(root=root, warm=servers)
    warm_run(runner, tmp_path / "first")
    stopping, go = threading.Event(), threading.Event()
    terminate = WarmServers._terminate

    def slow_terminate(procs: Any, timeout: float) -> None:
        stopping.set()
        go.wait(30)
        terminate(procs, timeout)

    monkeypatch.setattr(WarmServers, "_terminate", staticmethod(slow_terminate))
    wait_until("the idle stop began", stopping.is_set, timeout=30)
    seen: dict[str, Any] = {}
    arriving = threading.Thread(target=lambda: seen.update(warm_run(runner, tmp_path / "late")))
    arriving.start()
    go.set()
    arriving.join(120)
    assert not arriving.is_alive()
    assert seen["controller_comm"].startswith("ao-")
