"""End to end: start-up failures a user can cause say what is wrong in one line.

Two operators started on one machine with the default ports (a second
`make run`, or a test run next to a running operator) must not fail
mysteriously: the second exits 1 at once with a line naming the flag and the
address, and no traceback.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.config import defaults
from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import OperatorProcess

pytestmark = pytest.mark.cluster

DEFAULT_PORTS = (
    f"--health-probe-bind-address={defaults.HEALTH_PROBE_BIND_ADDRESS}",
    f"--metrics-bind-address={defaults.METRICS_BIND_ADDRESS}",
    f"--proxy-port={defaults.PROXY_PORT}",
    f"--user-metrics-bind-address={defaults.USER_METRICS_BIND_ADDRESS}",
)


@pytest.fixture
def watched(api_client: Any, e2e_crds: list[str]) -> Iterator[str]:
    name = make_namespace(api_client, "startup")
    yield name
    drop_namespace(api_client, name)


def start(
    kubeconfig: Path, workdir: Path, namespace: str, name: str, *args: str
) -> OperatorProcess:
    return OperatorProcess(
        kubeconfig=kubeconfig,
        workdir=workdir,
        env={"WATCH_NAMESPACE": namespace},
        args=list(args),
        name=name,
    )


def failed_start(operator: OperatorProcess) -> str:
    operator.start(wait_ready=False)
    assert operator.wait(60) == 1
    text = operator.log_path.read_text(errors="replace")
    assert "Traceback" not in text, text
    return text


@pytest.mark.parametrize(
    ("busy", "expected"),
    [
        # The first operator holds every default port; the second fails on the first it binds.
        (
            "all",
            f"cannot listen on --health-probe-bind-address='{defaults.HEALTH_PROBE_BIND_ADDRESS}'",
        ),
        # Only the proxy's port is taken (by anything): the message names --proxy-port.
        ("proxy", f"cannot listen on 127.0.0.1:{defaults.PROXY_PORT} (--proxy-port)"),
    ],
)
def test_a_busy_port_stops_start_up_with_one_clear_line(
    kubeconfig_path: Path, tmp_path: Path, watched: str, busy: str, expected: str
) -> None:
    holder: OperatorProcess | None = None
    sock: socket.socket | None = None
    try:
        if busy == "all":
            holder = start(kubeconfig_path, tmp_path, watched, "first", *DEFAULT_PORTS)
            holder.health_port = int(defaults.HEALTH_PROBE_BIND_ADDRESS.rpartition(":")[2])
            holder.start()
            second = start(kubeconfig_path, tmp_path, watched, "second", *DEFAULT_PORTS)
        else:
            sock = socket.socket()
            sock.bind(("127.0.0.1", defaults.PROXY_PORT))
            sock.listen()
            second = start(
                kubeconfig_path, tmp_path, watched, "second", f"--proxy-port={defaults.PROXY_PORT}"
            )
        text = failed_start(second)
        assert expected in text, text
        assert "already in use" in text.lower(), text
    finally:
        if sock is not None:
            sock.close()
        if holder is not None:
            assert holder.stop() == 0
